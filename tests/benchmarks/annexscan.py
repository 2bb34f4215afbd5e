"""largefiles (git-annex) at a home folder's scale (issue 32): what one small change costs
the push and pull commands in a tree of N small files with a few big annexed ones
(`--only annexscan`)."""
import os
import re
import shlex
import subprocess
import time

from .common import ROOT, git, make_bulk_remote, median, read_file, row, secs, write_file
from .onechange import bulk_path

ANNEX_EXAMPLE = os.path.join(ROOT, "docs", "examples", "git-annex.autosync")
BIG_FILES, BIG_MB, LARGEFILES = 3, 20, "10mb"

# docs/examples/git-annex.autosync's commands (drop-in configs carry them): `sync
# --content` seeks every file of the work tree.
SYNC_CONTENT = ("git annex sync --quiet --no-commit --no-pull --content",
                "git annex sync --quiet --no-commit --no-push --content")
# The seek limited to the folder that holds the annexed files (here: big/): what a
# transfer given the changed paths would cost (not a candidate: an annexed file elsewhere
# would stay on its machine).
SYNC_CONTENT_OF = ("git annex sync --quiet --no-commit --no-pull --content-of=big",
                   "git annex sync --quiet --no-commit --no-push --content-of=big")
# The git part of it alone: the branches, no content moved (not a candidate: the floor of
# any command that goes through git-annex's sync).
SYNC_ONLY = ("git annex sync --quiet --no-commit --no-pull --no-content",
             "git annex sync --quiet --no-commit --no-push --no-content")


def example_commands():
    """(pushcmd, pullcmd) as docs/examples/git-annex.autosync gives them (continuation
    lines kept: a template holds one command per line)."""
    with open(ANNEX_EXAMPLE) as f:
        text = f.read()
    found = {}
    for name in ("pushcmd", "pullcmd"):
        match = re.search(r"^%s = (.*(?:\n[ \t]+\S.*)*)" % name, text, re.M)
        found[name] = "\n".join(line.strip() for line in match.group(1).splitlines())
    return found["pushcmd"], found["pullcmd"]


def timed(template, cwd):
    """Seconds to run a command template, line by line, as the product runs a plain line
    (shlex, no shell)."""
    t0 = time.monotonic()
    for line in template.splitlines():
        proc = subprocess.run(shlex.split(line), cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode:
            raise RuntimeError("%s in %s: %s" % (line, cwd, proc.stderr.strip()[-300:]))
    return time.monotonic() - t0


def annex_clone(remote, path, name):
    """A clone as docs/beyond-git.md sets one up, with what the daemon's git commands see
    with `largefiles` set (vcs/largefiles.py: the rule and the backend)."""
    git("clone", "-q", remote, path)
    git("config", "annex.largefiles", "largerthan=" + LARGEFILES, cwd=path)
    git("config", "annex.backend", "BLAKE2B256E", cwd=path)
    git("annex", "init", "-q", name, cwd=path)


def annex_keys_here(path):
    return set(git("annex", "findkeys", "--in", "here", cwd=path).split())


def annexscan(run, sizes):
    """For each tree size: a committed tree of N small files (N/100 folders) and
    BIG_FILES annexed files of BIG_MB MB on a bare remote with an annex, two clones set
    up as docs/beyond-git.md says; then, trial by trial and interleaved, one small file
    changed and committed on A, A's pushcmd and B's pullcmd timed, for each pair of
    commands measured, beside bare git's push and pull of the same change on two plain
    clones of the same tree; and the daemon's own git-annex calls on that tree."""
    rows = []
    for files in sizes["annexscan_files"]:
        rows += scan_case(run, files, sizes["annexscan_trials"])
    return rows


def scan_case(run, files, trials):
    started = time.monotonic()
    prefix = os.path.join(run.base, "annexscan-%d" % files)
    remote = make_bulk_remote(prefix + ".git", files)
    floor_remote = prefix + "-floor.git"
    git("clone", "-q", "--bare", remote, floor_remote)
    c, d = prefix + "-floor-c", prefix + "-floor-d"
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    git("-C", remote, "annex", "init", "-q", "server")
    a, b = prefix + "-a", prefix + "-b"
    annex_clone(remote, a, "a")
    os.makedirs(os.path.join(a, "big"))
    for n in range(BIG_FILES):
        with open(os.path.join(a, "big", "big%d.bin" % n), "wb") as f:
            for _ in range(BIG_MB):
                f.write(os.urandom(1 << 20))
    git("add", "big", cwd=a)
    git("commit", "-q", "-m", "big files", cwd=a)
    example = example_commands()
    timed(example[0], a)
    annex_clone(remote, b, "b")
    timed(example[1], b)
    big = annex_keys_here(a)
    if len(big) != BIG_FILES or annex_keys_here(b) != big:
        raise RuntimeError("set-up: B holds %d of A's %d annexed files"
                           % (len(annex_keys_here(b) & big), len(big)))
    print("  (%d files and %d x %d MB annexed: remote, floor and clones ready after %.0f s;"
          " load %s)" % (files, BIG_FILES, BIG_MB, time.monotonic() - started,
                         open("/proc/loadavg").read().split()[0]), flush=True)

    variants = {"sync --content (the example's)" if example == SYNC_CONTENT else
                "sync --content (the example's before; drop-in configs)": SYNC_CONTENT,
                "sync --content-of=big (the annexed files' folder only)": SYNC_CONTENT_OF,
                "sync --no-content (git's part of it alone)": SYNC_ONLY}
    if example != SYNC_CONTENT:
        variants["the example's commands now"] = example
    times = {name: ([], []) for name in variants}
    floor = ([], [])
    for i in range(trials):
        for name, (push, pull) in variants.items():
            rel = bulk_path(files, 7919 * (i + 1) + len(times[name][0]) * 104729)
            content = ("changed in trial %d at %.6f\n" % (i, time.time())).encode()
            write_file(os.path.join(a, rel), content)
            git("add", "--", rel, cwd=a)
            git("commit", "-q", "-m", "change " + rel, cwd=a)
            times[name][0].append(timed(push, a))
            times[name][1].append(timed(pull, b))
            if read_file(os.path.join(b, rel)) != content:
                raise RuntimeError("%s: the change did not reach B" % name)
        rel = bulk_path(files, 7919 * (i + 1))
        write_file(os.path.join(c, rel), ("changed in trial %d\n" % i).encode())
        git("add", "--", rel, cwd=c)
        git("commit", "-q", "-m", "change " + rel, cwd=c)
        t0 = time.monotonic()
        git("push", "-q", "origin", "HEAD:main", cwd=c)
        floor[0].append(time.monotonic() - t0)
        t0 = time.monotonic()
        git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=d)
        floor[1].append(time.monotonic() - t0)
        print("  %d files, trial %d: %s (load %s)" % (files, i, "; ".join(
            "%s: %s + %s" % (name, secs(times[name][0][-1]), secs(times[name][1][-1]))
            for name in variants), open("/proc/loadavg").read().split()[0]), flush=True)
    if annex_keys_here(b) != big:
        raise RuntimeError("B lost annexed content")

    # The daemon's own git-annex calls (vcs/largefiles.py) on this tree, each 3 times.
    from autosync.vcs import largefiles
    # A replaced version (what the Trimmer drops and restore's bring() gets back): big0's
    # first, after a new one was saved and pushed.
    key0 = git("annex", "lookupkey", "big/big0.bin", cwd=a).strip()
    oid0 = git("rev-parse", "HEAD:big/big0.bin", cwd=a).strip()
    with open(os.path.join(a, "big", "big0.bin"), "wb") as f:
        for _ in range(BIG_MB):
            f.write(os.urandom(1 << 20))
    git("add", "big", cwd=a)
    git("commit", "-q", "-m", "a new version of big0", cwd=a)
    timed(example[0], a)
    big = annex_keys_here(a)
    trimmer = largefiles.Trimmer(a)
    trimmer.due()  # its first look; the next ones compare with it

    changes = []

    def small_change():
        changes.append(len(changes))
        rel = bulk_path(files, 104723 * (len(changes) + 1))
        write_file(os.path.join(a, rel), ("daemon's call %f\n" % time.time()).encode())
        git("add", "--", rel, cwd=a)
        git("commit", "-q", "-m", "change " + rel, cwd=a)

    daemon = [
        ("Trimmer.tell(): git annex sync --only-annex --no-content", None, lambda: git(
            "annex", "sync", "--quiet", "--only-annex", "--no-content", "--no-commit",
            "origin", cwd=a)),
        ("Trimmer.due() after a small change committed", small_change, trimmer.due),
        ("Trimmer.run()'s used_keys() (after a big file changed)", None,
         lambda: largefiles.used_keys(a)),
        ("expire: git annex info --fast", None,
         lambda: git("annex", "info", "--fast", "--quiet", cwd=a)),
        ("the Trimmer's drop: git annex drop --key (a replaced version)", None,
         lambda: largefiles.drop(a, key0)),
        ("restore's bring(): git annex get --key (that version back)", None,
         lambda: largefiles.bring(a, [oid0])),
    ]
    spent = {}
    for _ in range(3):  # round by round: each drop's version is got back after it
        for name, before, call in daemon:
            if before:
                before()
            t0 = time.monotonic()
            call()
            spent.setdefault(name, []).append(time.monotonic() - t0)
    if annex_keys_here(a) != big:
        raise RuntimeError("A lost annexed content")

    load = open("/proc/loadavg").read().split()[0]
    out = []
    for name, (pushes, pulls) in times.items():
        both = median([p + q for p, q in zip(pushes, pulls)])
        floor_both = median([p + q for p, q in zip(*floor)])
        out.append(row("annexscan: one small file changed in %d files (+%d x %d MB annexed), "
                       "%s: A's pushcmd + B's pullcmd: median" % (files, BIG_FILES, BIG_MB,
                                                                  name),
                       secs(both), secs(floor_both) + " (git push + git pull)",
                       "in proportion to what changed", None,
                       "%d trials; load %s" % (len(pushes), load)))
        out.append(row("  of which A's pushcmd / B's pullcmd", "%s / %s" % (
            secs(median(pushes)), secs(median(pulls))), "%s / %s" % (
            secs(median(floor[0])), secs(median(floor[1])))))
    # The one that reads the whole tree first (the product's own), the git-annex calls after.
    scan = "Trimmer.run()'s used_keys() (after a big file changed)"
    out.append(row("annexscan: the daemon's largefiles calls in %d files (+%d x %d MB annexed): "
                   "%s: median of 3" % (files, BIG_FILES, BIG_MB, scan),
                   secs(median(spent[scan])), "", "in proportion to what changed", None,
                   "once per big-file change; load %s" % load))
    for name, values in spent.items():
        if name != scan:
            out.append(row("  " + name, secs(median(values))))
    return out
