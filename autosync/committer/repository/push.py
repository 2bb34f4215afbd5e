"""The remote: a push (a pull between tries when rejected, never a force push), what the
remote lacks, a description of a pushed commit sent as a git note.

Handed the State and `pull`, the pull to run between tries (Pull.pull): no call back
through the repository.
"""
import logging
import os
import signal

from autosync.core import underway
from autosync.vcs import git, gitnotes
from autosync.vcs.commands import Cancel, CommandFailed

log = logging.getLogger("autosync.repository")

PUSH_TRIES = 3  # pushes per round; between them a pull merges what the remote has


class Push:
    def __init__(self, state, cmd, pull):
        self.state, self.cmd, self.pull = state, cmd, pull
        self.report = state.report
        self.told_no_upstream = False  # said once that unpushed() counts without one
        self.pushed_rev = None  # git: the upstream revision after the last push
        self.pushed_new = False  # the last push took a new revision to the remote
        self.notes_owed = False  # git: a description (note) the remote does not have yet
        # A stop ends a push under way (a remote takes a push whole or not at all); one
        # that begins after the stop (what the stop's last commit made) still runs.
        self.push_cancel = Cancel(later=False)

    def push(self, expect_new=True):
        """Push now (pulling in between when rejected, never forcing); True if it worked.

        `pushed_new` then says whether a new revision reached the remote: git says so
        by the upstream branch moving (`pushed_rev` is where to); for another DVCS it
        is `expect_new` (commits were made since the last push)."""
        try:
            return self.push_now(expect_new)
        finally:
            self.state.underway(None)

    def push_now(self, expect_new):
        state = self.state
        folder, gitenv = state.folder, state.gitenv
        self.pushed_new = False
        if not state.safe("push"):
            return False
        if state.gitdir and git.head(folder, gitenv=gitenv) is None:
            return True  # no commit yet (a clone of an empty remote): nothing to push
        before = git.head(folder, "@{upstream}", gitenv=gitenv) if state.gitdir else None
        if state.unpushed_files is None:  # the commits were made before this start
            state.unpushed_files = self.files_to_push(before)
        for attempt in range(1, PUSH_TRIES + 1):
            self.report.state("pushing")
            if state.unpushed_files >= underway.LONG:  # (a pull in between ended its own)
                state.underway("pushing", files=state.unpushed_files)
            try:
                self.cmd["pushcmd"].run(cwd=folder, cancel=self.push_cancel)
                break
            except CommandFailed as e:
                error = e
            if self.push_cancel.cancelled and error.returncode == -signal.SIGTERM:
                log.info("push not done: the daemon is stopping (the next start pushes)")
                return False
            # Rejected because the remote moved on (merge and try again), or unreachable
            # (then the pull fails too): never a force push.
            if attempt == PUSH_TRIES or not self.pull()["ok"]:
                self.report.failed("push", error, retry="push")
                return False
        self.report.succeeded("push")
        state.unpushed_files = 0
        if self.notes_owed:  # the remote was away when a description was given
            self.notes_owed = not gitnotes.push(folder, gitenv=gitenv)
        after = git.head(folder, "@{upstream}", gitenv=gitenv) if state.gitdir else None
        self.pushed_new = after != before if after is not None else expect_new
        self.pushed_rev = os.fsdecode(after) if after else None
        return True

    def files_to_push(self, upstream):
        """How many files the commits the remote lacks change (git: one diff of two trees;
        with no upstream, every file of HEAD); 0 when it cannot say (another DVCS)."""
        if not self.state.gitdir:
            return 0
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-only", os.fsdecode(upstream),
                "HEAD") if upstream else ("ls-tree", "-r", "-z", "--name-only", "HEAD")
        out = git.git(self.state.folder, *args, check=False, gitenv=self.state.gitenv)
        return out.count(b"\0") if out else 0

    def unpushed(self):
        """How many commits the remote lacks, read from git (docs/protocol.md, `unpushed`);
        None with another DVCS, which cannot say (the committer counts its commits)."""
        counted = git.unpushed(self.state.folder,
                               gitenv=self.state.gitenv) if self.state.gitdir else None
        if counted is None:
            return None
        count, upstream = counted
        if not upstream and not self.told_no_upstream:
            self.told_no_upstream = True
            log.warning("the branch checked out has no upstream branch: commits on no remote "
                        "branch count as not pushed (to set one: git push -u origin HEAD)")
        return count

    def upstream(self):
        """The upstream branch's revision as our last push or fetch left it (git), or None."""
        rev = git.head(self.state.folder, "@{upstream}",
                       gitenv=self.state.gitenv) if self.state.gitdir else None
        return os.fsdecode(rev) if rev else None

    def remote_url(self):
        try:
            return self.cmd["remoteurlcmd"].output(cwd=self.state.folder)
        except CommandFailed as e:
            log.warning("%s", e)
            return ""

    def describe_pushed(self, rev, text):
        """Put `text` on commit `rev`, pushed already, as a note that travels with the
        branch (vcs/gitnotes.py); -> the commit's subject, or None when that cannot be done
        (not git, or no such commit here): the text then goes on the next commit."""
        if not self.state.gitdir or not self.state.safe("commit"):
            return None
        try:
            subject = gitnotes.add(self.state.folder, rev, text, gitenv=self.state.gitenv)
        except RuntimeError as e:
            log.warning("the description of %s could not be added: %s", rev[:12], e)
            return None
        if subject is not None:
            self.notes_owed = not gitnotes.push(self.state.folder, gitenv=self.state.gitenv)
            if not self.notes_owed:  # announced (XMPP) like a push: the others pull it now
                self.report.event("pushed", url=self.remote_url(), source="notes", rev="")
        return subject
