"""The watcher's parts: ignore rules (checked against git itself) and batches."""
import os
import select
import signal
import subprocess
from types import SimpleNamespace

import pytest

from autosync.watcher import Batch, Ignore, Tree, Watcher
from conftest import git


def make(root, files):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)


GITIGNORES = {
    ".gitignore": "*.log\n!keep.log\nbuild/\n**/cache\n/rootonly.txt\ndocs/*.pdf\n",
    "sub/.gitignore": "!*.log\nlocal.txt\nnested/**/deep.txt\n",
    "sub/nested/.gitignore": "*.tmp\n",
}
PATHS = ["a.log", "keep.log", "build/out.o", "src/build/x.o", "x/cache/c", "cache",
         "rootonly.txt", "sub/rootonly.txt", "docs/a.pdf", "docs/more/b.pdf", "sub/a.log",
         "sub/local.txt", "local.txt", "sub/nested/a/b/deep.txt", "sub/nested/x.tmp",
         "sub/other/x.tmp", "plain.txt", "sub/nested/keep.txt"]


def test_ignore_rules_agree_with_git(tmp_path):
    root = str(tmp_path / "repo")
    git("init", "-q", root)
    make(root, GITIGNORES)
    make(root, {p: "x" for p in PATHS})
    with open(os.path.join(root, ".git", "info", "exclude"), "a") as f:
        f.write("excluded-by-info\n")
    make(root, {"excluded-by-info": "x"})
    ignore = Ignore(root)
    for rel in PATHS + ["excluded-by-info"]:
        by_git = subprocess.run(["git", "check-ignore", "-q", "--no-index", rel],
                                cwd=root).returncode == 0
        assert ignore(rel) == by_git, rel


def test_ignorepath_metadata_and_editor_junk(tmp_path):
    ignore = Ignore(str(tmp_path), ["src/packages", "big/"])
    for rel in ("src/packages/x", "big/y", ".git/config", "sub/.hg/store", "notes.txt~",
                ".notes.txt.swp", "4913", "#notes#", ".#notes", ".~lock.doc.odt#"):
        assert ignore(rel), rel
    for rel in ("src/packagesX", "notes.txt", "big.txt", "src/p"):
        assert not ignore(rel), rel


def test_a_changed_gitignore_is_read_again(tmp_path):
    root = str(tmp_path)
    make(root, {".gitignore": "*.a\n"})
    ignore = Ignore(root)
    assert ignore("x.a") and not ignore("x.b")
    make(root, {".gitignore": "*.b\n"})
    ignore.forget("")
    assert ignore("x.b") and not ignore("x.a")


def close(root, tree, ignore, steps):
    batch = Batch()
    for step in steps:
        step(batch)
    return sorted(batch.close(root, tree, ignore), key=lambda c: c["path"])


@pytest.fixture
def folder(tmp_path):
    root = str(tmp_path)
    make(root, {"a.txt": "a", "dir/b.txt": "b", "dir/c.txt": "c"})
    tree, ignore = Tree(), Ignore(root)
    for rel in tree.scan(root, "", ignore):
        tree.add(rel)
    return root, tree, ignore


def test_created_then_removed_in_one_batch_is_nothing(folder):
    root, tree, ignore = folder
    make(root, {"tmp.txt": "x"})
    os.unlink(os.path.join(root, "tmp.txt"))
    assert close(root, tree, ignore, [lambda b: b.touch("tmp.txt")]) == []


def test_backup_dance_is_one_modification(folder):
    root, tree, ignore = folder
    p = lambda r: os.path.join(root, r)
    os.rename(p("a.txt"), p("a.bak"))
    make(root, {"a.txt": "new"})
    os.unlink(p("a.bak"))
    changes = close(root, tree, ignore, [lambda b: b.move("a.txt", "a.bak", False),
                                         lambda b: b.touch("a.txt"),
                                         lambda b: b.touch("a.bak")])
    assert changes == [{"action": "modified", "path": "a.txt"}]


def test_chained_moves_become_one_move(folder):
    root, tree, ignore = folder
    p = lambda r: os.path.join(root, r)
    os.rename(p("a.txt"), p("b1.txt"))
    os.rename(p("b1.txt"), p("c1.txt"))
    changes = close(root, tree, ignore, [lambda b: b.move("a.txt", "b1.txt", False),
                                         lambda b: b.move("b1.txt", "c1.txt", False)])
    assert changes == [{"action": "moved", "path": "c1.txt", "src": "a.txt"}]
    assert tree.has("c1.txt") and not tree.has("a.txt")


def test_folder_moved_out_removes_what_it_held(folder):
    root, tree, ignore = folder
    os.rename(os.path.join(root, "dir"), os.path.join(os.path.dirname(root), "gone-dir"))
    changes = close(root, tree, ignore, [lambda b: b.touch("dir", True)])
    assert changes == [{"action": "removed", "path": "dir/b.txt"},
                       {"action": "removed", "path": "dir/c.txt"}]
    assert not tree.has("dir/b.txt")


def test_folder_renamed_inside_is_one_move(folder):
    root, tree, ignore = folder
    os.rename(os.path.join(root, "dir"), os.path.join(root, "renamed"))
    changes = close(root, tree, ignore, [lambda b: b.move("dir", "renamed", True)])
    assert changes == [{"action": "moved", "path": "renamed", "src": "dir"}]
    assert tree.has("renamed/b.txt") and not tree.has("dir/b.txt")


def test_batch_timing_quiet_and_longest_wait():
    b = Batch()
    assert b.due(0.0, 1.0, 5.0) is None
    b.touch("x", now=10.0)
    assert b.due(10.5, 1.0, 5.0) == pytest.approx(0.5)
    for t in range(11, 16):  # a file that keeps changing
        b.touch("x", now=float(t))
    assert b.due(15.0, 1.0, 5.0) == 0.0  # closed by maxwait, not starved


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
        raise AssertionError("still adding watches after 20 s: %d" % len(watcher.wm.watches))
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        watcher.drain()
        while select.select([watcher.wm.get_fd()], [], [], 0.2)[0]:
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
    w.wm.close()


def test_symlinks_are_entries_never_followed(watcher):
    """A folder unpacked with a link to /usr and a link loop: the links are files to us."""
    root = watcher.root
    os.makedirs(os.path.join(root, "unpacked", "deep"))  # in a blink, as tar does
    os.symlink("/usr", os.path.join(root, "unpacked", "deep", "usr"))
    os.symlink("..", os.path.join(root, "unpacked", "loop"))
    os.symlink("/usr", os.path.join(root, "usr-link"))
    settle_watches(watcher)
    assert sorted(w.path for w in watcher.wm.watches.values()) == [
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
