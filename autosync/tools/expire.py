"""`dvcs-autosync expire [--older-than AGE] [--yes]`: old annexed versions off the remote.

The command and what it says: its options, its config, its one-line errors, each version
it drops or keeps said first, and without --yes what it would free. What it drops, and
why it keeps the rest, is vcs/largefiles.py's expiring() and plan(), which the
committer's upkeep also runs at each `maintenanceinterval` with the `largefileskeep` age.

On a terminal it says what it is doing while it reads (the fetch, git-annex's logs, the
history) and how far the drops are (versions and bytes, of those said above), on one line
written over (tools/progress.py); to a file or a pipe, only the lasting lines.
"""
import argparse
import sys

from autosync.core import cli
from autosync.core.messages import escaped
from autosync.tools import progress
from autosync.vcs import largefiles
from autosync.vcs.git_environment import PLAIN


def parse(argv):
    p = argparse.ArgumentParser(
        prog="dvcs-autosync expire",
        description="Drop, from the remote and here, the annexed content of versions replaced "
                    "more than AGE ago that no current file uses and every machine has got "
                    "(git-annex). Says exactly what first.")
    p.add_argument("--older-than", metavar="AGE",
                   help="replaced longer ago than this: 30d, 12w, 1y (s, m, h, d, w, y); "
                        "default: the largefileskeep key")
    p.add_argument("--yes", action="store_true",
                   help="drop them (without it: only say what would be dropped)")
    p.add_argument("--config", help="configuration file (default: ~/.autosync)")
    return p.parse_args(argv)


def expire(cfg, age_text, yes, out=sys.stdout, now=None, progress=None, gitenv=PLAIN):
    """The versions the rule lets go, said on `out` line by line, then dropped with `yes`.
    progress: what it is doing meanwhile (tools/progress.Progress on a terminal).
    -> the exit status: 1 when git-annex refused a drop."""
    found = largefiles.expiring(cfg, age_text, now, progress, gitenv=gitenv)
    remote, drops = found.remote, found.drops
    verb = "dropping" if yes else "would drop"
    for version, size, where in drops:
        out.write("%s from %s: %s\n" % (verb, largefiles.placed(where, remote),
                                        largefiles.describe(version, size)))
    for version, why in found.kept:
        out.write("keeping: %s: %s\n" % (
            largefiles.describe(version, largefiles.key_size(version.key)), why))
    if not drops:
        out.write("nothing to expire: no annexed version replaced more than %s ago is on %s "
                  "or here and got by every machine\n" % (found.age, remote))
        return 0
    if not yes:
        out.write("would free %s (%d versions); nothing dropped: run again with --yes to drop "
                  "exactly these\n" % (largefiles.freed(drops, remote), len(drops)))
        return 0
    failed = []
    for version, size, place, said in largefiles.dropping(found, progress, gitenv=gitenv):
        failed.append(version)
        out.write("not dropped from %s: %s: %s\n" % (
            largefiles.placed((place,), remote), largefiles.describe(version, size),
            said or "git-annex refused"))
    done = [d for d in drops if d[0] not in failed]
    out.write("dropped %d versions (%s)%s\n" % (
        len(done), largefiles.freed(done, remote) or "nothing freed",
        "; %d refused by git-annex (above)" % len(set(failed)) if failed else ""))
    return 1 if failed else 0


def main(argv):
    args = parse(list(argv)[1:])  # argv[0] is "expire"
    cfg = cli.load(args.config)
    try:
        return expire(cfg, args.older_than, args.yes, progress=progress.Progress(sys.stdout))
    except largefiles.ExpireError as e:
        print(escaped("dvcs-autosync expire: %s" % e), file=sys.stderr)
        return 1
