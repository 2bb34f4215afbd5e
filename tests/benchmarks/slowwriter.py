"""A file written over 15 s: was a half-written version pushed before maxwait? (`--only slowwriter`)"""
import os
import subprocess
import threading
import time

from .common import (PROFILES, describe, git, install_hook, make_remote, read_file,
                      remote_head, row, wait_for)


def slow_writer(run, sizes):
    """A file written over N s, a line a second, the writer keeping it open: was a
    half-written version of it pushed, and how soon after the writer opened it?
    One machine per setting, one after the other: all machines share one XMPP
    account, and another machine's push makes a machine pull (and commit first)."""
    rows = []
    for profile in PROFILES:
        print("  at the %s ..." % profile, flush=True)
        rows += slow_writer_at(run, sizes, profile)
    return rows


def slow_writer_at(run, sizes, profile):
    settings = PROFILES[profile]
    seconds = sizes["slow_seconds"]
    remote = make_remote(os.path.join(run.base, "slow-%s.git" % profile))
    a = run.machine("slow-" + profile, remote, settings)
    if run.sync == "hook":
        install_hook(remote, a)
    a.start()
    a.wait_ready()
    # The catch-up pull after the XMPP login commits whatever is there, whatever the
    # delays: the writer starts once it is over, so the batching alone is measured.
    if run.sync == "xmpp" and not wait_for(lambda: "link up" in a.logtext(), 30, 0.05):
        print("  ! %s: no 'link up' line within 30 s" % a.name)
    time.sleep(1.0)
    wait_for(a.settled, 30, 0.05)
    delays = a.delays()
    name = "slow.txt"
    seen, stop = [], threading.Event()
    opened = time.monotonic()

    def watch_remote():
        head = remote_head(remote)
        while not stop.is_set():
            new = remote_head(remote)
            if new != head:
                head = new
                content = subprocess.run(
                    ["git", "--git-dir", remote, "show", "%s:%s" % (new, name)],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
                seen.append((time.monotonic() - opened, content))
            time.sleep(0.05)
    watcher = threading.Thread(target=watch_remote, daemon=True)
    with open(os.path.join(a.path, name), "w") as f:
        opened = time.monotonic()
        watcher.start()
        for k in range(seconds):
            f.write("line %d of a slowly written file\n" % (k + 1))
            f.flush()
            time.sleep(1.0)
    finished = time.monotonic() - opened
    final = read_file(os.path.join(a.path, name))
    arrived = wait_for(lambda: any(c == final for _, c in seen),
                       30 + sum(v or 0 for v in delays.values()), 0.1)
    stop.set()
    watcher.join()
    # Every version of the file in the remote's history, not only the heads seen.
    revisions = git("--git-dir", remote, "log", "--format=%H", "main", "--", name).split()
    versions = [git("--git-dir", remote, "show", "%s:%s" % (r, name)).encode()
                for r in revisions]
    half = [v for v in versions if v != final and final.startswith(v)]
    early = [t for t, c in seen if c and c != final and final.startswith(c) and t < finished]
    run.stop(a)
    first = min(early) if early else None
    ok = first is None or first >= delays["maxwait"]
    note = "written over %.0f s" % finished
    if first is not None:
        note = "first pushed %.1f s after opening; " % first + note
    if not arrived:
        note += "; final content not pushed"
    return [row("slow writer, %s (%s): half-written pushed" % (profile, describe(delays)),
                "%d of %d versions" % (len(half), len(versions)), "", "none before maxwait",
                ok, note)]
