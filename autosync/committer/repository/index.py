"""git's index and the conflict bookkeeping: the index brought up to date after a quick
commit (settle_index), no merge left half-done (merge_cleared: a stopped one finished,
an interrupted one undone), the index file our own commands left (index_mine), and the
conflict copies told once and listed in the status (announce, count_conflicts).

A merge this daemon finished is told here too (merge_committed), since finishing a
stopped merge is how the index is cleared before a commit or a pull.
"""
import logging

from autosync.committer import quickcommit
from autosync.core.copies import read_copy_name, told
from autosync.core.messages import merge_message
from autosync.vcs import git
from autosync.vcs.commands import CommandFailed
from autosync.vcs.pull import finish

log = logging.getLogger("autosync.repository")

CONFLICTS_KEPT = 100  # conflict copies listed in the status


class Index:
    """Handed the State, the command strings and the quick commit (or None)."""

    def __init__(self, state, cmd, quick):
        self.state, self.cmd, self.quick = state, cmd, quick
        self.report = state.report
        self.conflicts = []  # conflict copies made, newest last
        self.clean_index = None  # git: the index file merge_cleared need not read (index_mine)

    def settle_index(self):
        """A quick commit's index entries brought up to date (committer/quickcommit.py): the
        committer's next step after the push, and before any command that reads the index."""
        if self.quick is None or self.state.blocked:
            return
        known = self.clean_index is not None and \
            git.index_stat(self.state.gitdir) == self.clean_index
        fsmonitor = self.state.fsmonitor
        try:
            # With git's fsmonitor, the index written here keeps the hook's token (without
            # the setting git would drop it, and the next add would look at every file).
            if self.quick.settle(fsmonitor.env if fsmonitor else dict) and known:
                self.index_mine()  # update-index of stage 0 entries: no conflict entries
        except (quickcommit.NotQuick, OSError) as e:
            log.warning("the index was not brought up to date after a commit: %s", e)

    # --- merges (git) ------------------------------------------------------------------

    def merge_cleared(self):
        """No merge is left half-done (git): finish a stopped one, undo an interrupted one.

        Looking for an interrupted one reads the whole index (`ls-files -u`): skipped
        while the index file is the one our own commands left after the last look
        (index_mine), since they make no conflict entries; any other writer of the
        index (the user's git, a pullcmd of the user's) replaces the file, and the
        next look reads it."""
        if finish.merging(self.state.gitdir):
            return self.finish_merge()
        seen = git.index_stat(self.state.gitdir)
        if seen is not None and seen == self.clean_index:
            return True
        try:
            finish.undo_interrupted_merge(self.state.folder, gitenv=self.state.gitenv)
        except RuntimeError as e:
            self.report.failed("merge", e, retry="commit")
            return False
        self.clean_index = None  # until our own commands are done with it (index_mine)
        return True

    def index_mine(self):
        """Our own git commands (add, rm, commit, the git pull's index) are done with
        an index that merge_cleared found without conflict entries: the file as it is now
        needs no look for them. (A command of the user's that wrote it in the instant
        since would be missed until the index changes again.)"""
        self.clean_index = git.index_stat(self.state.gitdir)

    def finish_merge(self):
        """A merge stopped on conflicts: keep both versions of each file and commit it."""
        try:
            copies = finish.resolve(self.state.folder, gitenv=self.state.gitenv)
            message = merge_message(self.state.host, copies)
            self.cmd["commitcmd"].run(message, cwd=self.state.folder)
        except (CommandFailed, RuntimeError, OSError) as e:
            self.report.failed("merge", e, retry="commit")
            return False
        self.report.succeeded("merge")
        self.state.merged = self.state.head()
        self.merge_committed(copies, made=True)
        return True

    def merge_committed(self, copies, beside=(), made=False):
        """A merge that kept both versions was committed (`made`: by this daemon, even
        without a copy): told as a commit that adds the copies; then each copy announced,
        with `beside` (copies of files changed here while the pull ran)."""
        if copies or made:
            self.report.committed(merge_message(self.state.host, copies),
                                  [{"action": "added", "path": c["copy"]} for c in copies])
        self.announce(list(copies) + list(beside))

    # --- conflict copies -----------------------------------------------------------------

    def announce(self, copies):
        """Each conflict copy told once: a `conflict` event, the log (git's merges
        said it already, through keep_both), and the status."""
        for c in copies:
            if not self.state.gitdir:
                told(c)
                self.conflicts = (self.conflicts + [c["copy"]])[-CONFLICTS_KEPT:]
            self.report.event("conflict", **c)
        if copies or not self.state.gitdir:  # git: the index says (a whole read), when it changed
            self.count_conflicts()

    def count_conflicts(self):
        """The status lists the conflict copies the folder holds now (git: the tracked
        ones, read from the index; another DVCS: those made by this daemon)."""
        if self.state.gitdir:
            self.settle_index()
            found = [c.copy for c in map(read_copy_name,
                                         git.tracked_files(self.state.folder,
                                                           gitenv=self.state.gitenv)) if c]
            self.conflicts = found[-CONFLICTS_KEPT:]
        self.report.status(conflicts=list(self.conflicts))
