"""rewind.py: writing a path back as it was, planned first, without git (a fake history)."""
import os
from types import SimpleNamespace

from autosync.fs import guarded
from autosync.core.ignore import Ignore
from autosync.tools.rewind import EXECUTABLE, LINK, Rewind, same

PLAIN = "100644"


class FakeHistory:
    """What Rewind asks of tools/history.py: the old contents and what the newest revision holds."""

    def __init__(self, root, old, newest):
        self.cfg = SimpleNamespace(path=root, ignorepath=[])
        self.old = old          # path -> bytes at the revision
        self.newest_files = newest  # path -> bytes at the newest revision

    def content(self, rev, path):
        return (self.newest_files if rev == "HEAD" else self.old)[path]

    def newest(self):
        return "HEAD"

    def entries(self, rev, rel):
        return {p: (PLAIN, None) for p in self.newest_files}

    def expect(self, rev, path, entry):
        return guarded.Expect(entry[0], data=self.content(rev, path))

    def writer(self):
        return guarded.Writer(self.cfg.path)


def rewind(root, wanted, old, newest, rel="."):
    history = FakeHistory(str(root), old, newest)
    return Rewind(history, "rev", rel, wanted, Ignore(str(root)))


def test_plan_then_write(tmp_path):
    tmp_path = tmp_path / "sync"  # (tmp_path itself holds the tests' home)
    tmp_path.mkdir()
    (tmp_path / "same.txt").write_bytes(b"same\n")
    (tmp_path / "changed.txt").write_bytes(b"new\n")
    (tmp_path / "later.txt").write_bytes(b"later\n")      # committed after: removed
    (tmp_path / "draft.txt").write_bytes(b"draft\n")      # never committed: kept
    (tmp_path / "draft.txt~").write_bytes(b"junk\n")      # editor junk: not looked at
    old = {"same.txt": b"same\n", "changed.txt": b"old\n", "gone/run.sh": b"#!/bin/sh\n",
           "link": b"same.txt"}
    wanted = {"same.txt": PLAIN, "changed.txt": PLAIN, "gone/run.sh": EXECUTABLE, "link": LINK}
    newest = {"same.txt": b"same\n", "changed.txt": b"new\n", "later.txt": b"later\n"}
    r = rewind(tmp_path, wanted, old, newest)
    planned = r.run(dry_run=True)
    assert [(c.action, c.path) for c in planned] == [
        ("restored", "changed.txt"), ("kept", "draft.txt"), ("brought back", "gone/run.sh"),
        ("removed", "later.txt"), ("brought back", "link")]
    assert (tmp_path / "changed.txt").read_bytes() == b"new\n"  # a plan writes nothing
    r = rewind(tmp_path, wanted, old, newest)
    assert r.run(dry_run=False) == planned and r.failed == []
    assert (tmp_path / "changed.txt").read_bytes() == b"old\n"
    assert os.access(tmp_path / "gone" / "run.sh", os.X_OK)
    assert os.readlink(tmp_path / "link") == "same.txt"
    assert not (tmp_path / "later.txt").exists()
    assert (tmp_path / "draft.txt").exists() and (tmp_path / "draft.txt~").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".autosync-")]


def test_same_compares_content_mode_and_links(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x")
    st = os.lstat(path)
    assert same(str(path), st, PLAIN, b"x")
    assert not same(str(path), st, PLAIN, b"y")
    assert not same(str(path), st, EXECUTABLE, b"x")
    assert not same(str(path), st, LINK, b"x")
    os.symlink("f", tmp_path / "l")
    assert same(str(tmp_path / "l"), os.lstat(tmp_path / "l"), LINK, b"f")
