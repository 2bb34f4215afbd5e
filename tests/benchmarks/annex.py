#!/usr/bin/env python3
"""Issue 32 item 3's measurement: a big file saved N times (200 MB x 10 in the issue),
the disk it costs a laptop, a desktop and the remote, with `largefiles` (git-annex)
beside plain git, after the sync and after `expire`.

    python3 tests/benchmarks/annex.py [--size-mb 200] [--saves 10] [--scale 0.1] [--thin]
                                       [--only plain|annex] [--keep DIR]

Not a test: nothing is asserted; it prints what it measured (a Markdown table) and
the load average. Everything runs in a temporary folder with a private HOME: real
supervisors (`python -m autosync.supervisor CONFIG`) on two machines each time, real
git and git-annex, bare remotes on disk whose post-receive hook tells the other
machine (hooks/post-receive, as the README sets it up); syncmethod none.

  * plain git: the shipped defaults.
  * largefiles: docs/examples/git-annex.autosync's commands, `largefiles = 1mb`,
    `git annex init` on both machines and the remote. After the saves the laptop runs
    `dvcs-autosync expire --older-than 1s --yes` twice (a rule that keeps no replaced
    version: the bound on what any rule keeps), the second run to show it drops nothing.
    --thin also sets `annex.thin` on both machines (the file in the folder and the
    annex's copy one inode; an in-place write then changes that copy too).

Each save writes the new version beside the folder and renames it in (an editor's
save; a file written in place is issue 32 item 4's subject), then waits until the
desktop has that version and both machines are settled. "Disk" is the blocks the
folder (work tree and .git) or the bare repository takes (du, hard links once).
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # base, helpers
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, ROOT)

from base import Machine, Remote, git, wait_until  # noqa: E402
from helpers import use_example  # noqa: E402
from benchmarks.common import private_environment  # noqa: E402


def disk(path):
    """Bytes of disk blocks under path, each inode once (an annex.thin hard link, say)."""
    seen, total = set(), 0
    for root, dirs, names in os.walk(path):
        for name in dirs + names:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def mb(n):
    return "%.1f MB" % (n / 1e6)


def save(machine, data, rel="big.bin"):
    beside = os.path.join(os.path.dirname(machine.path), "." + machine.name + ".new")
    with open(beside, "wb") as f:
        f.write(data)
    os.rename(beside, os.path.join(machine.path, rel))


def local_keys(machine):
    from autosync.vcs import largefiles
    return largefiles.local_keys(machine.path)


def run(base, name, size, saves, annexed, thin=False):
    """-> {"after sync": {machine: bytes}, ...}, and what expire said."""
    top = pathlib.Path(base) / name
    top.mkdir()
    remote = Remote(top / "remote.git")
    extra = dict(largefiles="%db" % (size // 2)) if annexed else {}
    if annexed:
        git("-C", remote.path, "annex", "init", "-q", "remote")
    laptop = Machine(top, "laptop", remote, **extra)
    desktop = Machine(top, "desktop", remote, **extra)
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"),
                os.path.join(remote.path, "hooks", "post-receive"))
    for m in (laptop, desktop):
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
        if annexed:
            if thin:
                git("-C", m.path, "config", "annex.thin", "true")
            git("-C", m.path, "annex", "init", "-q", m.name)
            use_example(m, "git-annex.autosync")
    if annexed:
        git("-C", laptop.path, "annex", "sync", "-q", "--no-content")
    for m in (laptop, desktop):
        m.start()
    said = []
    try:
        figures = {"before": {"laptop": disk(laptop.path), "desktop": disk(desktop.path),
                              "remote": disk(remote.path)}}
        started = time.monotonic()
        for i in range(saves):
            data = os.urandom(size)
            save(laptop, data)
            wait_until(lambda: desktop.read("big.bin") == data and laptop.settled(remote)
                       and desktop.settled(remote), 600, 0.2, "save %d on the desktop" % i)
            print("  %s: save %d of %d on the desktop after %.0f s" % (
                name, i + 1, saves, time.monotonic() - started), flush=True)
        if annexed:  # each machine's own drop of the replaced versions, after its push/pull
            for m in (laptop, desktop):
                try:
                    wait_until(lambda: len(local_keys(m)) <= 1, 120, 0.2)
                except AssertionError:
                    said.append("%s still holds %d versions" % (m.name, len(local_keys(m))))
        figures["after sync"] = {"laptop": disk(laptop.path), "desktop": disk(desktop.path),
                                 "remote": disk(remote.path)}
        if annexed:
            time.sleep(1.1)  # the last replaced version's age passes the rule's 1 s
            for attempt in ("first", "second"):
                out = subprocess.run([sys.executable, "-m", "autosync.supervisor", "expire",
                                      "--older-than", "1s", "--yes", "--config", laptop.config],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True).stdout.splitlines()
                said.append("expire (%s run): %s" % (attempt, out[-1] if out else "(nothing)"))
            figures["after expire"] = {"laptop": disk(laptop.path),
                                       "desktop": disk(desktop.path),
                                       "remote": disk(remote.path)}
        return figures, said
    finally:
        for m in (laptop, desktop):
            m.stop()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-mb", type=float, default=200.0)
    p.add_argument("--saves", type=int, default=10)
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiplies the size (0.1: 20 MB for a 2-core machine shared by many)")
    p.add_argument("--thin", action="store_true", help="annex.thin on both annexed machines")
    p.add_argument("--only", choices=("plain", "annex"), help="one of the two runs")
    p.add_argument("--keep", metavar="DIR", help="work in DIR and leave it there")
    args = p.parse_args(argv)
    size = int(args.size_mb * args.scale * 1e6)
    base = args.keep or tempfile.mkdtemp(prefix="asbench-annex-")
    os.makedirs(base, exist_ok=True)
    private_environment(base)
    load = os.getloadavg()
    print("a %s file saved %d times (scale %g); load average %.1f %.1f %.1f; %s" % (
        mb(size), args.saves, args.scale, *load, subprocess.run(
            ["git", "annex", "version", "--raw"], stdout=subprocess.PIPE,
            text=True).stdout.strip() or "git-annex ?"), flush=True)
    try:
        rows, said = [], []
        if args.only != "annex":
            plain, _ = run(base, "plain", size, args.saves, annexed=False)
            rows += [("plain git, before the saves", plain["before"]),
                     ("plain git, after sync", plain["after sync"])]
        if args.only != "plain":
            name = "largefiles (git-annex%s)" % (", annex.thin" if args.thin else "")
            annexed, said = run(base, "annex", size, args.saves, annexed=True, thin=args.thin)
            rows += [("%s, before the saves" % name, annexed["before"]),
                     ("%s, after sync" % name, annexed["after sync"]),
                     ("%s, after expire (every replaced version)" % name,
                      annexed["after expire"])]
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print("| %s x %d | laptop | desktop | remote |" % (mb(size), args.saves))
    print("| --- | --- | --- | --- |")
    for label, f in rows:
        print("| %s | %s | %s | %s |" % (label, *("%s (%.2fx)" % (mb(f[k]), f[k] / size)
                                                 for k in ("laptop", "desktop", "remote"))))
    print()
    for line in said:
        print(line)
    print("load average at the end: %.1f %.1f %.1f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
