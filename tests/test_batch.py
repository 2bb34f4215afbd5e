"""batch.py: what a batch of events amounts to (Tree and Batch)."""
import os

import pytest

from autosync.batch import Batch, Tree
from autosync.ignore import Ignore
from test_ignore import make


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
