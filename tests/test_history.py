"""dvcs-autosync log and restore: message parsing, times, and the real thing on
real git history with the daemon running."""
import os
import socket
import subprocess
import sys
import time

import pytest

from autosync import history
from conftest import git, wait_until


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor"] + list(args), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)


# --- units ---------------------------------------------------------------------------

def test_parse_log_falls_back_to_the_author_for_manual_commits():
    out = ("abc123 1700000000 Ann Smith\nFix typo\n\0"
           "def456 1690000000 Test\nautosync on pc: 1 added\n\nadded: f\n\0")
    assert history.parse_log(out, "f", False) == [
        history.Version("abc123", 1700000000.0, "Ann Smith", "Ann Smith", "changed"),
        history.Version("def456", 1690000000.0, "Test", "pc", "added")]


def test_parse_when():
    now = 1_700_000_000.0
    assert history.parse_when("@1690000000", now) == 1690000000.0
    assert history.parse_when("3 hours ago", now) == now - 3 * 3600
    assert history.parse_when("2 days ago", now) == now - 2 * 86400
    assert history.parse_when("yesterday", now) == now - 86400
    local = time.mktime((2024, 5, 1, 14, 30, 0, 0, 0, -1))
    assert history.parse_when("2024-05-01 14:30", now) == local
    assert history.parse_when("2024-05-01T14:30:00", now) == local
    with pytest.raises(history.HistoryError):
        history.parse_when("last tuesday-ish", now)


def test_a_config_file_named_log_is_still_a_config(tmp_path):
    (tmp_path / "log").write_text("[autosync]\npath = .\nreadfrequency = soon\n")
    result = run("log", cwd=str(tmp_path))
    assert result.returncode == 2
    assert "log: [autosync] readfrequency: expected" in result.stderr


# --- end to end ------------------------------------------------------------------------

def write(machine, rel, content):
    with open(os.path.join(machine.path, rel), "wb") as f:
        f.write(content)


def settle(machine, remote):
    wait_until(lambda: machine.settled(remote), 30, 0.1, "%s to settle" % machine.name)


@pytest.mark.e2e
def test_log_and_restore_on_real_history_with_the_daemon_running(machines, remote):
    a = machines("a")
    notes = os.path.join(a.path, "notes.txt")
    write(a, "notes.txt", b"version 1\n")
    settle(a, remote)
    first_time = time.time()
    time.sleep(1.1)  # git keeps whole seconds: let version 2 be later
    write(a, "notes.txt", b"version 2\n")
    settle(a, remote)

    # log of the file: newest first, with the host and what happened.
    result = run("log", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    host = socket.gethostname()
    assert len(lines) == 2
    assert lines[0].split()[3:] == [host, "modified"]
    assert lines[1].split()[3:] == [host, "added"]
    # log of the folder, run from inside it, also lists the first (manual) commit.
    folder_log = run("log", "--config", a.config, cwd=a.path).stdout.splitlines()
    assert folder_log[-1].split()[3:] == ["Test", "first"]

    # restore with no --at: the version before the last change.
    result = run("restore", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 1\n"
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 1\n"

    # a removed file comes back, and the restore syncs like any change.
    os.unlink(notes)
    settle(a, remote)
    assert b"notes.txt" not in remote.files()
    result = run("restore", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 1\n"
    assert "added: notes.txt" in remote.log("-1", "--format=%B")

    # --at a time, and --at a revision shown by log.
    result = run("restore", notes, "--at", "@%d" % first_time, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 1\n"
    second = lines[0].split()[2]
    result = run("restore", notes, "--at", second, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 2\n"
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 2\n"
    assert not [n for n in os.listdir(a.path) if n.endswith("~")]

    # Clear errors: no such file, a time before it existed.
    result = run("restore", os.path.join(a.path, "never.txt"), "--config", a.config)
    assert result.returncode == 1 and "never.txt has no history" in result.stderr
    result = run("restore", notes, "--at", "2001-01-01", "--config", a.config)
    assert result.returncode == 1 and "no version as early as" in result.stderr


@pytest.mark.e2e
def test_contextcmd_output_is_in_the_pushed_commit_message(machines, remote):
    a = machines("a", start=False)
    a.dvcs = {"contextcmd": "echo context: busy"}
    a.write_config()
    a.start()
    write(a, "report.txt", b"draft\n")
    settle(a, remote)
    message = remote.log("-1", "--format=%B")
    assert message.startswith("autosync on ")
    assert "added: report.txt" in message and "context: busy" in message
    # log still reads such a message right.
    result = run("log", os.path.join(a.path, "report.txt"), "--config", a.config)
    assert result.stdout.split()[3:] == [socket.gethostname(), "added"]
