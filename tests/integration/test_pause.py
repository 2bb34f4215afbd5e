"""Pause and resume: the pause file (core/pause.py), and end to end with real git and the
real suite: across a restart of the suite and across another machine's push."""
import os
import signal
import time

import pytest

from autosync.core.pause import Pause, parse_duration, state_file
from base import git, wait_until


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("2h", 7200),
                                          ("1d", 86400), ("45", 45), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5m", "2w", "soon", "400d", "1h30m"])
def test_bad_durations_are_one_line(text):
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)


def test_the_pause_file_is_the_folders_own_and_survives(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = state_file(str(tmp_path / "sync"))
    assert path.startswith(str(tmp_path / "state" / "autosync") + "/")
    assert path != state_file(str(tmp_path / "other"))
    pause = Pause(path)
    assert pause.fields() is None
    pause.start(60)
    pause.owe_pull()
    again = Pause(path)
    assert again.fields() == pause.fields() and again.pull_owed
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    assert again.lift() is True and not os.path.exists(path)
    assert Pause(path).fields() is None


@pytest.mark.parametrize("content", ["not json", "[1]", '{"since": "yesterday"}'])
def test_a_broken_pause_file_is_ignored_with_a_warning(tmp_path, content, caplog):
    path = tmp_path / "x.pause"
    path.write_text(content)
    assert Pause(str(path)).fields() is None
    assert "ignoring the pause file" in caplog.text


def test_an_expired_pause_says_so(tmp_path):
    pause = Pause(str(tmp_path / "x.pause"))
    pause.start(0.05)
    assert pause.active() and not pause.expired()
    time.sleep(0.06)
    assert pause.expired()


# --- end to end ---------------------------------------------------------------------


def head(machine):
    return git("rev-parse", "HEAD", cwd=machine.path).strip()


def write(machine, rel, text):
    with open(os.path.join(machine.path, rel), "w") as f:
        f.write(text)


def start_paused(machine):
    """Start the suite on a machine whose pause is kept: it comes up paused."""
    machine.start(wait=False)
    wait_until(lambda: machine.status().get("state") == "paused", 30, what="a paused start")
    wait_until(lambda: b"watching" in open(machine.log, "rb").read(), 30, what="the watcher")


def test_pause_outlives_a_restart_and_another_machines_push_is_pulled_on_resume(
        machines, remote):
    a, b = machines("a", "b")
    before = head(a)
    out = a.notify("pause").stdout
    assert out.startswith("paused %s: since " % a.path) and out.strip().endswith("until resumed")
    status = a.status()
    assert status["state"] == "paused" and status["paused"]["until"] is None
    assert "paused:      since" in a.notify("status").stdout
    write(a, "here.txt", "made while paused\n")
    wait_until(lambda: a.status().get("pending") == ["here.txt"], 10, what="the batch")
    write(b, "there.txt", "from b\n")
    wait_until(lambda: b.settled(remote), 30, what="b to push")
    a.notify("pushed")  # as the post-receive hook or the XMPP listener would say
    refused = a.notify("sync", check=False)
    assert refused.returncode == 1 and "dvcs-autosync resume" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    time.sleep(1.5)  # several readfrequencies: nothing may happen
    assert head(a) == before and a.read("there.txt") is None

    a.stop()  # the whole suite goes, the pause stays
    start_paused(a)
    write(a, "later.txt", "made after the restart\n")
    time.sleep(1.5)
    assert head(a) == before and a.read("there.txt") is None
    assert "paused since" in a.logtext()

    assert a.notify("resume").stdout.strip() == "resumed: syncing again"
    wait_until(lambda: a.settled(remote), 30, what="a to catch up")
    assert a.read("there.txt") == b"from b\n"  # the push announced while paused
    # Everything made while paused (before and after the restart) is one commit.
    log = remote.log("--format=%s", "main").splitlines()
    assert [line.split(": ", 1)[1] for line in log[:2]] == ["2 added", "1 added"]
    assert git("show", "--name-only", "--format=", "HEAD", cwd=a.path).split() == [
        b"here.txt", b"later.txt"]
    assert a.status()["paused"] is None and a.status()["state"] == "idle"
    wait_until(lambda: b"resumed" in open(a.log, "rb").read(), 5, what="the log")


def test_a_pause_with_a_duration_ends_by_itself(machines, remote):
    a = machines("a")
    a.notify("pause", "2s")
    until = a.status()["paused"]["until"]
    assert 0 < until - time.time() <= 2
    write(a, "note.txt", "x\n")
    time.sleep(1)
    assert b"note.txt" not in remote.files()
    wait_until(lambda: a.settled(remote), 30, what="the pause to run out")
    assert remote.files()[b"note.txt"] == b"x\n"
    assert a.status()["paused"] is None


def test_bad_pause_arguments_are_usage_errors(machines):
    a = machines("a")
    result = a.notify("pause", "soon", check=False)
    assert result.returncode == 2 and "expected a duration" in result.stderr
    assert a.notify("pause", "1m", "2m", check=False).returncode == 2
    assert a.status()["paused"] is None


def test_a_killed_committer_comes_back_paused(machines, remote):
    a = machines("a")
    before = head(a)
    a.notify("pause")
    write(a, "kept.txt", "while paused\n")
    wait_until(lambda: a.status().get("pending") == ["kept.txt"], 10, what="the batch")
    killed = a.children()["committer"]
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: a.children().get("committer") not in (None, killed), 30,
               what="the supervisor to restart the committer")
    wait_until(lambda: a.status().get("state") == "paused", 30, what="the committer, paused")
    time.sleep(1.5)
    assert head(a) == before and b"kept.txt" not in remote.files()
    a.notify("resume")
    wait_until(lambda: a.settled(remote), 30, what="the resume")
    assert remote.files()[b"kept.txt"] == b"while paused\n"


def test_a_pause_given_while_the_start_pulls_holds_back_everything_after_the_pull(
        machines, remote, tmp_path):
    """Issue 41: the pause comes exactly while the start-up catch-up's pull runs (its
    pullcmd waits on a fifo the test holds). `pause` answers once that pull has ended;
    then neither the catch-up's commit nor its push runs: a file written after the pause
    is not in history, the remote keeps what another machine pushed meanwhile."""
    import subprocess
    import sys
    fifo, released = str(tmp_path / "gate"), str(tmp_path / "released")
    os.mkfifo(fifo)
    a = machines("a", start=False, pullinterval="3600", dvcs={
        "pullcmd": "test -e %s || cat %s >/dev/null; git pull -q --no-rebase --no-edit"
                   % (released, fifo)})
    b = machines("b")
    before = head(a)
    a.start(wait=False)

    def gate_open():
        try:  # a writer can open the fifo only while the pull's `cat` reads it
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None
    writer = wait_until(gate_open, 30, what="the start's pull")
    pause = subprocess.Popen([sys.executable, "-m", "autosync.tools.notify", "--config",
                              a.config, "pause"], stdout=subprocess.PIPE, text=True)
    wait_until(lambda: a.status().get("paused"), 30, what="the pause taken")
    write(a, "late.txt", "written after the pause\n")
    write(b, "fromb.txt", "b's\n")
    wait_until(lambda: b.settled(remote), 30, what="b to push")
    pushed = git("--git-dir", remote.path, "rev-parse", "main")
    assert pause.poll() is None  # not answered while the pull runs
    open(released, "w").close()
    os.close(writer)  # the pull goes on, and ends
    assert pause.communicate(timeout=60)[0].startswith("paused %s: since " % a.path)
    status = a.status()
    assert status["state"] == "paused" and status["paused"]
    assert git("--git-dir", remote.path, "rev-parse", "main") == pushed
    assert git("log", "--format=%H", "--", "late.txt", cwd=a.path) == b""
    assert head(a) != before  # the pull under way was let finish: b's change is here
    assert a.notify("resume").stdout.strip() == "resumed: syncing again"
    wait_until(lambda: a.settled(remote), 30, what="a to catch up")
    assert remote.files()[b"late.txt"] == b"written after the pause\n"
