"""A small file written on A until B has it (`--only propagation`)."""
import os
import time

from .common import (Events, PROFILES, SYNCTHING_DELAYS, describe, git, make_remote, median,
                      p90, peer_cells, read_file, row, secs, start_pair, syncthing_propagation,
                      wait_for, write_file)


PROPAGATION_AIMS = {"defaults": 0.25, "lowest": 0.1}


def propagation(run, sizes):
    """A small file written on A until B has it: at the shipped defaults, at the lowest
    settings, bare git doing it by hand, and Syncthing (delay 1 s and 10 s)."""
    floor_remote = make_remote(os.path.join(run.base, "floor.git"))
    c, d = os.path.join(run.base, "floor-c"), os.path.join(run.base, "floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    floor, floor_ssh = [], []
    results = {}
    # Each profile announced the chosen way (XMPP or the hook), then over ssh (a private
    # sshd: the remote watched with autosync-remote, git's push and pull through it too),
    # the floor interleaved with both; over ssh its floor is bare git through the same sshd.
    series = [(p, s, run.sync) for p, s in PROFILES.items()]
    sshd = run.start_sshd()
    if sshd:
        series += [(p, s, "ssh") for p, s in PROFILES.items()]
        # As before the held connection: a login for every push, fetch and watch.
        series += [("defaults", PROFILES["defaults"], "ssh-percommand")]

    def floor_trial(i, profile):
        name = "floor-%s-%03d.txt" % (profile, i)
        content = ("floor %d written at %.6f\n" % (i, time.time())).encode()
        started = time.monotonic()
        write_file(os.path.join(c, name), content)
        git("add", "--", name, cwd=c)
        git("commit", "-q", "-m", "add " + name, cwd=c)
        over_ssh = "-ssh" in profile
        url = sshd.url(floor_remote) if over_ssh else floor_remote
        git("push", "-q", url, "HEAD:main", cwd=c)
        git("pull", "-q", "--no-rebase", "--no-edit", url, "main", cwd=d)
        if read_file(os.path.join(d, name)) == content:
            (floor_ssh if over_ssh else floor).append(time.monotonic() - started)

    for profile, settings, via in series:
        print("  autosync at the %s, %s ..." % (profile, via), flush=True)
        over_ssh = via.startswith("ssh")
        tag = profile + ("-" + via if over_ssh else "")
        remote = make_remote(os.path.join(run.base, "prop-%s.git" % tag))
        held = os.environ.get("GIT_SSH_COMMAND")
        if via == "ssh-percommand":  # the daemons' ssh: the user's own "no multiplexing"
            os.environ["GIT_SSH_COMMAND"] = held + " -o ControlPath=none"
        try:
            a, b = start_pair(run, "prop-" + tag, remote, settings, "ssh" if over_ssh else None)
        finally:
            if held is not None:
                os.environ["GIT_SSH_COMMAND"] = held
        delays = a.delays()
        a_events, b_events = Events(a), Events(b)
        phases = {"A: write to committed": [], "A: committed to pushed": [],
                  "B: A's push to pull started": [], "B: pull (git pull)": []}
        suite, missed = [], 0
        timeout = 30 + sum(v or 0 for v in delays.values())
        for i in range(sizes["trials"]):
            # Our suite, then bare git, alternately: both see the same machine load.
            name = "trial-%03d.txt" % i
            content = ("trial %d written at %.6f\n" % (i, time.time())).encode()
            wall, started = time.time(), time.monotonic()
            write_file(os.path.join(a.path, name), content)
            if wait_for(lambda: read_file(os.path.join(b.path, name)) == content, timeout, 0.003):
                suite.append(time.monotonic() - started)
                wait_for(lambda: b_events.first("pull-finished", wall), 5, 0.01)
                marks = [wall, a_events.first("committed", wall), a_events.first("pushed", wall),
                         b_events.first("pull-started", wall),
                         b_events.first("pull-finished", wall)]
                if None not in marks:
                    for key, start, end in zip(phases, marks, marks[1:]):
                        phases[key].append(end - start)
            else:
                missed += 1
                print("  ! trial %d: the file did not reach B within %.0f s" % (i, timeout))
                if missed >= 3 and not suite:
                    print("  ! giving up on propagation (try --sync hook)")
                    break
            wait_for(lambda: a.settled() and b.settled(), 30, 0.05)
            floor_trial(i, tag)
            time.sleep(0.2)
        a_events.close()
        b_events.close()
        run.stop(a, b)
        results[profile, via] = (delays, suite, phases, missed)

    peers = {}
    if run.peers:
        for delay in SYNCTHING_DELAYS:
            print("  Syncthing at fsWatcherDelayS %d ..." % delay, flush=True)
            try:
                peers[delay] = syncthing_propagation(run, delay, sizes["trials"])
            except Exception as e:  # ours still count
                print("  ! Syncthing at delay %d failed: %s" % (delay, e))
                peers[delay] = []

    rows = []
    for (profile, via), (delays, suite, phases, missed) in results.items():
        slack = PROPAGATION_AIMS[profile]
        floor_median, floor_times = (median(floor_ssh), floor_ssh) if via.startswith("ssh") \
            else (median(floor), floor)
        label = "propagation, %s (%s)%s: median" % (
            profile, describe(delays), {"ssh": ", over ssh (held connection)",
                                        "ssh-percommand": ", over ssh (a login per command)"
                                        }.get(via, ""))
        if suite:
            mine = median(suite)
            ok = floor_median is not None and mine <= floor_median + slack
            rows.append(row(label, secs(mine), secs(floor_median), "<= floor + %g s" % slack, ok,
                            "%d trials, %s" % (len(suite), via) + (
                                "; floor: bare git through the same sshd (a login per "
                                "command)" if via.startswith("ssh") else ""),
                            **peer_cells(peers, mine)))
            if via == "ssh" and profile == "defaults" and floor:
                # The aim: the held connection as near the local path as this.
                rows.append(row("  beside the local-path floor", secs(mine), secs(median(floor)),
                                "<= floor + 0.15 s", mine <= median(floor) + 0.15,
                                "bare git through a local path"))
            rows.append(row("  90th percentile", secs(p90(suite)), secs(p90(floor_times)),
                            **peer_cells(peers, p90(suite), p90)))
            rows.append(row("  min / max", "%s / %s" % (secs(min(suite)), secs(max(suite))),
                            "%s / %s" % (secs(min(floor_times, default=None)),
                                         secs(max(floor_times, default=None)))))
            for key, values in phases.items():
                if values:
                    rows.append(row("  of which " + key, secs(median(values))))
        else:
            rows.append(row(label, "lost", secs(floor_median), "", False))
        if missed:
            rows.append(row("  trials lost", str(missed), "0", "0", False))
    if peers:
        best = min((median(v) for v in peers.values() if v), default=None)
        mine = median(results["defaults", run.sync][1])
        if best and mine:
            rows.append(row("propagation: Syncthing's fastest / ours at the defaults",
                            "%.1fx" % (best / mine), "", ">= 3x", best / mine >= 3))
    return rows
