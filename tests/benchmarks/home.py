"""A home folder's scale (issue 21): start, memory, idle, a rescan, a resume, a burst (`--only home`)."""
import os
import time

from .common import (Events, PROFILES, SyncthingPair, ask, count_files, cpu_seconds, git,
                      install_hook, make_bulk_remote, make_tree, median, memory, row, secs,
                      syncthing_propagation, wait_for)


HOME_AT = 1_000_000  # the size the aims are for


def write_many(folder, count, tag):
    """`count` new small files in a new folder `folder` (100 to a subfolder)."""
    for n in range(count):
        path = os.path.join(folder, "s%03d" % (n // 100))
        if n % 100 == 0:
            os.makedirs(path)
        with open(os.path.join(path, "n%05d.txt" % n), "w") as f:
            f.write("%s %d\n" % (tag, n))


def home(run, sizes):
    """A committed tree of N small files (N/100 folders, the issue's aims are at
    1,000,000): each machine's start until watching and idle (one machine at a time),
    the suite's memory and idle CPU there, a rescan that finds nothing, and a burst of
    new files until B has them all; bare git beside each on a clone of the same tree."""
    files, burst_files = sizes["home_files"], sizes["burst_files"]
    at_aim = files >= HOME_AT
    started = time.monotonic()
    remote = make_bulk_remote(os.path.join(run.base, "home.git"), files)
    floor_remote = os.path.join(run.base, "home-floor.git")
    git("clone", "-q", "--bare", remote, floor_remote)
    c, d = os.path.join(run.base, "home-floor-c"), os.path.join(run.base, "home-floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    a = run.machine("home-a", remote, PROFILES["defaults"])
    b = run.machine("home-b", remote, PROFILES["defaults"])
    print("  (tree of %d files, the floor's clones and ours ready after %.0f s)"
          % (files, time.monotonic() - started), flush=True)
    if run.sync == "hook":
        install_hook(remote, a, b)
    ready = [m.start().wait_ready(1800) for m in (a, b)]  # one at a time: no contention
    if run.sync == "xmpp" and not wait_for(lambda: a.sees(b) and b.sees(a), 60, 0.1):
        print("  ! the two XMPP listeners did not see each other within 60 s")
    status_times = []
    for _ in range(3):
        t0 = time.monotonic()
        git("status", "--porcelain", cwd=c)
        status_times.append(time.monotonic() - t0)
    time.sleep(1.0)
    rss = sum(r[2] for r in memory(a.proc.pid)) / 1024
    seconds = sizes["tree_idle_seconds"]
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(a.proc.pid) - cpu_before) / (time.monotonic() - t_before) * 100

    # A rescan that finds nothing (what a user's pullcmd, a resume or an overflow asks
    # for), as `autosync-notify sync` asks it: rescan, commit, push, answered once done;
    # bare git: `git add -A`.
    rescans, floor_rescans = [], []
    for _ in range(3):
        t0 = time.monotonic()
        if ask(a, {"cmd": "sync"}).get("ok"):
            rescans.append(time.monotonic() - t0)
        t0 = time.monotonic()
        git("add", "-A", cwd=c)
        floor_rescans.append(time.monotonic() - t0)

    # A resume that finds nothing (pause, then resume): a pull when the sync method asks,
    # a commit of what the watcher saw while paused (no rescan unless it missed events),
    # a push; until the committer is idle again.
    resumes = []
    for _ in range(3):
        ask(a, {"cmd": "pause"})
        wait_for(lambda: a.status().get("state") == "paused", 30, 0.01)
        t0 = time.monotonic()
        ask(a, {"cmd": "resume"})
        if wait_for(lambda: a.status().get("state") not in ("paused", None), 30, 0.002) and \
                wait_for(lambda: a.idle(), 600, 0.005):
            resumes.append(time.monotonic() - t0)

    # A burst of new files until B has them all; bare git: write, add -A, commit, push, pull.
    a_events = Events(a)
    t0 = time.monotonic()
    write_many(os.path.join(a.path, "burst"), burst_files, "home burst")
    last = os.path.join(b.path, "burst", "s%03d" % ((burst_files - 1) // 100),
                        "n%05d.txt" % (burst_files - 1))
    arrived = wait_for(lambda: count_files(b.path, "burst") == burst_files
                       and os.path.exists(last), 900, 0.05) and time.monotonic() - t0
    # ... and until A is idle again: its index brought up to date after the push (a
    # settle that cost 127 s at 1,000,000 files until each tree was read once).
    settled = arrived and wait_for(lambda: a.idle(), 900, 0.05) and time.monotonic() - t0
    commits = len([e for e in a_events.seen if e.get("event") == "committed"])
    a_events.close()
    t0 = time.monotonic()
    write_many(os.path.join(c, "burst"), burst_files, "home burst")
    git("add", "-A", cwd=c)
    git("commit", "-q", "-m", "burst", cwd=c)
    git("push", "-q", "origin", "HEAD:main", cwd=c)
    git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=d)
    floor_burst = time.monotonic() - t0
    run.stop(a, b)

    peer = {}
    if run.peers:
        peer = syncthing_home(run, min(files, SYNCTHING_HOME_FILES), sizes["onechange_trials"])

    def aim(text, ok):
        return (text, ok) if at_aim else ("%s (at %d files)" % (text, HOME_AT), None)

    rows = [row("home: %d files: start until watching and idle, A" % files, secs(ready[0]),
                secs(median(status_times)) + " (git status)", *aim("<= 15 s", ready[0] <= 15),
                "B: %s (started after A)" % secs(ready[1])),
            row("  memory, sum of RSS, A", "%.0f MB" % rss, "", *aim("<= 300 MB", rss <= 300)),
            row("  idle CPU over %d s, A" % seconds, "%.2f %%" % cpu, "",
                *aim("0 %", cpu < 0.1))]
    if rescans:
        rows.append(row("  a sync (rescan) that finds nothing: median of %d" % len(rescans),
                        secs(median(rescans)), secs(median(floor_rescans)) + " (git add -A)",
                        "in proportion to what changed", None))
    else:
        rows.append(row("  a rescan that finds nothing", "failed (see the log)", "", "", False))
    rows.append(row("  a resume that finds nothing (%s): median of %d"
                    % ("pull, commit, push" if run.sync == "xmpp" else
                       "commit, push; syncmethod none: no pull", len(resumes)), secs(median(resumes)) if resumes else "failed",
                    secs(median(floor_rescans)) + " (git add -A)",
                    "in proportion to what changed", None if resumes else False))
    rows.append(row("  %d new files until all on B" % burst_files,
                    secs(arrived) if arrived else "lost", secs(floor_burst) +
                    " (write, add -A, commit, push, pull)", "", None if arrived else False,
                    "%d commits; A idle again after %s" % (commits, secs(settled) if settled
                                                            else "more than 900 s")))
    if peer:
        rows.append(row("  Syncthing (fsWatcherDelayS 1) at %d files: both started until "
                        "scanned and idle" % peer["files"], "", "", "", None,
                        st1=secs(peer["ready"])))
        rows.append(row("  Syncthing at %d files: one file changed until on B: median of %d"
                        % (peer["files"], len(peer["times"])), "", "", "", None,
                        st1=secs(median(peer["times"])) if peer["times"] else "lost"))
    return rows


SYNCTHING_HOME_FILES = 100_000  # where a Syncthing pair is practical on this machine


def syncthing_home(run, files, trials):
    """Syncthing's start (both folders holding the same `files` files: each scans them,
    then the two compare) until idle, and one-file propagation there."""
    def fill(folder):
        make_tree(folder, files, max(files // 100, 1))
    try:
        pair = SyncthingPair(run, "home", 1, fill=fill, timeout=1800)
    except RuntimeError as e:
        print("  ! Syncthing at %d files: %s" % (files, e))
        return {}
    times = syncthing_propagation(run, 1, trials, pair)
    return {"files": files, "ready": pair.ready, "times": times}
