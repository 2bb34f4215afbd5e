"""What a killed committer left behind, cleared or kept before it touches the repository again.

* `clear_stale_lock`: remove a git `index.lock` that no live process holds.
* `leftover_commands`: DVCS commands a killed committer started, still running.
* `leftover_writes`: bytes a killed guarded write had moved aside, kept
  (fs/leftovers.py, with git's check of the new version handed in).

Processes are found through /proc (Linux), only the user's own are readable.
(Whether the synced folder is still ours: vcs/folder.py.)
"""
import logging
import os
import subprocess
import time

from autosync.fs import guarded, leftovers
from autosync.vcs import daemon_identity
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


def leftover_writes(root, in_history, copy_name, gitenv=PLAIN):
    """fs/leftovers.py's leftover_writes, told by git whether a temporary file holds the
    new version its journal entry names (or a beginning of it)."""
    return leftovers.leftover_writes(
        root, in_history, copy_name,
        new_version=lambda temp, oid: _prefix_of(temp, oid, os.path.dirname(temp),
                                                 gitenv=gitenv))


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
