"""What every part of the repository asks: may it be touched now (safe, and why not:
blocked), the long step under way, the revision checked out, the index lock.

One State is made by the repository (committer/repository/__init__.py) and handed to
each of its parts; the values the parts share live here, not in any one of them.
"""
import logging
import os
import time

from autosync.vcs import excludes, git, recovery
from autosync.vcs.pull import finish

log = logging.getLogger("autosync.repository")

SAFE_AGAIN = 5.0  # seconds before a blocked repository is looked at again


class State:
    """The folder, its git dir (it follows another clone put in its place), the report,
    and what more than one part reads or sets."""

    def __init__(self, cfg, report, gitdir, gitenv, excludes_file, where, staging, fsmonitor,
                 git_pull):
        self.cfg, self.folder, self.host = cfg, cfg.path, cfg.hostname
        self.report = report
        self.gitdir, self.gitenv = gitdir, gitenv
        self.excludes = excludes_file
        self.where, self.staging, self.fsmonitor = where, staging, fsmonitor
        self.git_pull = git_pull  # vcs/pull/git.py's GitPull, or None (pull.engine)
        self.blocked = None  # why nothing may be committed now, or None
        self.progress = None  # the long step under way (core/underway.py), or None
        self.merged = None  # the merge commit the last pull made here, if any
        # files the commits not pushed yet change: counted as they are made, asked of git
        # once at the first push after start (None until then)
        self.unpushed_files = None

    def safe(self, op):
        """May the repository be touched? Says why not once, and checks again later."""
        marker = self.where.marker
        problem = self.where.problem()
        if problem is None and self.where.marker != marker:
            self.follow_clone()
        if problem is None and self.gitdir and finish.rebasing(self.gitdir):
            problem = ("the repository is in the middle of a rebase: finish it (git rebase "
                       "--continue) or abort it (git rebase --abort); nothing is committed "
                       "until then")
        told, self.blocked = self.blocked, problem
        if problem is None:
            if told:
                log.warning("the repository is usable again: syncing resumes")
                self.report.succeeded("folder")
            return True
        if problem != told:  # the watcher's report of a folder away is told already
            self.report.failed("folder", problem + "; not committing",
                               quiet=problem == self.where.away)
        self.report.look_again(SAFE_AGAIN)
        return False

    def follow_clone(self):
        """The folder is another clone of our remote now: use its git dir from now on."""
        gitdir = git.git_dir(self.folder, gitenv=self.gitenv)
        if gitdir == self.gitdir or not (gitdir and self.gitdir):
            return
        self.gitdir = self.staging.gitdir = gitdir
        if self.git_pull is not None:
            self.git_pull.gitdir = gitdir
        self.excludes = self.staging.excludes = excludes.Excludes(self.cfg, gitdir,
                                                                  self.excludes.where)
        if self.fsmonitor:
            self.fsmonitor.follow(gitdir)

    def locked(self):
        return bool(self.gitdir) and git.index_locked(self.gitdir)

    def clear_lock(self):
        """Remove an index.lock that a killed git left behind (never a live one)."""
        if self.gitdir and self.where.marker:
            recovery.clear_stale_lock(os.path.join(self.gitdir, "index.lock"),
                                      os.path.dirname(self.where.marker))

    def underway(self, doing, files=None, done=None):
        """A long step (core/underway.py) begins, goes on (`done`), or is over (None): the
        status' `progress` set and the `progress` event told when it changed."""
        if doing is None:
            new = None
        else:
            same = self.progress is not None and self.progress["doing"] == doing
            new = {"doing": doing, "files": files, "done": done,
                   "since": self.progress["since"] if same else time.time()}
        if new == self.progress:
            return
        self.progress = new
        self.report.status(progress=new)
        self.report.event("progress", progress=new)

    def head(self):
        """The revision checked out (git: hex digits), for amend(); None with another DVCS."""
        rev = git.head(self.folder, gitenv=self.gitenv) if self.gitdir else None
        return os.fsdecode(rev) if rev else None
