"""What the parts of git's pull (git.py, odd.py, write.py, blobs.py) share: its
errors, a diff's entry, git run for it, the stop it honours."""

import collections
import os
import subprocess

from autosync.vcs.commands import environment

GITLINK = "160000"
ATTRIBUTES = ".gitattributes"
Entry = collections.namedtuple("Entry", "old_mode new_mode old new path")


class PullFailed(Exception):
    """str() says why, in one line or git's own lines; `problem`: its name in status."""
    problem = "pull"


class Unsafe(PullFailed):
    """The pulled tree holds a path git would not check out: nothing of it is written."""
    problem = "unsafe"


class Unwritten(PullFailed):
    """A pulled version could not be written: HEAD and the index were not moved."""
    problem = "unwritten"


class Stopped(PullFailed):
    """The daemon stops (GitPull.cancel): the pull ended before it wrote anything, its
    fetch killed; nothing failed, and the next start pulls again."""


def null(oid):
    """No object: what diff-tree says of a side that has no file (SHA-1 or SHA-256)."""
    return not oid.strip("0")


def run_git(folder, gitenv, *args, env=None, data=None, check=True, cwd=None):
    """git with args in folder (or cwd): the finished process; PullFailed when it fails
    and check is set."""
    proc = subprocess.run(("git",) + args, cwd=cwd or folder,
                          env=environment(env, gitenv),
                          input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=None if data is not None else subprocess.DEVNULL)
    if proc.returncode and check:
        raise PullFailed("git %s: %s" % (args[0], proc.stderr.decode("utf-8", "replace")
                                         .strip() or "exit %d" % proc.returncode))
    return proc


def entry_count(index):
    """The number of entries an index file holds (its header: "DIRC", version, count)."""
    try:
        with open(index, "rb") as f:
            header = f.read(12)
    except FileNotFoundError:
        return 0
    return int.from_bytes(header[8:12], "big") if header[:4] == b"DIRC" else -1


def is_rules(path):
    """Is path a .gitattributes file (written after every other file of a pull)?"""
    return os.path.basename(path) == ATTRIBUTES


class Stop:
    """The pull's stop: cancel.cancel() (GitPull.cancel) ends it at the next point(),
    up to the swap (swapping: from the first file replaced or removed on)."""

    def __init__(self, cancel):
        self.cancel, self.swapping = cancel, False

    def point(self):
        """Stopped when the daemon stops and nothing of the pull is written yet."""
        if self.cancel.cancelled and not self.swapping:
            raise Stopped("the daemon is stopping")
