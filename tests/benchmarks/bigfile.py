"""Big files (issue 32): a new 1 GB file, a 1 MB edit inside a 50 MB file (`--only bigfile`)."""
import os
import shutil
import time

from .common import (Events, PROFILES, ROOT, PeakMemory, SyncthingPair, describe, git,
                      make_remote, median, peer_cells, row, secs, start_pair, tree_bytes,
                      wait_for)


# What the README asks of the remote for big files (git gives the other side of a push
# or pull none of the daemon's settings, even for a remote reached by a path).
BIG_SERVER = (("core.bigFileThreshold", "16m"), ("receive.unpackLimit", "1"))


BIG_CHUNK = 4 << 20

# The big-file path (issue 32 item 3): files above this go to git-annex on the suite's
# annexed machines, whose commands are the example's.
LARGEFILES = "10mb"
ANNEX_EXAMPLE = os.path.join(ROOT, "docs", "examples", "git-annex.autosync")
# What the server needs for the annexed machines over ssh: git-annex installed, so that
# git-annex-shell is on a non-interactive session's PATH, and the bare repository
# `git annex init`ed (done here as for a path remote).
ANNEX_MISSING = "git-annex not installed (apt-get install -y git-annex): no largefiles rows"


def annex_remote(path):
    """A bare remote with an annex (`git annex init`, as docs/beyond-git.md sets it up)."""
    remote = make_remote(path)
    git("-C", remote, "annex", "init", "-q", "server")
    return remote


def annexed(m, backend=None):
    """start_pair's prepare(): the machine's annex (git annex init NAME, which also asks
    the remote for its annex, over ssh through git-annex-shell) and the example's [dvcs]
    commands beside `largefiles` (docs/examples/git-annex.autosync)."""
    ssh = ()
    if "-ssh" in m.name:
        # The private sshd's client files, for git-annex's own ssh (it takes
        # GIT_SSH_COMMAND only with GIT_ANNEX_USE_GIT_SSH=1): the daemon gives git-annex
        # its held connection (GIT_SSH_COMMAND, which has them), so the set-up's commands
        # here get them for this run only; the `-ssh-own` pair keeps them in its config,
        # as a user's own annex-ssh-options, and git-annex its own ssh, as before.
        options = os.environ["GIT_SSH_COMMAND"].split(None, 1)[1]
        ssh = ("-c", "remote.origin.annex-ssh-options=" + options)
        if "-ssh-own-" in m.name:
            git("config", "remote.origin.annex-ssh-options", options, cwd=m.path)
    if backend:
        git("config", "annex.backend", backend, cwd=m.path)
    git(*ssh, "annex", "init", "-q", m.name, cwd=m.path)
    if not git("config", "--get", "remote.origin.annex-uuid", cwd=m.path, check=False).strip():
        raise RuntimeError("%s: git-annex found no annex on the remote %s (over ssh it needs "
                           "git-annex-shell on the server's PATH)" % (m.name, git(
                               "remote", "get-url", "origin", cwd=m.path).strip()))
    git(*ssh, "annex", "sync", "-q", "--no-content", cwd=m.path)
    with open(ANNEX_EXAMPLE) as f:
        text = f.read()
    with open(m.config, "a") as f:
        f.write(text[text.index("\n[dvcs]"):text.index("\n[xmpp]")] + "\n")


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


def git_store(folder, annex=False):
    """Bytes of a git object store (a clone's .git/objects, or a bare repository's), and
    with `annex` git-annex's content store beside it (annex/objects)."""
    top = os.path.join(folder, ".git")
    top = top if os.path.isdir(top) else folder
    return tree_bytes(os.path.join(top, "objects")) + (
        tree_bytes(os.path.join(top, "annex", "objects")) if annex else 0)


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
    # The suite's machines: plain git at the shipped defaults, and (git-annex installed)
    # the big-file path: `largefiles` with the example's commands, over a path remote
    # and over ssh (the private sshd; syncmethod ssh), each on a remote of its own.
    pairs = {"ours": start_pair(run, prefix, remote, PROFILES["defaults"])}
    if not shutil.which("git-annex"):
        print("  ! " + ANNEX_MISSING)
    else:
        annexed_settings = dict(PROFILES["defaults"], largefiles=LARGEFILES)
        pairs["annex"] = start_pair(run, prefix + "-annex",
                                    annex_remote(os.path.join(run.base, prefix + "-annex.git")),
                                    annexed_settings, prepare=annexed)
        # The same with git-annex's default key (SHA-256), set as a user would: the
        # backend the product chooses (vcs/largefiles.py, BACKEND) against it, in one run.
        pairs["annex-sha256"] = start_pair(
            run, prefix + "-annex-sha256",
            annex_remote(os.path.join(run.base, prefix + "-annex-sha256.git")),
            annexed_settings, prepare=lambda m: annexed(m, backend="SHA256E"))
        if run.start_sshd():
            pairs["annex-ssh"] = start_pair(
                run, prefix + "-annex-ssh",
                annex_remote(os.path.join(run.base, prefix + "-annex-ssh.git")),
                annexed_settings, via="ssh", prepare=annexed)
            # The same with git-annex's own ssh (a login per command), as before the daemon
            # gave it the held connection, or where the user set annex-ssh-options.
            pairs["annex-ssh-own"] = start_pair(
                run, prefix + "-annex-ssh-own",
                annex_remote(os.path.join(run.base, prefix + "-annex-ssh-own.git")),
                annexed_settings, via="ssh", prepare=annexed)
    a, b = pairs["ours"]
    delays = a.delays()
    pair = SyncthingPair(run, prefix, 1) if run.peers else None
    events = {key: (Events(pa), Events(pb)) for key, (pa, pb) in pairs.items()}
    name = "big.bin"
    places = {key: (pa.path, pb.path) for key, (pa, pb) in pairs.items()}
    places["floor"] = (c, d)
    if pair:
        places["st"] = (pair.a.folder, pair.b.folder)
    times = {key: [] for key in places}
    phases = {key: {"A: close to committed": [], "A: committed to pushed": [],
                    "B: A's push to pull started": [], "B: pull": []} for key in pairs}
    floor_steps = {"git add": [], "git commit": [], "git push": [], "git pull (B)": []}
    # B's suite and every process it starts, while a new file arrives (issue 43, item 3).
    memory = {key: [] for key in pairs}

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
        if key in pairs:
            wait_for(lambda: all(m.settled() for m in pairs[key]), 120, 0.05)
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
    for key in set(pairs) - {"ours"}:
        stores[key] = (pairs[key][0].path, pairs[key][0].remote, pairs[key][1].path)
    before = {key: [git_store(p, key.startswith("annex")) for p in paths]
              for key, paths in stores.items()}
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
            sampler = PeakMemory(pairs[key][1].proc.pid).start() if key in pairs else None
            wall, t0 = time.time(), time.monotonic()
            if key == "floor":
                floor_sync("trial %d" % i)
            if wait_for(lambda: has(os.path.join(there, name), size, samples), 600, 0.01):
                times[key].append(time.monotonic() - t0)
            else:
                print("  ! %s trial %d (%s): not on B within 600 s" % (case, i, key))
            if key in pairs:
                a_events, b_events = events[key]
                wait_for(lambda: b_events.first("pull-finished", wall), 30, 0.01)
                marks = [wall, a_events.first("committed", wall),
                         a_events.first("pushed", wall), b_events.first("pull-started", wall),
                         b_events.first("pull-finished", wall)]
                if None not in marks:
                    for phase, start, end in zip(phases[key], marks, marks[1:]):
                        phases[key][phase].append(end - start)
            settle(key)
            if sampler:
                memory[key].append(sampler.stop())
            print("  %s trial %d %s: %s (load %s)" % (
                case, i, key, secs(times[key][-1] if len(times[key]) > i else None),
                open("/proc/loadavg").read().split()[0]), flush=True)
    grown = {key: [git_store(p, key.startswith("annex")) - b0
                   for p, b0 in zip(paths, before[key])]
             for key, paths in stores.items()}
    for a_events, b_events in events.values():
        a_events.close()
        b_events.close()
    for machines in pairs.values():
        run.stop(*machines)
    if pair:
        pair.stop()

    mb = size >> 20
    what = ("a new %d MB file, from its move in until on B" % mb if case == "new" else
            "a 1 MB edit inside a %d MB file, from the close until on B" % mb)
    st = median(times.get("st") or [])
    rows = []
    for key in pairs:
        # The plain row's label is as before (its stored runs stay its history).
        label = "bigfile: %s (%s)" % (what, describe(delays)) if key == "ours" else \
            "bigfile, largefiles = %s (git-annex), %s: %s (%s)" % (
                LARGEFILES, {"annex-ssh": "over ssh", "annex-ssh-own":
                             "over ssh, git-annex's own ssh (annex-ssh-options set)",
                             "annex-sha256": "path remote, "
                             "annex.backend SHA256E (git-annex's default)"}.get(
                                 key, "path remote"), what, describe(pairs[key][0].delays()))
        mine = median(times[key])
        peer = peer_cells({1: times["st"]}, mine) if pair else {}
        rows.append(row(label + ": median", secs(mine), secs(median(times["floor"])),
                        "<= 2x Syncthing", (mine <= 2 * st) if (mine and st) else None,
                        "%d trials" % len(times[key]), **peer))
        for phase, values in phases[key].items():
            if values:
                rows.append(row("  of which " + phase, secs(median(values))))
        if memory[key]:   # the trial that needed the most
            idle, peak = max(memory[key], key=lambda m: m[1] - m[0])
            rows.append(row("  B's memory, the suite and every process it starts (sum of "
                            "RSS): idle / peak", "%.0f / %.0f MB" % (idle / 1024, peak / 1024),
                            "", "<= idle + 150 MB", peak - idle <= 150 * 1024,
                            "highest of %d trials" % len(memory[key])))
        rows.append(row("  history grown per %s, autosync: A / remote / B%s" % (
            case, "" if key == "ours" else " (git objects and annex)"),
            " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown[key])))
        if key == "ours":
            for step, values in floor_steps.items():
                if values:
                    rows.append(row("  bare git: " + step, "", secs(median(values))))
            rows.append(row("  history grown per %s, bare git: A / remote / B" % case, "",
                            " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown["floor"])))
    return rows
