"""stopflag in a program of its own: a real SIGINT or SIGTERM ends its loop cleanly, and wakes
the select() it waits in (tests/unit/core/test_stopflag.py: the flag called directly)."""
import os
import signal
import subprocess
import sys

import pytest

from base import ROOT


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


SELECT_CALLS = {"x86_64": {"23", "270"}, "aarch64": {"72"}}


@pytest.mark.parametrize("how", ["fd", "handler only"])
def test_a_loop_in_select_wakes_on_a_signal_its_handler_has_not_run_for(how):
    """With wake_fd the loop's select() ends on the signal (its 60 s timeout is what a
    loop with nothing due may wait; the watcher's, for ever); without it, only at its
    timeout (3 s here)."""
    import platform
    from base import wait_until
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
