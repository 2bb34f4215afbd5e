"""A pulled tree that holds one name twice in a folder, checked out as git does, the
version git leaves out kept as a conflict copy (settle_odd, for git.py's GitPull)."""

import collections
import logging
import os
import time

from autosync.core.copies import copy_name
from autosync.core.messages import host_of, printable
from autosync.vcs.git import no_index
from autosync.vcs.pull.common import GITLINK, entry_count

log = logging.getLogger("autosync.gitpull")


def settle_odd(pull, head, theirs):
    """A pulled tree that holds one name twice in a folder (two entries `a`, or a file
    `x` beside a folder `x`), which git's own tools never write but `git clone` and
    `git pull` check out all the same: git's index takes the later entry (a folder's
    files replace the file of its name), and so is it here, instead of a refusal
    that would stop every pull and push. The version git leaves out is kept as a
    conflict copy (named for the pulled commit's host and time, so every machine
    that settles it makes the same tree), in a commit on top of the pulled one,
    which this machine pushes. Only the trees HEAD lacks are read to find out; a
    tree that also holds a path git refuses is left to refuse_unsafe.
    -> (the commit to pull, [the copies kept])"""
    base = head or pull.git("hash-object", "-t", "tree", "--stdin", data=b"").stdout.decode().strip()
    tree = pull.rev(theirs + "^{tree}")
    out = pull.git("diff-tree", "-r", "-t", "-z", "--no-renames", base, theirs,
                   env=no_index(pull.gitdir)).stdout.split(b"\0")
    trees = [tree] + [info.split(b" ")[3].decode() for info in out[0::2]
                      if info.startswith(b":") and info.split(b" ")[1] == b"040000"]
    listed = pull.git("cat-file", "--batch", data=b"".join(
        t.encode() + b"\n" for t in trees)).stdout
    at, odd = 0, False
    for _ in trees:
        end = listed.index(b"\n", at)
        header, at = listed[at:end].split(), end + 1
        if len(header) != 3:
            continue  # (missing here: the checks after this one say so)
        body, at = listed[at:at + int(header[2])], at + int(header[2]) + 1
        names = []
        while body:
            info, _, body = body.partition(b"\0")
            names.append(info.partition(b" ")[2])
            body = body[len(tree) // 2:]
        odd = odd or len(names) != len(set(names))
    if not odd:
        return theirs, []
    effective, dropped, below = {}, [], collections.Counter()
    for record in pull.git("ls-tree", "-r", "-z", tree).stdout.split(b"\0"):
        if not record:
            continue
        info, _, name = record.partition(b"\t")
        mode, _, oid = info.decode().split()
        path = os.fsdecode(name)
        folders = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
        gone = [p for p in [path] + folders if p in effective]
        if below[path]:
            gone += [p for p in effective if p.startswith(path + "/")]
        for p in gone:
            old_mode, old_oid = effective.pop(p)
            for i in range(1, p.count("/") + 1):
                below["/".join(p.split("/")[:i])] -= 1
            if (p, old_mode, old_oid) != (path, mode, oid):
                dropped.append((p, old_mode, old_oid))
        effective[path] = (mode, oid)
        for folder in folders:
            below[folder] += 1
    fields = pull.git("log", "-1", "--format=%ct%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd"
                      "%x00%s", "--date=raw", theirs).stdout.decode("utf-8", "surrogateescape")
    stamp, *who, subject = fields.rstrip("\n").split("\0", 7)
    stamp, host = int(stamp), host_of(subject) or who[0]

    def free(name):
        parts = name.split("/")
        return name not in effective and not below[name] and not any(
            "/".join(parts[:i]) in effective for i in range(1, len(parts)))
    copies, pairs = [], []
    for path, mode, oid in dropped:
        if mode == GITLINK:
            log.warning("the pulled commit %s holds %s twice: the other submodule pointer "
                        "is in history only", theirs[:12], printable(path))
            continue
        parts = path.split("/")
        cut = next((i for i in range(1, len(parts)) if "/".join(parts[:i]) in effective),
                   None)   # (its folder is a file now: the copy goes beside that file)
        name = path if cut is None else "/".join(parts[:cut]) + " - " + " - ".join(parts[cut:])
        copy = copy_name(name, host, stamp, free, clock=time.gmtime)
        effective[copy] = (mode, oid)
        copies.append({"path": path, "copy": copy, "host": host})
        pairs.append((path, copy))
    index = os.path.join(pull.gitdir, "autosync-odd-index")
    env = {"GIT_INDEX_FILE": index}
    try:
        if os.path.lexists(index):
            os.unlink(index)
        pull.git("update-index", "-z", "--index-info", env=env, check=False, data=b"".join(
            b"%s %s\t%s\0" % (m.encode(), o.encode(), os.fsencode(p))
            for p, (m, o) in effective.items()))
        if entry_count(index) != len(effective):
            return theirs, []   # a path git refuses besides: refuse_unsafe says which
        pull.copy_rules_in_tree(pairs, env)
        settled = pull.git("write-tree", env=env).stdout.decode().strip()
    finally:
        for leftover in (index, index + ".lock"):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    lines = ["conflict: %s (other version kept as %s)" % (printable(c["path"]),
                                                        printable(c["copy"]))
             for c in copies]
    message = "autosync on %s: checked out as git does, %d versions kept (the pulled " \
        "tree held a name twice)" % (host, len(copies)) + \
        ("\n\n" + "\n".join(lines) if lines else "")
    log.warning("the pulled commit %s holds a name twice in a folder (%s): written as git "
                "checks it out, the version it leaves out kept as %s", theirs[:12],
                ", ".join(printable(c["path"]) for c in copies[:3]) or "the same version",
                ", ".join(printable(c["copy"]) for c in copies[:3]) or "nothing")
    # Every machine that settles this commit makes this very commit (the pulled one's
    # host, people and times; copies named in UTC; unsigned): no two settlings of it
    # ever meet in a merge whose base is the odd tree, which git's merge misreads.
    names = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
             "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE")
    return pull.git("commit-tree", "--no-gpg-sign", settled, "-p", theirs,
                    env=dict(zip(names, who)), data=os.fsencode(message)
                    ).stdout.decode().strip(), copies
