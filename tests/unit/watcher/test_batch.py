"""batch.py: what a batch of events amounts to (Tree and Batch)."""
import os

import pytest

from autosync.watcher.batch import SETTLE, SETTLE_MAX, Batch, Tree
from autosync.core.ignore import Ignore
from helpers import make_files


def close(root, tree, ignore, steps):
    batch = Batch()
    for step in steps:
        step(batch)
    return sorted(batch.close(root, tree, ignore), key=lambda c: c["path"])


@pytest.fixture
def folder(tmp_path):
    root = str(tmp_path)
    make_files(root, {"a.txt": "a", "dir/b.txt": "b", "dir/c.txt": "c"})
    tree, ignore = Tree(), Ignore(root)
    for rel in tree.scan(root, "", ignore):
        tree.add(rel)
    return root, tree, ignore


def test_created_then_removed_in_one_batch_is_nothing(folder):
    root, tree, ignore = folder
    make_files(root, {"tmp.txt": "x"})
    os.unlink(os.path.join(root, "tmp.txt"))
    assert close(root, tree, ignore, [lambda b: b.touch("tmp.txt")]) == []


def test_a_file_or_folder_the_tree_never_held_gone_again_is_told(folder):
    """In a pull's batch that is a file the pull wrote and a writer removed before the
    pull ended: its changes net to nothing, so the watcher asks for a rescan."""
    root, tree, ignore = folder
    batch = Batch()
    batch.touch("dir/b.txt")  # known, and still there
    make_files(root, {"new.txt": "n"})
    batch.touch("new.txt")  # unknown, there
    assert not batch.gone_unknown(root, tree)
    os.unlink(os.path.join(root, "dir", "b.txt"))
    assert not batch.gone_unknown(root, tree)  # known: the batch says "removed"
    batch.touch("pulled.txt")  # unknown, gone
    assert batch.gone_unknown(root, tree)
    other = Batch()
    other.touch("pulled-dir", isdir=True)
    assert other.gone_unknown(root, tree)
    other = Batch()
    other.touch("dir", isdir=True)  # known through its files
    assert not other.gone_unknown(root, tree)


def test_backup_dance_is_one_modification(folder):
    root, tree, ignore = folder
    p = lambda r: os.path.join(root, r)
    os.rename(p("a.txt"), p("a.bak"))
    make_files(root, {"a.txt": "new"})
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


def test_a_batch_waits_for_its_writers_to_close_their_files():
    b = Batch()
    b.touch("big.iso", now=10.0)
    b.written("big.iso")
    # Open for writing: not before maxwait, whatever the quiet (set or not).
    assert b.due(12.0, None, 10.0) == pytest.approx(8.0)
    assert b.due(12.0, 0.2, 10.0) == pytest.approx(8.0)
    b.touch("big.iso", now=12.0)
    b.closed("big.iso")
    # Closed: the settle time (50 ms for a young batch), or the user's quiet.
    assert b.due(12.0, None, 10.0) == pytest.approx(0.2)  # 2 s old: a tenth of its age
    assert b.due(12.0, 5.0, 10.0) == pytest.approx(5.0)
    young = Batch()
    young.touch("a", now=1.0)
    assert young.due(1.0, None, 10.0) == pytest.approx(SETTLE)
    old = Batch()
    old.touch("a", now=5.0)
    old.touch("a", now=65.0)
    assert old.due(65.0, None, 100.0) == pytest.approx(SETTLE_MAX)


def test_a_file_renamed_or_removed_while_open(tmp_path):
    b = Batch()
    b.touch("d/part", now=1.0)
    b.written("d/part")
    b.move("d/part", "d/done", False, now=1.0)
    assert b.writing == {"d/done"}
    b.move("d", "e", True, now=1.0)
    assert b.writing == {"e/done"}
    b.closed("e/done")
    assert b.due(1.0, None, 10.0) == pytest.approx(SETTLE)
    b.written("gone")
    b.written("kept")
    (tmp_path / "kept").write_text("x")
    b.forget_vanished(str(tmp_path))  # "gone" was moved out of the folder while open
    assert b.writing == {"kept"}
    b.closed_under("")  # nothing under a folder named "": not everything
    assert b.writing == {"kept"}
    b.rescan_all(now=2.0)
    assert b.rescan and b.writing == set()


def test_a_new_file_gets_the_settle_time_for_its_first_write_even_at_readfrequency_0():
    b = Batch()
    b.touch("new.txt", now=10.0)
    b.was_created(now=10.0)  # created, not written yet: the writer may still be on its way
    assert b.due(10.0, 0.0, 10.0) == pytest.approx(SETTLE)
    assert b.due(10.0, 5.0, 10.0) == pytest.approx(5.0)  # a longer quiet is not shortened
    b.written("new.txt")  # the first write came: now its close is waited for
    assert b.due(10.0 + SETTLE, 0.0, 10.0) == pytest.approx(10.0 - SETTLE)


def test_a_file_still_written_at_maxwait_waits_twice_as_long_each_time(tmp_path):
    from autosync.watcher.batch import LONGEST_WAIT, Growing
    (tmp_path / "big").write_bytes(b"x")
    (tmp_path / "new").write_bytes(b"")
    growing, b = Growing(), Batch()
    b.written("big")
    b.written("new")
    root = str(tmp_path)
    # The first maxwait: committed (it has content); the empty one waits on.
    assert growing.leave_out(b, root, 10.0, now=10.0)[0] == {"new"}
    commits = [10.0]
    for now in range(20, 2000, 10):  # a batch closes every maxwait while it is written
        if "big" not in growing.leave_out(b, root, 10.0, now=float(now))[0]:
            commits.append(float(now))
    gaps = [later - earlier for earlier, later in zip(commits, commits[1:])]
    assert gaps[:5] == [20.0, 40.0, 80.0, 160.0, 320.0]
    assert max(gaps) == LONGEST_WAIT
    # Closed: forgotten, so a new writer of it starts from maxwait again.
    b.closed("big")
    growing.leave_out(b, root, 10.0, now=3000.0)
    b.written("big")
    assert growing.leave_out(b, root, 10.0, now=3001.0)[0] == {"new"}


def test_a_file_written_for_hours_holds_back_no_save_beside_it(folder):
    """A log appended to for hours (issue 32: a home folder has some): once its first
    batch closed at maxwait, the batches after it carry it. Its appends neither open a
    batch nor hold one open; a save beside it closes its batch after the settle time, not
    at maxwait; the log's next version closes the batch at its due time, doubling; its
    close ends the wait at once."""
    from autosync.watcher.batch import Growing
    root, tree, ignore = folder
    make_files(root, {"app.log": "line\n", "a.txt": "saved"})
    growing, b = Growing(), Batch()
    b.touch("app.log", now=0.0)
    b.written("app.log")
    assert b.due(1.0, None, 10.0) == pytest.approx(9.0)  # the first time: up to maxwait
    left, carried = growing.leave_out(b, root, 10.0, now=10.0)
    assert left == set() and carried == {"app.log": 30.0}  # sent; the next one at 10 + 20
    b = Batch()
    for rel, due in carried.items():
        b.carry(rel, due)
    for t in (10.5, 11.0, 11.5):  # appends: the batch stays closed until the log is due
        b.touch("app.log", now=t)
        b.written("app.log")
        assert b.first is None and b.due(t, None, 10.0) == pytest.approx(30.0 - t)
    b.touch("a.txt", now=12.0)  # a save beside it
    b.written("a.txt")
    b.closed("a.txt")
    b.touch("app.log", now=12.01)
    b.written("app.log")
    assert b.due(12.01, None, 10.0) == pytest.approx(SETTLE - 0.01)  # not at maxwait
    left, carried = growing.leave_out(b, root, 10.0, now=12.05)
    assert left == {"app.log"} and carried == {"app.log": 30.0}  # not due yet: waits on
    assert [c["path"] for c in b.close(root, tree, ignore, left)] == ["a.txt"]
    b = Batch()
    for rel, due in carried.items():
        b.carry(rel, due)
    assert b.carried_due(30.0) and b.due(30.0, None, 10.0) == 0.0
    assert growing.leave_out(b, root, 10.0, now=30.0) == (set(), {"app.log": 70.0})
    b = Batch()
    b.carry("app.log", 70.0)
    b.touch("app.log", now=31.0)  # its close
    b.closed("app.log", now=31.0)
    assert b.writing == set() and b.due(31.0, None, 10.0) == pytest.approx(SETTLE)
    assert growing.leave_out(b, root, 10.0, now=31.1) == (set(), {})


@pytest.mark.parametrize("carried", [True, False])
def test_a_file_saved_over_one_still_written_is_closed_under_its_name(carried):
    """An editor's save (write a new file, rename it over the old one) over a file some
    program still appends to: the name holds the saved file now, which is closed; the
    batch does not wait for the old file's writer (its due time, or maxwait)."""
    b = Batch()
    if carried:
        b.carry("app.log", 100.0)
    else:
        b.touch("app.log", now=0.5)
        b.written("app.log")
    b.touch("app.log.swp", now=1.0)
    b.written("app.log.swp")
    b.closed("app.log.swp")
    b.move("app.log.swp", "app.log", False, now=1.01)
    assert b.writing == set() and b.carried == {}
    assert b.due(1.01, None, 10.0) == pytest.approx(b.quiet(None))  # the settle time
    assert b.quiet(None) < 0.1  # not maxwait (10), nor the log's due time
    moved = Batch()  # renamed while still open: still open, and still carried, at the new name
    moved.carry("app.log", 100.0)
    moved.move("app.log", "old.log", False, now=2.0)
    assert moved.writing == {"old.log"} and moved.carried == {"old.log": 100.0}


def test_what_a_batch_leaves_out_is_not_recorded(folder):
    root, tree, ignore = folder
    make_files(root, {"part.iso": "half"})
    changes = close(root, tree, ignore, [lambda b: b.touch("part.iso"), lambda b: b.touch("a.txt")])
    assert [c["path"] for c in changes] == ["a.txt", "part.iso"]
    tree2 = Tree()
    for rel in tree2.scan(root, "", ignore):
        if rel != "part.iso":
            tree2.add(rel)
    b = Batch()
    b.touch("part.iso")
    assert b.close(root, tree2, ignore, leave={"part.iso"}) == []
    assert not tree2.has("part.iso")  # still new to the next batch


def test_a_file_created_and_held_open_empty_does_not_hold_the_batch(folder):
    """A lock file may stay open and empty for hours: it is left out, and the rest of
    the batch closes after the settle time as usual."""
    root, tree, ignore = folder
    b = Batch()
    make_files(root, {"app.lock": "", "a.txt": "changed"})
    b.touch("app.lock", now=1.0)
    b.was_created(now=1.0)
    b.opened_new("app.lock")
    b.touch("a.txt", now=1.0)
    assert b.due(1.0, None, 10.0) == pytest.approx(SETTLE)
    assert b.close(root, tree, ignore, leave=b.fresh) == [{"action": "modified", "path": "a.txt"}]
    later = Batch()
    later.fresh = {"app.lock"}
    assert later.due(2.0, None, 10.0) is None  # nothing to wait for
    later.touch("app.lock", now=3.0)
    later.written("app.lock")  # its first write: now its close is waited for
    assert later.fresh == set() and later.writing == {"app.lock"}


def test_a_rescan_asked_at_start_waits_for_a_file_being_written(folder):
    """The watcher's start-up rescan goes with the first batch: after the settle time,
    and not while a file created meanwhile is still open (the rescan would commit it
    empty)."""
    root, tree, ignore = folder
    batch = Batch()
    batch.rescan_when_closed(now=100.0)
    assert batch.due(100.0, None, 10.0) == pytest.approx(SETTLE)  # on its own: soon
    batch.touch("new.txt", now=100.01)
    batch.written("new.txt")
    assert batch.due(100.2, None, 10.0) == pytest.approx(9.8)  # open: only at maxwait
    batch.closed("new.txt")
    assert batch.due(100.2, None, 10.0) == 0.0
    make_files(root, {"new.txt": "whole"})
    assert batch.rescan and [c["path"] for c in batch.close(root, tree, ignore)] == ["new.txt"]


def test_a_burst_on_a_loaded_machine_is_not_ended_by_the_pauses_it_already_made():
    """An untar on a busy machine pauses between files longer than on a quiet one: the
    pause that ends the batch is twice the longest it saw while nothing was open (issue
    32: an untar was cut into many commits at 50 ms pauses)."""
    b = Batch()
    for i in range(5):
        b.touch("f%d" % i, now=10.0 + 0.04 * i)  # 40 ms apart, each file written and closed
    last = 10.0 + 0.04 * 4
    assert b.due(last + 0.06, None, 10.0) == pytest.approx(0.02)  # 60 ms: not the end yet
    b.written("slow")  # held open for 1.2 s: the writer's pace, not the machine's
    b.touch("slow", now=last + 1.2)
    b.closed("slow")
    assert b.quiet(None) == pytest.approx((last + 1.2 - 10.0) / 10)  # a tenth of its age
    b.touch("late", now=last + 2.5)  # a pause of a second or more is no machine's pace
    assert b.quiet(None) == pytest.approx((last + 2.5 - 10.0) / 10)
    # A batch that begins right after one closed on a pause starts with that pause.
    after = Batch(previous=11.0, learned=0.2)
    after.touch("g", now=11.3)
    assert after.quiet(None) == pytest.approx(0.6)
    # One that begins later than twice that pause is a new change: a save made 0.4 s
    # after the last one settles in SETTLE, not in twice 0.4 s (issue 32: one file's
    # propagation had gone from 421 to 552 ms).
    edit = Batch(previous=11.0, learned=SETTLE)
    edit.touch("g", now=11.4)
    assert edit.quiet(None) == pytest.approx(SETTLE)
    edit.touch("g", now=11.41)
    assert edit.quiet(None) == pytest.approx(SETTLE)
    fresh = Batch(previous=11.0, learned=0.3)
    fresh.touch("g", now=12.5)  # long after: a new burst
    assert fresh.quiet(None) == pytest.approx(SETTLE)
    # After maxwait the burst goes on at once: the patience it learnt is kept.
    going_on = Batch(previous=11.0, learned=0.3)
    going_on.touch("h", now=11.001)
    assert going_on.quiet(None) == pytest.approx(0.6)
