"""`dvcs-autosync expire [--older-than AGE] [--yes]`: old annexed versions off the remote.

The command's front: its options, its config, its one-line errors. What it drops, and
why it keeps the rest, is vcs/largefiles.py's expire() and plan(), which the committer's
upkeep also runs at each `maintenanceinterval` with the `largefileskeep` age.

On a terminal it says what it is doing while it reads (the fetch, git-annex's logs, the
history) and how far the drops are (versions and bytes, of those said above), on one line
written over (tools/progress.py); to a file or a pipe, only the lasting lines.
"""
import argparse
import sys

from autosync.core import cli
from autosync.tools import progress
from autosync.vcs import largefiles


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


def main(argv):
    args = parse(list(argv)[1:])  # argv[0] is "expire"
    cfg = cli.load(args.config)
    try:
        return largefiles.expire(cfg, args.older_than, args.yes,
                                 progress=progress.Progress(sys.stdout))
    except largefiles.ExpireError as e:
        print(escaped("dvcs-autosync expire: %s" % e), file=sys.stderr)
        return 1
