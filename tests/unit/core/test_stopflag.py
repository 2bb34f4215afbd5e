"""stopflag: a real SIGINT or SIGTERM only records itself and wakes the loop."""
import os
import select
import signal
import subprocess
import sys

import pytest

from autosync.core.stopflag import StopFlag
from conftest import ROOT


@pytest.fixture(autouse=True)
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def pipe():
    r, w = os.pipe()
    os.set_blocking(w, False)
    yield r, w
    os.close(r)
    os.close(w)


def woken(r, timeout=10.0):
    """Wait for the wake byte(s) the handler writes; the bytes read."""
    ready, _, _ = select.select([r], [], [], timeout)
    return os.read(r, 100) if ready else b""


def test_a_new_flag_is_false():
    flag = StopFlag()
    assert not flag and flag.signum is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_real_signal_sets_the_flag_and_wakes_without_raising(pipe, sig):
    r, w = pipe
    flag = StopFlag(wake=lambda: os.write(w, b"x"))
    assert flag.install() is flag
    os.kill(os.getpid(), sig)  # SIGINT would raise KeyboardInterrupt with Python's handler
    assert woken(r) == b"x"
    assert flag and flag.signum == sig


def test_each_signal_wakes_again_and_the_last_one_is_kept(pipe):
    r, w = pipe
    flag = StopFlag(wake=lambda: os.write(w, b"x")).install()
    os.kill(os.getpid(), signal.SIGINT)
    assert woken(r) == b"x"
    os.kill(os.getpid(), signal.SIGTERM)
    assert woken(r) == b"x"
    assert flag.signum == signal.SIGTERM


def test_without_wake_the_flag_is_still_set(pipe):
    r, w = pipe
    flag = StopFlag().install()
    waker = StopFlag(wake=lambda: os.write(w, b"x")).install((signal.SIGUSR1,))
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGUSR1)  # both are pending before Python runs either handler
    assert woken(r) == b"x"
    assert flag.signum == signal.SIGTERM and waker.signum == signal.SIGUSR1


def test_only_the_signals_asked_for_are_taken():
    flag = StopFlag().install((signal.SIGUSR1,))
    assert signal.getsignal(signal.SIGUSR1) == flag._record
    assert signal.getsignal(signal.SIGTERM) != flag._record


PROGRAM = """
import os, select, signal, sys
from autosync.core.stopflag import StopFlag
r, w = os.pipe()
os.set_blocking(w, False)
flag = StopFlag(wake=lambda: os.write(w, b"x")).install(wake_fd=w)
print("ready", flush=True)
while not flag:
    select.select([r], [], [], 30)
print("stopped by", flag.signum, flush=True)
"""

# The worst moment for a Python-level handler, made certain: the main thread blocks the
# signal, so the kernel gives it to the other thread, and the test sends it only once the
# main thread is inside select() (the kernel says so: /proc/PID/syscall): select() is not
# interrupted and no bytecode of the main thread runs to call the handler (the same as a
# signal that lands just before select() starts). Only the C-level write to wake_fd wakes
# it. The program says what ended its select(): "woken" (the fd) or "timeout".
ELSEWHERE = """
import os, select, signal, sys, threading
from autosync.core.client import Inbox
from autosync.core.stopflag import StopFlag
inbox = Inbox()
flag = StopFlag(wake=inbox.wake).install(**({"wake_fd": inbox.wake_w} if sys.argv[1] == "fd"
                                            else {}))
threading.Thread(target=threading.Event().wait, daemon=True).start()  # takes the signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
print("ready", flush=True)
ended = None
while not flag:
    ended = "woken" if select.select([inbox], [], [], float(sys.argv[2]))[0] else "timeout"
    inbox.take()
print("stopped by", flag.signum, ended, flush=True)
"""

# select()'s system call numbers (select, pselect6) where /proc/PID/syscall is read
SELECT_CALLS = {"x86_64": {"23", "270"}, "aarch64": {"72"}}


@pytest.mark.parametrize("how", ["fd", "handler only"])
def test_a_loop_in_select_wakes_on_a_signal_its_handler_has_not_run_for(how):
    """With wake_fd the loop's select() ends on the signal (its 60 s timeout is what a
    loop with nothing due may wait; the watcher's, for ever); without it, only at its
    timeout (3 s here)."""
    import platform
    from conftest import wait_until
    calls = SELECT_CALLS.get(platform.machine())
    if calls is None:
        pytest.skip("select()'s system call number not known on %s" % platform.machine())
    def in_select(pid):
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split()[0] in calls
    out = stopped([ELSEWHERE, how.split()[0], "60" if how == "fd" else "3"], signal.SIGTERM,
                  50, lambda pid: wait_until(lambda: in_select(pid), 30, 0.001,
                                             "the program's main thread to be in select()"))
    assert out == b"stopped by %d %s\n" % (signal.SIGTERM,
                                           b"woken" if how == "fd" else b"timeout")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_program_loop_stops_cleanly_on_a_signal(sig):
    assert stopped([PROGRAM], sig, 20) == b"stopped by %d\n" % sig


def stopped(args, sig, timeout, before=lambda pid: None):
    """Run `python3 -c` args; once it says "ready" (and `before(pid)` returned), send sig:
    -> what it printed after, once it ended cleanly within `timeout` seconds."""
    proc = subprocess.Popen([sys.executable, "-c"] + args, env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        before(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and err == b""
    return out


def test_every_program_that_waits_in_select_gives_its_stop_flag_a_wake_fd():
    """The race above is every select() loop's: each program's StopFlag is installed with
    its inbox's pipe. The committer's main thread waits in join(), which a signal
    interrupts (no select, no pipe)."""
    import re
    package = os.path.join(ROOT, "autosync")
    installs = {}
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py") and name != "stopflag.py":
                path = os.path.join(folder, name)
                text = open(path).read()
                found = re.findall(r"\.install\(([^)]*)\)", text) if "StopFlag" in text else []
                if found:
                    installs[os.path.relpath(path, package)] = found
    assert set(installs) == {"committer/committer.py", "core/client.py", "desktop/notifier.py",
                             "desktop/tray.py", "watcher/watcher.py"}
    for path, calls in installs.items():
        for args in calls:
            assert ("wake_fd=" in args) == (path != "committer/committer.py"), (path, args)
