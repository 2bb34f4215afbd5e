"""Thin machines: a partial clone (`--filter=blob:none`) that keeps the current files only.

`dvcs-autosync init --thin` clones that way. The repository then holds every
commit and folder listing but only the file contents it checked out, pulled
or made itself; an old version's content stays on the remote (the promisor
remote, git's `extensions.partialClone`) until something needs it.

git fetches a missing content by itself when a command reads it, one round
trip per object (git 2.39's `cat-file --batch`, as a restore or a pull read
them, asks for each on its own). So those who know up front which contents they
will read ask for them here, all in one fetch:

  * the daemon's pull (vcs/pull/git.py): the new versions of the changed paths,
    before anything is written; the remote away at that instant is a failed
    pull like any other (nothing written, tried again);
  * restore (tools/history.py): the versions it will write, before anything is
    written; the remote away is one line (Unreachable), nothing written;
  * the notes fetched with each pull (vcs/gitnotes.py), so that `log` works with
    the remote away.

Which contents are missing is found without fetching: the wanted blobs are
put in a tree made for the purpose (`git mktree --missing`, a few bytes,
dropped by the next gc) and `git rev-list --objects --missing=print` lists
those it lacks. Nothing here does anything in a full clone.
"""
import logging
import subprocess

from autosync.vcs.commands import environment, why
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.thin")

FETCH_TIMEOUT = 600.0  # seconds one batch of contents may take to arrive
BLOB_MODES = ("100644", "100755", "120000")


class Unreachable(Exception):
    """Contents this machine does not hold could not be fetched; str() is one line."""


def _git(folder, *args, data=None, timeout=None, gitenv=PLAIN):
    return subprocess.run(("git",) + args, cwd=folder, env=environment(gitenv=gitenv),
                          input=data,
                          stdin=subprocess.DEVNULL if data is None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def promisor(folder, gitenv=PLAIN):
    """The remote a thin machine fetches missing contents from; None for a full clone."""
    # `clone --filter` marks the remote (remote.NAME.promisor); an older git, or a
    # `fetch --filter` in a full clone, names it in extensions.partialClone.
    proc = _git(folder, "config", "--get-regexp",
                r"^(extensions\.partialclone|remote\..*\.promisor)$", gitenv=gitenv)
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        if key == "extensions.partialclone":
            return value.strip() or None
        if value.strip().lower() in ("true", "yes", "on", "1", ""):  # "": `promisor` alone
            return key[len("remote."):-len(".promisor")]
    return None


def missing(folder, oids, gitenv=PLAIN):
    """The blob ids among `oids` that are not on this machine (nothing is fetched)."""
    oids = sorted(set(o for o in oids if o and o.strip("0")))
    if not oids:
        return set()
    listing = b"".join(b"100644 blob %s\t%08d\0" % (o.encode(), n) for n, o in enumerate(oids))
    made = _git(folder, "mktree", "-z", "--missing", data=listing, gitenv=gitenv)
    if made.returncode:
        raise Unreachable("git mktree: %s" % _said(made))
    return missing_below(folder, [made.stdout.decode().strip()], gitenv=gitenv)


def missing_below(folder, tips, but=(), gitenv=PLAIN):
    """The objects reachable from `tips` (commits, trees) and not from `but` that are
    not on this machine."""
    proc = _git(folder, "rev-list", "--objects", "--missing=print", "--no-object-names",
                *tips, "--not", *but, gitenv=gitenv)
    if proc.returncode:
        raise Unreachable("git rev-list: %s" % _said(proc))
    return {line[1:].decode() for line in proc.stdout.splitlines() if line.startswith(b"?")}


def _said(proc):
    lines = why(proc.stderr.decode("utf-8", "replace"))
    return " | ".join(lines) or "exit %d" % proc.returncode


def fetch(folder, oids, what="the contents", gitenv=PLAIN):
    """Bring the blobs `oids` (missing here) from the promisor remote in one fetch.
    -> how many; Unreachable (one line) when the remote cannot give them."""
    oids = sorted(set(oids))
    remote = promisor(folder, gitenv=gitenv)
    if not oids or remote is None:
        return 0
    # What git itself runs for a missing object, given all of them at once.
    try:
        proc = _git(folder, "-c", "fetch.negotiationAlgorithm=noop", "fetch", remote,
                    "--no-tags", "--no-write-fetch-head", "--recurse-submodules=no",
                    "--filter=blob:none", "--stdin",
                    data="".join(o + "\n" for o in oids).encode(), timeout=FETCH_TIMEOUT,
                    gitenv=gitenv)
    except subprocess.TimeoutExpired:
        raise Unreachable("%s (%d on the remote only: this is a thin machine) did not arrive "
                          "from %s within %d s" % (what, len(oids), where(folder, remote,
                                                                          gitenv=gitenv),
                                                   FETCH_TIMEOUT)) from None
    if proc.returncode:
        lines = why(proc.stderr.decode("utf-8", "replace"), 1)
        raise Unreachable("%s (%d on the remote only: this is a thin machine) cannot be "
                          "fetched from %s: %s" % (what, len(oids), where(folder, remote,
                                                                          gitenv=gitenv),
                                                    lines[0] if lines else
                                                    "exit %d" % proc.returncode))
    log.info("fetched %d contents from %s", len(oids), remote)
    return len(oids)


def where(folder, remote, gitenv=PLAIN):
    """The remote's name and address, for a message."""
    proc = _git(folder, "config", "--get", "remote.%s.url" % remote, gitenv=gitenv)
    url = proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""
    return "%s (%s)" % (remote, url) if url else remote


def bring(folder, oids, what="the contents", gitenv=PLAIN):
    """Make sure the blobs `oids` are here: those missing on a thin machine fetched in one
    go. -> how many were fetched; Unreachable when the remote cannot give them."""
    if promisor(folder, gitenv=gitenv) is None:
        return 0
    return fetch(folder, missing(folder, oids, gitenv=gitenv), what, gitenv=gitenv)


def bring_below(folder, tips, but=(), what="the contents", gitenv=PLAIN):
    """The same for everything reachable from `tips` and not from `but`."""
    if promisor(folder, gitenv=gitenv) is None:
        return 0
    return fetch(folder, missing_below(folder, tips, but, gitenv=gitenv), what, gitenv=gitenv)
