"""Finish a git merge that stopped on conflicts, keeping every version.

Git only: it reads the index's conflict stages (`git ls-files -u`), which
no configured command can describe. Each conflicted path is settled by
keep_both (the newer version at the path, the other beside it as a
conflict copy; a change kept over a delete); a path deleted on both sides
goes. This module supplies only what git knows: the two committed versions
and their last change (WorkingTree), and writing a blob. Files are written
from the committed blobs (a stage that is git's own merge with markers, as a
rename that met another path leaves, is replaced by the committed versions
it names: keep_every), so conflict markers never reach the tree or a
commit. The caller commits the result (docs/conflicts.md).
"""
import logging
import os
import re
import subprocess
import tempfile

from autosync.core.copies import copy_name
from autosync.vcs.pull.keep_both import keep_both
from autosync.vcs import copyrules
from autosync.vcs.catfile import FILTERED, filtered_request
from autosync.vcs.commands import environment, why
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


# The line a merge writes after the other side's text: `>>>>>>> <commit id>`, longer in a
# merge nested in another and with `:PATH` when a rename gave the sides different paths.
MERGE_LABEL = "^>{7,} [0-9a-f]{40}(:.*)?$"


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
            labels = set(re.findall(rb"^>{7,} ([0-9a-f]{40})(?::.*)?$", f.read(), re.M))
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
    """(commit time, commit id, host, author `Name <email>`) of the last commit on rev
    that touched path."""
    # The path on stdin (--stdin reads paths after a `--` line), off the command line;
    # git reads it line by line, so a name with a newline is the rev's last commit.
    out = b"" if "\n" in path else git(
        folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%ae%x00%s", "--stdin", rev,
        data=b"--\n" + os.fsencode(path) + b"\n", check=False, gitenv=gitenv) or b""
    if not out.strip():
        out = git(folder, "log", "-1", "--format=%ct%x00%H%x00%an%x00%ae%x00%s", rev,
                  gitenv=gitenv)
    stamp, commit, author, email, subject = out.decode("utf-8", "replace").rstrip(
        "\n").split("\0", 4)
    return int(stamp), commit, host_of(subject) or author, "%s <%s>" % (author, email)


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
    line (catfile.FILTERED, as restorecmd's cat-file reads it); the content follows the
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
    """keep_both.Place for a merge stopped in git's working tree: a version is a
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


# git's conflict markers: 7 characters or more (more in a merge nested in another), then a
# label: the side's name, and ":PATH" when the two sides' paths differ (a rename).
MARKED = re.compile(rb"^(<{7,}|>{7,}) (.*?)\r?\n?$")


def entry(folder, rev, path, gitenv=PLAIN):
    """(mode, blob id) of the file at path in rev, or None (no such file). The path goes
    on stdin: git prints rev's folder holding it, whose entries are read here."""
    folder_of, name = os.path.split(os.fsencode(path))
    out = git(folder, "cat-file", "--batch", "-z", data=b"%s:%s\0" % (rev.encode(), folder_of),
              check=False, gitenv=gitenv) or b""
    header, _, body = out.partition(b"\n")
    fields = header.split()
    if len(fields) != 3 or fields[1] != b"tree":
        return None
    size = len(fields[0]) // 2
    body = body[:int(fields[2])]
    while body:
        head, _, rest = body.partition(b"\0")
        mode, _, entry_name = head.partition(b" ")
        if entry_name == name:
            kind = int(mode, 8) & 0o170000
            return ("%06o" % int(mode, 8), rest[:size].hex()) \
                if kind in (0o100000, 0o120000) else None
        body = rest[size:]
    return None


def labels(folder, blob, gitenv=PLAIN):
    """The labels of the outermost `<<<<<<<` and `>>>>>>>` markers in blob (streamed, line
    by line), or None when it holds no such pair."""
    proc = subprocess.Popen(("git", "cat-file", "blob", blob), cwd=folder,
                            env=environment(gitenv=gitenv), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    found = {}
    with proc.stdout:
        for line in proc.stdout:
            marker = MARKED.match(line)
            if marker:
                size, label = len(marker.group(1)), marker.group(2)
                side = found.setdefault(marker.group(1)[:1], (size, label))
                if size < side[0]:
                    found[marker.group(1)[:1]] = (size, label)
    proc.wait()
    if b"<" not in found or b">" not in found:
        return None
    return found[b"<"][1], found[b">"][1]


def in_tree(folder, rev, blob, gitenv=PLAIN):
    """Is blob one of the files of rev (anywhere)? Asked only of a rare version (below)."""
    out = git(folder, "ls-tree", "-r", "-z", rev, check=False, gitenv=gitenv) or b""
    return any(e.split(b"\t", 1)[0].split()[2:] == [blob.encode()]
               for e in out.split(b"\0") if e)


def committed(folder, path, side, version, revs, gitenv=PLAIN):
    """One side's version of a conflicted path, as a committed version.

    git's stage 2 or 3 entry is the side's committed version, or git's own merge of it
    where a renamed file collides with another path (rename/add, rename/rename(2to1),
    also through a criss-cross's virtual merge base) and that merge is clean. When it is
    not clean, git puts its merge there with conflict markers ("this may result in
    nested conflict markers": `<<<<<<<< OURS:d1/f3.txt` ... `>>>>>>>> THEIRS:d0/f2.txt`),
    a version no commit holds. That one is replaced by the side's committed version at
    the path (None: it has none), and the two committed versions git's merge could not
    combine, which its labels name, are returned to be kept too. A file of the user's
    that holds such lines is a committed version, and stays as it is.
    revs: (ours, theirs) as git names them. -> (version, [(side, version) also to keep])"""
    if version is None:
        return None, []
    rev = revs[0 if side == "ours" else 1]
    own = entry(folder, rev, path, gitenv=gitenv)
    if own == version:
        return version, []
    named = labels(folder, version[1], gitenv=gitenv)
    if named is None or in_tree(folder, rev, version[1], gitenv=gitenv):
        return version, []
    others = []
    for which, label, at in zip(("ours", "theirs"), named, revs):
        _, colon, there = os.fsdecode(label).partition(":")
        found = entry(folder, at, there if colon else path, gitenv=gitenv)
        if found is not None and found != own:
            others.append((which, found))
    log.warning("%s: git's merge of the %s version holds conflict markers (a rename that "
                "met another path): the committed versions are kept instead", path, side)
    return own, others


def keep_every(folder, path, ours, theirs, place, revs, gitenv=PLAIN):
    """keep_both of a conflicted path's committed versions (committed() above):
    the newer at the path, the other beside it, and each further version git's merge had
    combined in a conflict copy of its own. -> (the copies made, the paths written;
    none: nothing stays at the path)"""
    ours, more = committed(folder, path, "ours", ours, revs, gitenv=gitenv)
    theirs, extra = committed(folder, path, "theirs", theirs, revs, gitenv=gitenv)
    more += extra
    kept = [v for v in (ours, theirs) if v is not None]
    further = []
    for side, version in more:
        if version not in kept:
            kept.append(version)
            further.append((side, version))
    if ours is None and theirs is None and further:
        side, version = further.pop(0)
        ours, theirs = (version, None) if side == "ours" else (None, version)
    copy, written = keep_both(path, ours, theirs, place)
    made = [copy] if copy else []
    for side, version in further:
        stamp, _, host = place.last_change(side, version)[:3]
        name = copy_name(path, host, stamp, lambda n: n != path and (
            not place.taken(n) or place.holds(n, version)))
        place.write(name, version)
        made.append({"path": path, "copy": name, "host": host})
        written.append(name)
        log.warning("conflict in %s: a further version (from %s) kept as %s", path, host, name)
    return made, written


def resolve(folder, gitenv=PLAIN):
    """Resolve every conflicted path by keep_both and stage the result.

    -> list of {"path", "copy", "host"}: one per conflict copy made."""
    made, staged = [], []
    for path, stages in sorted(unmerged(folder, gitenv=gitenv).items()):
        ours, theirs = stages.get(2), stages.get(3)
        place = WorkingTree(folder, path, gitenv)
        copies, written = keep_every(folder, path, ours, theirs, place, ("HEAD", "MERGE_HEAD"),
                                     gitenv=gitenv)
        if not written:  # deleted on both sides (e.g. renamed apart); or all that git put
            # there was its own merge with markers, which goes (its versions are committed)
            git(folder, "rm", "-q", "--ignore-unmatch",
                "--cached" if ours is None and theirs is None else "-f", "--", paths=[path],
                gitenv=gitenv)
            continue
        made += copies
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
    them (the loser, keep_both). A commit made on this machine is in its HEAD
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
