"""Safety checks before the committer touches the repository.

* `Folder`: is the synced folder still the one we started on? A folder that
  was deleted, unmounted or replaced by another folder, or that lost its DVCS
  metadata, must not be committed: every file would look deleted. Another
  clone of the same remote put in its place (`rm -rf`, then `git clone`) is
  taken on, once the clone is complete.
* `clear_stale_lock`: remove a git `index.lock` that no live process holds.
* `leftover_commands`: DVCS commands a killed committer started, still running.
* `leftover_writes`: bytes a killed guarded write had moved aside, kept.

Processes are found through /proc (Linux), only the user's own are readable.
"""
import errno
import logging
import os
import stat
import subprocess
import time

from autosync.core import git, guarded
from autosync.core.commands import CommandFailed, environment
from autosync.core.paths import find_marker

log = logging.getLogger("autosync.recovery")


def _identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def remote_of(template):
    """A Folder's `remote`: remoteurlcmd (a commands.Template) run in a folder -> its
    output, "" when it fails; None when there is no such command."""
    if template is None or template.empty:
        return None

    def remote(path):
        try:
            return template.output(cwd=path, timeout=10)
        except (CommandFailed, OSError):
            return ""
    return remote


def _git_dir(marker):
    """The git metadata folder a `.git` marker stands for (a folder, or a file naming it)."""
    if os.path.isdir(marker):
        return marker
    try:
        with open(marker) as f:
            line = f.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(os.path.dirname(marker), line[len("gitdir:"):].strip())


def _being_made(folder, marker):
    """A git clone or checkout at work: its index locked, or a commit checked out and no
    index written yet (a clone between its fetch and its checkout: a commit then would
    record every file as deleted)."""
    if os.path.basename(marker) != ".git":
        return False
    gitdir = _git_dir(marker)
    if gitdir is None:
        return True  # a .git file being written
    if git.index_locked(gitdir):
        return True
    if os.path.exists(os.path.join(gitdir, "index")):
        return False
    head = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=folder,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, env=environment())
    return head.returncode == 0


GONE = ("the synced folder %s is gone (moved away, deleted or unmounted): nothing is "
        "committed until it is back; syncing starts again by itself then")


class Folder:
    """The synced folder as it was at start-up; `problem()` says what changed since.

    `remote(path)` says which remote a folder's repository syncs with (see
    remote_of): a folder put in place of ours is taken on when it is another
    clone of that remote. Without it only our own folder (moved away and back)
    is. `set_away()` is for whoever knows better (the watcher): while the
    folder is away that is the problem, and when it is back the folder is
    looked at in full, remote included, since a folder made anew may get the
    old one's inode number."""

    def __init__(self, path, remote=None):
        self.path = path
        self.remote = remote
        self.identity = _identity(path)
        self.marker = find_marker(path)
        self.url = self.url_of(path)
        self.away = None
        self.doubt = False  # it was away: the same inode number proves nothing

    def url_of(self, path):
        return (self.remote(path) or "").strip() if self.remote is not None else ""

    def set_away(self, problem):
        """The folder is away (`problem` says so), or back (None)."""
        self.away = problem
        self.doubt = self.doubt or bool(problem)

    def examine(self):
        """-> (verdict, line): "ours" (the folder we started on, or another clone of the
        same remote, taken on from now on), "away" (not there, without its metadata, or
        being made: look again later), "foreign" (another folder: never ours)."""
        try:
            identity = _identity(self.path)
        except OSError:
            return "away", GONE % self.path
        same = identity == self.identity
        if same and not self.doubt:
            if self.marker is None or not os.path.lexists(self.marker):
                return "away", "the repository metadata %s is gone" % (self.marker
                                                                       or "(none found)")
            return "ours", None
        replaced = "the synced folder %s was replaced by another folder" % self.path
        if not os.path.isdir(self.path):
            return "foreign", replaced + " (it is not a folder now)"
        marker = find_marker(self.path)
        if marker is None:
            try:
                empty = not os.listdir(self.path)
            except OSError:
                empty = True
            if empty:  # an unmounted disk's mount point, or a clone about to begin
                return "away", GONE % self.path
            return "foreign", replaced + ", one that holds no repository"
        if _being_made(self.path, marker):
            return "away", ("a new folder at %s is being made (a clone or a checkout at "
                            "work): waiting for it" % self.path)
        url = self.url_of(self.path)
        if not (same and url == self.url) and (not self.url or url != self.url):
            return "foreign", "%s, %s" % (replaced, (
                "not a clone of %s (its remote: %s)" % (self.url, url or "none")
                if self.url else "and ours had no remote to compare it with"))
        if not same:
            log.warning("the synced folder %s is another clone of %s now: syncing it",
                        self.path, self.url)
        self.identity, self.marker, self.doubt = identity, marker, False
        return "ours", None

    def problem(self):
        """None while it is safe to commit, else one line saying why not."""
        if self.away:
            return self.away
        verdict, line = self.examine()
        return None if verdict == "ours" else line


def _pids():
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            yield int(name)


def _link(pid, what):
    try:
        return os.readlink("/proc/%d/%s" % (pid, what))
    except OSError:
        return None


def _inside(path, top):
    return path is not None and (path == top or path.startswith(top.rstrip("/") + "/"))


def lock_holders(lock, top):
    """Live processes that have `lock` open, or git processes working inside `top`."""
    lock = os.path.realpath(lock)
    top = os.path.realpath(top)
    found = []
    for pid in _pids():
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue  # gone, or another user's (which cannot write our repository)
        if any(_link(pid, "fd/" + fd) == lock for fd in fds):
            found.append(pid)
        elif comm.startswith("git") and _inside(_link(pid, "cwd"), top):
            found.append(pid)
    return found


def clear_stale_lock(lock, top):
    """Remove `lock` if no live process holds it. -> True removed, False held, None absent."""
    if not os.path.lexists(lock):
        return None
    holders = lock_holders(lock, top)
    if holders:
        log.info("%s is held by live process(es) %s: leaving it", lock,
                 ", ".join(map(str, holders)))
        return False
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return None
    log.warning("removed a stale %s that no live process held (left by a killed git)", lock)
    return True


def leftover_commands(folder):
    """PIDs of commands a previous committer started in folder (AUTOSYNC_DAEMON=1) still running."""
    folder = os.path.realpath(folder)
    found = []
    for pid in _pids():
        if not _inside(_link(pid, "cwd"), folder):
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"AUTOSYNC_DAEMON=1" in env:
            found.append(pid)
    return found


def wait_for_leftovers(folder, timeout, quiet_scans=3):
    """Let a killed committer's last command (a pull, a commit) finish before we start.

    Done after `quiet_scans` empty scans in a row: a process in the middle of
    exec() (a shell starting git) can be missed by one scan.
    -> None if there were none, else True once they ended (False: still running)."""
    deadline = time.monotonic() + timeout
    told, quiet = False, 0
    while quiet < quiet_scans and time.monotonic() < deadline:
        pids = leftover_commands(folder)
        if pids and not told:
            log.warning("waiting for command(s) %s left running by a killed committer",
                        ", ".join(map(str, pids)))
            told = True
        quiet = 0 if pids else quiet + 1
        time.sleep(0.05)
    if quiet < quiet_scans:
        log.error("commands left by a killed committer still run after %.0f s; going on",
                  timeout)
    return (quiet >= quiet_scans) if told else None


def _alive(pid):
    return os.path.exists("/proc/%d" % pid)


def leftover_writes(root, in_history, copy_name):
    """Guarded writes cut off by a killed process (guarded.Journal): between its swap
    and its swap back, the user's bytes were under the temporary name.

    For each entry under `root` of a process no longer alive: a temporary file whose
    content `in_history(data)` knows is removed; any other content is kept beside
    its path, at `copy_name(path)` (absolute paths; a conflict copy's name), never
    over a file. -> the paths of the copies kept."""
    where = guarded.journal_dir()
    try:
        names = os.listdir(where)
    except OSError:
        return []
    top = os.fsencode(os.path.realpath(root)).rstrip(b"/") + b"/"
    kept = []
    for name in sorted(names):
        pid = name.split(".")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        journal = os.path.join(where, name)
        entry = guarded.read_journal(journal)
        if entry and not entry[0].startswith(top):
            continue  # another folder's: its own committer sees to it
        if entry and not _keep_leftover(os.fsdecode(entry[0]), os.fsdecode(entry[1]),
                                        in_history, copy_name, kept):
            continue  # could not be kept now: the entry stays for the next start
        os.unlink(journal)
    return kept


def _keep_leftover(temp, path, in_history, copy_name, kept):
    try:
        st = os.lstat(temp)
    except FileNotFoundError:
        return True  # the write had finished, or not begun
    if stat.S_ISLNK(st.st_mode):
        data = os.fsencode(os.readlink(temp))
    elif stat.S_ISREG(st.st_mode):
        with open(temp, "rb") as f:
            data = f.read()
    else:
        return True  # not ours (a folder of that name would never be a temporary file)
    if in_history is not None and in_history(data):
        os.unlink(temp)
        log.info("removed %s, left by a write that was cut off: its content is in history",
                 temp)
        return True
    copy = copy_name(path)
    try:
        try:
            guarded.rename(guarded.AT_FDCWD, temp, guarded.AT_FDCWD, copy,
                           guarded.RENAME_NOREPLACE)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            os.link(temp, copy, follow_symlinks=False)  # never replaces either
            os.unlink(temp)
    except OSError as e:
        log.error("could not keep %s (left by a write that was cut off) as %s: %s; it "
                  "stays where it is", temp, copy, e.strerror)
        return False
    log.warning("kept bytes that a cut-off write had moved aside, which are in no "
                "version: %s", copy)
    kept.append(copy)
    return True
