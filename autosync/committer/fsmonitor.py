"""git's fsmonitor, answered by the suite: git skips the files the watcher says are unchanged.

At 100,000 files and more, every git command that reads the index lstat()s every
file in it. With core.fsmonitor set, git asks a hook instead which paths may have
changed since the token stored in the index (protocol version 2), and looks only at
those. The committer knows: every batch of the watcher names what changed. The
hook (committer/fsmonitor_hook.py, standalone for its start-up) reads the state file the
BatchJournal writes; the token is the number of batches received in this run, never a
clock.

Safety, which decides where the setting goes:
* Only the commit's staging commands get it (addcmd, rmcmd, modifycmd, movecmd,
  startupcmd, commitcmd, when all are plain git lines) and the git pull's (vcs/pull/git.py)
  `update-index`: they write the index but never the working tree. A file answered
  unchanged too early (its batch not sent yet) is staged by its own batch, which
  follows with a higher number.
* Never a command that writes the working tree from the index's view of it (a
  user's pullcmd, `git reset --merge`, checkout): it could take a file written an
  instant ago for unchanged and overwrite it. Those run without the setting, and
  git then ignores the index's fsmonitor data. Nor a command under which git runs
  hooks of the user's (commit hooks inherit the environment) or git-annex.
* Every rescan batch (protocol.RESCANS), every rescan of the committer's own (a
  sync, a retry) and folders without a watch make older tokens answer `/`.
* Tracked files the watcher never reports (ignored by a .gitignore added after
  them, ignorepath, editors' files) are named in every answer.
"""
import logging
import os
import shlex
import subprocess
import sys
import threading

from autosync.vcs import daemon_identity, git
from autosync.vcs.git_environment import PLAIN
from autosync.vcs.commands import Template, environment

log = logging.getLogger("autosync.fsmonitor")

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fsmonitor_hook.py")
# fsmonitor = auto: on from this many files in the index. Below it the hook's start-up
# costs more than the lstat()s it saves, and end to end the other machine's pull (its
# index update runs the hook) loses what the commit gains (the figures:
# tests/benchmarks/JOURNAL.md, "git's fsmonitor answered by the product").
AUTO_FROM = 100_000
# Paths remembered (the state file is written whole at every batch); beyond, older
# tokens answer "/": git looks at every file once, which is only slower.
LIMIT = 20_000
# The commit's command strings that get the setting (when all of them are plain git).
STAGING = ("addcmd", "rmcmd", "modifycmd", "movecmd", "startupcmd", "commitcmd")
# git runs these under the commands that get the setting, with its environment: a
# user's hook there could run any git command (checkout, stash) with the setting.
HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit",
         "reference-transaction", "post-index-change")


def leaves_daemon_alone(path):
    """Does the hook end at once under the daemon's commands, as the shipped post-commit
    does (its first command: daemon_identity.HOOK_EXIT)?"""
    try:
        with open(path, "rb") as f:
            lines = f.read(4096).decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    commands = [l.strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]
    return bool(commands) and commands[0] == daemon_identity.HOOK_EXIT


def hook_command(where):
    """core.fsmonitor's value: git runs it through the shell, so each word is quoted.
    The interpreter by its full name (a pyenv shim costs 60 ms per run); -I -S: no
    site packages, no user paths."""
    return " ".join(shlex.quote(w) for w in (sys.executable, "-I", "-S", HOOK, where))


def token(run, seq):
    return "autosync:%s:%d" % (run, seq)


class BatchJournal:
    """What the hook answers from: the batches received, numbered, written to `where`.

    received() runs on the socket threads, write() on the worker: both under the lock."""

    def __init__(self, where, run=None):
        self.where = where
        self.run = run or os.urandom(8).hex()  # a token of an earlier run answers "/"
        self.seq = 0  # batches received (and rescans of the committer's own)
        self.floor = 0  # the oldest token still answered with paths
        self.paths = {}  # path -> the number of the last batch naming it
        self.always = set()  # tracked files the watcher never reports
        self.blind = False  # folders without a watch: every token answers "/"
        self.ignores_changed = True  # `always` must be read again (ignored_read)
        self.lock = threading.Lock()
        self.writing = threading.Lock()
        self.dirty = True

    def received(self, changes, rescan=False):
        """A batch arrived (before anything commits it)."""
        with self.lock:
            self.seq += 1
            if rescan:
                self._forget()
            for change in changes:
                for key in ("path", "src"):
                    path = change.get(key)
                    if path:
                        self.paths[path] = self.seq
                        if os.path.basename(path) == ".gitignore":
                            self.ignores_changed = True
            if len(self.paths) > LIMIT:
                self._forget()
            self.dirty = True

    def invalidate(self):
        """Everything is looked at again: the committer rescans by itself."""
        with self.lock:
            self.seq += 1
            self._forget()
            self.dirty = True

    def _forget(self):
        self.floor = self.seq
        self.paths.clear()

    def set_blind(self, blind):
        with self.lock:
            if blind != self.blind:
                self.blind, self.dirty = blind, True

    def ignored(self, paths, replace=False):
        """Tracked paths the watcher never reports: named in every answer from now on."""
        with self.lock:
            if replace:
                self.always = set(paths)
                self.ignores_changed = False
            else:
                self.always |= set(paths)
            self.dirty = True

    def state(self):
        """The state file's bytes (committer/fsmonitor_hook.py reads them)."""
        head = b"autosync-fsmonitor 1\n%s\n%d %d %d\n" % (
            self.run.encode(), self.floor, self.seq, int(self.blind))
        entries = [b"*:" + os.fsencode(p) + b"\0" for p in sorted(self.always)]
        entries += [b"%d:%s\0" % (seq, os.fsencode(p)) for p, seq in self.paths.items()
                    if p not in self.always]
        return head + b"".join(entries)

    def write(self):
        """The state file as of now, if anything changed since the last write. A batch
        received after this write gets a higher number than the token it hands out.
        (One writer at a time: an older state never replaces a newer one.)"""
        with self.writing:
            with self.lock:
                if not self.dirty:
                    return
                data, self.dirty = self.state(), False
            temp = self.where + ".new"
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with open(fd, "wb") as f:
                    f.write(data)
                os.replace(temp, self.where)
            except OSError:
                self.dirty = True  # written next time
                raise

    def remove(self):
        for name in (self.where, self.where + ".new"):
            try:
                os.unlink(name)
            except OSError:
                pass


class Monitor:
    """The fsmonitor setting for one folder (the whole working tree) and its journal."""

    def __init__(self, folder, gitdir, where, gitenv=PLAIN):
        self.folder, self.gitdir, self.gitenv = folder, gitdir, gitenv
        self.journal = BatchJournal(where)
        self.value = hook_command(where)
        hooks = git.git(folder, "config", "--path", "--get", "core.hooksPath", check=False,
                        gitenv=gitenv)
        hooks = os.fsdecode(hooks.strip()) if hooks else os.path.join(gitdir, "hooks")
        self.hooks = os.path.join(folder, hooks)  # relative: to the top of the tree
        self.excludes_seen = None
        self.reading = threading.Lock()  # publish() runs on socket threads and the worker

    def in_the_way(self):
        """Why the setting cannot be given now, or None: a hook of the user's that git
        would run with it, or git-annex (its filters run git commands of their own)."""
        for name in HOOKS:
            path = os.path.join(self.hooks, name)
            if os.access(path, os.X_OK) and not leaves_daemon_alone(path):
                return "the repository has a %s hook" % name
        if os.path.isdir(os.path.join(self.gitdir, "annex")):
            return "git-annex is in use"
        return None

    def excludes_stamp(self):
        """What git's excludes beyond the .gitignore files were, last time (info/exclude,
        the committer's excludes file): when they change, `always` is read again."""
        stamp = []
        for name in (os.path.join(self.gitdir, "info", "exclude"),
                     self.gitenv.excludes):
            try:
                st = os.stat(name) if name else None
                stamp.append(st and (st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                stamp.append(None)
        return stamp

    def read_ignored(self):
        """Tracked files that git's ignore rules (and so the watcher's) leave out."""
        stamp = self.excludes_stamp()
        if not self.journal.ignores_changed and stamp == self.excludes_seen:
            return
        out = git.git(self.folder, "ls-files", "-z", "-c", "-i", "--exclude-standard",
                      gitenv=self.gitenv)
        self.journal.ignored([os.fsdecode(p) for p in out.split(b"\0") if p], replace=True)
        self.excludes_seen = stamp

    def pulled(self, names):
        """A pull brought `names`: a .gitignore among them may ignore tracked files, and
        a file new here may be one the watcher ignores."""
        if any(os.path.basename(n) == ".gitignore" for n in names):
            self.journal.ignores_changed = True
        elif names:
            # (check-ignore refuses GIT_LITERAL_PATHSPECS, which environment() sets)
            proc = subprocess.run(
                ["git", "check-ignore", "--no-index", "-z", "--stdin"], cwd=self.folder,
                env=environment({"GIT_LITERAL_PATHSPECS": "0"}, self.gitenv),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, input=b"".join(os.fsencode(n) + b"\0" for n in names))
            if proc.returncode not in (0, 1):  # 1: none is ignored
                self.journal.ignores_changed = True  # the whole list read again instead
            found = [os.fsdecode(p) for p in proc.stdout.split(b"\0") if p]
            if found and proc.returncode == 0:
                self.journal.ignored(found)
        self.publish()

    def publish(self):
        """The state file brought up to date (the list of ignored files read again if
        need be), at once: whoever runs the hook gets the batches received. -> False
        if it could not be written."""
        with self.reading:
            try:
                self.read_ignored()
                self.journal.write()
                return True
            except (OSError, RuntimeError) as e:
                log.warning("fsmonitor state not written (git looks at every file): %s", e)
                return False

    def env(self):
        """The variables that give a git command the setting (for Template.run's env),
        the state file brought up to date first; {} when it cannot be given now."""
        why = self.in_the_way()
        if why:
            log.debug("no fsmonitor for this command: %s", why)
            return {}
        if not self.publish():
            return {}
        return self.gitenv.more_settings((("core.fsmonitor", self.value),
                                          ("core.fsmonitorHookVersion", "2")))

    def follow(self, gitdir):
        """The folder is another clone now (repository.follow_clone)."""
        self.gitdir = gitdir
        self.journal.invalidate()
        self.publish()

    def close(self):
        self.journal.remove()


class Monitored(Template):
    """A command string run with the fsmonitor setting (Monitor.env)."""

    def __init__(self, name, text, gitenv, monitor):
        super().__init__(name, text, gitenv)
        self.monitor = monitor

    def run(self, *args, cwd, check=True, timeout=None, env=None):
        return super().run(*args, cwd=cwd, check=check, timeout=timeout,
                           env={**self.monitor.env(), **(env or {})})

    def run_many(self, paths, cwd, timeout=None, env=None):
        return super().run_many(paths, cwd=cwd, timeout=timeout,
                                env={**self.monitor.env(), **(env or {})})


def index_entries(gitdir):
    """How many entries the index holds, from its header (0 if it cannot be read)."""
    try:
        with open(os.path.join(gitdir, "index"), "rb") as f:
            head = f.read(12)
    except OSError:
        return 0
    return int.from_bytes(head[8:12], "big") if head[:4] == b"DIRC" else 0


def monitor_for(cfg, gitdir, at_top, own_commands, gitenv=PLAIN):
    """The Monitor for a repository with `fsmonitor = yes` (or auto, in a tree of AUTO_FROM
    files or more, as it is at start); None where it cannot be used: not git (no
    `gitdir`), a folder inside a larger working tree (not `at_top`: the watcher sees
    only the folder), or command strings other than plain git (not `own_commands`: a
    user's command keeps its meaning). The repository makes its staging commands
    (template()) and its git pull's index update with it."""
    if cfg.fsmonitor == "no":
        return None
    if not (gitdir and at_top and own_commands):
        if cfg.fsmonitor == "yes":
            log.info("fsmonitor = yes has no effect here: it needs git, the folder to be "
                     "the whole working tree, and the shipped kind of commit commands "
                     "(plain git)")
        return None
    if cfg.fsmonitor == "auto" and index_entries(gitdir) < AUTO_FROM:
        return None
    log.info("git's fsmonitor is answered from the watcher's batches (fsmonitor = %s)",
             cfg.fsmonitor)
    return Monitor(cfg.path, gitdir, cfg.socket + ".fsmonitor", gitenv)


def template(name, text, gitenv, monitor):
    """The command string `name` as the repository runs it: with the fsmonitor setting
    (Monitored) when it is one of the commit's STAGING commands and there is a `monitor`."""
    if monitor is not None and name in STAGING:
        return Monitored(name, text, gitenv, monitor)
    return Template(name, text, gitenv)
