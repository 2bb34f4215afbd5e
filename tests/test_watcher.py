"""The watcher on a real folder: what reaches the committer, what it watches."""
import os
import select
import signal
from types import SimpleNamespace

import pytest

from autosync.watcher import Watcher
from conftest import git


def test_a_folders_own_times_change_no_file(machines, remote):
    """tar sets its folders' times at the end: that is no modification of what they hold."""
    from test_sync import settle, write
    a = machines("a")
    for i in range(3):
        write(a, "x/f%d" % i, b"%d\n" % i)
    settle(a, remote)
    os.utime(os.path.join(a.path, "x"), (1, 1))
    write(a, "y", b"y\n")
    settle(a, remote)
    assert remote.log("-1", "--format=%s").endswith(": 1 added\n")


def settle_watches(watcher):
    """Read and handle events (pyinotify's made-up ones too) until 0.2 s bring none.

    Watching through a link to /usr takes minutes: an alarm ends that."""
    def too_long(*_):
        raise AssertionError("still adding watches after 20 s: %d" % len(watcher.inotify))
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        watcher.drain()
        while select.select([watcher.inotify], [], [], 0.2)[0]:
            watcher.drain()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def watcher(tmp_path):
    root = tmp_path / "sync"
    root.mkdir()
    w = Watcher(SimpleNamespace(path=str(root), ignorepath=[], pulllock="conservative",
                                readfrequency=0.2, maxwait=3))
    w.start_watching()
    yield w
    w.inotify.wm.close()


def test_symlinks_are_entries_never_followed(watcher):
    """A folder unpacked with a link to /usr and a link loop: the links are files to us."""
    root = watcher.root
    os.makedirs(os.path.join(root, "unpacked", "deep"))  # in a blink, as tar does
    os.symlink("/usr", os.path.join(root, "unpacked", "deep", "usr"))
    os.symlink("..", os.path.join(root, "unpacked", "loop"))
    os.symlink("/usr", os.path.join(root, "usr-link"))
    settle_watches(watcher)
    assert sorted(watcher.inotify.watched()) == [
        root, os.path.join(root, "unpacked"), os.path.join(root, "unpacked", "deep")]
    changes = watcher.batch.close(root, watcher.tree, watcher.ignore)
    assert sorted((c["action"], c["path"]) for c in changes) == [
        ("added", "unpacked/deep/usr"), ("added", "unpacked/loop"), ("added", "usr-link")]
    # A scan of the tree stops at links too.
    assert sorted(watcher.tree.scan(root, "", watcher.ignore)) == [
        "unpacked/deep/usr", "unpacked/loop", "usr-link"]
    assert watcher.tree.scan(root, "usr-link", watcher.ignore) == []


def watches_of(pid):
    """The inotify watches a process holds, as the kernel counts them."""
    count = 0
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                count += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            pass  # closed meanwhile
    return count


def test_symlinks_are_committed_as_links(machines, remote):
    """The real suite: links to /usr and a loop are synced as links (mode 120000), quickly."""
    from test_sync import settle, write
    a = machines("a")
    write(a, "unpacked/deep/file.txt", b"x\n")
    os.symlink("/usr", os.path.join(a.path, "unpacked", "deep", "usr"))
    os.symlink("..", os.path.join(a.path, "unpacked", "loop"))
    settle(a, remote, timeout=20)
    listing = git("--git-dir", remote.path, "ls-tree", "-r", "main").decode()
    assert "120000 blob" in listing and "\tunpacked/deep/usr\n" in listing
    links = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert links["unpacked/deep/usr"] == links["unpacked/loop"] == "120000"
    assert remote.files()[b"unpacked/deep/usr"] == b"/usr"
    assert watches_of(a.children()["watcher"]) == 3  # the folder, unpacked, deep
    assert "cannot watch" not in a.logtext() and "Traceback" not in a.logtext()
