"""stopflag: a real SIGINT or SIGTERM only records itself and wakes the loop."""
import os
import select
import signal

import pytest

from autosync.core.stopflag import StopFlag
from base import ROOT


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


# The worst moment for a Python-level handler, made certain: the main thread blocks the
# signal, so the kernel gives it to the other thread, and the test sends it only once the
# main thread is inside select() (the kernel says so: /proc/PID/syscall): select() is not
# interrupted and no bytecode of the main thread runs to call the handler (the same as a
# signal that lands just before select() starts). Only the C-level write to wake_fd wakes
# it. The program says what ended its select(): "woken" (the fd) or "timeout".
# select()'s system call numbers (select, pselect6) where /proc/PID/syscall is read
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
                             "desktop/tray.py", "watcher/watcher.py", "web/server.py"}
    # Without a pipe: the committer (join()), and the page's server, whose loop is
    # handle_request() with its own 0.5 s timeout (a stop is seen within it).
    unpiped = ("committer/committer.py", "web/server.py")
    for path, calls in installs.items():
        for args in calls:
            assert ("wake_fd=" in args) == (path not in unpiped), (path, args)
