"""8 machines on one account: a change on one until all the others have it (`--only machines`)."""
import os
import subprocess
import time

from .common import (Events, PROFILES, describe, git, install_hook, make_remote, median, p90,
                      read_file, row, secs, wait_for, write_file)


def many_machines(run, sizes):
    """N machines on one account and one bare remote: a change on one until all the
    others have it (the last arrival), and their pulls at once, counting failures."""
    rows = []
    for profile in PROFILES:
        print("  %d machines at the %s ..." % (sizes["machines"], profile), flush=True)
        rows += many_machines_at(run, sizes, profile)
    return rows


def many_machines_at(run, sizes, profile):
    n, settings = sizes["machines"], PROFILES[profile]
    remote = make_remote(os.path.join(run.base, "many-%s.git" % profile))
    machines = [run.machine("many-%s-%d" % (profile, i), remote, settings) for i in range(n)]
    if run.sync == "hook":
        install_hook(remote, *machines)
    started = time.monotonic()
    for m in machines:
        m.start()
    for m in machines:
        m.wait_ready(300)
    if run.sync == "xmpp" and not wait_for(
            lambda: all(m.sees(o) for m in machines for o in machines if o is not m), 60, 0.2):
        print("  ! not every XMPP listener saw all the others within 60 s")
    print("  (%d machines started and ready in %.0f s)" % (n, time.monotonic() - started))
    delays = machines[0].delays()
    events = [Events(m) for m in machines]

    floor_remote = make_remote(os.path.join(run.base, "many-floor-%s.git" % profile))
    clones = [os.path.join(run.base, "many-floor-%s-%d" % (profile, i)) for i in range(n)]
    for clone in clones:
        git("clone", "-q", floor_remote, clone)

    last, floor, lost = [], [], 0
    timeout = 30 + sum(v or 0 for v in delays.values())
    for i in range(sizes["many_trials"]):
        writer = machines[i % n]
        others = [m for m in machines if m is not writer]
        name = "many-%03d.txt" % i
        content = ("written on %s at %.6f\n" % (writer.name, time.time())).encode()
        started = time.monotonic()
        write_file(os.path.join(writer.path, name), content)
        arrived = {}

        def everyone():
            for m in others:
                if m.name not in arrived and read_file(os.path.join(m.path, name)) == content:
                    arrived[m.name] = time.monotonic() - started
            return len(arrived) == len(others)
        if wait_for(everyone, timeout, 0.003):
            last.append(max(arrived.values()))
        else:
            lost += 1
            print("  ! trial %d: after %.0f s only %d of %d machines have it"
                  % (i, timeout, len(arrived), len(others)))
        wait_for(lambda: all(m.settled() for m in machines), 60, 0.1)

        # The floor: bare git commits and pushes on one clone, then the others pull at once.
        source = clones[i % n]
        started = time.monotonic()
        write_file(os.path.join(source, name), content)
        git("add", "--", name, cwd=source)
        git("commit", "-q", "-m", "add " + name, cwd=source)
        git("push", "-q", cwd=source)
        pulls = [subprocess.Popen(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=c,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
                 for c in clones if c != source]
        codes = [p.wait() for p in pulls]
        if not any(codes):
            floor.append(time.monotonic() - started)
        time.sleep(0.2)

    failed = [e for ev in events for e in list(ev.seen) if e.get("event") == "failed"]
    failed_pulls = [e for e in failed if "pull" in str(e.get("op", ""))]
    errors = ["%s: %s" % (m.name, m.status().get("last_error")) for m in machines
              if m.status().get("last_error")]
    for ev in events:
        ev.close()
    run.stop(*machines)

    rows = []
    label = "%d machines, %s (%s): last of %d arrivals" % (n, profile, describe(delays), n - 1)
    if last:
        mine, bare = median(last), median(floor)
        rows.append(row(label + ", median", secs(mine), secs(bare), "<= floor + 0.5 s",
                        bare is not None and mine <= bare + 0.5,
                        "%d trials; floor: push, then %d git pulls at once" % (len(last), n - 1)))
        rows.append(row("  90th percentile of the last arrival", secs(p90(last)),
                        secs(p90(floor))))
    else:
        rows.append(row(label, "lost", secs(median(floor)), "", False))
    if lost:
        rows.append(row("  trials lost", str(lost), "0", "0", False))
    rows.append(row("  failed pulls (failed events)", str(len(failed_pulls)), "", "0",
                    not failed_pulls, "; ".join(sorted({str(e.get("error"))[:80]
                                                        for e in failed_pulls}))[:200]))
    if len(failed) > len(failed_pulls) or errors:
        rows.append(row("  other failures / last_error", str(len(failed) - len(failed_pulls)),
                        "", "", None, "; ".join(errors)[:200]))
    return rows
