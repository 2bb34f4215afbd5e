"""Finish a git merge that stopped on conflicts, keeping every version.

Git only: it reads the index's conflict stages (`git ls-files -u`), which
no configured command can describe. Each conflicted path is settled by
copies.keep_both (the newer version at the path, the other beside it as a
conflict copy; a change kept over a delete); a path deleted on both sides
goes. This module supplies only what git knows: the two committed versions
and their last change (WorkingTree), and writing a blob. Files are written
from the committed blobs, so conflict markers never reach the tree or a
commit. The caller commits the result (docs/conflicts.md).
"""
import logging
import os
import re
import subprocess
import tempfile

from autosync.core.copies import keep_both
from autosync.vcs import copyrules
from autosync.vcs.commands import FILTERED, environment, filtered_request, why
from autosync.vcs.git import git
from autosync.vcs.git_environment import PLAIN
from autosync.core.messages import host_of

log = logging.getLogger("autosync.conflicts")


def merging(gitdir):
    return os.path.exists(os.path.join(gitdir, "MERGE_HEAD"))


def rebasing(gitdir):
    return any(os.path.exists(os.path.join(gitdir, d)) for d in ("rebase-merge", "rebase-apply"))


def unmerged(folder, gitenv=PLAIN):
    """{path: {stage: (mode, blob id)}} of the index's conflict entries."""
    out = git(folder, "ls-files", "-u", "-z", gitenv=gitenv)
    found = {}
    for entry in out.split(b"\0"):
        if entry:
            info, path = entry.split(b"\t", 1)
            mode, blob, stage = info.split()
            found.setdefault(os.fsdecode(path), {})[int(stage)] = (mode.decode(), blob.decode())
    return found


def undo_interrupted_merge(folder, gitenv=PLAIN):
    """A merge killed before it wrote MERGE_HEAD left conflict entries (and markers) behind.

    `git reset --merge` puts back what the merge changed and keeps local changes
    it did not touch; both sides are still in commits, so the next pull redoes it.
    -> True if there was such a merge."""
    if not unmerged(folder, gitenv=gitenv):
        return False
    log.warning("undoing a merge that was interrupted before it finished; "
                "the next pull does it again")
    git(folder, "reset", "-q", "--merge", gitenv=gitenv)
    return True


# The line a merge writes after the other side's text: `>>>>>>> <commit id>`.
MERGE_LABEL = "^>>>>>>> [0-9a-f]{40}$"


def undo_killed_pull(folder, gitenv=PLAIN):
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
    if git(folder, "rev-parse", "-q", "--verify", "HEAD", check=False, gitenv=gitenv) is None:
        return []   # no commit yet: nothing to put back
    out = git(folder, "diff", "HEAD", "--name-only", "-z", "-G", MERGE_LABEL, gitenv=gitenv)
    paths = [os.fsdecode(p) for p in out.split(b"\0") if p]
    paths = [p for p in paths if _labels_unmerged_commit(folder, p, gitenv=gitenv)]
    if paths:
        log.warning("a killed pull left conflict markers in %d file(s): put back to the last "
                    "commit, the next pull merges again: %s", len(paths), ", ".join(paths[:10]))
        git(folder, "checkout", "-q", "HEAD", "--", paths=paths, gitenv=gitenv)
    return paths


def _labels_unmerged_commit(folder, path, gitenv=PLAIN):
    """Does the file's `>>>>>>> <id>` line name a commit we have and have not merged?"""
    try:
        with open(os.path.join(folder, path), "rb") as f:
            labels = set(re.findall(rb"^>>>>>>> ([0-9a-f]{40})$", f.read(), re.M))
    except OSError:
        return False
    for label in labels:
        known = git(folder, "cat-file", "-e", label + b"^{commit}", check=False,
                    gitenv=gitenv) is not None
        if known and git(folder, "merge-base", "--is-ancestor", label, "HEAD",
                         check=False, gitenv=gitenv) is None:
            return True
    return False


def last_change(folder, rev, path, gitenv=PLAIN):
    """(commit time, commit id, host) of the last commit on rev that touched path."""
    # The path on stdin (--stdin reads paths after a `--` line), off the command line;
    # git reads it line by line, so a name with a newline is the rev's last commit.
    out = b"" if "\n" in path else git(
        folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%s", "--stdin", rev,
        data=b"--\n" + os.fsencode(path) + b"\n", check=False, gitenv=gitenv) or b""
    if not out.strip():
        out = git(folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%s", rev, gitenv=gitenv)
    stamp, commit, author, subject = out.decode("utf-8", "replace").rstrip("\n").split("\0", 3)
    return int(stamp), commit, host_of(subject) or author


def write_blob(folder, rel, mode, blob, gitenv=PLAIN):
    """Put a committed version at rel: a file with its mode, as git's checkout writes it
    (through its smudge filters: line endings, git-lfs, the user's), or a symlink. (An
    annexed version is written as its pointer, as git-annex's smudge gives it; the `git
    add` that stages it puts the content in when the annex has it.)"""
    full = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if os.path.lexists(full) and not os.path.isdir(full):
        os.unlink(full)
    if mode == "120000":
        os.symlink(git(folder, "cat-file", "blob", blob, gitenv=gitenv), os.fsencode(full))
        return
    with open(full, "wb") as f:
        filtered(folder, rel, blob, f, gitenv=gitenv)
    os.chmod(full, 0o755 if mode == "100755" else 0o644)


def filtered(folder, rel, blob, out, gitenv=PLAIN):
    """Write blob into the file `out` through the filters of rel's attributes, streamed
    (an annexed version may be gigabytes). The name goes on stdin, never on the command
    line (commands.FILTERED, as restorecmd's cat-file reads it); the content follows the
    header and ends with one newline."""
    request, header = filtered_request(blob, rel)
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(FILTERED, cwd=folder, env=environment(gitenv=gitenv),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
        proc.stdin.write(request)
        proc.stdin.close()
        ok = proc.stdout.read(len(header)) == header
        held = b""
        while ok:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                break
            out.write(held + chunk[:-1])
            held = chunk[-1:]
        proc.stdout.close()
        if proc.wait() or not ok or held != b"\n":
            errors.seek(0)
            said = " | ".join(why(errors.read().decode(errors="replace")))
            raise RuntimeError("git cat-file: %s" % (said or "could not read %s" % blob))


def same_blob(folder, rel, blob, gitenv=PLAIN):
    """True if rel already holds exactly this blob (a copy written before a crash)."""
    full = os.path.join(folder, rel)
    if not os.path.isfile(full) or os.path.islink(full):
        return False
    if "\n" in rel:   # --stdin-paths reads lines; such a copy is simply not reused
        return False
    # The name on stdin, off the command line; git hashes the file as `-- rel` would.
    return git(folder, "hash-object", "--stdin-paths", data=os.fsencode(rel) + b"\n",
               check=False, gitenv=gitenv) == blob.encode() + b"\n"


class WorkingTree:
    """copies.Place for a merge stopped in git's working tree: a version is a
    committed blob, (mode, blob id); "ours" is HEAD, "theirs" MERGE_HEAD."""

    def __init__(self, folder, path, gitenv=PLAIN):
        self.folder, self.path, self.gitenv = folder, path, gitenv
        self.rules = []  # .gitattributes given a copy's rule (copyrules.keep): staged too

    def last_change(self, side, version):
        return last_change(self.folder, "HEAD" if side == "ours" else "MERGE_HEAD", self.path,
                           gitenv=self.gitenv)

    def taken(self, rel):
        return os.path.lexists(os.path.join(self.folder, rel))

    def is_folder(self, rel):
        return os.path.isdir(os.path.join(self.folder, rel))

    def holds(self, rel, version):
        return same_blob(self.folder, rel, version[1], gitenv=self.gitenv)

    def write(self, rel, version):
        if rel != self.path:  # a copy: written and stored by its original's attributes
            self.rules += copyrules.keep(self.folder, self.path, rel, gitenv=self.gitenv)
        write_blob(self.folder, rel, *version, gitenv=self.gitenv)


def resolve(folder, gitenv=PLAIN):
    """Resolve every conflicted path by copies.keep_both and stage the result.

    -> list of {"path", "copy", "host"}: one per conflict copy made."""
    made, staged = [], []
    for path, stages in sorted(unmerged(folder, gitenv=gitenv).items()):
        ours, theirs = stages.get(2), stages.get(3)
        if ours is None and theirs is None:  # deleted on both sides (e.g. renamed apart)
            git(folder, "rm", "-q", "--cached", "--ignore-unmatch", "--", paths=[path],
                gitenv=gitenv)
            continue
        place = WorkingTree(folder, path, gitenv)
        copy, written = keep_both(path, ours, theirs, place)
        made += [copy] if copy else []
        staged += [path] + written + place.rules
    if staged:
        git(folder, "add", "-A", "--", paths=staged, gitenv=gitenv)
    return made


# --- whose version a conflict copy holds (dvcs-autosync conflicts) -----------------------

NO_MERGE = "no merge"  # copy_made_here: no merge in history made the copy


def copy_made_here(folder, copy, path, gitenv=PLAIN):
    """Whether the version the conflict copy `copy` (of `path`) holds was made on this
    machine, told by the repository, never by a host name (cloned machines share one):
    True, False; None when it cannot tell (neither side's or both sides' last change of
    path was made here: a third machine, or a reflog expired); NO_MERGE when no merge in
    history made the copy (a copy made by hand).

    The merge that added the copy has two parents; the copy holds the version of one of
    them (the loser, copies.keep_both). A commit made on this machine is in its HEAD
    reflog as `commit...` (git commit, and committer/quickcommit.py's update-ref);
    one pulled in is there, if at all, as a pull. So the side whose last change of
    path was made here is this machine's."""
    if "\n" in copy or "\n" in path:  # --stdin and --batch-check read lines
        return None
    out = git(folder, "log", "--format=%H %P", "--stdin", "HEAD",
              data=b"--\n" + os.fsencode(copy) + b"\n", check=False, gitenv=gitenv)
    lines = (out or b"").decode().split("\n")
    commits = [line.split() for line in lines if line.strip()]
    if not commits or len(commits[-1]) != 3:  # the oldest commit with the copy: a merge?
        return NO_MERGE
    merge, *parents = commits[-1]
    blobs = _blobs(folder, ["%s:%s" % (merge, copy)] + ["%s:%s" % (p, path) for p in parents],
                   gitenv)
    if blobs[0] is None or any(_blobs(folder, ["%s:%s" % (p, copy) for p in parents], gitenv)):
        return NO_MERGE  # the copy was there before: not this merge's
    losers = [p for p, blob in zip(parents, blobs[1:]) if blob == blobs[0]]
    if len(losers) != 1:
        return None
    winner = parents[1 - parents.index(losers[0])]
    made = made_here(folder, gitenv)
    lost_here = last_change(folder, losers[0], path, gitenv=gitenv)[1] in made
    won_here = last_change(folder, winner, path, gitenv=gitenv)[1] in made
    return lost_here if lost_here != won_here else None


def _blobs(folder, names, gitenv):
    """The object id of each `REV:PATH` in names (None where there is none), asked on
    stdin (the names stay off the command line)."""
    out = git(folder, "cat-file", "--batch-check=%(objectname)",
              data=b"".join(os.fsencode(n) + b"\n" for n in names), gitenv=gitenv)
    return [line if re.fullmatch(r"[0-9a-f]{40,64}", line) else None
            for line in out.decode("utf-8", "replace").split("\n")[:len(names)]]


def made_here(folder, gitenv=PLAIN):
    """The commits this machine made: its HEAD reflog's `commit`, `commit (amend)`,
    `commit (merge)`... entries (git commit's; quickcommit's update-ref says `commit:`)."""
    out = git(folder, "log", "-g", "--format=%H %gs", "HEAD", check=False, gitenv=gitenv)
    made = set()
    for line in (out or b"").decode("utf-8", "replace").split("\n"):
        commit, _, subject = line.partition(" ")
        if subject.startswith("commit"):
            made.add(commit)
    return made
