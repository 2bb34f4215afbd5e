"""End-to-end: the suite's connections survive a quiet spell and a restarted committer."""
import os
import signal
import time

import pytest

from base import wait_until
from helpers import settle, write


QUIET = 65  # seconds: longer than the 60 s after which the committer used to drop clients


# Slow: a real minute of quiet. tests/integration/test_protocol.py's quiet-client test covers the
# socket's part in a second (its deadline shortened); this one, the whole daemon.
@pytest.mark.slow
def test_a_move_after_a_long_quiet_spell_is_one_commit(machines, remote):
    a = machines("a")
    write(a, "old.txt", b"moved after the quiet spell\n")
    settle(a, remote)
    programs = a.children()
    commits = remote.commit_count()
    time.sleep(QUIET)  # real quiet: nothing is written, nobody asks anything
    os.rename(os.path.join(a.path, "old.txt"), os.path.join(a.path, "new.txt"))
    write(a, "after.txt", b"written after the quiet spell\n")
    settle(a, remote)
    assert remote.commit_count() == commits + 1
    message = remote.log("-1", "--format=%B")
    assert "moved: new.txt (from old.txt)" in message and "added: after.txt" in message
    assert a.children() == programs  # nobody died and was restarted
    log = a.logtext()
    assert "Traceback" not in log and "BrokenPipe" not in log and "went away" not in log


def test_the_watcher_survives_its_committer_restarting(machines, remote):
    a = machines("a")
    write(a, "old.txt", b"moved while the committer restarts\n")
    settle(a, remote)
    watcher, committer = a.children()["watcher"], a.children()["committer"]
    os.kill(committer, signal.SIGKILL)
    # The watcher's batch closes while no committer listens: it is sent again.
    os.rename(os.path.join(a.path, "old.txt"), os.path.join(a.path, "new.txt"))
    wait_until(lambda: a.children().get("committer") not in (None, committer), 30,
               what="the committer to be restarted")
    settle(a, remote)
    assert remote.files()[b"new.txt"] == b"moved while the committer restarts\n"
    assert b"old.txt" not in remote.files()
    assert "moved: new.txt (from old.txt)" in remote.log("-1", "--format=%B")
    assert a.children()["watcher"] == watcher
    assert "Traceback" not in a.logtext()
