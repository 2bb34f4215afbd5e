"""The repository's upkeep (issue 21, item 3): maintenancecmd runs on the committer's
schedule, never while it commits, pushes or pulls. Units for the schedule; end to end
with a slow maintenance command beside a real daemon that commits and pulls."""
import os
import random
import shutil
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from autosync.committer import maintenance
from autosync.committer.status import Status
from base import Machine, git, wait_until


# --- the schedule ----------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Worker:
    """What Upkeep asks of the committer."""

    def __init__(self, interval, command="true"):
        self.cfg = SimpleNamespace(maintenanceinterval=interval, path="/",
                                   commands={"maintenancecmd": command})
        self.cond = threading.RLock()
        self.stopping = False
        self.work = False
        self.pausing = SimpleNamespace(active=lambda: self.is_paused)
        self.is_paused = False
        self.status = Status(self.cond, lambda fields: None)

    def has_work(self):
        return self.work


def test_the_upkeep_waits_for_its_interval_and_for_quiet():
    clock, worker = Clock(), Worker(600)
    upkeep = maintenance.Upkeep(worker, clock)
    assert upkeep.timeout(None) == 0  # the history's size, at the first idle moment
    assert not upkeep.tick(False)  # (/ is no git repository: never measured again)
    assert upkeep.timeout(None) == 600 and upkeep.timeout(5.0) == 5.0
    clock.now += 599
    assert not upkeep.tick(False)
    clock.now += 1
    assert not upkeep.tick(True)  # the worker just worked: quiet for 30 s first
    assert upkeep.timeout(None) == 30
    clock.now += 30
    assert upkeep.tick(False) and upkeep.runs == 1
    assert worker.status["maintenance"]["error"] is None
    assert upkeep.timeout(None) == 600  # the next one an interval later


class Ticking(Clock):
    """A clock that moves on at every reading, as time.monotonic does."""

    def __call__(self):
        self.now += 0.001
        return self.now


def test_what_is_due_is_done_at_once_with_a_moving_clock():
    """A deadline read as "now" is passed by the next reading: the worker must not
    wait 0 s for ever (it did: 100 % CPU while idle)."""
    clock, worker = Ticking(), Worker(600)
    worker.cfg.path = os.getcwd()
    upkeep = maintenance.Upkeep(worker, clock)
    assert upkeep.timeout(None) == 0
    upkeep.tick(False)
    assert upkeep.timeout(None) > 500


def test_the_upkeep_does_not_run_while_paused_or_with_work_waiting():
    clock, worker = Clock(), Worker(10)
    upkeep = maintenance.Upkeep(worker, clock)
    clock.now += 20
    worker.is_paused = True
    assert not upkeep.tick(False) and upkeep.runs == 0
    assert upkeep.timeout(None) >= 1.0  # not due again at once: the worker does not spin
    worker.is_paused, worker.work = False, True
    clock.now += 20
    assert not upkeep.tick(False) and upkeep.runs == 0
    worker.work = False
    clock.now += 20
    assert upkeep.tick(False) and upkeep.runs == 1


def test_no_command_or_no_interval_is_off():
    for worker in (Worker(600, ""), Worker(0)):
        upkeep = maintenance.Upkeep(worker, Clock())
        upkeep.tick(False)  # the size: / is no git repository
        assert upkeep.timeout(None) is None and upkeep.timeout(3.0) == 3.0
        assert not upkeep.tick(False)


def test_a_failing_command_is_said_and_tried_again_later():
    clock, worker = Clock(), Worker(10, "false")
    upkeep = maintenance.Upkeep(worker, clock)
    clock.now += 10
    assert upkeep.tick(False)
    assert "maintenancecmd" in worker.status["maintenance"]["error"]
    assert upkeep.failing and upkeep.timeout(None) == 10


# --- end to end ------------------------------------------------------------------------

GIT_WRAPPER = """#!/bin/sh
# Every git command run with this PATH: its start and end, its parent, its first words.
echo "S $$ $PPID $(date +%s.%N) $1 $2" >> '{log}'
'{git}' "$@"
rc=$?
echo "E $$ $(date +%s.%N)" >> '{log}'
exit $rc
"""

SLOW_MAINTENANCE = """#!/bin/sh
echo "S $$ $PPID $(date +%s.%N) maintenance" >> '{log}'
sleep 1.2
git maintenance run --auto --quiet
echo "E $$ $(date +%s.%N)" >> '{log}'
"""


def intervals(path):
    """{pid: [start, end, ppid, words]} from a log of S/E lines."""
    found = {}
    with open(path) as f:
        for line in f:
            words = line.split()
            if words and words[0] == "S":
                found[words[1]] = [float(words[3]), None, words[2], " ".join(words[4:])]
            elif words and words[0] == "E" and words[1] in found:
                found[words[1]][1] = float(words[2])
    return found


@pytest.mark.e2e
def test_maintenance_never_overlaps_a_commit_or_a_pull(tmp_path, remote, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_log, upkeep_log = tmp_path / "git.log", tmp_path / "maintenance.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(GIT_WRAPPER.format(log=git_log, git=shutil.which("git")))
    wrapper.chmod(0o755)
    slow = tmp_path / "slow-maintenance"
    slow.write_text(SLOW_MAINTENANCE.format(log=upkeep_log))
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    a = Machine(tmp_path, "a", remote, maintenanceinterval="0.5",
                dvcs={"maintenancecmd": str(slow)})
    other = Machine(tmp_path, "other", remote)  # pushes, so that a's pulls merge
    rng = random.Random(21)
    pulls = []
    try:
        a.start()
        committer = str(a.children()["committer"])
        for i in range(14):
            if i in (2, 6, 10):
                # The worst moment, made certain: the next writes and pull requests come
                # while a maintenance run has just begun (not left to the machine's speed).
                begun = len(intervals(upkeep_log)) if upkeep_log.exists() else 0
                wait_until(lambda: upkeep_log.exists() and len(intervals(upkeep_log)) > begun,
                           60, 0.05, "a maintenance run to begin")
            with open(os.path.join(a.path, "f%02d.txt" % i), "w") as f:
                f.write("change %d\n" % i)
            if i % 3 == 0:
                with open(os.path.join(other.path, "o%02d.txt" % i), "w") as f:
                    f.write("theirs %d\n" % i)
                git("add", "-A", cwd=other.path)
                git("commit", "-q", "-m", "theirs %d" % i, cwd=other.path)
                # a's push may land between this pull and push: pull again, as a user would
                for _ in range(50):
                    git("pull", "-q", "--no-rebase", "--no-edit", cwd=other.path)
                    if subprocess.run(["git", "push", "-q"], cwd=other.path,
                                      stderr=subprocess.DEVNULL).returncode == 0:
                        break
                    time.sleep(0.1)
                else:
                    raise AssertionError("other's push was refused 50 times")
                pull = threading.Thread(target=a.notify, args=("pull",))
                pull.start()
                pulls.append(pull)
            time.sleep(rng.choice((0.2, 0.8, 1.5, 2.0)))
        for pull in pulls:
            pull.join(60)
        wait_until(lambda: a.settled(remote), 60, 0.3, "a to settle")
        assert a.read("o12.txt") == b"theirs 12\n"
        assert {n.decode() for n in remote.files()} >= {"f%02d.txt" % i for i in range(14)}
    finally:
        a.stop()
    runs = [(s, e if e is not None else float("inf"))
            for s, e, _, _ in intervals(upkeep_log).values()]
    assert len(runs) >= 3, runs  # it did run, several times, between the work
    ours = [(s, e, words) for s, e, parent, words in intervals(git_log).values()
            if parent == committer]
    assert any(w.startswith("commit") for _, _, w in ours)
    assert any(w.startswith("fetch") for _, _, w in ours)  # the pulls
    assert any(w.startswith("push") for _, _, w in ours)
    overlaps = [(w, s, e, ms, me) for s, e, w in ours for ms, me in runs
                if s < me and (e is None or e > ms)]
    assert not overlaps, overlaps
    assert all(e != float("inf") for _, e in runs)  # and each ended
