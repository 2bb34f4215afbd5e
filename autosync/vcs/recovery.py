"""What a killed committer left behind, cleared or kept before it touches the repository again.

* `clear_stale_lock`: remove a git `index.lock` that no live process holds.
* `leftover_commands`: DVCS commands a killed committer started, still running.
* `leftover_writes`: bytes a killed guarded write had moved aside, kept.

Processes are found through /proc (Linux), only the user's own are readable.
(Whether the synced folder is still ours: vcs/folder.py.)
"""
import errno
import logging
import os
import re
import stat
import subprocess
import time

from autosync.vcs import daemon_identity, guarded
from autosync.vcs.commands import environment
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.recovery")


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
    """PIDs of commands a previous committer started in folder still running (marked as
    the daemon's: vcs/daemon_identity.py)."""
    folder = os.path.realpath(folder)
    return [pid for pid in _pids() if _inside(_link(pid, "cwd"), folder)
            and daemon_identity.started_by_daemon(pid)]


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


def leftover_writes(root, in_history, copy_name, gitenv=PLAIN):
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
        if entry and not _keep_leftover(entry, in_history, copy_name, kept, gitenv=gitenv):
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


def _prefix_of(temp, oid, folder, gitenv=PLAIN):
    """Does the file temp hold the blob oid, or a beginning of it (a write cut off by a
    power loss)? The blob is read from git in chunks."""
    proc = subprocess.Popen(("git", "cat-file", "blob", oid), cwd=folder,
                            env=environment(gitenv=gitenv),
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


def _keep_leftover(entry, in_history, copy_name, kept, gitenv=PLAIN):
    temp, path = os.fsdecode(entry[0]), os.fsdecode(entry[1])
    try:
        st = os.lstat(temp)
    except FileNotFoundError:
        return True  # the write had finished, or not begun
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return True  # not ours (a folder of that name would never be a temporary file)
    if entry[2] and stat.S_ISREG(st.st_mode) and \
            _prefix_of(temp, entry[2].decode(), os.path.dirname(temp), gitenv=gitenv):
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
