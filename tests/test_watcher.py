"""The watcher on a real folder: what reaches the committer, what it watches."""
import os
import select
import signal
import time
from types import SimpleNamespace

import pytest

from autosync.watcher import Watcher
from conftest import git, wait_until


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


def write_slowly(path, chunks, pause, during=None):
    """One writer holding the file open: a chunk every `pause` seconds."""
    with open(path, "wb") as f:
        for i, chunk in enumerate(chunks):
            f.write(chunk)
            f.flush()
            if during is not None and i == 1:
                during()
            time.sleep(pause)


def history_of(remote, name):
    """Every content `name` had in the remote's history, oldest first."""
    revs = remote.log("--format=%H", "--reverse", "--", name).split()
    return [git("--git-dir", remote.path, "cat-file", "blob", "%s:%s" % (rev, name))
            for rev in revs]


def test_a_file_open_for_writing_is_committed_once_closed(machines, remote):
    """Shipped defaults: 2.4 s of writing (maxwait 3 in these tests) is one commit, whole."""
    from test_sync import settle
    a = machines("a")
    chunks = [b"part %d\n" % i for i in range(6)]
    write_slowly(os.path.join(a.path, "slow.log"), chunks, 0.4)
    settle(a, remote)
    assert history_of(remote, "slow.log") == [b"".join(chunks)]


def test_a_file_open_for_writing_is_not_committed_by_the_rescan_after_a_pull(machines, remote):
    """Another machine pushes while the file is written; this one pulls meanwhile.
    The rescan after that pull must not commit the half-written file."""
    from test_sync import settle, write
    a, b = machines("a", "b")
    chunks = [b"part %d\n" % i for i in range(6)]

    def other_machine_pushes():
        write(b, "from-b.txt", b"b\n")
        settle(b, remote)
        a.notify("pull")
        wait_until(lambda: os.path.exists(os.path.join(a.path, "from-b.txt")), 20,
                   what="a to pull")
    write_slowly(os.path.join(a.path, "slow.log"), chunks, 0.3, during=other_machine_pushes)
    settle(a, remote)
    assert history_of(remote, "slow.log") == [b"".join(chunks)]


@pytest.mark.parametrize("pulllock", ["conservative", "optimized"])
def test_a_file_opened_during_a_pull_waits_in_the_open_batch(watcher, pulllock):
    """Written during the pull and still open at its end: neither the rescan nor
    the replay takes it before its writer closes it."""
    from autosync.batch import Batch
    watcher.cfg.pulllock = pulllock
    sent = []
    watcher.send = lambda changes, rescan=False: sent.append((changes, rescan))
    with open(os.path.join(watcher.root, "pulled.txt"), "w") as f:
        f.write("from the pull\n")
    with open(os.path.join(watcher.root, "local.txt"), "w") as f:
        f.write("half")
        watcher.pull_batch = Batch()
        watcher.pull_batch.touch("pulled.txt")
        watcher.pull_batch.touch("local.txt")
        watcher.pull_batch.written("local.txt")
        watcher.on_committer_event({"event": "pull-finished"})
    assert watcher.batch.writing == {"local.txt"}
    if pulllock == "optimized":
        assert sent == [([{"action": "added", "path": "pulled.txt"}], False)]
    else:
        assert sent == [] and watcher.batch.rescan
