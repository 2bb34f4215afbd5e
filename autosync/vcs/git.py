"""The few things the committer asks git directly, when the DVCS is git.

Configured commands cover the daily work for any DVCS; these cover what no
command string can describe: where the repository is, and exactly what the
next commit will record (for a commit message that names every file, also
when `startupcmd` found the changes by itself).
"""
import os
import subprocess

from autosync.vcs.commands import PATHSPEC_OPTIONS, environment, why
from autosync.core.messages import host_of
from autosync.vcs.git_environment import PLAIN

ACTIONS = {"A": "added", "M": "modified", "T": "modified", "D": "removed"}
GITLINK = "160000"  # the mode of a repository inside the tree (a submodule)


def git(folder, *args, check=True, data=None, paths=None, gitenv=PLAIN):
    """Run git in folder -> stdout bytes (None on failure when not check).

    data: its standard input. paths: pathspecs given on standard input (NUL-ended,
    `--pathspec-from-file`), never on the command line where every local user can read
    them; args[0] must take that option (add, rm, reset, checkout, ...).
    A failure raises RuntimeError("git SUBCOMMAND: git's lines that say why")."""
    if paths is not None:
        args = args[:1] + tuple(PATHSPEC_OPTIONS) + args[1:]
        data = b"".join(os.fsencode(p) + b"\0" for p in paths)
    proc = subprocess.run(("git",) + args, cwd=folder, env=environment(gitenv=gitenv),
                          input=data,
                          stdin=subprocess.DEVNULL if data is None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        if check:
            said = " | ".join(why(proc.stderr.decode(errors="replace")))
            raise RuntimeError("git %s: %s" % (args[0], said or "exit %d" % proc.returncode))
        return None
    return proc.stdout


def hash_open(folder, rel, fd, gitenv=PLAIN):
    """The blob id git would store for the file at rel (its clean filters, line endings),
    which the caller holds open as fd; None if the file at rel is not fd's any more, or
    changed while git read it.

    git reads the file itself, streamed: its name goes on stdin (`--stdin-paths`), since
    `--path` would show it to every local user. None for a name with a newline (git
    reads the names line by line)."""
    if "\n" in rel:
        return None
    before = os.fstat(fd)
    out = git(folder, "hash-object", "--stdin-paths", data=os.fsencode(rel) + b"\n",
              check=False, gitenv=gitenv)
    try:
        there = os.lstat(os.path.join(folder, rel))
    except OSError:
        return None
    after = os.fstat(fd)
    same = all(getattr(there, f) == getattr(before, f) == getattr(after, f)
               for f in ("st_ino", "st_dev", "st_size", "st_mtime_ns"))
    return out.decode("ascii", "replace").strip() if out and same else None


def git_dir(folder, gitenv=PLAIN):
    """The repository's metadata folder (.git), absolute; None if folder is not in git."""
    out = git(folder, "rev-parse", "--absolute-git-dir", check=False, gitenv=gitenv)
    return os.fsdecode(out.strip()) if out else None


def is_top(folder, gitenv=PLAIN):
    """Is `folder` the top of its working tree (not a folder inside one)?"""
    top = git(folder, "rev-parse", "--show-toplevel", check=False, gitenv=gitenv)
    return bool(top) and os.path.realpath(os.fsdecode(top.strip())) == os.path.realpath(folder)


def staged_changes(folder, gitenv=PLAIN):
    """What the next commit records, as batch changes with paths relative to `folder`;
    a folder staged as a gitlink (a repository inside) has "gitlink": True.

    None when git cannot tell (an error)."""
    out = git(folder, "diff", "--cached", "--raw", "-z", "-M", "--relative", check=False,
              gitenv=gitenv)
    return None if out is None else raw_changes(out)


def raw_changes(out):
    """git's `--raw -z` list of changes (diff, diff-tree) as batch changes."""
    fields = [os.fsdecode(f) for f in out.split(b"\0")]
    changes, i = [], 0
    while i + 1 < len(fields) and fields[i]:
        _, mode, _, _, status = fields[i][1:].split(" ")
        kind = status[:1]
        if kind in ("R", "C"):
            change = {"action": "moved" if kind == "R" else "added",
                      "path": fields[i + 2], "src": fields[i + 1]}
            i += 3
        else:
            change = {"action": ACTIONS.get(kind, "modified"), "path": fields[i + 1]}
            i += 2
        if mode == GITLINK:
            change["gitlink"] = True
        changes.append(change)
    return changes


def tracked_files(folder, gitenv=PLAIN):
    """The files git tracks below `folder`, relative to it."""
    out = git(folder, "ls-files", "-z", check=False, gitenv=gitenv) or b""
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def committed_files(folder, rev="HEAD", gitenv=PLAIN):
    """The files commit `rev` holds below `folder`, relative to it (not the index, which
    lags HEAD after a quick commit until it is settled)."""
    out = git(folder, "ls-tree", "-r", "-z", "--name-only", rev, "--", check=False,
              gitenv=gitenv) or b""
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def changed_paths(folder, gitenv=PLAIN):
    """What git sees changed below `folder`, relative to it: -> (removed, other)."""
    prefix = os.fsdecode((git(folder, "rev-parse", "--show-prefix",
                              gitenv=gitenv) or b"").strip())
    out = git(folder, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames",
              "--", ".", gitenv=gitenv)
    removed, other = [], []
    for entry in out.split(b"\0"):
        if len(entry) > 3:
            path = os.path.relpath(os.fsdecode(entry[3:]), prefix or ".")
            (removed if b"D" in entry[:2] else other).append(path)
    return removed, other


def untracked_repositories(folder, gitenv=PLAIN):
    """Folders below `folder` that hold a repository of their own and are not tracked
    (git lists them as one entry ending in "/"); ignored ones are left out."""
    out = git(folder, "ls-files", "--others", "--exclude-standard", "-z", check=False,
              gitenv=gitenv) or b""
    return [os.fsdecode(p)[:-1] for p in out.split(b"\0") if p.endswith(b"/")]


def submodules(folder, gitenv=PLAIN):
    """The paths .gitmodules declares, relative to `folder`: the gitlinks the user wanted."""
    top = git(folder, "rev-parse", "--show-toplevel", check=False, gitenv=gitenv)
    if not top:
        return set()
    top = os.fsdecode(top.strip())
    out = git(top, "config", "--file", ".gitmodules", "-z", "--get-regexp",
              r"^submodule\..*\.path$", check=False, gitenv=gitenv) or b""
    paths = set()
    for entry in out.split(b"\0"):
        if b"\n" in entry:
            path = os.path.join(top, os.fsdecode(entry.split(b"\n", 1)[1]))
            paths.add(os.path.relpath(path, folder))
    return paths


def head(folder, ref="HEAD", gitenv=PLAIN):
    """The commit `ref` names (HEAD, or "@{upstream}": what the remote had when we last
    pushed or fetched), or None."""
    out = git(folder, "rev-parse", "-q", "--verify", ref, check=False, gitenv=gitenv)
    return out.strip() if out else None


def unpushed(folder, gitenv=PLAIN):
    """How many commits on HEAD the remote lacks, as this repository knows it: -> (count,
    True) counted against the upstream branch; (count, False) when there is none, counted
    against every remote branch (all of HEAD's commits when there is no remote branch at
    all); None when git cannot count (no commit yet)."""
    out = git(folder, "rev-list", "--count", "@{upstream}..HEAD", check=False, gitenv=gitenv)
    if out is not None:
        return int(out), True
    out = git(folder, "rev-list", "--count", "HEAD", "--not", "--remotes", check=False,
              gitenv=gitenv)
    return (int(out), False) if out is not None else None


def changed_names(folder, before, after, gitenv=PLAIN):
    """The paths below `folder` that differ between two commits (a pull's), relative."""
    if not before or not after or before == after:
        return []
    names = git(folder, "diff", "--name-only", "-z", "--relative", before, after, check=False,
                gitenv=gitenv)
    return [os.fsdecode(n) for n in (names or b"").split(b"\0") if n]


def pulled(folder, before, after, files=None, gitenv=PLAIN):
    """What a pull brought, for the `pulled` event: files changed and the hosts they came
    from. `files`: changed_names(), if the caller has them."""
    if not before or not after or before == after:
        return {"changed": before != after and after is not None, "files": [], "hosts": []}
    if files is None:
        files = changed_names(folder, before, after, gitenv=gitenv)
    subjects = git(folder, "log", "--format=%s", b"%s..%s" % (before, after), check=False,
                   gitenv=gitenv)
    hosts = []
    for subject in os.fsdecode(subjects or b"").splitlines():
        host = host_of(subject)
        if host and host not in hosts:
            hosts.append(host)
    return {"changed": True, "files": files[:200], "count": len(files), "hosts": hosts}


def index_locked(gitdir):
    """Some git is writing the index now (or a killed one left its lock behind)."""
    return os.path.lexists(os.path.join(gitdir, "index.lock"))


def no_index(gitdir):
    """Environment for a command that reads the index without needing it here (diff-tree
    of two trees, check-attr): an empty one (a file that is never there). At 1,000,000
    files each read of the real one costs about 110 ms. Attributes still come from the
    folder's .gitattributes files."""
    return {"GIT_INDEX_FILE": os.path.join(gitdir, "autosync-no-index")}


def index_stat(gitdir):
    """The index file's identity and times, or None: git replaces the file at every
    write, so an unchanged answer means nobody wrote the index since."""
    try:
        st = os.stat(os.path.join(gitdir, "index"))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
