"""One synced folder's DVCS operations: commit, merge, push, pull.

Runs the configured command strings (any DVCS) plus the few git-only
safeguards (vcs/pull/finish.py, vcs/folder.py, vcs/recovery.py). It decides nothing about when: the
committer calls it from its worker thread and hears back through `report`,
a Report (below; reports.Reports in the committer, tests/fakes.Reports in tests).
"""
import logging
import os
import re
import shlex
import signal
import time
import typing

from autosync.committer import fsmonitor, massdelete, quickcommit
from autosync.vcs import copyrules, excludes, git, gitnotes, guarded, largefiles, \
    pullleftovers, recovery
from autosync.vcs.pull import finish, hg
from autosync.vcs.pull import git as gitpull
from autosync.vcs.git_environment import GitEnvironment
from autosync.ssh import connection as sshremote
from autosync.vcs.commands import SHELL_CHARS, Cancel, CommandFailed, Template
from autosync.core import underway
from autosync.core.config import shipped_form
from autosync.core.copies import copy_name, read_copy_name, told
from autosync.core.messages import (MERGED_COPY, commit_message, host_of, merge_message,
                                     unquoted)
from autosync.committer.staging import Staging, expand_moves
from autosync.committer.stillwritten import StillWritten
from autosync.vcs.folder import Folder, remote_of

# git commit's words when the index holds nothing new (exit 1): not a failure.
NOTHING_TO_COMMIT = re.compile(r"^(nothing to commit|nothing added to commit|no changes added "
                               r"to commit)", re.M)
log = logging.getLogger("autosync.repository")

PUSH_TRIES = 3  # pushes per round; between them a pull merges what the remote has
LEFTOVER_WAIT = 120.0  # seconds a killed committer's last command may take to finish
CONFLICTS_KEPT = 100  # conflict copies listed in the status
SAFE_AGAIN = 5.0  # seconds before a blocked repository is looked at again
PLAIN_STATUS = "git diff --cached --quiet"  # the shipped statuscmd (see nothing_staged)


# git's subcommands that never make conflict entries in the index (see merge_cleared).
STAGING_COMMANDS = frozenset(("add", "rm", "mv", "commit", "diff", "status"))


def plain_git(text, subcommands):
    """Is every line of a command string `git SUBCOMMAND ...` with one of `subcommands`,
    no shell in it? (An empty one runs nothing: plain too.)"""
    for line in (l.strip() for l in text.split("\n")):
        if not line:
            continue
        if SHELL_CHARS.intersection(line):
            return False
        try:
            words = shlex.split(line)
        except ValueError:
            return False
        if len(words) < 2 or words[0] != "git" or words[1] not in subcommands:
            return False
    return True


class Report(typing.Protocol):
    """What the repository tells whoever decides when (the committer)."""

    def state(self, name):
        """What the repository is doing now (protocol.STATES)."""

    def status(self, **fields):
        """Fields of the status that changed."""

    def failed(self, op, error, retry=None, quiet=False):
        """op failed; retry "commit", "pull" or "push" later; quiet: already said,
        only look again later."""

    def succeeded(self, op):
        """op worked: its backoff starts afresh."""

    def look_again(self, seconds):
        """A commit may be possible later (a rebase ends)."""

    def committed(self, message, listed):
        """A commit was made; listed: the files it records."""

    def pulled(self, ok):
        """A pull ended."""

    def event(self, name, **fields):
        """Something subscribers should hear of (protocol.EVENTS)."""

    def last_error(self):
        """The last failure said, for a request's reply."""


def held_ssh(folder, remote):
    """GIT_SSH_COMMAND holding one ssh connection to the remote (`remote(folder)`: its
    address, vcs/folder.py's remote_of), or None (not over ssh, or the user's own)."""
    url = remote(folder) if remote else ""
    return sshremote.git_ssh_command(url, folder) if url else None


def git_environment_for(cfg, gitdir, excludes_file, remote):
    """The one GitEnvironment every git command of the committer runs with, made once at
    its start (vcs/git_environment.py): the excludes file it writes, the `largefiles`
    rule and its git-annex key, and in git (and git-annex) the one ssh connection held to
    the remote (push, fetch, notes; `remote`: vcs/folder.py's remote_of)."""
    ssh_command = held_ssh(cfg.path, remote) if gitdir else None
    return GitEnvironment(excludes=excludes_file.where if excludes_file else None,
                          largefiles=largefiles.rule_of(cfg),
                          annex_backend=largefiles.backend_of(cfg),
                          ssh_command=ssh_command,
                          annex_git_ssh=bool(ssh_command) and
                          largefiles.annex_through_git_ssh(cfg.path))


class Repository:
    """Built whole here, its parts handed in at their construction: the git environment
    (self.gitenv), git's fsmonitor (self.fsmonitor, or None) and the command strings
    that run with it. The committer asks the repository, never its parts."""

    def __init__(self, cfg, report):
        self.cfg, self.folder, self.host = cfg, cfg.path, cfg.hostname
        self.report = report
        # The original's git strings run as the shipped ones, which mean the same
        # (config.ORIGINAL_GIT_COMMANDS) and take the fast paths.
        texts = {name: shipped_form(name, text) for name, text in cfg.commands.items()}
        taken = sorted(n for n, t in cfg.commands.items() if texts[n] != t)
        if taken:
            log.info("the original's %s run as the shipped one%s (the same meaning): %s",
                     "command string is" if len(taken) == 1 else "command strings are",
                     "" if len(taken) == 1 else "s", ", ".join(taken))
        self.gitdir = git.git_dir(self.folder)  # None: not git, no built-in resolution
        # Every git command we run (startupcmd above all) leaves out what the watcher does.
        self.excludes = excludes.Excludes(cfg, self.gitdir, cfg.socket + ".exclude") \
            if self.gitdir else None
        self.gitenv = git_environment_for(cfg, self.gitdir, self.excludes, remote_of(
            Template("remoteurlcmd", texts["remoteurlcmd"]) if "remoteurlcmd" in texts
            else None))
        # The folder is the whole working tree (not a folder inside one): git's lists of
        # what is staged (--relative) then speak of all that a commit records.
        self.at_top = bool(self.gitdir) and git.is_top(self.folder, gitenv=self.gitenv)
        # The commit's command strings are plain git add/rm/commit lines, which make no
        # conflict entries in the index (see merge_cleared).
        self.own_commands = all(plain_git(texts[name], STAGING_COMMANDS) for name in
                                ("addcmd", "rmcmd", "modifycmd", "movecmd", "startupcmd",
                                 "statuscmd", "commitcmd"))
        # git's fsmonitor answered from the watcher's batches (committer/fsmonitor.py), or
        # None; the commit's staging commands are made with it.
        self.fsmonitor = fsmonitor.monitor_for(cfg, self.gitdir, self.at_top,
                                               self.own_commands, self.gitenv)
        self.cmd = {name: fsmonitor.template(name, text, self.gitenv, self.fsmonitor)
                    for name, text in texts.items()}
        # What the folder was at start: a vanished or replaced one is never committed.
        # Another clone of the same remote put in its place is taken on (safe()).
        self.where = Folder(self.folder, remote_of(self.cmd.get("remoteurlcmd")), self.gitenv)
        self.blocked = None  # why nothing may be committed now, or None
        self.commit_error = None  # why the last commit failed or left something out
        self.told_no_upstream = False  # said once that unpushed() counts without one
        self.pushed_rev = None  # git: the upstream revision after the last push
        self.conflicts = []  # conflict copies made, newest last
        self.pushed_new = False  # the last push took a new revision to the remote
        self.merged = None  # the merge commit the last pull made here, if any
        self.notes_owed = False  # git: a description (note) the remote does not have yet
        self.clean_index = None  # git: the index file merge_cleared need not read (index_mine)
        self.staging = Staging(self.folder, self.cmd, self.gitdir, self.excludes, report,
                               self.gitenv)
        # Files some process holds open for writing: left out of every commit until closed.
        self.still = StillWritten(self.folder, report)
        # A plain `git pull` is done by vcs/gitpull.py: it never overwrites a write it did not see.
        fetch = gitpull.plain_pull(self.cmd["pullcmd"].text) if self.gitdir else None
        self.guarded = None if fetch is None else \
            gitpull.GitPull(self.folder, self.gitdir, self.host, fetch, self.gitenv,
                            index_env=self.fsmonitor.env if self.fsmonitor else dict)
        if self.guarded is not None:
            self.guarded.on_progress = lambda made, total: \
                self.underway("writing", total, made) if total >= underway.LONG else None
        self.progress = None  # the long step under way (core/underway.py), or None
        # git: files a failed pullcmd of the user's left that could not be put back
        # (vcs/pullleftovers.py): path -> its lstat then; out of every commit until a pull
        # succeeds or the file changes
        self.pull_leftovers = {}
        # files the commits not pushed yet change: counted as they are made, asked of git
        # once at the first push after start (None until then)
        self.unpushed_files = None
        # A stop ends a push under way (a remote takes a push whole or not at all); one
        # that begins after the stop (what the stop's last commit made) still runs.
        self.push_cancel = Cancel(later=False)
        # git: a batch committed from its changed paths, without rewriting the whole index
        # (committer/quickcommit.py; only with the shipped command strings, else never taken).
        self.quick = quickcommit.QuickCommit(self.folder, self.gitdir, self.cmd, self.at_top,
                                             self.gitenv) if self.gitdir else None
        if self.fsmonitor:
            self.fsmonitor.publish()

    def stop(self):
        """The daemon stops: a guarded pull's fetch is killed and the pull ends before it
        writes anything (one writing already runs to its end); a push under way is
        killed. Safe in a signal handler."""
        if self.guarded is not None:
            self.guarded.cancel.cancel()
        self.push_cancel.cancel()

    def close(self):
        """The daemon stops: what it made goes (its socket is the server's)."""
        if self.excludes:
            self.excludes.remove()
        if self.fsmonitor:
            self.fsmonitor.close()

    # --- what the watcher tells (git's fsmonitor; nothing without it) ---------------------

    def received(self, changes, rescan):
        """A batch of the watcher's, numbered for git's fsmonitor hook: the committer calls
        this before its worker can take the batch (committer/fsmonitor.py)."""
        if self.fsmonitor:
            self.fsmonitor.journal.received(changes, rescan)

    def publish_received(self):
        """The hook's state file written with every batch received, for git commands run
        from now on."""
        if self.fsmonitor:
            self.fsmonitor.publish()

    def unwatched(self, blind):
        """Some folders have no watch (`blind`), or none lacks one any more: changes there
        are never sent, so the hook answers that anything may have changed."""
        if self.fsmonitor:
            self.fsmonitor.journal.set_blind(blind)
            self.fsmonitor.publish()

    def folder_away(self, problem):
        """The watcher says the folder is away (`problem`, a text) or back at its place
        (None): nothing is committed while it is away (vcs/folder.py)."""
        self.where.set_away(problem)

    # --- files held open for writing (committer/stillwritten.py) -------------------------

    def still_written_wait(self):
        """Seconds until the files left out while open for writing are looked at again
        (0: now), or None when none is left out."""
        return self.still.wait()

    def still_written_due(self):
        return self.still.due()

    def still_written_ready(self):
        """The files left out that may go into a commit now (closed, gone, or due for a
        version while open) -> changes, for the next batch."""
        return self.still.recheck()

    # --- safety ------------------------------------------------------------------------

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
        if self.guarded is not None:
            self.guarded.gitdir = gitdir
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

    def recover(self):
        """At start: let a killed committer's last command finish, and undo its damage."""
        recovery.wait_for_leftovers(self.folder, LEFTOVER_WAIT)
        self.clear_lock()
        self.settle_index()  # a quick commit's index entries a killed daemon still owed
        # Whether or not a leftover was seen: a killed pull may have died before we
        # started. A recorded merge (MERGE_HEAD) is finished by merge_cleared instead.
        # (No commit yet, as in a clone of an empty remote: no pull can have run.)
        if self.gitdir and not finish.merging(self.gitdir) and self.head():
            try:
                finish.undo_killed_pull(self.folder, gitenv=self.gitenv)
            except RuntimeError as e:
                log.error("%s", e)
        self.keep_leftover_writes()
        if self.gitdir:
            self.count_conflicts()

    # --- commits -----------------------------------------------------------------------

    def unstage_all(self):
        """The index back to HEAD (to nothing before the first commit); the files as
        they are."""
        if git.git(self.folder, "rev-parse", "-q", "--verify", "HEAD", check=False,
                   gitenv=self.gitenv):
            git.git(self.folder, "reset", "-q", gitenv=self.gitenv)
        else:
            git.git(self.folder, "read-tree", "--empty", gitenv=self.gitenv)

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

    def commit(self, changes, rescan=False, note=None, text=None):
        """Stage and commit one batch (`text`: the user's description); True if a commit
        was made."""
        try:
            return self.commit_batch(changes, rescan, note, text)
        finally:
            self.underway(None)

    def commit_batch(self, changes, rescan, note, text):
        self.report.state("committing")
        if not self.safe("commit"):
            return False
        self.settle_index()
        # Never stage over a merge that stopped (killed mid-pull): that would commit markers.
        if self.gitdir and not self.merge_cleared():
            return False
        self.clear_lock()
        self.commit_error = None
        if rescan and self.fsmonitor:  # git looks at every file, not at what was sent
            self.fsmonitor.journal.invalidate()
            self.fsmonitor.publish()
        changes = self.staging.prepare(changes)
        sent = len(changes)
        kept = self.leftovers_kept()
        changes = [c for c in changes if c["path"] not in kept and c.get("src") not in kept]
        changes = self.still.leave_out(changes)  # still being written: kept for later
        if sent and not changes and not rescan:
            return False
        if len(changes) >= underway.LONG or (rescan and self.gitdir and
                                             git.head(self.folder) is None):
            # many files, or a first sync's: said while git takes them (a rescan: how
            # many is not known before git has looked at every file)
            self.underway("adding", files=None if rescan else len(changes))
        if self.quick is not None and not rescan:
            before = time.time()
            quick = self.quick.commit(changes, lambda listed: commit_message(
                self.host, listed, note, self.context(), text))
            if quick is not None:  # else: not for this batch, the usual path follows
                if self.own_commands:
                    self.index_mine()  # untouched since merge_cleared looked at it
                message, listed = quick
                if not listed:
                    self.held_back([])
                    return False  # nothing to commit
                return self.committed(message, listed, [], before)
        try:
            # A rescan that finds everything itself needs only the moves (git records
            # them) from the batch: an overflow's batch lists every file in the folder.
            held = self.staging.stage(changes, moves_only=rescan and self.staging.rescan_finds_all())
            scanned = bool(held) or rescan
            if scanned:
                # Something went wrong path by path, or events were missed:
                # let the DVCS find every change itself.
                held = self.staging.rescan()
            if self.staging.excludes_lost():
                # The excludes file went while git staged (it is back now): what it
                # ignores may be staged. The index back to HEAD (the files untouched),
                # then everything staged again with it in place, or nothing committed.
                self.unstage_all()
                held, scanned = self.staging.rescan(), True
                if self.staging.excludes_lost():
                    self.unstage_all()
                    self.report.look_again(SAFE_AGAIN)
                    return False
            # What the commit records, read once (issue 21: each read is the whole index):
            # for the gitlinks check, the plain statuscmd and the message.
            staged = git.staged_changes(self.folder,
                                        gitenv=self.gitenv) if self.gitdir else None
            if staged is not None and self.staging.unstage_gitlinks(staged):
                staged = git.staged_changes(self.folder, gitenv=self.gitenv)
            if scanned and staged and self.unstage_still_written(staged):
                staged = git.staged_changes(self.folder, gitenv=self.gitenv)
            if staged and kept and any(c["path"] in kept or c.get("src") in kept
                                       for c in staged):
                git.git(self.folder, "reset", "-q", "--", paths=sorted(kept),
                        gitenv=self.gitenv)  # the failed pull's, not the user's
                staged = git.staged_changes(self.folder, gitenv=self.gitenv)
            if self.nothing_staged(staged):
                self.held_back(held)
                return False  # nothing to commit
            listed = staged if staged is not None else expand_moves(self.folder, changes)
            message = commit_message(self.host, listed, note or (rescan and "rescan"),
                                     self.context(), text)
            if len(listed) >= underway.LONG:
                self.underway("committing", files=len(listed))
            before = time.time()
            self.cmd["commitcmd"].run(message, cwd=self.folder)
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
            if self.gitdir and self.own_commands:
                self.index_mine()
        if self.quick is not None and self.quick.shipped:
            self.quick.committed_usual_way(self.head())
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
        git.git(self.folder, "reset", "-q", "--", paths=sorted(p for p in paths if p),
                gitenv=self.gitenv)
        return True

    def committed(self, message, listed, held, before):
        """A commit was made: said, with what it means (conflict copies, a mass delete)."""
        if not self.held_back(held):
            self.report.succeeded("commit")
        if self.unpushed_files is not None:
            self.unpushed_files += len(listed)
        self.report.committed(message, listed)
        if any(read_copy_name(c["path"]) or read_copy_name(c.get("src", ""))
               for c in listed):
            self.count_conflicts()  # a copy made, settled or removed
        notice = massdelete.notice(self.cfg, self.gitdir, listed, before, self.gitenv)
        if notice:
            self.report.status(mass_delete=notice)
            self.report.event("mass-delete", **notice)
        return True

    def head(self):
        """The revision checked out (git: hex digits), for amend(); None with another DVCS."""
        rev = git.head(self.folder, gitenv=self.gitenv) if self.gitdir else None
        return os.fsdecode(rev) if rev else None

    def amend(self, message, rev):
        """Reword our last commit, which is not pushed (the committer knows), to `message`
        with amendcmd; -> its new revision ("" with another DVCS than git), or None when
        that cannot be done: no amendcmd, or (git) the commit is not `rev` any more."""
        template = self.cmd.get("amendcmd")
        if template is None or template.empty or not self.safe("commit") \
                or (self.gitdir and self.head() != rev):
            return None
        self.settle_index()  # git commit --amend records the index
        self.report.state("committing")
        try:
            template.run(message, cwd=self.folder)
        except CommandFailed as e:
            self.report.failed("commit", e)
            return None
        return self.head() or ""

    def describe_pushed(self, rev, text):
        """Put `text` on commit `rev`, pushed already, as a note that travels with the
        branch (vcs/gitnotes.py); -> the commit's subject, or None when that cannot be done
        (not git, or no such commit here): the text then goes on the next commit."""
        if not self.gitdir or not self.safe("commit"):
            return None
        try:
            subject = gitnotes.add(self.folder, rev, text, gitenv=self.gitenv)
        except RuntimeError as e:
            log.warning("the description of %s could not be added: %s", rev[:12], e)
            return None
        if subject is not None:
            self.notes_owed = not gitnotes.push(self.folder, gitenv=self.gitenv)
            if not self.notes_owed:  # announced (XMPP) like a push: the others pull it now
                self.report.event("pushed", url=self.remote_url(), source="notes", rev="")
        return subject

    def held_back(self, held):
        held = self.staging.hold_back(held)
        self.commit_error = self.staging.error
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
        return self.cmd["statuscmd"].run(cwd=self.folder, check=False).returncode == 0

    def context(self):
        """The output of contextcmd (off unless configured), for the commit message."""
        template = self.cmd.get("contextcmd")
        if template is None or template.empty:
            return None
        try:
            return template.output(cwd=self.folder, timeout=10) or None
        except CommandFailed as e:
            log.warning("%s", e)
            return None

    def settle_index(self):
        """A quick commit's index entries brought up to date (committer/quickcommit.py): the
        committer's next step after the push, and before any command that reads the index."""
        if self.quick is None or self.blocked:
            return
        known = self.clean_index is not None and git.index_stat(self.gitdir) == self.clean_index
        try:
            # With git's fsmonitor, the index written here keeps the hook's token (without
            # the setting git would drop it, and the next add would look at every file).
            if self.quick.settle(self.fsmonitor.env if self.fsmonitor else dict) and known:
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
        if finish.merging(self.gitdir):
            return self.finish_merge()
        seen = git.index_stat(self.gitdir)
        if seen is not None and seen == self.clean_index:
            return True
        try:
            finish.undo_interrupted_merge(self.folder, gitenv=self.gitenv)
        except RuntimeError as e:
            self.report.failed("merge", e, retry="commit")
            return False
        self.clean_index = None  # until our own commands are done with it (index_mine)
        return True

    def index_mine(self):
        """Our own git commands (add, rm, commit, the guarded pull's index) are done with
        an index that merge_cleared found without conflict entries: the file as it is now
        needs no look for them. (A command of the user's that wrote it in the instant
        since would be missed until the index changes again.)"""
        self.clean_index = git.index_stat(self.gitdir)

    def finish_merge(self):
        """A merge stopped on conflicts: keep both versions of each file and commit it."""
        try:
            copies = finish.resolve(self.folder, gitenv=self.gitenv)
            message = merge_message(self.host, copies)
            self.cmd["commitcmd"].run(message, cwd=self.folder)
        except (CommandFailed, RuntimeError, OSError) as e:
            self.report.failed("merge", e, retry="commit")
            return False
        self.report.succeeded("merge")
        self.merged = self.head()
        self.merge_committed(copies, made=True)
        return True

    def merge_committed(self, copies, beside=(), made=False):
        """A merge that kept both versions was committed (`made`: by this daemon, even
        without a copy): told as a commit that adds the copies; then each copy announced,
        with `beside` (copies of files changed here while the pull ran)."""
        if copies or made:
            self.report.committed(merge_message(self.host, copies),
                                  [{"action": "added", "path": c["copy"]} for c in copies])
        self.announce(list(copies) + list(beside))

    def announce(self, copies):
        """Each conflict copy told once: a `conflict` event, the log (git's merges
        said it already, through copies.keep_both), and the status."""
        for c in copies:
            if not self.gitdir:
                told(c)
                self.conflicts = (self.conflicts + [c["copy"]])[-CONFLICTS_KEPT:]
            self.report.event("conflict", **c)
        if copies or not self.gitdir:  # git: the index says (a whole read), when it changed
            self.count_conflicts()

    def count_conflicts(self):
        """The status lists the conflict copies the folder holds now (git: the tracked
        ones, read from the index; another DVCS: those made by this daemon)."""
        if self.gitdir:
            self.settle_index()
            found = [c.copy for c in map(read_copy_name,
                                         git.tracked_files(self.folder,
                                                           gitenv=self.gitenv)) if c]
            self.conflicts = found[-CONFLICTS_KEPT:]
        self.report.status(conflicts=list(self.conflicts))

    def merged_elsewhere(self, before, after):
        """Conflict copies that another machine's merges, pulled just now, kept: told here
        too (read back from their commit messages)."""
        if not (self.gitdir and before and after and before != after):
            return []
        out = git.git(self.folder, "log", "-z", "--format=%H%n%B",
                          b"%s..%s" % (before, after), check=False, gitenv=self.gitenv) or b""
        copies = []
        for message in os.fsdecode(out).split("\0"):
            rev, _, message = message.strip("\n").partition("\n")
            lines = message.split("\n")
            host = host_of(lines[0])
            if not host or rev == self.merged:
                continue  # the merge this pull made: its copies were told then
            for line in lines[1:]:
                found = MERGED_COPY.fullmatch(line)
                if found:  # (the names as printable() wrote them)
                    copies.append({"path": unquoted(found.group(1)),
                                   "copy": unquoted(found.group(2)),
                                   "host": host, "source": "pulled"})
        return copies

    # --- the remote --------------------------------------------------------------------

    def push(self, expect_new=True):
        """Push now (pulling in between when rejected, never forcing); True if it worked.

        `pushed_new` then says whether a new revision reached the remote: git says so
        by the upstream branch moving (`pushed_rev` is where to); for another DVCS it
        is `expect_new` (commits were made since the last push)."""
        try:
            return self.push_now(expect_new)
        finally:
            self.underway(None)

    def push_now(self, expect_new):
        self.pushed_new = False
        if not self.safe("push"):
            return False
        if self.gitdir and git.head(self.folder, gitenv=self.gitenv) is None:
            return True  # no commit yet (a clone of an empty remote): nothing to push
        before = git.head(self.folder, "@{upstream}",
                          gitenv=self.gitenv) if self.gitdir else None
        if self.unpushed_files is None:  # the commits were made before this start
            self.unpushed_files = self.files_to_push(before)
        for attempt in range(1, PUSH_TRIES + 1):
            self.report.state("pushing")
            if self.unpushed_files >= underway.LONG:  # (a pull in between ended its own)
                self.underway("pushing", files=self.unpushed_files)
            try:
                self.cmd["pushcmd"].run(cwd=self.folder, cancel=self.push_cancel)
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
        self.unpushed_files = 0
        if self.notes_owed:  # the remote was away when a description was given
            self.notes_owed = not gitnotes.push(self.folder, gitenv=self.gitenv)
        after = git.head(self.folder, "@{upstream}",
                         gitenv=self.gitenv) if self.gitdir else None
        self.pushed_new = after != before if after is not None else expect_new
        self.pushed_rev = os.fsdecode(after) if after else None
        return True

    def files_to_push(self, upstream):
        """How many files the commits the remote lacks change (git: one diff of two trees;
        with no upstream, every file of HEAD); 0 when it cannot say (another DVCS)."""
        if not self.gitdir:
            return 0
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-only", os.fsdecode(upstream),
                "HEAD") if upstream else ("ls-tree", "-r", "-z", "--name-only", "HEAD")
        out = git.git(self.folder, *args, check=False, gitenv=self.gitenv)
        return out.count(b"\0") if out else 0

    def unpushed(self):
        """How many commits the remote lacks, read from git (docs/protocol.md, `unpushed`);
        None with another DVCS, which cannot say (the committer counts its commits)."""
        counted = git.unpushed(self.folder, gitenv=self.gitenv) if self.gitdir else None
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
        rev = git.head(self.folder, "@{upstream}", gitenv=self.gitenv) if self.gitdir else None
        return os.fsdecode(rev) if rev else None

    def remote_url(self):
        try:
            return self.cmd["remoteurlcmd"].output(cwd=self.folder)
        except CommandFailed as e:
            log.warning("%s", e)
            return ""

    def keep_leftover_writes(self):
        """Bytes a killed write of ours (a pull, restore or settle) had moved aside: gone
        if history has them, else kept as a conflict copy. -> the copies."""
        in_history = None
        if self.gitdir:
            def in_history(temp, path):
                """Is the content of the file (a link's target) at temp a blob git has?
                Hashed by git as it reads the file (a link: here), never held whole."""
                if os.path.islink(temp):
                    target = os.fsencode(os.readlink(temp))
                    head = git.head(self.folder, gitenv=self.gitenv)
                    oid = guarded.blob_id(len(target), [target], len(head or
                                                                     "0" * 40)).encode()
                else:
                    oid = git.git(self.folder, "hash-object", "--no-filters", "--stdin-paths",
                                  data=os.fsencode(temp) + b"\n", check=False,
                                  gitenv=self.gitenv) \
                        if "\n" not in temp else None
                return bool(oid) and git.git(self.folder, "cat-file", "-e",
                                                 oid.decode().strip(), check=False,
                                                 gitenv=self.gitenv) is not None

        def copy(path):
            return copy_name(path, self.host, time.time(),
                                       lambda name: not os.path.lexists(name))
        # A copy is a conflict copy by name: the rescan commits it, status counts it.
        kept = recovery.leftover_writes(self.folder, in_history, copy, gitenv=self.gitenv)
        if self.gitdir:  # stored through its original's filters (a rule of its own) first
            for full in kept:
                rel = os.path.relpath(full, self.folder)
                copyrules.keep(self.folder, read_copy_name(rel).path, rel, gitenv=self.gitenv)
        return kept

    def run_guarded_pull(self):
        """gitpull.py's pull; True if it went well."""
        self.report.state("pulling")
        self.keep_leftover_writes()  # a restore killed while the committer ran
        if not self.merge_cleared():  # a merge left half-done by hand or by a kill
            return False
        try:
            result = self.guarded.run()
        except gitpull.Stopped:  # cut short by the stop: nothing written, nothing failed
            log.info("pull not done: the daemon is stopping (the next start pulls)")
            return False
        except gitpull.PullFailed as e:
            # A refused tree or a path not written is its own problem, with its own fix.
            self.report.failed(e.problem, e, retry="pull")
            return False
        except (CommandFailed, RuntimeError, OSError) as e:
            self.report.failed("pull", e, retry="pull")
            return False
        for problem in ("unsafe", "unwritten"):
            self.report.succeeded(problem)
        self.merged = result["merge"]
        self.index_mine()  # gitpull wrote the index with stage 0 entries only
        # An empty remote is where every sync begins: waited on, not a failure.
        self.report.status(waiting="the remote is empty: waiting for the first change"
                           if result.get("empty") else None)
        self.merge_committed(result["merged"], result["beside"])
        self.report.succeeded("pull")
        return True

    def run_pull(self):
        """pullcmd, then the merge finished if it stopped on conflicts; True if all went well."""
        if self.guarded is not None:
            return self.run_guarded_pull()
        for attempt in (1, 2):
            self.report.state("pulling")
            try:
                output = self.cmd["pullcmd"].run(cwd=self.folder).output
                error = None
            except CommandFailed as e:
                error = e
            if error is not None and self.unrelated(error):
                # Two machines that began on an empty remote: merged like any other
                # divergence (both versions kept below), never refused again and again.
                try:
                    output = self.unrelated(error).run(cwd=self.folder).output
                    error = None
                except CommandFailed as e:
                    error = e
            if self.gitdir and finish.merging(self.gitdir):
                return self.finish_merge()
            if error is None:
                self.pull_leftovers = {}
                # A pullcmd's helper (autosync-hgmerge) that merged and kept both versions.
                self.merge_committed(hg.reported(output))
                self.report.succeeded("pull")
                return True
            # What the failed pull wrote is its own, never a change of the user's.
            said = self.pulled_leftovers(error)
            # Local changes the merge would overwrite: commit them and try once more.
            if attempt == 1 and self.commit([], rescan=True, note="changes made before a pull"):
                continue
            self.report.failed("pull", said, retry="pull")
            return False

    def pulled_leftovers(self, error):
        """git: after pullcmd failed, the files it left (vcs/pullleftovers.py) put back as
        HEAD has them, those that cannot be kept out of commits; -> the failure as said."""
        if not self.gitdir:
            return error
        try:
            found = pullleftovers.find(self.folder, self.gitenv)
            kept = pullleftovers.put_back(self.folder, found, self.gitenv)
        except (OSError, RuntimeError, ValueError) as e:
            log.warning("what the failed pull left in the folder was not looked at: %s", e)
            return error
        if found:
            log.warning("the pull failed and had written %d file(s) of the remote's version "
                        "(whole or cut short): %d put back as the last commit has them%s",
                        len(found), len(found) - len(kept), "" if not kept else
                        "; kept out of every commit until a pull works: " +
                        ", ".join(sorted(kept)[:10]))
        self.pull_leftovers.update({rel: pullleftovers.signature(self.folder, rel)
                                    for rel in kept})
        if not self.pull_leftovers:
            return error
        return "%s; %d file(s) it left half-written are kept out of commits (%s)" % (
            error, len(self.pull_leftovers), ", ".join(sorted(self.pull_leftovers)[:3]))

    def leftovers_kept(self):
        """The failed pull's files kept out of commits: those not changed since (a change
        since is the user's)."""
        for rel, seen in list(self.pull_leftovers.items()):
            if pullleftovers.signature(self.folder, rel) != seen:
                del self.pull_leftovers[rel]
        return set(self.pull_leftovers)

    def unrelated(self, error):
        """pullcmd with --allow-unrelated-histories, when git refused to merge unrelated
        histories and pullcmd is one `git pull` line; else None."""
        text = self.cmd["pullcmd"].text.strip()
        if (self.gitdir and "unrelated histories" in str(error) and "\n" not in text
                and text.startswith("git pull") and not SHELL_CHARS.intersection(text)):
            return Template("pullcmd", text + " --allow-unrelated-histories", self.gitenv)
        return None

    def pull(self):
        """Pull now; -> the reply to a pull request."""
        if not self.safe("pull"):
            return {"ok": False, "pulled": False, "error": self.blocked}
        self.settle_index()
        self.report.event("pull-started")
        before = git.head(self.folder, gitenv=self.gitenv) if self.gitdir else None
        self.merged = None
        try:
            ok = self.run_pull()
        finally:
            self.underway(None)
        # guarded: every write the pull made went through vcs/gitpull.py's guarded writer
        # (no command of the user's ran): the watcher's events of the pull are a full
        # account of what changed, and it stages them instead of asking for a rescan.
        self.report.event("pull-finished", ok=ok, guarded=self.guarded is not None)
        self.report.pulled(ok)
        if ok:
            # git can say what came in; for another DVCS the event says only that it ran.
            after = git.head(self.folder, gitenv=self.gitenv) if self.gitdir else None
            names = git.changed_names(self.folder, before, after,
                                      gitenv=self.gitenv) if self.gitdir else []
            news = git.pulled(self.folder, before, after, names,
                              gitenv=self.gitenv) if self.gitdir else {}
            if self.fsmonitor:
                self.fsmonitor.pulled(names)
            self.report.event("pulled", **news)
            elsewhere = self.merged_elsewhere(before, after)
            for c in elsewhere:
                log.warning("conflict in %s (merged on %s): both versions kept, the other "
                            "as %s", c["path"], c["host"], c["copy"])
            self.announce(elsewhere)
            if self.gitdir and not elsewhere and (after and not before or
                                                  any(map(read_copy_name, names))):
                self.count_conflicts()  # a copy pulled in, or settled on another machine
            if self.gitdir:  # descriptions of pushed commits, from every machine
                try:
                    gitnotes.fetch(self.folder, gitenv=self.gitenv)
                except RuntimeError as e:
                    log.warning("descriptions (git notes) not merged: %s", e)
        # conservative: the watcher set aside the events of the pull; once it has read
        # every event up to pull-finished it sends the paths they name (guarded) or asks
        # for a rescan (any other pullcmd): a rescan here could run before an edit made
        # the instant the pull ended. With no watcher connected, the rescan at its start
        # does the same.
        result = {"ok": ok, "pulled": ok}
        if not ok and self.guarded is not None and self.guarded.cancel.cancelled:
            result.update(stopping=True, error="the daemon is stopping before the pull was made")
        elif not ok:
            result["error"] = self.report.last_error()
        return result
