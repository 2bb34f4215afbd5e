"""One synced folder's DVCS operations: commit, merge, push, pull, built here from parts
with one job each, and the one Repository the committer asks.

Runs the configured command strings (any DVCS) plus the few git-only
safeguards (vcs/pull/finish.py, vcs/folder.py, vcs/recovery.py). It decides nothing about when: the
committer calls it from its worker thread and hears back through `report`,
a Report (below; reports.Reports in the committer, tests/fakes.Reports in tests).

The parts, each handed what it needs at its construction (no part calls another
through the repository):

* state.py: what every part asks (safe, blocked, the long step under way, HEAD, the
  index lock) and the values they share;
* index.py: the index brought up to date, no merge left half-done, the conflict copies
  told and counted;
* commit.py: a batch staged and committed; our last commit reworded;
* pull.py: the engine chosen (vcs/pull/), the pull run and what it brought told; the
  files a failed pullcmd left;
* push.py: the push, handed the pull to run between tries; what the remote lacks.

The git environment (vcs/remote.py's git_environment_for) is made here, once.
"""
import logging
import shlex
import typing

from autosync.committer import fsmonitor, quickcommit
from autosync.committer.repository import pull as pulling
from autosync.committer.repository.commit import Commit
from autosync.committer.repository.index import Index
from autosync.committer.repository.push import Push
from autosync.committer.repository.state import State
from autosync.committer.staging import Staging
from autosync.committer.stillwritten import StillWritten
from autosync.core.config import shipped_form
from autosync.vcs import excludes, git, recovery
from autosync.vcs.commands import SHELL_CHARS, Template
from autosync.vcs.folder import Folder, remote_of
from autosync.vcs.pull import finish
from autosync.vcs.remote import git_environment_for

log = logging.getLogger("autosync.repository")

LEFTOVER_WAIT = 120.0  # seconds a killed committer's last command may take to finish


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


class Repository:
    """Built whole here, its parts handed in at their construction: the git environment
    (self.gitenv), git's fsmonitor (self.fsmonitor, or None), the command strings that
    run with it, and the parts above. The committer asks the repository, never its parts."""

    def __init__(self, cfg, report):
        self.cfg, self.folder = cfg, cfg.path
        self.report = report
        # The original's git strings run as the shipped ones, which mean the same
        # (config.ORIGINAL_GIT_COMMANDS) and take the fast paths.
        texts = {name: shipped_form(name, text) for name, text in cfg.commands.items()}
        taken = sorted(n for n, t in cfg.commands.items() if texts[n] != t)
        if taken:
            log.info("the original's %s run as the shipped one%s (the same meaning): %s",
                     "command string is" if len(taken) == 1 else "command strings are",
                     "" if len(taken) == 1 else "s", ", ".join(taken))
        gitdir = git.git_dir(self.folder)  # None: not git, no built-in resolution
        # Every git command we run (startupcmd above all) leaves out what the watcher does.
        excludes_file = excludes.Excludes(cfg, gitdir, cfg.socket + ".exclude") \
            if gitdir else None
        self.gitenv = git_environment_for(cfg, gitdir, excludes_file, remote_of(
            Template("remoteurlcmd", texts["remoteurlcmd"]) if "remoteurlcmd" in texts
            else None))
        # The folder is the whole working tree (not a folder inside one): git's lists of
        # what is staged (--relative) then speak of all that a commit records.
        self.at_top = bool(gitdir) and git.is_top(self.folder, gitenv=self.gitenv)
        # The commit's command strings are plain git add/rm/commit lines, which make no
        # conflict entries in the index (see Index.merge_cleared).
        own_commands = all(plain_git(texts[name], STAGING_COMMANDS) for name in
                           ("addcmd", "rmcmd", "modifycmd", "movecmd", "startupcmd",
                            "statuscmd", "commitcmd"))
        # git's fsmonitor answered from the watcher's batches (committer/fsmonitor.py), or
        # None; the commit's staging commands are made with it.
        self.fsmonitor = fsmonitor.monitor_for(cfg, gitdir, self.at_top,
                                               own_commands, self.gitenv)
        self.cmd = {name: fsmonitor.template(name, text, self.gitenv, self.fsmonitor)
                    for name, text in texts.items()}
        # What the folder was at start: a vanished or replaced one is never committed.
        # Another clone of the same remote put in its place is taken on (State.safe).
        self.where = Folder(self.folder, remote_of(self.cmd.get("remoteurlcmd")), self.gitenv)
        self.staging = Staging(self.folder, self.cmd, gitdir, excludes_file, report,
                               self.gitenv)
        # Files some process holds open for writing: left out of every commit until closed.
        self.still = StillWritten(self.folder, report)
        # A plain `git pull` is done by vcs/pull/git.py: it never overwrites a write it did
        # not see.
        self.git_pull = pulling.engine(self.folder, gitdir, cfg.hostname, self.cmd["pullcmd"],
                                       self.gitenv, self.fsmonitor)
        # git: a batch committed from its changed paths, without rewriting the whole index
        # (committer/quickcommit.py; only with the shipped command strings, else never taken).
        self.quick = quickcommit.QuickCommit(self.folder, gitdir, self.cmd, self.at_top,
                                             self.gitenv) if gitdir else None
        self.state = State(cfg, report, gitdir, self.gitenv, excludes_file, self.where,
                           self.staging, self.fsmonitor, self.git_pull)
        self.index = Index(self.state, self.cmd, self.quick)
        leftovers = pulling.Leftovers(self.state)
        self.commits = Commit(self.state, self.index, self.cmd, self.quick, self.still,
                              own_commands, self.at_top, kept_out=leftovers.kept)
        self.pulls = pulling.Pull(self.state, self.index, leftovers, self.cmd,
                                  commit=self.commits.commit)
        self.pushes = Push(self.state, self.cmd, pull=self.pulls.pull)
        if self.fsmonitor:
            self.fsmonitor.publish()

    # --- what the committer reads ------------------------------------------------------

    @property
    def blocked(self):
        """Why nothing may be committed now, or None."""
        return self.state.blocked

    @property
    def excludes(self):
        """The excludes file git reads (vcs/excludes.py), or None (not git)."""
        return self.state.excludes

    @property
    def commit_error(self):
        """Why the last commit failed or left something out, or None."""
        return self.commits.commit_error

    @property
    def pushed_new(self):
        """The last push took a new revision to the remote."""
        return self.pushes.pushed_new

    @property
    def pushed_rev(self):
        """git: the upstream revision after the last push."""
        return self.pushes.pushed_rev

    def stop(self):
        """The daemon stops: a git pull's fetch is killed and the pull ends before it
        writes anything (one writing already runs to its end); a push under way is
        killed. Safe in a signal handler."""
        if self.git_pull is not None:
            self.git_pull.cancel.cancel()
        self.pushes.push_cancel.cancel()

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

    # --- what the committer asks -------------------------------------------------------

    def safe(self, op):
        """May the repository be touched? Says why not once, and checks again later."""
        return self.state.safe(op)

    def recover(self):
        """At start: let a killed committer's last command finish, and undo its damage."""
        recovery.wait_for_leftovers(self.folder, LEFTOVER_WAIT)
        self.state.clear_lock()
        self.index.settle_index()  # a quick commit's index entries a killed daemon still owed
        # Whether or not a leftover was seen: a killed pull may have died before we
        # started. A recorded merge (MERGE_HEAD) is finished by merge_cleared instead.
        # (No commit yet, as in a clone of an empty remote: no pull can have run.)
        gitdir = self.state.gitdir
        if gitdir and not finish.merging(gitdir) and self.head():
            try:
                finish.undo_killed_pull(self.folder, gitenv=self.gitenv)
            except RuntimeError as e:
                log.error("%s", e)
        self.pulls.keep_leftover_writes()
        if gitdir:
            self.index.count_conflicts()

    def commit(self, changes, rescan=False, note=None, text=None):
        """Stage and commit one batch (`text`: the user's description); True if a commit
        was made."""
        return self.commits.commit(changes, rescan, note, text)

    def amend(self, message, rev):
        """Reword our last commit, which is not pushed, to `message` (commit.py)."""
        return self.commits.amend(message, rev)

    def describe_pushed(self, rev, text):
        """Put `text` on pushed commit `rev` as a git note (push.py)."""
        return self.pushes.describe_pushed(rev, text)

    def settle_index(self):
        """A quick commit's index entries brought up to date (index.py)."""
        self.index.settle_index()

    def head(self):
        """The revision checked out (git: hex digits); None with another DVCS."""
        return self.state.head()

    def pull(self):
        """Pull now; -> the reply to a pull request (pull.py)."""
        return self.pulls.pull()

    def push(self, expect_new=True):
        """Push now, pulling in between when rejected (push.py); True if it worked."""
        return self.pushes.push(expect_new)

    def unpushed(self):
        """How many commits the remote lacks (git), or None (push.py)."""
        return self.pushes.unpushed()

    def upstream(self):
        """The upstream branch's revision as our last push or fetch left it (git), or None."""
        return self.pushes.upstream()

    def remote_url(self):
        return self.pushes.remote_url()
