"""Files held open for writing (fs/stillopen.py), and the committer's files left out of
its commits until they are closed (committer/stillwritten.py)."""
import os

import pytest

from autosync.committer import stillwritten
from autosync.committer.stillwritten import FIRST_VERSION, StillWritten
from autosync.fs import stillopen
from fakes import Reports
from helpers import Writer


@pytest.fixture
def writer():
    made = []

    def make(path):
        made.append(Writer(str(path)))
        return made[-1]
    yield make
    for w in made:
        w.kill()


@pytest.mark.parametrize("how", ["lease", "proc"])
def test_a_file_another_process_writes_is_held_open_until_it_is_closed(tmp_path, writer, how):
    """Asked of the kernel: a read lease, or (where none can be taken) /proc."""
    lease = stillopen.lease_says if how == "lease" else (lambda path: None)
    (tmp_path / "read-only-open.txt").write_bytes(b"r")
    os.symlink("log.txt", tmp_path / "link")
    w = writer(tmp_path / "log.txt")
    w.write(b"half")
    with open(tmp_path / "read-only-open.txt", "rb"):
        held = stillopen.held_open(str(tmp_path), ["log.txt", "read-only-open.txt", "link",
                                                   "gone.txt"], lease=lease)
    assert held == {"log.txt"}  # a link is an entry of its own, never written through
    w.close()
    assert stillopen.held_open(str(tmp_path), ["log.txt"], lease=lease) == set()


def test_the_lease_asked_is_let_go_at_once(tmp_path, writer):
    """Asking takes nothing away: a writer may open the file right after."""
    (tmp_path / "f").write_bytes(b"x")
    assert stillopen.lease_says(str(tmp_path / "f")) is False
    w = writer(tmp_path / "f")  # would block for lease-break-time under a lease kept
    w.write(b"y")
    assert stillopen.lease_says(str(tmp_path / "f")) is True
    w.close()
    assert (tmp_path / "f").read_bytes() == b"xy"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def tracker(tmp_path, open_files):
    clock, reports = Clock(), Reports()
    still = StillWritten(str(tmp_path), reports, clock=clock,
                         held_open=lambda folder, paths: open_files & set(paths))
    return still, clock, reports


def test_a_file_held_open_is_left_out_said_and_given_back_once_closed(tmp_path):
    (tmp_path / "log.txt").write_bytes(b"half")
    open_files = {"log.txt"}
    still, clock, reports = tracker(tmp_path, open_files)
    changes = [{"action": "added", "path": "log.txt"}, {"action": "added", "path": "a.txt"},
               {"action": "removed", "path": "old.txt"}]
    assert still.leave_out(changes) == changes[1:]
    assert reports.fields["writing"] == ["log.txt"]
    assert still.wait() == stillwritten.RECHECK and not still.due()
    clock.now += stillwritten.RECHECK
    assert still.due() and still.recheck() == []  # still open: looked at later, less often
    assert still.wait() == 2 * stillwritten.RECHECK
    open_files.clear()  # closed, and no event said so
    clock.now += still.wait()
    assert still.recheck() == [{"action": "added", "path": "log.txt"}]
    assert reports.fields["writing"] == [] and still.wait() is None
    assert still.leave_out(changes) == changes  # closed: committed


def test_a_file_open_for_long_gets_a_version_at_ten_minutes_then_at_doubling_gaps(tmp_path):
    (tmp_path / "app.log").write_bytes(b"line\n")
    still, clock, reports = tracker(tmp_path, {"app.log"})
    change = [{"action": "modified", "path": "app.log"}]
    start = clock.now
    assert still.leave_out(change) == []  # first found open
    versions = []
    while clock.now < start + 8 * FIRST_VERSION:
        ready = still.recheck() if still.due() else []
        if ready and still.leave_out(ready):
            versions.append(clock.now - start)
        clock.now += 1.0
        if clock.now - start == 100:
            assert still.leave_out(change) == []  # as the watcher sends it again
    assert versions == [FIRST_VERSION, 3 * FIRST_VERSION, 7 * FIRST_VERSION]


def test_an_empty_file_held_open_gets_no_version(tmp_path):
    """A lock file stays open, empty, for hours: nothing to keep of it."""
    (tmp_path / "lock").write_bytes(b"")
    still, clock, reports = tracker(tmp_path, {"lock"})
    assert still.leave_out([{"action": "added", "path": "lock"}]) == []
    clock.now += 2 * FIRST_VERSION
    assert still.recheck() == [] and still.wait() > 0  # no busy loop on an overdue entry


from repos import repo  # noqa: E402,F401  (the fixture)


def committed_files(path):
    from base import git
    return git("ls-tree", "-r", "--name-only", "HEAD", cwd=path).decode().split()


@pytest.mark.parametrize("how", ["rescan", "batch", "moved"])
def test_no_commit_takes_a_file_still_being_written(repo, writer, how):
    """The rescan (git add -A takes every file as it is), a batch (the quick path) and a
    move of the open file: the file stays out, whole or not at all, until closed."""
    r, reports = repo()
    if how == "moved":
        (repo.path / "old.log").write_bytes(b"old\n")
        assert r.commit([{"action": "added", "path": "old.log"}])
    w = writer(repo.path / "new.log" if how != "moved" else repo.path / "old.log")
    w.write(b"half\n")
    (repo.path / "done.txt").write_bytes(b"done\n")
    if how == "moved":
        os.rename(repo.path / "old.log", repo.path / "new.log")
        changes = [{"action": "moved", "path": "new.log", "src": "old.log"}]
    else:
        changes = [{"action": "added", "path": "new.log"}]
    changes.append({"action": "added", "path": "done.txt"})
    assert r.commit(changes if how != "rescan" else [], rescan=how == "rescan")
    files = committed_files(repo.path)
    assert "done.txt" in files and "new.log" not in files
    assert ("old.log" in files) == (how == "moved")  # a move waits whole: no moment without
    assert reports.fields["writing"] == ["new.log"]
    if how != "moved":  # (a rescan sees the move as git does: changed this much, no move)
        assert not r.commit([], rescan=True)  # nothing else: the open file is no change yet
    w.write(b"whole\n")
    w.close()
    closed = r.still.recheck()
    assert closed == [changes[0]]
    assert r.commit(closed)
    from base import git
    assert git("show", "HEAD:new.log", cwd=repo.path) == \
        (b"old\n" if how == "moved" else b"") + b"half\nwhole\n"
    assert "old.log" not in committed_files(repo.path)
    assert reports.fields["writing"] == []


def test_the_committer_looks_again_and_commits_a_file_whose_close_nobody_told(
        committer, tmp_path):
    """The watcher's IN_CLOSE_WRITE may never come (the file was opened before it ran, its
    events were lost): the worker wakes for the look itself, and commits the file once
    it is closed."""
    open_files, clock = {"log.txt"}, Clock()
    committer.repo.still = still = StillWritten(
        str(tmp_path), committer.reports, clock=clock,
        held_open=lambda folder, paths: open_files & set(paths))
    assert still.leave_out([{"action": "added", "path": "log.txt"}]) == []
    assert committer.status["writing"] == ["log.txt"]
    assert not committer.worker.has_work() and committer.worker.sleep_time() <= stillwritten.RECHECK
    clock.now += stillwritten.RECHECK
    assert committer.worker.has_work()
    committer.worker.step()  # still open: nothing to commit
    assert not [c for c in committer.repo.calls if c[0] == "commit"]
    open_files.clear()
    clock.now += still.wait()
    assert committer.worker.has_work()
    committer.worker.step()
    assert ("commit", ["log.txt"], False) in committer.repo.calls
    assert committer.status["writing"] == [] and still.wait() is None
