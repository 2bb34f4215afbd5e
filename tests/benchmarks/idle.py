"""CPU of the whole suite over an idle period (`--only idle`)."""
import os
import time

from .common import (cpu_seconds, install_hook, make_remote, process_tree)


def idle(run, sizes):
    """CPU time of the whole suite, over an idle period, as percent of one core."""
    remote = make_remote(os.path.join(run.base, "idle.git"))
    a = run.machine("idle-a", remote)
    if run.sync == "hook":
        install_hook(remote, a)
    a.start()
    a.wait_ready()
    time.sleep(2.0)  # start-up's last log lines and commands
    seconds = sizes["idle_seconds"]
    pids = len(process_tree(a.proc.pid))
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    used = cpu_seconds(a.proc.pid) - cpu_before
    elapsed = time.monotonic() - t_before
    run.stop(a)
    percent = used / elapsed * 100
    return [("idle CPU over %d s (%d processes)" % (seconds, pids), "%.2f %%" % percent,
             "", "< 1 %", percent < 1, "%.2f s of CPU" % used)]
