"""N small files untarred into A until B has them all (`--only burst`)."""
import io
import os
import subprocess
import tarfile
import time

from .common import (Events, PROFILES, SYNCTHING_DELAYS, SyncthingPair, commit_count,
                      count_files, describe, git, make_remote, median, peer_cells, remote_head,
                      row, secs, start_pair, wait_for)


def make_archive(folder, prefix, count, tag):
    """A tar of `count` small files, 100 to a folder, under `prefix`/; its path.

    Written straight from memory: creating and deleting thousands of files just
    before a timed untar makes ext4 slow to allocate inodes (perf shows tar's
    time in ext4_create -> recently_deleted), which would blur the figures."""
    archive = os.path.join(folder, prefix + ".tar")
    now = time.time()
    with tarfile.open(archive, "w") as tar:
        for d in range(0, count, 100):
            info = tarfile.TarInfo("%s/d%03d" % (prefix, d // 100))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for n in range(count):
            data = ("%s file %d\n" % (tag, n)).encode()
            info = tarfile.TarInfo("%s/d%03d/f%05d.txt" % (prefix, n // 100, n))
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return archive


def files_under(remote, prefix):
    return len(git("--git-dir", remote, "ls-tree", "-r", "--name-only", "main", "--",
                   prefix).splitlines())


def burst(run, sizes):
    """N files untarred into A until B has them all (and until the remote has them), at
    the shipped defaults and the lowest settings, beside bare git (untar, add, commit,
    push, pull) and Syncthing (untar until all are in B's folder)."""
    count = sizes["burst_files"]
    limit = 300
    floor_remote = make_remote(os.path.join(run.base, "burst-floor.git"))
    floor_d = os.path.join(run.base, "burst-floor-d")
    git("clone", "-q", floor_remote, floor_d)

    sides = {}     # name: {"arrived": [], "pushed": [], "commits": [], "phases": {...}}
    pairs = {}
    for profile, settings in PROFILES.items():
        remote = make_remote(os.path.join(run.base, "burst-%s.git" % profile))
        a, b = start_pair(run, "burst-" + profile, remote, settings)
        pairs[profile] = (a, b, remote, (Events(a), Events(b)), a.delays())
        sides[profile] = {"arrived": [], "pushed": [], "commits": [],
                          "phases": {"untar (tar -xf)": [], "untar end to last commit": [],
                                     "last commit to pushed": [], "pushed to all on B": [],
                                     "B: A's push to pull started": [],
                                     "B: pull started to all on disk": [],
                                     "B: pull (pull-started to pull-finished)": [],
                                     "B: pull-finished to both settled": []}}
    sides["floor"] = {"arrived": [], "pushed": [], "phases": {
        "untar (tar -xf)": [], "git add -A": [], "git commit": [], "git push": [],
        "git pull": []}}
    st_pairs = {}
    if run.peers:
        for delay in SYNCTHING_DELAYS:
            sides["st%d" % delay] = {"arrived": []}
            try:
                st_pairs[delay] = SyncthingPair(run, "burst", delay)
            except Exception as e:  # ours still count
                print("  ! Syncthing at delay %d failed: %s" % (delay, e))

    def ours(profile, prefix, archive):
        a, b, remote, (events, b_events), delays = pairs[profile]
        side = sides[profile]
        before, head = commit_count(remote), remote_head(remote)
        wall, started = time.time(), time.monotonic()
        subprocess.run(["tar", "-xf", archive, "-C", a.path], check=True)
        untarred = time.time()
        marks = {}

        def done():
            nonlocal head
            now = time.monotonic()
            if "pushed" not in marks:
                new = remote_head(remote)
                if new != head:
                    head = new
                    if files_under(remote, prefix) == count:
                        marks["pushed"] = now
            if "arrived" not in marks and count_files(b.path, prefix) == count:
                marks["arrived"] = now
            return len(marks) == 2
        if not wait_for(done, limit, 0.02):
            print("  ! %s %s: after %d s, %d files on the remote, %d on B"
                  % (profile, prefix, limit, files_under(remote, prefix),
                     count_files(b.path, prefix)))
            return
        side["arrived"].append(marks["arrived"] - started)
        side["pushed"].append(marks["pushed"] - started)
        side["commits"].append(commit_count(remote) - before)
        wait_for(lambda: events.first("pushed", wall), 5, 0.01)
        committed = [e["time"] for e in list(events.seen)
                     if e.get("event") == "committed" and e["time"] >= wall]
        pushed = events.first("pushed", max(committed or [wall]))
        arrived = wall + marks["arrived"] - started  # as Unix time, like the events
        if committed and pushed:
            for key, value in zip(side["phases"], (
                    untarred - wall, committed[-1] - untarred, pushed - committed[-1],
                    arrived - pushed)):
                side["phases"][key].append(value)
        wait_for(lambda: a.settled() and b.settled(), 60, 0.1)
        # B's side: its pull of the burst (the last pull that started before all arrived),
        # and what its committer did after it (the rescan) until idle again.
        idle = time.time()
        starts = [e["time"] for e in list(b_events.seen) if e.get("event") == "pull-started"
                  and pushed and pushed <= e["time"] <= arrived]
        if starts:
            finished = b_events.first("pull-finished", starts[-1])
            for key, value in (("B: A's push to pull started", starts[-1] - pushed),
                               ("B: pull started to all on disk", arrived - starts[-1]),
                               ("B: pull (pull-started to pull-finished)",
                                finished and finished - starts[-1]),
                               ("B: pull-finished to both settled", finished and idle - finished)):
                if value is not None:
                    side["phases"][key].append(value)

    def floor(prefix, archive):
        clone = os.path.join(run.base, "burst-floor-" + prefix)
        git("clone", "-q", floor_remote, clone)
        os.sync()
        steps = [time.monotonic()]
        subprocess.run(["tar", "-xf", archive, "-C", clone], check=True)
        steps.append(time.monotonic())
        git("add", "-A", cwd=clone)
        steps.append(time.monotonic())
        git("commit", "-q", "-m", "burst", cwd=clone)
        steps.append(time.monotonic())
        git("push", "-q", cwd=clone)
        steps.append(time.monotonic())
        git("pull", "-q", "--no-rebase", "--no-edit", cwd=floor_d)
        steps.append(time.monotonic())
        side = sides["floor"]
        if count_files(floor_d, prefix) == count:
            side["arrived"].append(steps[-1] - steps[0])
        side["pushed"].append(steps[-2] - steps[0])
        for key, start, end in zip(side["phases"], steps, steps[1:]):
            side["phases"][key].append(end - start)
        # The clone stays until the end of the run: deleting 10,000 files here
        # would slow the next untar (see make_archive).

    def syncthing(delay, prefix, archive):
        pair = st_pairs[delay]
        started = time.monotonic()
        subprocess.run(["tar", "-xf", archive, "-C", pair.a.folder], check=True)
        if wait_for(lambda: count_files(pair.b.folder, prefix) == count, limit, 0.02):
            sides["st%d" % delay]["arrived"].append(time.monotonic() - started)
        else:
            print("  ! Syncthing %d s %s: %d files on B after %d s"
                  % (delay, prefix, count_files(pair.b.folder, prefix), limit))
        wait_for(pair.idle, 60, 0.1)

    steps = [(name, (lambda f, arg: lambda p, ar: f(arg, p, ar))(ours, name))
             for name in PROFILES]
    steps.append(("floor", floor))
    steps += [("st%d" % d, (lambda arg: lambda p, ar: syncthing(arg, p, ar))(d))
              for d in st_pairs]
    for i in range(sizes["burst_trials"]):
        prefix = "burst-%d" % i
        archive = make_archive(run.base, prefix, count, "trial %d %.6f" % (i, time.time()))
        # Each side starts with nothing left to write back; they take turns going first.
        order = steps[i % len(steps):] + steps[:i % len(steps)]
        for name, step in order:
            print("  trial %d: %s ..." % (i, name), flush=True)
            os.sync()
            step(prefix, archive)
    for a, b, remote, events, delays in pairs.values():
        for e in events:
            e.close()
        run.stop(a, b)
    for pair in st_pairs.values():
        pair.stop()

    rows = []
    bare = sides["floor"]
    floor_arrived, floor_pushed = median(bare["arrived"]), median(bare["pushed"])
    peers = {d: sides["st%d" % d]["arrived"] for d in SYNCTHING_DELAYS if run.peers}
    for profile in PROFILES:
        side, delays = sides[profile], pairs[profile][4]
        label = "burst of %d files, %s (%s): untar to on B" % (count, profile,
                                                                  describe(delays))
        if not side["arrived"]:
            rows.append(row(label, "lost", secs(floor_arrived), "<= 1.5x bare git", False))
            continue
        mine = median(side["arrived"])
        ratio = mine / floor_arrived if floor_arrived else None
        rows.append(row(label, secs(mine), secs(floor_arrived), "<= 1.5x bare git",
                        ratio is not None and ratio <= 1.5,
                        "%.2fx bare git; %d runs" % (ratio, len(side["arrived"]))
                        if ratio else "", **peer_cells(peers, mine)))
        rows.append(row("  untar to pushed (the remote has all)", secs(median(side["pushed"])),
                        secs(floor_pushed)))
        for key, values in side["phases"].items():
            if values:
                rows.append(row("  of which " + key, secs(median(values))))
        rows.append(row("  commits made", ", ".join(map(str, side["commits"])), "1", "<= 2",
                        max(side["commits"]) <= 2))
        if peers.get(1):
            rows.append(row("  sooner than Syncthing at delay 1", "", "", "yes",
                            mine < median(peers[1])))
    for key in ("untar (tar -xf)", "git add -A", "git commit", "git push", "git pull"):
        rows.append(row("  bare git: " + key, "", secs(median(bare["phases"][key]))))
    return rows
