"""Finish a merge that stopped on conflicts, keeping every version.

Git only: it reads the index's conflict stages (`git ls-files -u`), which
no configured command can describe. For each conflicted path:

* both sides have a version (edited on both, added on both): the newer one
  stays at the path, the other is written beside it as a conflict copy,
  `name (conflict from HOST YYYY-MM-DD HHMMSS).ext`;
* one side deleted it, the other changed it: the changed version stays;
* both sides deleted it: it goes.

"Newer" is the side whose last commit touching the path has the later commit
time, ties broken by the larger commit id: both machines compute the same
winner, so they converge instead of trading copies. Files are written from
the committed blobs, so conflict markers never reach the tree or a commit.
The caller commits the result (docs/conflicts.md).
"""
import collections
import logging
import os
import re
import time

from autosync.gitrepo import git
from autosync.messages import host_of
from autosync.paths import METADATA

log = logging.getLogger("autosync.conflicts")


def merging(gitdir):
    return os.path.exists(os.path.join(gitdir, "MERGE_HEAD"))


def rebasing(gitdir):
    return any(os.path.exists(os.path.join(gitdir, d)) for d in ("rebase-merge", "rebase-apply"))


def unmerged(folder):
    """{path: {stage: (mode, blob id)}} of the index's conflict entries."""
    out = git(folder, "ls-files", "-u", "-z")
    found = {}
    for entry in out.split(b"\0"):
        if entry:
            info, path = entry.split(b"\t", 1)
            mode, blob, stage = info.split()
            found.setdefault(os.fsdecode(path), {})[int(stage)] = (mode.decode(), blob.decode())
    return found


def undo_interrupted_merge(folder):
    """A merge killed before it wrote MERGE_HEAD left conflict entries (and markers) behind.

    `git reset --merge` puts back what the merge changed and keeps local changes
    it did not touch; both sides are still in commits, so the next pull redoes it.
    -> True if there was such a merge."""
    if not unmerged(folder):
        return False
    log.warning("undoing a merge that was interrupted before it finished; "
                "the next pull does it again")
    git(folder, "reset", "-q", "--merge")
    return True


# The line a merge writes after the other side's text: `>>>>>>> <commit id>`.
MERGE_LABEL = "^>>>>>>> [0-9a-f]{40}$"


def undo_killed_pull(folder):
    """Put back files that a pull killed mid-merge left with conflict markers.

    A merge that loses its output pipe (the committer that ran it was killed)
    dies of SIGPIPE after writing the markers into the files but before it
    records anything in the index or MERGE_HEAD. Such a file differs from our
    last commit and carries a `>>>>>>> <commit id>` label naming a commit we
    have fetched but not merged; both sides are committed, so it goes back to
    our commit and the next pull merges again. A user's file that merely holds
    such lines (notes about git) names no such commit and is left alone.
    Called at every start (the killed pull may have ended before the new
    committer looked for it), never during a recorded merge. -> the paths put back."""
    if git(folder, "rev-parse", "-q", "--verify", "HEAD", check=False) is None:
        return []   # no commit yet: nothing to put back
    out = git(folder, "diff", "HEAD", "--name-only", "-z", "-G", MERGE_LABEL)
    paths = [os.fsdecode(p) for p in out.split(b"\0") if p]
    paths = [p for p in paths if _labels_unmerged_commit(folder, p)]
    if paths:
        log.warning("a killed pull left conflict markers in %d file(s): put back to the last "
                    "commit, the next pull merges again: %s", len(paths), ", ".join(paths[:10]))
        git(folder, "checkout", "-q", "HEAD", "--", paths=paths)
    return paths


def _labels_unmerged_commit(folder, path):
    """Does the file's `>>>>>>> <id>` line name a commit we have and have not merged?"""
    try:
        with open(os.path.join(folder, path), "rb") as f:
            labels = set(re.findall(rb"^>>>>>>> ([0-9a-f]{40})$", f.read(), re.M))
    except OSError:
        return False
    for label in labels:
        known = git(folder, "cat-file", "-e", label + b"^{commit}", check=False) is not None
        if known and git(folder, "merge-base", "--is-ancestor", label, "HEAD",
                         check=False) is None:
            return True
    return False


def last_change(folder, rev, path):
    """(commit time, commit id, host) of the last commit on rev that touched path."""
    # The path on stdin (--stdin reads paths after a `--` line), off the command line;
    # git reads it line by line, so a name with a newline is the rev's last commit.
    out = b"" if "\n" in path else git(
        folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%s", "--stdin", rev,
        data=b"--\n" + os.fsencode(path) + b"\n", check=False) or b""
    if not out.strip():
        out = git(folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%s", rev)
    stamp, commit, author, subject = out.decode("utf-8", "replace").rstrip("\n").split("\0", 3)
    return int(stamp), commit, host_of(subject) or author


def copy_name(path, host, stamp, free):
    """`dir/name (conflict from HOST 2026-12-03 101502).ext`, the first one free(name) accepts."""
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    if stem.startswith(".") and not ext:  # .bashrc: the whole name is the stem
        stem, ext = base, ""
    when = time.strftime("%Y-%m-%d %H%M%S", time.localtime(stamp))
    host = host.replace("/", "_")
    for n in range(1, 1000):
        extra = "" if n == 1 else " %d" % n
        tail = " (conflict from %s %s%s)%s" % (host, when, extra, ext)
        name = os.path.join(folder, _fit(stem, NAME_MAX - len(os.fsencode(tail))) + tail)
        if free(name):
            return name
    raise RuntimeError("no free conflict name for %s" % path)


NAME_MAX = 255  # bytes of one file name on Linux file systems


def _fit(stem, room):
    """The stem cut to at most `room` bytes, whole characters (a copy of a copy of a
    long name would pass the file system's limit and stall the merge)."""
    while len(os.fsencode(stem)) > room and len(stem) > 1:
        stem = stem[:-max(1, (len(os.fsencode(stem)) - room) // 4)]
    return stem


Copy = collections.namedtuple("Copy", "copy path host time")
# copy_name's pattern; the greedy stem takes a copy of a copy as a copy of a copy.
COPY_NAME = re.compile(r"(?P<stem>.+) \(conflict from (?P<host>.+) "
                       r"(?P<when>\d{4}-\d\d-\d\d \d{6})(?: \d+)?\)(?P<ext>[^/]*)", re.S)


def read_copy_name(rel):
    """copy_name read back: a conflict copy's path -> Copy (its original's path, the host
    and unix time of the version it holds), or None for any other name."""
    folder, base = os.path.split(rel)
    found = COPY_NAME.fullmatch(base)
    if not found:
        return None
    try:
        stamp = time.mktime(time.strptime(found.group("when"), "%Y-%m-%d %H%M%S"))
    except (ValueError, OverflowError):
        return None
    return Copy(rel, os.path.join(folder, found.group("stem") + found.group("ext")),
                found.group("host"), stamp)


def find_copies(folder):
    """Every conflict copy below `folder` (DVCS metadata skipped), sorted by path."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in METADATA)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            copy = read_copy_name(os.path.relpath(os.path.join(root, name), folder))
            if copy:
                found.append(copy)
    return sorted(found)


def write_blob(folder, rel, mode, blob):
    """Put a committed version at rel: a file with its mode, or a symlink."""
    data = git(folder, "cat-file", "blob", blob)
    full = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if os.path.lexists(full) and not os.path.isdir(full):
        os.unlink(full)
    if mode == "120000":
        os.symlink(data, os.fsencode(full))
        return
    with open(full, "wb") as f:
        f.write(data)
    os.chmod(full, 0o755 if mode == "100755" else 0o644)


def same_blob(folder, rel, blob):
    """True if rel already holds exactly this blob (a copy written before a crash)."""
    full = os.path.join(folder, rel)
    if not os.path.isfile(full) or os.path.islink(full):
        return False
    if "\n" in rel:   # --stdin-paths reads lines; such a copy is simply not reused
        return False
    # The name on stdin, off the command line; git hashes the file as `-- rel` would.
    return git(folder, "hash-object", "--stdin-paths", data=os.fsencode(rel) + b"\n",
               check=False) == blob.encode() + b"\n"


def resolve(folder):
    """Resolve every conflicted path and stage the result.

    -> list of {"path", "copy", "host"}: one per conflict copy made."""
    copies, staged = [], []
    for path, stages in sorted(unmerged(folder).items()):
        ours, theirs = stages.get(2), stages.get(3)
        if ours and theirs:
            mine, other = last_change(folder, "HEAD", path), last_change(folder, "MERGE_HEAD", path)
            ours_wins = mine[:2] > other[:2]
            win, lose = (ours, theirs) if ours_wins else (theirs, ours)
            stamp, _, host = other if ours_wins else mine
            target = path
            if os.path.isdir(os.path.join(folder, path)):  # a folder took the name meanwhile
                target = copy_name(path, "both sides", stamp, lambda n: not os.path.lexists(
                    os.path.join(folder, n)))
            copy = copy_name(path, host, stamp, lambda n: n != target and (
                not os.path.lexists(os.path.join(folder, n)) or same_blob(folder, n, lose[1])))
            write_blob(folder, copy, *lose)
            write_blob(folder, target, *win)
            copies.append({"path": path, "copy": copy, "host": host})
            staged += [path, copy, target]
            log.warning("conflict in %s: kept the newer version, the other (from %s) as %s",
                        path, host, copy)
        elif ours or theirs:  # changed on one side, deleted on the other: keep the change
            write_blob(folder, path, *(ours or theirs))
            staged.append(path)
            log.warning("%s was changed on one side and deleted on the other: kept", path)
        else:  # deleted on both sides (e.g. renamed apart): nothing to keep here
            git(folder, "rm", "-q", "--cached", "--ignore-unmatch", "--", paths=[path])
    if staged:
        git(folder, "add", "-A", "--", paths=staged)
    return copies
