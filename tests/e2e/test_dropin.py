"""End-to-end: the original dvcs-autosync's habits keep working beside the new suite.

Facts relied on, from the original's last revision (issue 11):
* its pidfile holds the PID as written by `str(os.getpid())`, no newline;
* at start it reads the whole file and treats the daemon as running when
  os.path.exists('/proc/' + text); otherwise it removes the file and goes on;
* its example's movecmd is two lines, `git rm %s` then `git add %s`;
* it pulls on every `pushed ...` message from another resource of the account.
"""
import os
import subprocess
import sys

import pytest

from base import ORIGINAL_COMMANDS, wait_until
from helpers import Events
from helpers import settle, write



def original_sees_a_daemon(pidfile):
    """The original's start-up check, as it reads the file."""
    with open(pidfile) as f:
        return os.path.exists("/proc/" + f.read())


def test_the_original_refuses_to_start_beside_a_running_daemon(machines):
    a = machines("a")
    from autosync.core.config import load
    pidfile = load(a.config).pidfile
    with open(pidfile) as f:
        assert f.read() == str(a.proc.pid)  # no newline
    assert original_sees_a_daemon(pidfile)


def test_the_new_daemon_refuses_to_start_beside_the_original(machines, tmp_path):
    a = machines("a", start=False)
    from autosync.core.config import load
    pidfile = load(a.config).pidfile
    # The original, running: its process name says dvcs-autosync, its pidfile its PID.
    original = subprocess.Popen(["bash", "-c", "exec -a dvcs-autosync sleep 60"])
    try:
        with open(pidfile, "w") as f:
            f.write(str(original.pid))
        result = subprocess.run([sys.executable, "-m", "autosync.supervisor", a.config],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=30)
        assert result.returncode == 1
        assert "already running for this config with PID %d" % original.pid in result.stderr
        with open(pidfile) as f:
            assert f.read() == str(original.pid)  # left as the original wrote it
    finally:
        original.kill()
        original.wait()


def test_a_second_config_for_the_folder_is_refused_beside_a_running_original(machines,
                                                                             tmp_path):
    """The original makes no socket, so the socket check cannot see it: a config of ours
    for the folder it syncs (under another name) is refused all the same."""
    a = machines("a", start=False)
    script = tmp_path / "original" / "dvcs-autosync"  # the original's script, by its name
    script.parent.mkdir()
    script.write_text("import time\ntime.sleep(60)\n")
    its_config = tmp_path / "original.autosync"
    its_config.write_text("[autosync]\npath = %s\npidfile = %s\n[dvcs]\n%s\n" % (
        a.path, tmp_path / "original.pid",
        "\n".join("%s = %s" % kv for kv in ORIGINAL_COMMANDS.items() if "\n" not in kv[1])))
    original = subprocess.Popen([sys.executable, str(script), str(its_config)])
    try:
        result = subprocess.run([sys.executable, "-m", "autosync.supervisor", a.config],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=30)
        assert result.returncode == 1, result.stderr
        assert "another dvcs-autosync (PID %d, config %s) already syncs %s" % (
            original.pid, its_config, a.path) in result.stderr
        from autosync.core.config import load
        assert not os.path.exists(load(a.config).pidfile)  # ours taken back
    finally:
        original.kill()
        original.wait()
    # The original gone, ours starts.
    a.start()
    # start() saw it idle once; the watcher's start-up rescan may be under way just after
    wait_until(lambda: a.status().get("state") == "idle", 30, what="a to sync")
    assert a.proc.poll() is None


def test_a_tilde_in_another_daemons_config_is_that_daemons_home(machines, tmp_path):
    """`path = ~/a` in a config another process runs on is that process's HOME's `a`
    (it was ours: two daemons with other HOMEs, each refused as syncing the other's)."""
    from autosync import supervisor
    from autosync.core.config import load
    a = machines("a", start=False)
    script = tmp_path / "original" / "dvcs-autosync"
    script.parent.mkdir()
    script.write_text("import time\ntime.sleep(60)\n")
    its_config = tmp_path / "original.autosync"
    its_config.write_text("[autosync]\npath = ~/%s\n" % os.path.basename(a.path))
    for home, same in ((os.path.dirname(a.path), True), (str(tmp_path / "elsewhere"), False)):
        original = subprocess.Popen([sys.executable, str(script), str(its_config)],
                                    env=dict(os.environ, HOME=home))
        try:
            wait_until(lambda: os.path.exists("/proc/%d/cmdline" % original.pid) and
                       str(its_config).encode() in open("/proc/%d/cmdline" % original.pid,
                                                        "rb").read(), 10, 0.02, "its start")
            found = supervisor.other_daemon(load(a.config))
            assert found == ((original.pid, str(its_config)) if same else None), (home, found)
        finally:
            original.kill()
            original.wait()


def test_stopping_leaves_a_pidfile_that_names_another_process(machines):
    a = machines("a")
    from autosync.core.config import load
    pidfile = load(a.config).pidfile
    with open(pidfile, "w") as f:
        f.write("1")  # taken over meanwhile (the original replaced it, say)
    assert a.stop() == 0
    with open(pidfile) as f:
        assert f.read() == "1"


@pytest.mark.parametrize("commands", ["original", "new"])
def test_a_folder_move_with_the_originals_movecmd_is_quiet_and_the_same(machines, remote,
                                                                        commands):
    dvcs = dict(ORIGINAL_COMMANDS) if commands == "original" else {}
    a = machines("a", dvcs=dvcs)
    for i in range(5):
        write(a, "photos/2024/p%d.jpg" % i, b"photo %d\n" % i)
    settle(a, remote)
    os.rename(os.path.join(a.path, "photos"), os.path.join(a.path, "pictures"))
    settle(a, remote)
    assert "fatal:" not in a.logtext() and "WARNING" not in a.logtext()
    files = remote.files()
    assert sorted(files) == [b"README"] + [b"pictures/2024/p%d.jpg" % i for i in range(5)]
    moved = remote.log("-1", "--format=%s", "main").strip()
    assert moved.endswith(": 5 moved"), moved
    names = remote.log("-1", "--format=", "--name-status", "-M", "main").split("\n")
    assert sum(1 for n in names if n.startswith("R100")) == 5


def test_a_folder_of_2000_files_moved_with_the_originals_strings_is_one_rm_and_one_add(
        machines, remote):
    """The original's strings run as the shipped ones (issue 32): the daemon's log names
    each command it runs; the move is one movecmd (its two lines), not one per file, and
    lands as one commit of 2,000 exact renames."""
    a = machines("a", dvcs=dict(ORIGINAL_COMMANDS))
    assert "the original's command strings are run as the shipped ones" in a.logtext()
    for i in range(2000):
        write(a, "photos/p%04d.jpg" % i, b"photo %d\n" % i)
    settle(a, remote)
    before, logged = remote.commit_count(), len(a.logtext())
    os.rename(os.path.join(a.path, "photos"), os.path.join(a.path, "pictures"))
    settle(a, remote)
    ran = [line.split(" DEBUG ", 1)[1].split(":", 1)[0] for line in
           a.logtext()[logged:].splitlines() if "autosync.commands[" in line]
    assert ran.count("movecmd") == 2 and ran.count("addcmd") + ran.count("rmcmd") == 0, ran
    assert remote.commit_count() - before == 1
    names = remote.log("-1", "--format=", "--name-status", "-M", "main").splitlines()
    assert len(names) == 2000 and all(n.startswith("R100\tphotos/") for n in names)


def test_only_a_push_of_something_new_is_announced(machines, remote):
    a = machines("a", start=False)
    a.start()
    events = Events(a)
    assert a.notify("sync").returncode == 0  # nothing new: pushed nothing
    write(a, "new.txt", b"x\n")
    said = events.wait_for(lambda e: e.get("event") == "pushed")
    assert said["source"] == "committer"
    assert [e for e in events.seen if e.get("event") == "committed"]  # after a commit only
    assert a.notify("sync").returncode == 0
    a.stop()
    events.close()
    assert len([e for e in events.seen if e.get("event") == "pushed"]) == 1
    # Nor right after starting, with nothing to push.
    a.start()
    events = Events(a)
    assert a.notify("sync").returncode == 0
    a.stop()
    events.close()
    assert not [e for e in events.seen if e.get("event") == "pushed"]
