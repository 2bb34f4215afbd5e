"""A commit that removes many files: said loudly, with the command that undoes it.

Many files removed at once may be an accident (rm -rf in the wrong place), and
it reaches every machine. committer/repository/commit.py asks after each commit; the notice
goes to the status, an event (a notification at every level) and the log.
"""
import logging
import os
import shlex
import time

from autosync.vcs import git
from autosync.vcs.git_environment import PLAIN
from autosync.core.config import default_path
from autosync.core.paths import METADATA

log = logging.getLogger("autosync.committer")

# A commit removing at least this many files, and at least this part of all, is said loudly.
LEAST, PART = 20, 0.25


def notice(cfg, gitdir, listed, before, gitenv=PLAIN):
    """The notice for a commit of `listed` changes made at `before`, or None if it is not
    a mass delete: {"count", "total", "restore" (the undoing command), "time"}."""
    removed = [c["path"] for c in listed if c["action"] == "removed"]
    if len(removed) < LEAST:
        return None
    total = len(removed) + tracked_files(cfg.path, gitdir, gitenv=gitenv)
    if len(removed) < PART * total:
        return None
    where = os.path.commonpath(removed) if len(removed) > 1 else os.path.dirname(removed[0])
    if os.path.isfile(os.path.join(cfg.path, where)):
        where = os.path.dirname(where)
    command = "dvcs-autosync restore %s --at @%d%s" % (
        # The second before this commit's: commit times have one-second steps.
        shlex.quote(where or "."), int(before) - 1,
        "" if cfg.file == default_path() else " --config " + shlex.quote(cfg.file))
    log.warning("%d of %d files were removed in one commit; if that was a mistake, "
                "undo it with: %s", len(removed), total, command)
    return {"count": len(removed), "total": total, "restore": command, "time": time.time()}


def tracked_files(folder, gitdir, gitenv=PLAIN):
    """How many files the repository holds below the folder now (git: the commit just
    made; else on disk)."""
    if gitdir:
        return len(git.committed_files(folder, gitenv=gitenv))
    count = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in METADATA]
        count += len(files)
    return count
