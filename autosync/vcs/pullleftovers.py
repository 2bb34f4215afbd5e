"""What a pull command of the user's that failed left in the folder (git).

A `pullcmd` that is not a plain `git pull` (git-annex's `sync`, a script) writes the
folder itself; when it fails half-way (a full disk, a lost connection) it leaves files
cut short, or whole ones it had not merged yet. Plain git leaves them too but never
commits them; the daemon would, as changes of the user's ("changes made before a pull",
then the rescan after the pull). The rule, after such a pull fails:

* the pull's target is what it fetched: FETCH_HEAD and the upstream branch, where they
  differ from HEAD; the paths they change against HEAD are what it may have written;
* such a path is the pull's leftover when its file in the folder is the target's
  version as checked out (its filters applied) or the beginning of it (empty, cut at
  4 KB, ...), or is gone where the target removes it; anything else there (another
  content, a link, a folder) is the user's, committed as usual;
* a leftover is put back as HEAD has it (through the guarded writer: only while it still
  holds what was checked; removed when HEAD has none): every byte it held is in the
  fetched target, and the pull's next try then finds the folder as it left it;
* one that cannot be put back (the disk still full, a write of the user's in between,
  a version too big to read here) is kept out of every commit until a pull succeeds
  or the file changes (then it is the user's).
"""
import collections
import hashlib
import os
import stat
import subprocess

from autosync.vcs import git
from autosync.vcs.catfile import FILTERED, filtered_request
from autosync.vcs.commands import environment
from autosync.vcs.git_environment import PLAIN
from autosync.fs.guarded import Expect, Refused, Writer

TARGETS = ("FETCH_HEAD", "@{upstream}")
CHUNK = 1 << 16
PUT_BACK_MAX = 64 << 20  # bytes of HEAD's version read to put it back; a bigger one is kept out

# head: (mode, oid) in HEAD or None; expect: what is in the folder now (None: gone)
Leftover = collections.namedtuple("Leftover", "head expect")


def absent(oid):
    return not oid.strip("0")


def raw_diff(folder, revs, gitenv=PLAIN):
    """`git diff` of `revs` (two revisions, or "A...B": from their merge base to B) ->
    {path: ((mode, oid) on the first side or None, (mode, oid) on the other or None)}."""
    out = git.git(folder, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--relative",
                  *revs, check=False, gitenv=gitenv) or b""
    fields, found = out.split(b"\0"), {}
    for meta, name in zip(fields[0::2], fields[1::2]):
        if meta.startswith(b":"):
            old_mode, new_mode, old_oid, new_oid = os.fsdecode(meta[1:]).split(" ")[:4]
            found[os.fsdecode(name)] = (None if absent(old_oid) else (old_mode, old_oid),
                                        None if absent(new_oid) else (new_mode, new_oid))
    return found


def target_changes(folder, gitenv=PLAIN):
    """{path: ((HEAD's mode, oid) or None, (the target's mode, oid) or None)} for every path
    the pull brings: changed on the target's side since its merge base with HEAD (not a
    path only this machine's commits changed)."""
    head = git.head(folder, gitenv=gitenv)
    changes = {}
    for ref in TARGETS:
        target = git.head(folder, ref, gitenv=gitenv)
        if not head or not target or target == head:
            continue
        brought = raw_diff(folder, [head + b"..." + target], gitenv)
        for path, sides in raw_diff(folder, [head, target], gitenv).items():
            if path in brought:
                changes.setdefault(path, sides)
    return changes


def begins(folder, rel, oid, gitenv=PLAIN):
    """Is the regular file at rel all of, or the beginning of, blob `oid` as checked out
    at rel? -> the Expect of what the file holds (its plain blob id), or None. Read in
    chunks, never whole."""
    request, header = filtered_request(oid, rel)
    proc = subprocess.Popen(FILTERED, cwd=folder, env=environment(gitenv=gitenv),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(request)
        proc.stdin.close()
        if proc.stdout.read(len(header)) != header:
            return None
        fd = os.open(os.path.join(folder, rel), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            h = hashlib.sha256() if len(oid) == 64 else hashlib.sha1()
            h.update(b"blob %d\0" % st.st_size)
            size = 0
            while True:
                mine = os.read(fd, CHUNK)
                if not mine:
                    break
                if proc.stdout.read(len(mine)) != mine:
                    return None
                h.update(mine)
                size += len(mine)
        finally:
            os.close(fd)
        # git ends the content with a newline of its own: nothing left after the file's
        # bytes means the file took that newline too, and is longer than the version.
        if size != st.st_size or not proc.stdout.read(1):
            return None
        return Expect("100755" if st.st_mode & 0o100 else "100644", oid=h.hexdigest())
    except OSError:
        return None
    finally:
        proc.kill()
        proc.wait()


def find(folder, gitenv=PLAIN):
    """The failed pull's leftovers, by the rule above: {path: Leftover}."""
    found = {}
    for rel, (head, target) in target_changes(folder, gitenv).items():
        if head and head[0] == "160000" or target and target[0] in ("160000", "120000"):
            continue  # repositories inside; a link is written whole, never cut
        if target is None:
            if head is not None and not os.path.lexists(os.path.join(folder, rel)):
                found[rel] = Leftover(head, None)  # removed as the target removes it
            continue
        expect = begins(folder, rel, target[1], gitenv)
        if expect is not None and not (head and expect.oid == head[1]):  # (HEAD's: nothing to do)
            found[rel] = Leftover(head, expect)
    return found


def checked_out(folder, rel, oid, gitenv=PLAIN):
    """HEAD's version of rel as git checks it out (its filters), or None: too big or unread."""
    out = git.git(folder, "cat-file", "-s", oid, check=False, gitenv=gitenv)
    if out is None or int(out) > PUT_BACK_MAX:
        return None
    request, header = filtered_request(oid, rel)
    proc = subprocess.run(FILTERED, cwd=folder, env=environment(gitenv=gitenv), input=request,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if proc.returncode or not proc.stdout.startswith(header) or \
            not proc.stdout.endswith(b"\n"):
        return None
    return proc.stdout[len(header):-1]


def put_back(folder, leftovers, gitenv=PLAIN):
    """Each leftover as HEAD has it, where it still holds what find() saw. -> {path: why}
    of those kept as they are."""
    writer, kept = Writer(folder), {}
    for rel, left in sorted(leftovers.items()):
        try:
            if left.head is None:
                done = writer.remove(rel, left.expect)
            else:
                data = checked_out(folder, rel, left.head[1], gitenv)
                done = data is not None and writer.put(rel, left.head[0], data, left.expect)
            if not done:
                kept[rel] = "changed meanwhile, or too big to put back here"
        except (OSError, Refused) as e:
            kept[rel] = getattr(e, "strerror", None) or str(e)
    return kept


def signature(folder, rel):
    """What tells that a kept leftover changed since (the user wrote it): lstat's."""
    try:
        st = os.lstat(os.path.join(folder, rel))
    except OSError:
        return None
    return st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns
