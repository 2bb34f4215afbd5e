"""Safety checks before the committer touches the repository.

* `Folder`: is the synced folder still the one we started on? A folder that
  was deleted, unmounted or replaced (another inode), or that lost its DVCS
  metadata, must not be committed: every file would look deleted.
* `clear_stale_lock`: remove a git `index.lock` that no live process holds.
* `leftover_commands`: DVCS commands a killed committer started, still running.

Processes are found through /proc (Linux), only the user's own are readable.
"""
import logging
import os
import time

from autosync.paths import find_marker

log = logging.getLogger("autosync.recovery")


def _identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


class Folder:
    """The synced folder as it was at start-up; `problem()` says what changed since."""

    def __init__(self, path):
        self.path = path
        self.identity = _identity(path)
        self.marker = find_marker(path)

    def problem(self):
        """None while it is safe to commit, else one line saying why not."""
        try:
            identity = _identity(self.path)
        except OSError:
            return "the synced folder %s is gone (deleted, moved or unmounted)" % self.path
        if identity != self.identity:
            return ("the synced folder %s was replaced by another folder (unmounted, or "
                    "deleted and created again)" % self.path)
        if self.marker is None or not os.path.lexists(self.marker):
            return "the repository metadata %s is gone" % (self.marker or "(none found)")
        return None


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
