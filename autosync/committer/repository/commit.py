"""One batch staged and committed (or the quick commit's path, committer/quickcommit.py),
what it records said (conflict copies, a mass delete), our last commit reworded.

Handed the State, the Index (settle_index and merge_cleared before staging, index_mine
after, count_conflicts when a copy is committed) and `kept_out`: the files a failed
pullcmd of the user's left, never committed as the user's change (pull.Leftovers).
"""
import logging
import re
import time

from autosync.committer import massdelete
from autosync.committer.staging import expand_moves
from autosync.core import underway
from autosync.core.copies import read_copy_name
from autosync.core.messages import commit_message
from autosync.vcs import git
from autosync.vcs.commands import CommandFailed
from autosync.committer.repository.state import SAFE_AGAIN

log = logging.getLogger("autosync.repository")

# git commit's words when the index holds nothing new (exit 1): not a failure.
NOTHING_TO_COMMIT = re.compile(r"^(nothing to commit|nothing added to commit|no changes added "
                               r"to commit)", re.M)
PLAIN_STATUS = "git diff --cached --quiet"  # the shipped statuscmd (see nothing_staged)


class Commit:
    def __init__(self, state, index, cmd, quick, still, own_commands, at_top, kept_out):
        self.state, self.index, self.cmd = state, index, cmd
        self.report = state.report
        self.quick, self.still = quick, still
        self.own_commands, self.at_top = own_commands, at_top
        self.kept_out = kept_out
        self.commit_error = None  # why the last commit failed or left something out

    def unstage_all(self):
        """The index back to HEAD (to nothing before the first commit); the files as
        they are."""
        folder, gitenv = self.state.folder, self.state.gitenv
        if git.git(folder, "rev-parse", "-q", "--verify", "HEAD", check=False,
                   gitenv=gitenv):
            git.git(folder, "reset", "-q", gitenv=gitenv)
        else:
            git.git(folder, "read-tree", "--empty", gitenv=gitenv)

    def commit(self, changes, rescan=False, note=None, text=None):
        """Stage and commit one batch (`text`: the user's description); True if a commit
        was made."""
        try:
            return self.commit_batch(changes, rescan, note, text)
        finally:
            self.state.underway(None)

    def commit_batch(self, changes, rescan, note, text):
        state, staging = self.state, self.state.staging
        folder, gitenv = state.folder, state.gitenv
        self.report.state("committing")
        if not state.safe("commit"):
            return False
        self.index.settle_index()
        # Never stage over a merge that stopped (killed mid-pull): that would commit markers.
        if state.gitdir and not self.index.merge_cleared():
            return False
        state.clear_lock()
        self.commit_error = None
        if rescan and state.fsmonitor:  # git looks at every file, not at what was sent
            state.fsmonitor.journal.invalidate()
            state.fsmonitor.publish()
        changes = staging.prepare(changes)
        sent = len(changes)
        kept = self.kept_out()
        changes = [c for c in changes if c["path"] not in kept and c.get("src") not in kept]
        changes = self.still.leave_out(changes)  # still being written: kept for later
        if sent and not changes and not rescan:
            return False
        if len(changes) >= underway.LONG or (rescan and state.gitdir and
                                             git.head(folder) is None):
            # many files, or a first sync's: said while git takes them (a rescan: how
            # many is not known before git has looked at every file)
            state.underway("adding", files=None if rescan else len(changes))
        if self.quick is not None and not rescan:
            before = time.time()
            quick = self.quick.commit(changes, lambda listed: commit_message(
                state.host, listed, note, self.context(), text))
            if quick is not None:  # else: not for this batch, the usual path follows
                if self.own_commands:
                    self.index.index_mine()  # untouched since merge_cleared looked at it
                message, listed = quick
                if not listed:
                    self.held_back([])
                    return False  # nothing to commit
                return self.committed(message, listed, [], before)
        try:
            # A rescan that finds everything itself needs only the moves (git records
            # them) from the batch: an overflow's batch lists every file in the folder.
            held = staging.stage(changes, moves_only=rescan and staging.rescan_finds_all())
            scanned = bool(held) or rescan
            if scanned:
                # Something went wrong path by path, or events were missed:
                # let the DVCS find every change itself.
                held = staging.rescan()
            if staging.excludes_lost():
                # The excludes file went while git staged (it is back now): what it
                # ignores may be staged. The index back to HEAD (the files untouched),
                # then everything staged again with it in place, or nothing committed.
                self.unstage_all()
                held, scanned = staging.rescan(), True
                if staging.excludes_lost():
                    self.unstage_all()
                    self.report.look_again(SAFE_AGAIN)
                    return False
            # What the commit records, read once (issue 21: each read is the whole index):
            # for the gitlinks check, the plain statuscmd and the message.
            staged = git.staged_changes(folder, gitenv=gitenv) if state.gitdir else None
            if staged is not None and staging.unstage_gitlinks(staged):
                staged = git.staged_changes(folder, gitenv=gitenv)
            if scanned and staged and self.unstage_still_written(staged):
                staged = git.staged_changes(folder, gitenv=gitenv)
            if staged and kept and any(c["path"] in kept or c.get("src") in kept
                                       for c in staged):
                git.git(folder, "reset", "-q", "--", paths=sorted(kept),
                        gitenv=gitenv)  # the failed pull's, not the user's
                staged = git.staged_changes(folder, gitenv=gitenv)
            if self.nothing_staged(staged):
                self.held_back(held)
                return False  # nothing to commit
            listed = staged if staged is not None else expand_moves(folder, changes)
            message = commit_message(state.host, listed, note or (rescan and "rescan"),
                                     self.context(), text)
            if len(listed) >= underway.LONG:
                state.underway("committing", files=len(listed))
            before = time.time()
            self.cmd["commitcmd"].run(message, cwd=folder)
        except (CommandFailed, RuntimeError) as e:
            if isinstance(e, CommandFailed) and e.name == "commitcmd" and \
                    NOTHING_TO_COMMIT.search(e.output or ""):
                # A status check that greps `git status` (the original's) took a file
                # made after the add for a change ("nothing added to commit but
                # untracked files present"): that file's own batch commits it.
                self.held_back(held)
                return False
            # Tried again with backoff (a rescan): a lock in the way passes, and a cause
            # the user fixes (a git identity, a full disk) must clear by itself.
            self.report.failed("commit", e, retry="commit")
            self.commit_error = "commit: %s" % e
            return False
        finally:
            if state.gitdir and self.own_commands:
                self.index.index_mine()
        if self.quick is not None and self.quick.shipped:
            self.quick.committed_usual_way(state.head())
        return self.committed(message, listed, held, before)

    def unstage_still_written(self, staged):
        """What a rescan staged (git add -A takes every file as it is) less the files still
        open for writing: their index entries set back to HEAD's, both names of a move.
        -> True if any was."""
        writing = self.still.judge(
            [c["path"] for c in staged if c["action"] != "removed"],
            {c["path"]: {k: c[k] for k in ("action", "path", "src") if k in c} for c in staged})
        if not writing:
            return False
        paths = {p for c in staged if c["path"] in writing for p in (c["path"], c.get("src"))}
        git.git(self.state.folder, "reset", "-q", "--", paths=sorted(p for p in paths if p),
                gitenv=self.state.gitenv)
        return True

    def committed(self, message, listed, held, before):
        """A commit was made: said, with what it means (conflict copies, a mass delete)."""
        state = self.state
        if not self.held_back(held):
            self.report.succeeded("commit")
        if state.unpushed_files is not None:
            state.unpushed_files += len(listed)
        self.report.committed(message, listed)
        if any(read_copy_name(c["path"]) or read_copy_name(c.get("src", ""))
               for c in listed):
            self.index.count_conflicts()  # a copy made, settled or removed
        notice = massdelete.notice(state.cfg, state.gitdir, listed, before, state.gitenv)
        if notice:
            self.report.status(mass_delete=notice)
            self.report.event("mass-delete", **notice)
        return True

    def amend(self, message, rev):
        """Reword our last commit, which is not pushed (the committer knows), to `message`
        with amendcmd; -> its new revision ("" with another DVCS than git), or None when
        that cannot be done: no amendcmd, or (git) the commit is not `rev` any more."""
        template = self.cmd.get("amendcmd")
        if template is None or template.empty or not self.state.safe("commit") \
                or (self.state.gitdir and self.state.head() != rev):
            return None
        self.index.settle_index()  # git commit --amend records the index
        self.report.state("committing")
        try:
            template.run(message, cwd=self.state.folder)
        except CommandFailed as e:
            self.report.failed("commit", e)
            return None
        return self.state.head() or ""

    def held_back(self, held):
        staging = self.state.staging
        held = staging.hold_back(held)
        self.commit_error = staging.error
        return held

    def nothing_staged(self, staged):
        """statuscmd's answer: True when there is nothing to commit. The shipped
        `git diff --cached --quiet`, on a folder that is the whole working tree, asks
        what `staged` (git's list of what the commit records, or None) says already:
        not run again (nor the original's `git status | grep`, run as the shipped one). Any
        other statuscmd (a grep of the user's) runs."""
        if staged is not None and self.at_top and \
                self.cmd["statuscmd"].text.strip() == PLAIN_STATUS:
            return not staged
        return self.cmd["statuscmd"].run(cwd=self.state.folder, check=False).returncode == 0

    def context(self):
        """The output of contextcmd (off unless configured), for the commit message."""
        template = self.cmd.get("contextcmd")
        if template is None or template.empty:
            return None
        try:
            return template.output(cwd=self.state.folder, timeout=10) or None
        except CommandFailed as e:
            log.warning("%s", e)
            return None
