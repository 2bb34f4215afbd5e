"""Big binary files changed on both sides, kept out of git's merge (set_apart).

git's merge (merge-ort's merge_3way, git 2.39) reads the three versions of a file that
both sides changed whole into memory, and only then finds them binary and keeps its own
side: a 1 GB video saved on two machines cost the pull 3 GB in `git merge-tree`. Such a
file's outcome is known without reading it: a conflict of the two versions, which
git.py's resolve keeps both of, as for any binary conflict. So the merge is given a
commit on top of the pulled one in which these files hold this machine's version (the
two sides agree there: git has nothing to read), and their two versions come back as
the conflicts merge-tree would have reported.

Only files git would merge as binary, by git's own rules (ll-merge.c, xdiff-interface.c):
above 16 MB (the daemon's core.bigFileThreshold), with no `merge` attribute, and one of
the three versions larger than git's text limit or holding a NUL byte in its first 8000
bytes. A big text file edited on both sides is merged by git as before (in memory: git
has no other way to merge text).
"""
import os
import subprocess

from autosync.vcs.commands import environment
from autosync.vcs.pull.blobs import STREAM
from autosync.vcs.pull.common import null

BIG = 16 << 20          # core.bigFileThreshold (git_environment.SETTINGS)
TEXT_LIMIT = 1023 << 20  # xdiff's MAX_XDIFF_SIZE: git merges nothing larger as text
FIRST_FEW = 8000        # buffer_is_binary: a NUL among these makes a file binary
FILES = ("100644", "100755")


def set_apart(pull, head, theirs):
    """-> (the commit to merge instead of `theirs`, {path: {2: ours, 3: theirs}}: the big
    binary files both sides changed, each version (mode, blob id)). Nothing set apart
    (`theirs` and {}) unless the two have exactly one merge base (none: unrelated
    histories; several: git merges the bases first)."""
    bases = pull.git("merge-base", "--all", head, theirs, check=False).stdout.split()
    if len(bases) != 1:
        return theirs, {}
    base = bases[0].decode()
    ours, other = changed(pull, base, head), changed(pull, base, theirs)
    both = {}
    for path in ours.keys() & other.keys():
        (was, mine), (_, new) = ours[path], other[path]
        if mine[1] != new[1] and mine[0] in FILES and new[0] in FILES and \
                (null(was[1]) or was[0] in FILES):   # (two contents git would merge)
            both[path] = (was, mine, new)
    if not both:
        return theirs, {}
    sizes = object_sizes(pull, {v[1] for vs in both.values() for v in vs if not null(v[1])})
    big = {path: vs for path, vs in both.items()
           if max(sizes.get(v[1], 0) for v in vs) > BIG}
    ruled = merge_rules(pull, big) if big else set()
    # The two sides' versions first: the base's, which a thin machine may have to fetch,
    # only when neither side tells.
    big = {path: (was, mine, new) for path, (was, mine, new) in big.items()
           if path not in ruled and any(sizes.get(v[1], 0) > TEXT_LIMIT or binary(pull, v[1])
                                        for v in (mine, new, was) if not null(v[1]))}
    if not big:
        return theirs, {}
    index = os.path.join(pull.gitdir, "autosync-apart-index")
    env = {"GIT_INDEX_FILE": index}
    for leftover in (index, index + ".lock"):   # (a pull killed here before)
        if os.path.lexists(leftover):
            os.unlink(leftover)
    try:
        pull.git("read-tree", theirs, env=env)
        pull.git("update-index", "-z", "--index-info", env=env, data=b"".join(
            b"%s %s\t%s\0" % (mine[0].encode(), mine[1].encode(), os.fsencode(path))
            for path, (_, mine, _) in sorted(big.items())))
        tree = pull.git("write-tree", env=env).stdout.decode().strip()
    finally:
        if os.path.exists(index):
            os.unlink(index)
    commit = pull.git("commit-tree", tree, "-p", theirs, data=b"autosync: big files set "
                      b"apart from the merge\n").stdout.decode().strip()
    return commit, {path: {2: mine, 3: new} for path, (_, mine, new) in big.items()}


def changed(pull, base, rev):
    """{path: (its version in base, in rev)} of the files `rev` adds or changes against
    `base`, each version (mode, blob id); renames not looked for (each path as it is)."""
    out = pull.git("diff-tree", "-r", "-z", "--no-renames", base, rev).stdout
    fields, found = iter(out.split(b"\0")), {}
    for info in fields:
        if not info:
            break
        old_mode, new_mode, old, new, _ = info[1:].decode().split(" ")
        path = os.fsdecode(next(fields))
        if not null(new):
            found[path] = ((old_mode, old), (new_mode, new))
    return found


def object_sizes(pull, oids):
    """{blob id: size} (git's object info, nothing read)."""
    oids = sorted(oids)
    out = pull.git("cat-file", "--batch-check=%(objectname) %(objectsize)",
                   data=b"".join(oid.encode() + b"\n" for oid in oids)).stdout
    sizes = {}
    for line in out.decode().splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isdigit():
            sizes[words[0]] = int(words[1])
    return sizes


def merge_rules(pull, paths):
    """The paths a `merge` attribute names (a driver of the user's, `-merge`, `union`):
    left to git's merge."""
    out = pull.git("check-attr", "-z", "--stdin", "merge",
                   data=b"".join(os.fsencode(p) + b"\0" for p in paths)).stdout
    fields = out.split(b"\0")
    return {os.fsdecode(path) for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3])
            if value != b"unspecified"}


def binary(pull, oid):
    """Does git take the blob for binary (a NUL in its first FIRST_FEW bytes)? Those are
    read, the rest not: its cat-file, which streams it, ends there."""
    proc = subprocess.Popen(("git",) + STREAM + ("cat-file", "blob", oid), cwd=pull.folder,
                            env=environment(gitenv=pull.gitenv), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        head, want = b"", FIRST_FEW
        while want:
            chunk = proc.stdout.read(want)
            if not chunk:
                break
            head, want = head + chunk, want - len(chunk)
    finally:
        proc.kill()
        proc.stdout.close()
        proc.wait()
    return b"\0" in head
