"""supervisor: the pidfile, restarting a program that exits (with backoff), which
programs a config starts, and stopping them in order; with real processes."""
import logging
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from autosync import supervisor
from autosync.tools import notify
from base import ROOT
from fakes import config, config_with_a_shared_socket_folder, serving
from fakes import paused_reply
from service_units import INSTALLS, PLAIN, TEMPLATE, exec_start, not_restarted_on


@pytest.fixture
def programs():
    made = []

    def make(code, name="committer"):
        program = supervisor.Program(name, [])
        program.argv = [sys.executable, "-c", code]
        made.append(program)
        return program

    yield make
    for program in made:
        if program.proc is not None and program.proc.poll() is None:
            program.proc.kill()
        if program.proc is not None:
            program.proc.wait()


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # reaped: nobody has it (until reused, which a test cannot wait for)


OURS = "%d" % os.getpid()  # no newline: the original dvcs-autosync reads the whole text


def read(path):
    with open(path) as f:
        return f.read()


# --- the pidfile --------------------------------------------------------------------

def test_take_pidfile_writes_our_pid(tmp_path):
    path = str(tmp_path / "autosync.pid")
    supervisor.take_pidfile(path)
    assert read(path) == OURS
    supervisor.take_pidfile(path)  # our own PID in it: no refusal
    assert read(path) == OURS
    assert sorted(os.listdir(str(tmp_path))) == ["autosync.pid", "home"]  # no temporary file


@pytest.mark.parametrize("content", ["", "garbage\n", "-\n", None])
def test_an_unreadable_or_dead_pidfile_is_replaced(tmp_path, content, caplog):
    path = str(tmp_path / "autosync.pid")
    with open(path, "w") as f:
        f.write("%d\n" % dead_pid() if content is None else content)
    with caplog.at_level(logging.INFO, logger="autosync"):
        supervisor.take_pidfile(path)
    assert read(path) == OURS
    if content is None:
        assert "replacing stale pidfile" in caplog.text


def test_a_live_process_that_is_not_autosync_does_not_block(tmp_path, spawn):
    other = spawn([sys.executable, "-c", "import sys; print('ready', flush=True); "
                   "sys.stdin.read()"])  # a PID reused by another program after a reboot
    assert other.stdout.readline() == b"ready\n"
    path = str(tmp_path / "autosync.pid")
    with open(path, "w") as f:
        f.write("%d\n" % other.pid)
    supervisor.take_pidfile(path)
    assert read(path) == OURS


def test_a_live_autosync_is_refused_with_exit_1_and_its_pid(tmp_path, spawn, capsys):
    running = spawn([sys.executable, "-c", "import sys; print('ready', flush=True); "
                     "sys.stdin.read()", "dvcs-autosync"])
    assert running.stdout.readline() == b"ready\n"  # its command line is in place
    path = str(tmp_path / "autosync.pid")
    with open(path, "w") as f:
        f.write("%d\n" % running.pid)
    with pytest.raises(SystemExit) as exited:
        supervisor.take_pidfile(path)
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already running" in err and str(running.pid) in err
    assert read(path) == "%d\n" % running.pid  # left alone


@pytest.mark.parametrize("how, theirs", [
    # A Python that lives in a folder named after us (the tests' venv) runs something else.
    ("venv/bin/python3", False),
    ("-m autosync.supervisor", True),  # ours, as the supervisor starts from a checkout
    ("/venv/bin/dvcs-autosync", True),  # ours, through a launcher; or the original
])
def test_what_counts_as_a_running_autosync(tmp_path, spawn, how, theirs):
    folder = tmp_path / "autosync-test" / "venv" / "bin"
    folder.mkdir(parents=True)
    python = folder / "python3"
    python.symlink_to(sys.executable)
    wait = "import sys; print('ready', flush=True); sys.stdin.read()"
    argv = {"venv/bin/python3": [str(python), "-c", wait],
            "-m autosync.supervisor": [str(python), "-c", wait, "-m", "autosync.supervisor"],
            "/venv/bin/dvcs-autosync": [str(python), "-c", wait, "/venv/bin/dvcs-autosync"]}
    other = spawn(argv[how])
    assert other.stdout.readline() == b"ready\n"
    assert supervisor._is_autosync(other.pid) is theirs


def test_release_pidfile_removes_only_our_own(tmp_path, spawn):
    path = str(tmp_path / "autosync.pid")
    supervisor.release_pidfile(path)  # none: nothing to do
    supervisor.take_pidfile(path)
    supervisor.release_pidfile(path)
    assert not os.path.exists(path)
    with open(path, "w") as f:
        f.write("%d\n" % dead_pid())  # another daemon's, taken after ours
    supervisor.release_pidfile(path)
    assert os.path.exists(path)


def test_answers_only_for_a_listening_socket(tmp_path):
    path = str(tmp_path / "run" / "c.sock")
    assert supervisor.answers(path) is False
    with serving(path, lambda m, c: {"ok": True}):
        assert supervisor.answers(path) is True


def test_process_alive():
    assert supervisor.process_alive(os.getpid())
    assert not supervisor.process_alive(dead_pid())


# --- Program: restarts with backoff ---------------------------------------------------

def test_program_runs_the_module_with_the_arguments():
    program = supervisor.Program("watcher", ["/x/autosync.ini", "-v"])
    assert program.name == "autosync-watcher"
    assert program.argv == [sys.executable, "-m", "autosync.watcher", "/x/autosync.ini", "-v"]


def test_an_exit_is_restarted_after_a_growing_backoff(programs, caplog):
    program = programs("raise SystemExit(3)")
    now = time.monotonic()
    program.check(now)  # due at once: started
    first = program.proc
    assert first is not None
    first.wait(30)
    with caplog.at_level(logging.WARNING, logger="autosync"):
        program.check(now)
    assert program.proc is None
    assert "autosync-committer exited with status 3; restarting in 0.5 s" in caplog.text
    program.check(now + supervisor.BACKOFF_MIN - 0.01)
    assert program.proc is None  # not yet
    program.check(now + supervisor.BACKOFF_MIN)
    assert program.proc is not None and program.proc is not first
    program.proc.wait(30)
    program.check(now + 1)
    assert program.next_start == pytest.approx(now + 1 + 2 * supervisor.BACKOFF_MIN)


def test_the_backoff_is_capped(programs):
    program = programs("raise SystemExit(1)")
    delays, now = [], 0.0
    program.started = 0.0
    for _ in range(12):
        program.start()
        program.proc.wait(30)
        program.started = now  # every run short: no reset
        program.check(now)
        delays.append(program.next_start - now)
    assert delays[:3] == [0.5, 1.0, 2.0]
    assert max(delays) == supervisor.BACKOFF_MAX and delays[-1] == supervisor.BACKOFF_MAX


def test_a_program_that_ran_long_starts_its_backoff_afresh(programs):
    program = programs("raise SystemExit(1)")
    for _ in range(4):
        program.start()
        program.proc.wait(30)
        program.check(program.started)
    assert program.next_start - program.started > supervisor.BACKOFF_MIN
    program.start()
    program.proc.wait(30)
    now = program.started + supervisor.STABLE_AFTER + 1
    program.check(now)
    assert program.next_start == pytest.approx(now + supervisor.BACKOFF_MIN)


def test_a_kill_is_named_as_a_signal(programs, caplog):
    program = programs("import time; time.sleep(60)")
    program.start()
    program.proc.kill()
    program.proc.wait(30)
    with caplog.at_level(logging.WARNING, logger="autosync"):
        program.check(time.monotonic() - 100)  # no restart due yet at that time
    assert "autosync-committer was killed by signal %d" % signal.SIGKILL in caplog.text


def test_signal_to_a_program_that_is_gone_is_harmless(programs):
    program = programs("pass")
    program.signal(signal.SIGTERM)  # never started
    program.start()
    program.proc.wait(30)
    program.signal(signal.SIGTERM)


# --- which programs, and stopping them ------------------------------------------------

@pytest.mark.parametrize("syncmethod, notifymethod, wanted", [
    ("none", "none", ["committer", "watcher"]),
    ("xmpp", "none", ["committer", "watcher", "xmpp"]),
    ("none", "xmpp", ["committer", "watcher", "xmpp"]),
    ("none", "desktop", ["committer", "watcher", "desktop"]),
    ("xmpp", "desktop", ["committer", "watcher", "xmpp", "desktop"]),
    ("none", "all", ["committer", "watcher", "xmpp", "desktop"]),
    ("ssh", "desktop", ["committer", "watcher", "sshlink", "desktop"]),
    ("ssh", "xmpp", ["committer", "watcher", "sshlink", "xmpp"]),
])
def test_programs_follow_syncmethod_and_notifymethod(syncmethod, notifymethod, wanted):
    cfg = config(syncmethod=syncmethod, notifymethod=notifymethod)
    got = supervisor.programs(cfg, ["/x.ini"])
    assert [p.name for p in got] == ["autosync-" + w for w in wanted]
    assert all(p.argv[-1] == "/x.ini" for p in got)


def test_the_tray_is_started_when_the_config_asks():
    got = supervisor.programs(config(syncmethod="none", notifymethod="desktop", tray=True), [])
    assert [p.name for p in got][-2:] == ["autosync-desktop", "autosync-tray"]
    assert "autosync-tray" not in [p.name for p in supervisor.programs(config(), [])]


# On SIGTERM each program writes its name to a file in `log`; the committer also says
# whether the watcher had already stopped.
STOPPING = """
import os, signal, sys, time
name, log = sys.argv[1], sys.argv[2]
def stop(signum, frame):
    before = sorted(os.listdir(log))
    open(os.path.join(log, name), "w").write(" ".join(before))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_stop_ends_the_others_first_and_the_committer_last(programs, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    running = [programs(STOPPING, name) for name in ("committer", "watcher", "xmpp")]
    for program in running:
        program.argv += [program.name, str(log)]
        program.proc = subprocess.Popen(program.argv, stdout=subprocess.PIPE)
        assert program.proc.stdout.readline() == b"ready\n"
    supervisor.stop(running)
    assert all(p.proc.returncode == 0 for p in running)
    assert read(str(log / "autosync-committer")) == "autosync-watcher autosync-xmpp"


def test_stop_kills_a_program_that_ignores_sigterm(programs, monkeypatch, caplog):
    monkeypatch.setattr(supervisor, "STOP_GRACE", 1.0)
    stubborn = programs("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "print('ready', flush=True); time.sleep(60)", "watcher")
    committer = programs("import time; print('ready', flush=True); time.sleep(60)")
    for program in (committer, stubborn):
        program.proc = subprocess.Popen(program.argv, stdout=subprocess.PIPE)
        assert program.proc.stdout.readline() == b"ready\n"
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="autosync"):
        supervisor.stop([committer, stubborn])
    assert time.monotonic() - started < 10
    assert committer.proc.returncode == -signal.SIGTERM
    assert stubborn.proc.returncode == -signal.SIGKILL
    assert "autosync-watcher did not stop in time" in caplog.text


def test_wait_for_socket(programs, tmp_path):
    path = str(tmp_path / "run" / "c.sock")
    quitter = programs("pass")
    quitter.start()
    assert supervisor.wait_for_socket(path, quitter, timeout=30) is False  # it exited
    with serving(path, lambda m, c: {"ok": True}):
        sleeper = programs("import time; time.sleep(60)")
        sleeper.start()
        assert supervisor.wait_for_socket(path, sleeper, timeout=30) is True


def test_remove_ignores_a_missing_file(tmp_path):
    path = tmp_path / "x"
    path.write_text("x")
    supervisor.remove(str(path))
    assert not path.exists()
    supervisor.remove(str(path))


def test_main_with_a_bad_config_exits_2_and_takes_no_pidfile(tmp_path, capsys):
    conf = tmp_path / "autosync.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = pigeon\n" % tmp_path)
    conf.chmod(0o600)
    with pytest.raises(SystemExit) as exited:
        supervisor.main([str(conf)])
    assert exited.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(os.listdir(str(tmp_path))) == ["autosync.ini", "home"]


def test_main_starts_nothing_on_a_socket_folder_others_can_enter(tmp_path, capsys):
    folder, conf = config_with_a_shared_socket_folder(tmp_path)
    with pytest.raises(SystemExit) as exited:
        supervisor.main([str(conf)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing the socket folder %s" % (tmp_path / "shared") in err
    assert not os.path.exists(str(conf) + ".pid")


@pytest.mark.e2e
def test_a_config_warning_is_said_once_per_start(machines, remote):
    """The supervisor says it; the committer, watcher and the rest read the same file
    and keep quiet about it."""
    a = machines("a", start=False)
    a.settings["pathh"] = "~/typo"
    a.write_config()
    a.start()
    time.sleep(1)  # every program has read the config by now
    assert a.logtext().count("pathh") == 1, a.logtext()
    a.stop()


# --- What the main command understands -----------------------------------------------------

MODULES = {"notify": "tools.notify", "tray": "desktop.tray"}  # the rest: python -m autosync.X


def run_module(module, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autosync." + MODULES.get(module, module)] + list(args), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_dvcs_autosync_status_is_autosync_notify_status(machines, remote):
    a = machines("a")
    told = run_module("notify", "--config", a.config, "status")
    assert told.returncode == 0 and "state:       idle" in told.stdout, told.stderr
    for argv in (["status", "--config", a.config], ["--config", a.config, "status"],
                 ["--config=" + a.config, "status"]):
        said = run_module("supervisor", *argv)
        assert (said.returncode, said.stdout, said.stderr) == (0, told.stdout, ""), argv
    # From inside the folder, as autosync-notify finds its daemon.
    here = run_module("supervisor", "status", cwd=a.path)
    assert (here.returncode, here.stdout) == (0, told.stdout), here.stderr


def test_a_config_file_named_status_is_still_a_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "status").write_text("[autosync]\n")
    assert supervisor.command(["status"]) is None
    assert supervisor.command(["--config", "x", "log", "a.txt"]) == ["log", "a.txt",
                                                                    "--config", "x"]


@pytest.mark.parametrize("module", ["supervisor", "committer", "watcher", "xmpp", "desktop",
                                    "tray", "notify"])
def test_every_program_takes_config_and_tells_a_folder_given_for_it(module, tmp_path,
                                                                    private_home):
    folder = tmp_path / "Sync"
    (folder / ".git").mkdir(parents=True)
    argv = ["--config", str(folder)] + (["status"] if module == "notify" else [])
    result = run_module(module, *argv)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("%s: a folder, where a config file is expected; to sync "
                                    "it, write the config file: printf " % folder), result.stderr
    assert result.stderr.count("\n") == 1


def test_the_main_command_tells_a_folder_given_as_its_argument(tmp_path, private_home):
    folder = tmp_path / "Sync"
    folder.mkdir()
    result = run_module("supervisor", str(folder))
    assert result.returncode == 2
    assert result.stderr.startswith("%s: a folder, where a config file is expected" % folder)
    assert "cannot read" not in result.stderr


@pytest.mark.e2e
def test_pause_typed_in_home_pauses_the_default_config_s_daemon(machines, remote, private_home):
    from base import git, wait_until
    a = machines("a")
    os.symlink(a.config, str(private_home / ".autosync"))  # the default config
    before = git("--git-dir", remote.path, "rev-parse", "main")
    paused = run_module("supervisor", "pause", cwd=str(private_home))
    assert paused.returncode == 0 and paused.stdout.startswith(
        "paused %s: since " % a.path), paused.stderr
    assert a.status()["paused"]
    with open(os.path.join(a.path, "while-paused.txt"), "w") as f:
        f.write("not yet\n")
    wait_until(lambda: "while-paused.txt" in (a.status().get("pending") or []),
               what="the paused change to be pending")
    assert git("--git-dir", remote.path, "rev-parse", "main") == before
    resumed = run_module("notify", "resume", cwd=str(private_home))
    assert resumed.returncode == 0 and resumed.stdout == "resumed: syncing again\n", \
        resumed.stderr
    wait_until(lambda: a.settled(remote), what="the change pushed after the resume")
    assert git("--git-dir", remote.path, "rev-parse", "main") != before


# --- the original beside: which runs, on which folder (core/daemons.py) ----------------

def test_the_original_is_told_from_ours_by_its_script_under_python3(tmp_path):
    from autosync.core import daemons
    original, ours = tmp_path / "o" / "dvcs-autosync", tmp_path / "u" / "dvcs-autosync"
    for script, text in ((original, "import pyinotify, jabberbot\n"),
                         (ours, "from autosync.supervisor import main\nmain()\n")):
        script.parent.mkdir()
        script.write_text(text)
    assert daemons.is_original(["/usr/bin/python3", str(original), "x.autosync"])
    assert daemons.is_original(["python3", "-u", "dvcs-autosync"], str(original.parent))
    assert not daemons.is_original(["/usr/bin/python3", str(ours)])
    assert daemons.is_original(["/usr/bin/python2.7", str(ours)])  # Python 2: only it
    # `python` is whichever Python the link leads to: the script says, or the binary.
    assert daemons.is_original(["python", "./dvcs-autosync"], str(original.parent))
    assert not daemons.is_original(["python", "./dvcs-autosync"], str(ours.parent))
    python2 = tmp_path / "python2.7"
    python2.write_text("")
    (tmp_path / "exe").symlink_to(python2)  # as /proc/PID/exe names the binary that runs
    assert daemons.is_original(["python", str(ours)], ".", str(tmp_path / "exe"))
    assert not daemons.is_original(["python", str(tmp_path / "gone" / "dvcs-autosync")])
    assert not daemons.is_original(["python3", "-m", "autosync.supervisor"])
    assert not daemons.is_original(["python3", str(tmp_path / "gone" / "dvcs-autosync")])


def test_an_original_given_another_config_syncs_the_folder_of_its_home_s_autosync(tmp_path):
    """The original reads ~/.autosync after the file it is given: a path there wins. Ours,
    on the folder of that ~/.autosync, is refused though the original's file names another."""
    from autosync.core.config import load
    home, folder = tmp_path / "its-home", tmp_path / "Sync"
    home.mkdir()
    folder.mkdir()
    (home / ".autosync").write_text("[autosync]\npath = ~/../Sync\n")
    given = tmp_path / "given.autosync"
    given.write_text("[autosync]\npath = %s\n" % (tmp_path / "elsewhere"))
    ours = tmp_path / "ours.autosync"
    ours.write_text("[autosync]\npath = %s\nsyncmethod = none\nnotifymethod = none\n" % folder)
    script = tmp_path / "original" / "dvcs-autosync"
    script.parent.mkdir()
    script.write_text("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
    for env_home, same in ((home, True), (tmp_path / "nowhere", False)):
        original = subprocess.Popen([sys.executable, str(script), str(given)],
                                    env=dict(os.environ, HOME=str(env_home)),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert original.stdout.readline() == b"ready\n"
            found = supervisor.other_daemon(load(str(ours), check_path=False))
            assert found == ((original.pid, str(given)) if same else None), env_home
        finally:
            original.kill()
            original.wait()


PIP_LAUNCHER = """#!%s
# -*- coding: utf-8 -*-
import re
import sys
from autosync.supervisor import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


@pytest.mark.e2e
def test_ours_started_by_a_launcher_whose_python_is_named_python_is_not_the_original(
        machines, remote, tmp_path, private_home):
    """pip run as `venv/bin/python -m pip` writes `#!venv/bin/python` into our launcher:
    the daemon's command line is then `.../python .../dvcs-autosync CONFIG`, a Python 3 by
    another name. It is ours: a second folder (on ~/.autosync) is not refused for it,
    and init does not tell the user about an original that is not there."""
    from autosync.core import daemons
    from autosync.core.config import load
    from autosync.tools.init import words
    from base import wait_until
    a, b = machines("a", "b", start=False)
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    launcher = venv / "dvcs-autosync"
    launcher.write_text(PIP_LAUNCHER % (venv / "python"))
    launcher.chmod(0o755)
    os.symlink(b.config, str(private_home / ".autosync"))  # b: the default config
    a.logfile = open(a.log, "ab")
    a.proc = subprocess.Popen([str(launcher), "-v", a.config], stdout=a.logfile,
                              stderr=a.logfile, stdin=subprocess.DEVNULL)
    wait_until(lambda: a.status().get("state") == "idle", 30, what="a to start")
    ours = [args for pid, args, _ in daemons.running() if pid == a.proc.pid]
    assert ours == [[str(venv / "python"), str(launcher), "-v", a.config]]
    assert daemons.synced_folder(a.proc.pid, ours[0], a.config) == a.path
    assert supervisor.other_daemon(load(b.config)) is None
    found = words.original_setups()
    assert not [where for _, where, _ in found if "PID %d," % a.proc.pid in where], found


@pytest.mark.parametrize("unit", [TEMPLATE, PLAIN], ids=os.path.basename)
@pytest.mark.parametrize("install", INSTALLS)
def test_exec_start_finds_the_program_and_a_config_error_is_not_restarted(unit, install,
                                                                         tmp_path):
    home = tmp_path / "user"
    system = tmp_path / "usr-local-bin"
    folder = system if INSTALLS[install] is None else home / INSTALLS[install]
    folder.mkdir(parents=True)
    (tmp_path / "run").mkdir(mode=0o700)
    # A launcher as pip writes one, which also notes where it was found.
    launcher = folder / "dvcs-autosync"
    launcher.write_text('#!/bin/sh\necho "$0" > "%s"\nexec %s -m autosync.supervisor "$@"\n'
                        % (tmp_path / "ran", sys.executable))
    launcher.chmod(0o755)
    config = home / (".config/autosync/work" if unit == TEMPLATE else ".autosync")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[autosync]\nsyncmethod = none\n")  # no path: a config error
    # The user manager's PATH: the system's folders, without the user's own. The test's
    # own folder stands for them: the machine's /usr/bin may hold an installed
    # dvcs-autosync (the Debian package), which is not the one under test.
    env = {"PATH": str(system), "HOME": str(home), "PYTHONPATH": ROOT,
           "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    result = subprocess.run(exec_start(unit, str(home), "work"), env=env, cwd="/",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert (tmp_path / "ran").read_text() == "%s\n" % launcher, result.stderr
    # The config error's one line, and the status the unit does not restart on.
    assert result.stderr == ("%s: [autosync] path: expected the folder to keep in sync, "
                             "got nothing\n" % config), result.stderr
    assert result.returncode == 2
    assert result.returncode in not_restarted_on(unit)


@pytest.mark.parametrize("unit", [TEMPLATE, PLAIN], ids=os.path.basename)
def test_without_the_program_the_unit_stops_at_once(unit, tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    system = tmp_path / "usr-bin"  # the system's folders, without the machine's programs:
    system.mkdir()  # its /usr/bin may hold an installed dvcs-autosync (the Debian package)
    result = subprocess.run(exec_start(unit, str(home), "work"),
                            env={"PATH": str(system), "HOME": str(home)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "dvcs-autosync" in result.stderr and "not found" in result.stderr, result.stderr
    assert result.returncode == 127
    assert result.returncode in not_restarted_on(unit)


def test_as_a_program_without_a_daemon(tmp_path):
    """The installed entry point: exit status 3 reaches the shell."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(notify.__file__)))
    proc = subprocess.run([sys.executable, "-m", "autosync.tools.notify", "--socket",
                           str(tmp_path / "none.sock"), "sync"], env=env, cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 3 and proc.stdout == b""
    assert proc.stderr.count(b"\n") == 1


def test_dvcs_autosync_takes_the_everyday_commands(tmp_path):
    from autosync.core.paths import socket_for
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(notify.__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    requests = []
    with serving(socket_for(str(tmp_path / "Sync")),
                 lambda m, c: requests.append(m) or paused_reply(m)):
        for command in (["pause"], ["resume"], ["sync"], ["status"], ["describe", "x"]):
            proc = subprocess.run([sys.executable, "-m", "autosync.supervisor"] + command,
                                  env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
        assert [r["cmd"] for r in requests] == ["pause", "resume", "sync", "status", "describe"]
        # A file named like the command, here: the original's `dvcs-autosync CONFIG`.
        (tmp_path / "pause").write_text("[autosync]\npath = %s\n" % (tmp_path / "nowhere"))
        proc = subprocess.run([sys.executable, "-m", "autosync.supervisor", "pause"], env=env,
                              cwd=str(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode != 0 and len(requests) == 5
    assert proc.stderr.startswith("dvcs-autosync: pause is a file here: read as the config "
                                  "file, as the original dvcs-autosync CONFIG did; for the "
                                  "command, run it in another folder\n")


def log_line(verbose, journal):
    code = ("from autosync.core import cli; import logging; cli.setup_logging(%r); "
            "logging.getLogger('autosync.x').debug('dbg'); "
            "logging.getLogger('autosync.x').info('hello')" % verbose)
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    env["PYTHONPATH"] = ROOT
    if journal:
        env["JOURNAL_STREAM"] = "8:12345"
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=True, timeout=60)
    assert proc.stdout == b""
    return proc.stderr.decode().splitlines()


STAMPED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} autosync\.x\[\d+\] (\w+) (\w+)$")


def test_logging_goes_to_stderr_with_time_and_pid():
    lines = log_line(False, False)
    assert [STAMPED.match(l).groups() for l in lines] == [("INFO", "hello")]  # no debug


def test_verbose_logs_debug_and_the_journal_gets_no_timestamp():
    assert [STAMPED.match(l).groups() for l in log_line(True, False)] == [
        ("DEBUG", "dbg"), ("INFO", "hello")]
    assert log_line(False, True) == ["autosync.x: INFO hello"]
    assert log_line(True, True) == ["autosync.x: DEBUG dbg", "autosync.x: INFO hello"]


def test_a_log_line_acts_on_no_terminal():
    """A name from another machine, quoted where it is put in (copies.told) or not (a
    tool's words in an error), reaches the log with nothing a terminal acts on."""
    code = ("from autosync.core import cli, copies; import logging; cli.setup_logging(False); "
            "name = '\\033]0;owned\\007\\u009b2J\\udcff'; "
            "copies.told({'path': name, 'copy': name + '.copy', 'host': 'b'}); "
            "logging.getLogger('autosync.x').error('hg: %s: cannot add', name)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("JOURNAL_STREAM", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=True, timeout=60)
    lines = proc.stderr.decode("utf-8").splitlines()
    assert len(lines) == 2 and all(line.isprintable() for line in lines)
    assert lines[0].endswith('conflict in "\\033]0;owned\\a\\302\\2332J\\377": kept the '
                             'newer version, the other (from b) as '
                             '"\\033]0;owned\\a\\302\\2332J\\377.copy"')
    assert lines[1].endswith("ERROR hg: \\033]0;owned\\a\\302\\2332J\\377: cannot add")
