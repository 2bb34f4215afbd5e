"""Big files (issue 32): a new 1 GB file, a 1 MB edit inside a 50 MB file (`--only bigfile`)."""
import os
import time

from .common import (Events, PROFILES, SyncthingPair, describe, git, make_remote, median,
                      peer_cells, row, secs, start_pair, tree_bytes, wait_for)


# What the README asks of the remote for big files (git gives the other side of a push
# or pull none of the daemon's settings, even for a remote reached by a path).
BIG_SERVER = (("core.bigFileThreshold", "16m"), ("receive.unpackLimit", "1"))


BIG_CHUNK = 4 << 20


def write_random(path, size):
    """A new file of `size` random bytes; -> (offset, bytes) samples to recognise it by."""
    samples = []
    with open(path, "wb") as f:
        for offset in range(0, size, BIG_CHUNK):
            chunk = os.urandom(min(BIG_CHUNK, size - offset))
            f.write(chunk)
            if offset == 0 or offset + len(chunk) >= size or offset // BIG_CHUNK % 37 == 0:
                samples.append((offset, chunk[:65536]))
    return samples


def edit_random(path, offset, size):
    """`size` new random bytes written over `path` at `offset`; -> the samples."""
    data = os.urandom(size)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    return [(offset, data[:65536]), (offset + size - 65536, data[-65536:])]


def has(path, size, samples):
    """`path` is `size` bytes long and holds the samples (cheap enough to poll)."""
    try:
        if os.stat(path).st_size != size:
            return False
        with open(path, "rb") as f:
            for offset, data in samples:
                f.seek(offset)
                if f.read(len(data)) != data:
                    return False
        return True
    except OSError:
        return False


def git_store(folder):
    """Bytes of a git object store (a clone's .git/objects, or a bare repository's)."""
    objects = os.path.join(folder, ".git", "objects")
    return tree_bytes(objects if os.path.isdir(objects) else os.path.join(folder, "objects"))


def bigfile(run, sizes):
    """A new 1 GB file (moved into the folder once written), then a 1 MB edit inside a
    50 MB file, each from the move or the writer's close until B holds it: the real suite at the shipped defaults (the remote set as the README
    asks of a server), bare git at git's defaults (add, commit, push, pull in a second
    clone) and Syncthing (delay 1 s), interleaved."""
    rows = []
    for case, size, trials in (("new", sizes["big_new_mb"] << 20, sizes["big_new_trials"]),
                               ("edit", sizes["big_file_mb"] << 20, sizes["big_edit_trials"])):
        rows += bigfile_case(run, case, size, trials)
    return rows


def bigfile_case(run, case, size, trials):
    prefix = "big" + case
    remote = make_remote(os.path.join(run.base, prefix + ".git"))
    for key, value in BIG_SERVER:
        git("--git-dir", remote, "config", key, value)
    floor_remote = make_remote(os.path.join(run.base, prefix + "-floor.git"))
    c, d = (os.path.join(run.base, prefix + "-floor-" + n) for n in "cd")
    for path in (c, d):
        git("clone", "-q", floor_remote, path)
    a, b = start_pair(run, prefix, remote, PROFILES["defaults"])
    delays = a.delays()
    pair = SyncthingPair(run, prefix, 1) if run.peers else None
    a_events, b_events = Events(a), Events(b)
    name = "big.bin"
    places = {"ours": (a.path, b.path), "floor": (c, d)}
    if pair:
        places["st"] = (pair.a.folder, pair.b.folder)
    times = {key: [] for key in places}
    phases = {"A: close to committed": [], "A: committed to pushed": [],
              "B: A's push to pull started": [], "B: pull": []}
    floor_steps = {"git add": [], "git commit": [], "git push": [], "git pull (B)": []}

    def floor_sync(message):
        for key, args, cwd in (("git add", ("add", "--", name), c),
                               ("git commit", ("commit", "-q", "-m", message), c),
                               ("git push", ("push", "-q", "origin", "HEAD:main"), c),
                               ("git pull (B)", ("pull", "-q", "--no-rebase", "--no-edit",
                                                 "origin", "main"), d)):
            s0 = time.monotonic()
            git(*args, cwd=cwd)
            floor_steps[key].append(time.monotonic() - s0)

    def settle(key):
        if key == "ours":
            wait_for(lambda: a.settled() and b.settled(), 120, 0.05)
        elif key == "st":
            wait_for(pair.idle, 120, 0.1)

    if case == "edit":  # the 50 MB file everywhere first, not timed
        for key, (here, there) in places.items():
            samples = write_random(os.path.join(here, name), size)
            if key == "floor":
                floor_sync("the big file")
            if not wait_for(lambda: has(os.path.join(there, name), size, samples), 300, 0.05):
                raise RuntimeError("%s: the 50 MB file did not arrive within 300 s" % key)
            settle(key)
        for values in floor_steps.values():
            values.clear()
    stores = {"ours": (a.path, remote, b.path), "floor": (c, floor_remote, d)}
    before = {key: [git_store(p) for p in paths] for key, paths in stores.items()}
    for i in range(trials):
        for key, (here, there) in places.items():
            path = os.path.join(here, name)
            if case == "new":
                if os.path.exists(path):  # the last trial's file goes first, not timed
                    os.unlink(path)
                    if key == "floor":
                        git("rm", "-q", "--", name, cwd=c)
                        git("commit", "-q", "-m", "gone", cwd=c)
                        git("push", "-q", "origin", "HEAD:main", cwd=c)
                        git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=d)
                    wait_for(lambda: not os.path.exists(os.path.join(there, name)), 120, 0.05)
                    settle(key)
                # Written beside the folder, then moved in: timed from the move, and no
                # tool sees (or commits) a half-written file.
                outside = os.path.join(run.base, "%s-%s.part" % (prefix, key))
                samples = write_random(outside, size)
                os.rename(outside, path)
            else:
                offset = (size // 2 + (i - trials // 2) * (3 << 20)) & ~4095
                samples = edit_random(path, offset, 1 << 20)
            wall, t0 = time.time(), time.monotonic()
            if key == "floor":
                floor_sync("trial %d" % i)
            if wait_for(lambda: has(os.path.join(there, name), size, samples), 600, 0.01):
                times[key].append(time.monotonic() - t0)
            else:
                print("  ! %s trial %d (%s): not on B within 600 s" % (case, i, key))
            if key == "ours":
                wait_for(lambda: b_events.first("pull-finished", wall), 30, 0.01)
                marks = [wall, a_events.first("committed", wall),
                         a_events.first("pushed", wall), b_events.first("pull-started", wall),
                         b_events.first("pull-finished", wall)]
                if None not in marks:
                    for phase, start, end in zip(phases, marks, marks[1:]):
                        phases[phase].append(end - start)
            settle(key)
            print("  %s trial %d %s: %s (load %s)" % (
                case, i, key, secs(times[key][-1] if len(times[key]) > i else None),
                open("/proc/loadavg").read().split()[0]), flush=True)
    grown = {key: [git_store(p) - b0 for p, b0 in zip(paths, before[key])]
             for key, paths in stores.items()}
    a_events.close()
    b_events.close()
    run.stop(a, b)
    if pair:
        pair.stop()

    mb = size >> 20
    label = ("bigfile: a new %d MB file, from its move in until on B" % mb if case == "new" else
             "bigfile: a 1 MB edit inside a %d MB file, from the close until on B" % mb)
    label += " (%s)" % describe(delays)
    mine = median(times["ours"])
    peer = {}
    if pair:
        peer = peer_cells({1: times["st"]}, mine)
    st = median(times.get("st") or [])
    rows = [row(label + ": median", secs(mine), secs(median(times["floor"])),
                "<= 2x Syncthing", (mine <= 2 * st) if (mine and st) else None,
                "%d trials" % len(times["ours"]), **peer)]
    for phase, values in phases.items():
        if values:
            rows.append(row("  of which " + phase, secs(median(values))))
    for step, values in floor_steps.items():
        if values:
            rows.append(row("  bare git: " + step, "", secs(median(values))))
    for key, what in (("ours", "autosync"), ("floor", "bare git")):
        rows.append(row("  history grown per %s, %s: A / remote / B" % (case, what),
                        " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown[key])
                        if key == "ours" else "",
                        " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown[key])
                        if key == "floor" else ""))
    return rows
