"""One file changed in a committed tree of N files until B has it (`--only onechange`)."""
import os
import time

from .common import (Events, PROFILES, describe, git, make_bulk_remote, make_thin, median,
                      read_file, row, secs, serve_partial_clones, start_pair, wait_for,
                      write_file)


def bulk_path(files, n, per_folder=100):
    return "d%04d/f%07d.txt" % ((n % files) // per_folder, n % files)


def onechange(run, sizes):
    """A one-file change in a committed tree of N small files (N/100 folders) until B has
    it, on the real suite at the shipped defaults, beside bare git doing it plainly
    (`git add -- PATH`, `git commit`, `git push`, `git pull` in a second clone)."""
    files, trials = sizes["onechange_files"], sizes["onechange_trials"]
    started = time.monotonic()
    remote = make_bulk_remote(os.path.join(run.base, "one.git"), files)
    made = time.monotonic() - started
    # The floor's remote: the same history, its own refs (a local clone links the objects).
    floor_remote = os.path.join(run.base, "one-floor.git")
    git("clone", "-q", "--bare", remote, floor_remote)
    c, d = os.path.join(run.base, "one-floor-c"), os.path.join(run.base, "one-floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    print("  (tree of %d files made in %.0f s; the floor's two clones ready after %.0f s)"
          % (files, made, time.monotonic() - started), flush=True)
    thin = sizes.get("onechange_thin")
    if thin:  # both remotes serve partial clones, as `init --thin` requires; bare git thin too
        for where in (remote, floor_remote):
            serve_partial_clones(where)
        for path in (c, d):
            make_thin(path)
    extra = sizes.get("git_config") or []
    env_before = dict(os.environ)
    if extra:  # candidate git settings, for the suite only (git_environment keeps them)
        count = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
        for i, (key, value) in enumerate(extra, start=count):
            os.environ["GIT_CONFIG_KEY_%d" % i] = key
            os.environ["GIT_CONFIG_VALUE_%d" % i] = value
        os.environ["GIT_CONFIG_COUNT"] = str(count + len(extra))
    try:
        a, b = start_pair(run, "one", remote,
                          dict(PROFILES["defaults"], **dict(sizes.get("settings") or [])),
                          thin=thin)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    print("  (the suite's two machines watching and idle after %.0f s)"
          % (time.monotonic() - started), flush=True)
    delays = a.delays()
    a_events, b_events = Events(a), Events(b)
    phases = {"A: write to committed": [], "A: committed to pushed": [],
              "B: A's push to pull started": [], "B: pull (git pull)": []}
    floor_phases = {"git add -- PATH": [], "git commit": [], "git push": [], "git pull (B)": []}
    suite, floor, missed = [], [], 0
    for i in range(trials):
        # Our suite, then bare git, alternately: both see the same machine load.
        name = bulk_path(files, 7919 * (i + 1))  # spread over the tree
        content = ("changed in trial %d at %.6f\n" % (i, time.time())).encode()
        wall, t0 = time.time(), time.monotonic()
        write_file(os.path.join(a.path, name), content)
        if wait_for(lambda: read_file(os.path.join(b.path, name)) == content, 60, 0.003):
            suite.append(time.monotonic() - t0)
            wait_for(lambda: b_events.first("pull-finished", wall), 5, 0.01)
            marks = [wall, a_events.first("committed", wall), a_events.first("pushed", wall),
                     b_events.first("pull-started", wall), b_events.first("pull-finished", wall)]
            if None not in marks:
                for key, start, end in zip(phases, marks, marks[1:]):
                    phases[key].append(end - start)
        else:
            missed += 1
            print("  ! trial %d: the change did not reach B within 60 s" % i)
        wait_for(lambda: a.settled() and b.settled(), 60, 0.05)

        t0 = time.monotonic()
        write_file(os.path.join(c, name), content)
        steps = [("git add -- PATH", ("add", "--", name), c),
                 ("git commit", ("commit", "-q", "-m", "change " + name), c),
                 ("git push", ("push", "-q", "origin", "HEAD:main"), c),
                 ("git pull (B)", ("pull", "-q", "--no-rebase", "--no-edit", "origin", "main"),
                  d)]
        for key, args, cwd in steps:
            s0 = time.monotonic()
            git(*args, cwd=cwd)
            floor_phases[key].append(time.monotonic() - s0)
        if read_file(os.path.join(d, name)) == content:
            floor.append(time.monotonic() - t0)
        time.sleep(0.2)
    a_events.close()
    b_events.close()
    run.stop(a, b)

    label = "onechange: one file changed in %d files, on B (%s)" % (files, describe(delays))
    if extra or sizes.get("settings"):
        label += " with " + ", ".join("%s=%s" % kv for kv in extra + sizes["settings"])
    if thin:
        label += ", thin machines"
    rows = []
    if suite:
        mine = median(suite)
        rows.append(row(label + ": median", secs(mine), secs(median(floor)),
                        "<= 0.5 s, 8x under bare git", mine <= 0.5 and bool(floor)
                        and median(floor) >= 8 * mine, "%d trials" % len(suite)))
        rows.append(row("  min / max", "%s / %s" % (secs(min(suite)), secs(max(suite))),
                        "%s / %s" % (secs(min(floor, default=None)),
                                     secs(max(floor, default=None)))))
        for key, values in phases.items():
            if values:
                rows.append(row("  of which " + key, secs(median(values))))
        for key, values in floor_phases.items():
            if values:
                rows.append(row("  bare git: " + key, "", secs(median(values))))
    else:
        rows.append(row(label, "lost", secs(median(floor)), "", False))
    if missed:
        rows.append(row("  trials lost", str(missed), "0", "0", False))
    return rows
