"""How much disk the history takes: on this machine, and on the remote where that is cheap.

Shown by `status` (the committer's status field `history`; `autosync-notify
status` and `dvcs-autosync status` print it as one line). Measured with
`git count-objects -v` (what git's object store holds: packs, loose objects,
garbage; not the working tree), never on a status request: the committer's
worker measures in its idle time, at start, then at most once a minute after
commits and pulls, and after each maintenance (maintenance.Upkeep).

The remote is measured only when it is a path on this machine (a mounted
disk, `file://`): the same command in that repository. Over ssh or https it
would cost a connection each time; it is then said to be unknown, with why.
Only for git; another DVCS shows nothing.
"""
import os
import subprocess
import time

from autosync.vcs import thin
from autosync.vcs.commands import environment
from autosync.vcs.git_environment import PLAIN

MEASURE_EVERY = 60.0  # seconds at least between two measurements after work


def count_objects(git_args, cwd, gitenv=PLAIN):
    """`git count-objects -v` -> bytes of packs, loose objects and garbage; None on failure."""
    try:
        proc = subprocess.run(["git"] + git_args + ["count-objects", "-v"], cwd=cwd,
                              env=environment(gitenv=gitenv), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode:
        return None
    fields = dict(line.split(": ", 1) for line in proc.stdout.decode("utf-8", "replace")
                  .splitlines() if ": " in line)
    try:
        return 1024 * sum(int(fields.get(k, 0)) for k in ("size", "size-pack", "size-garbage"))
    except ValueError:
        return None


def remote_path(url, folder):
    """The remote's repository as a local path, when it is one; else None."""
    if url.startswith("file://"):
        url = url[len("file://"):]
    elif "://" in url or (":" in url.split("/", 1)[0]):
        return None  # ssh://, https://, host:path
    path = os.path.join(folder, os.path.expanduser(url))
    return path if os.path.isdir(path) else None


def _git(folder, *args, gitenv=PLAIN):
    proc = subprocess.run(("git",) + args, cwd=folder, env=environment(gitenv=gitenv),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    return proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""


def upstream_remote(folder, gitenv=PLAIN):
    """The remote the checked-out branch follows (origin when it says none)."""
    branch = _git(folder, "symbolic-ref", "-q", "--short", "HEAD", gitenv=gitenv)
    name = _git(folder, "config", "--get", "branch.%s.remote" % branch,
                gitenv=gitenv) if branch else ""
    return name if name and name != "." else "origin"


def measure(folder, gitenv=PLAIN):
    """{"here": bytes, "thin": bool, "remote": bytes or None, "remote_unknown": why or None,
    "time": unix seconds}; None when the folder is no git repository."""
    here = count_objects([], folder, gitenv=gitenv)
    if here is None:
        return None
    remote_name = upstream_remote(folder, gitenv=gitenv)
    url = _git(folder, "config", "--get", "remote.%s.url" % remote_name, gitenv=gitenv)
    remote, why = None, None
    path = remote_path(url, folder) if url else None
    if not url:
        why = "no remote"
    elif path is None:
        why = "not measured over the network"
    else:
        remote = count_objects(["--git-dir", path], folder, gitenv=gitenv)
        if remote is None:
            why = "cannot be read at %s" % path
    return {"here": here, "thin": thin.promisor(folder,
                                                gitenv=gitenv) is not None, "remote": remote,
            "remote_unknown": why, "time": time.time()}


def human(size):
    """Bytes as people read them: 512 bytes, 12.3 kB, 4.5 MB, 1.2 GB."""
    if size < 1000:
        return "%d bytes" % size
    for unit in ("kB", "MB", "GB", "TB"):
        size /= 1000.0
        if size < 1000 or unit == "TB":
            return "%.1f %s" % (size, unit)


def text(history):
    """The status line's value for the `history` field (None: not measured yet)."""
    if not history:
        return "not measured yet"
    here = "%s here%s" % (human(history["here"]),
                          " (thin: current files only, old versions on the remote)"
                          if history.get("thin") else "")
    if history.get("remote") is not None:
        return "%s, %s on the remote" % (here, human(history["remote"]))
    return "%s, on the remote unknown (%s)" % (here, history.get("remote_unknown") or "?")
