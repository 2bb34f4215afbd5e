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
import re
import stat
import subprocess
import time

from autosync.vcs import git, guarded
from autosync.vcs.commands import CommandFailed, environment
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


TEMP_NAME = re.compile(rb"\.autosync-write\.[0-9]+\.[0-9]+~\Z")


def _private(where):
    """The journal folder is ours alone: a real folder, owned by us, mode 0700. A
    folder anyone else could write to (or a synced one, carried in from elsewhere)
    could name any file: its entries are not followed."""
    try:
        st = os.lstat(where)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        log.warning("%s is not a private folder of this user (mode 0700): its entries are "
                    "left alone", where)
        return False
    return True


def _inside_folder(path, top):
    """Is path (bytes, absolute) a temporary-file or file name directly in a real folder
    under top (bytes, ending in "/"), written plainly: no `..`, no `.`, no symlinked
    folder on the way?"""
    if not path.startswith(top) or b"/../" in path + b"/" or b"/./" in path + b"/" or \
            b"//" in path:
        return False
    folder = os.path.dirname(path)
    return os.path.realpath(folder) == folder and (folder + b"/").startswith(top)


def leftover_writes(root, in_history, copy_name):
    """Guarded writes cut off by a killed process (guarded.Journal, guarded.Plan).

    A swap's or a removal's entry: between its swap and its swap back, the user's bytes
    were under the temporary name. For each entry under `root` of a process no longer
    alive: a temporary file that holds the new version (its blob id is in the entry),
    a beginning of it, or a content `in_history(temp, path)` knows, is removed; any
    other content is kept beside its path, at `copy_name(path)` (absolute paths; a
    conflict copy's name), never over a file. A plan's temporary files that no entry
    names held pulled versions only, and are removed.

    Only entries in a private journal folder (ours, 0700) are followed, and only those
    whose paths are plain names inside `root`; anything else is one warning, and left
    alone. -> the paths of the copies kept."""
    where = guarded.journal_dir()
    if not _private(where):
        return []
    try:
        names = os.listdir(where)
    except OSError:
        return []
    top = os.fsencode(os.path.realpath(root)).rstrip(b"/") + b"/"
    kept, plans, named = [], [], set()
    for name in sorted(names):
        pid = name.split(".")[0]
        journal = os.path.join(where, name)
        if name.endswith(".plan"):
            if pid.isdigit() and not _alive(int(pid)):
                plans.append(journal)
            continue
        entry = guarded.read_journal(journal)
        if entry:
            named.add(entry[0])
        if not pid.isdigit() or _alive(int(pid)):
            continue
        if entry and not entry[0].startswith(top):
            continue  # another folder's: its own committer sees to it
        if entry and not (_inside_folder(entry[0], top) and _inside_folder(entry[1], top) and
                          os.path.dirname(entry[0]) == os.path.dirname(entry[1]) and
                          TEMP_NAME.match(os.path.basename(entry[0]))):
            log.warning("journal entry %s names paths it may not (outside %s, or not a "
                        "temporary file of ours): left alone", journal, root)
            continue
        if entry and not _keep_leftover(entry, in_history, copy_name, kept):
            continue  # could not be kept now: the entry stays for the next start
        named.discard(entry[0] if entry else None)
        os.unlink(journal)
    for plan in plans:
        temps = guarded.read_plan(plan)
        if temps and not temps[0].startswith(top):
            continue
        for temp in temps:
            if temp in named or not (_inside_folder(temp, top) and
                                     TEMP_NAME.match(os.path.basename(temp))):
                continue
            try:
                if stat.S_ISREG(os.lstat(temp).st_mode) or stat.S_ISLNK(os.lstat(temp).st_mode):
                    os.unlink(temp)
                    log.info("removed %s, a pulled version a cut-off write left", temp)
            except FileNotFoundError:
                pass
        os.unlink(plan)
    return kept


def _prefix_of(temp, oid, folder):
    """Does the file temp hold the blob oid, or a beginning of it (a write cut off by a
    power loss)? The blob is read from git in chunks."""
    proc = subprocess.Popen(("git", "cat-file", "blob", oid), cwd=folder, env=environment(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        with open(os.open(temp, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            while True:
                mine = f.read(guarded.CHUNK)
                if not mine:
                    return True
                if proc.stdout.read(len(mine)) != mine:
                    return False
    except OSError:
        return False
    finally:
        proc.stdout.close()
        proc.kill()
        proc.wait()


def _keep_leftover(entry, in_history, copy_name, kept):
    temp, path = os.fsdecode(entry[0]), os.fsdecode(entry[1])
    try:
        st = os.lstat(temp)
    except FileNotFoundError:
        return True  # the write had finished, or not begun
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return True  # not ours (a folder of that name would never be a temporary file)
    if entry[2] and stat.S_ISREG(st.st_mode) and \
            _prefix_of(temp, entry[2].decode(), os.path.dirname(temp)):
        os.unlink(temp)
        log.info("removed %s, the new version of a write that was cut off", temp)
        return True
    if in_history is not None and in_history(temp, path):
        os.unlink(temp)
        log.info("removed %s, left by a write that was cut off: its content is in history",
                 temp)
        return True
    copy = copy_name(path)
    try:
        if not guarded.put_where_nothing_is(guarded.AT_FDCWD, temp, guarded.AT_FDCWD, copy):
            raise FileExistsError(errno.EEXIST, "the copy's name is taken")
    except OSError as e:
        log.error("could not keep %s (left by a write that was cut off) as %s: %s; it "
                  "stays where it is", temp, copy, e.strerror)
        return False
    log.warning("kept bytes that a cut-off write had moved aside, which are in no "
                "version: %s", copy)
    kept.append(copy)
    return True
