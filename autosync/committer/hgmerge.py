"""autosync-hgmerge: merge a Mercurial working copy's two heads, keeping every version.

Mercurial's counterpart of vcs/gitmerge.py (the policy is copies.keep_both), run
by the Mercurial example's `pullcmd` after `hg pull`
(docs/examples/mercurial.autosync):

* a merge left half-done (a crash) is finished first;
* two heads on the working copy's branch (both machines committed while
  apart) are merged. Text changed in different places is merged by hg as
  usual. For each file hg cannot merge, the same as with git:
  - both sides have a version (edited on both, added on both): the newer one
    stays at the path, the other beside it as a conflict copy named by
    copies.copy_name, `name (conflict from HOST YYYY-MM-DD HHMMSS).ext`;
    "newer" is the side whose last commit touching the path has the later
    date, ties broken by the larger changeset id, so every machine picks
    the same winner;
  - one side deleted it, the other changed it: the changed version stays;
  then the merge is committed as `autosync on HOST: merged, N conflicts` with
  one `conflict: PATH (other version kept as COPY)` line each
  (messages.merge_message). Files are written from the committed versions,
  never from merge output, so conflict markers never reach a commit;
* one head that the working copy is behind: update to it, refusing (exit 1)
  when that would merge with uncommitted changes; so does a merge, and the
  daemon then commits them and pulls again.

What it did is printed once: one line per conflict copy on stdout,
`autosync-conflict {"path": ..., "copy": ..., "host": ...}` (JSON; see
reported()), and a readable line per conflict on stderr. Exit status 0 when
the working copy ends on the single head with nothing unresolved.
"""
import argparse
import json
import logging
import os
import socket
import subprocess
import sys

from autosync.vcs.commands import HG_LIST, why
from autosync.core.copies import keep_both
from autosync.vcs.guarded import EXECUTABLE, LINK, Expect, Writer
from autosync.core.messages import host_of, merge_message

log = logging.getLogger("autosync.hgmerge")

PREFIX = "autosync-conflict "
# Merge tool: hg's own text merge (changes in different places merge cleanly);
# what it cannot merge is left unresolved for us. No `.orig` files in the folder.
MERGE = ("merge", "-y", "--tool", ":merge", "--config", "ui.origbackuppath=.hg/origbackups")


class Failed(Exception):
    pass


class Hg:
    """hg commands in one working copy, with plain (HGPLAIN) output."""

    def __init__(self, root):
        self.root = root

    def run(self, *args, ok=(0,), paths=None, data=None):
        """-> (returncode, stdout bytes); raises Failed on a return code not in ok.

        paths: file patterns, given on stdin (hg's `listfile0:`) and never on the command
        line, where every local user can read them; data: stdin (a commit message)."""
        if paths is not None:
            args += ("--", HG_LIST)
            data = b"".join(os.fsencode(p) + b"\0" for p in paths)
        env = dict(os.environ, HGPLAIN="1")
        proc = subprocess.run(("hg", "--cwd", self.root) + args, env=env, input=data,
                              stdin=subprocess.DEVNULL if data is None else None,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode not in ok:
            said = " | ".join(why(proc.stderr.decode("utf-8", "replace")))
            raise Failed("hg %s: %s" % (args[0], said or "exit %d" % proc.returncode))
        return proc.returncode, proc.stdout

    def out(self, *args, paths=None):
        return self.run(*args, paths=paths)[1].decode("utf-8", "surrogateescape")

    def nodes(self, revset):
        return self.out("log", "-r", revset, "-T", "{node}\n").split()


def pattern(path):
    return "path:" + path


def version(hg, rev, path):
    """(flags, content) of path in rev, or None if rev has no such file."""
    rc, flags = hg.run("files", "-r", rev, "-T", "{flags}", paths=[pattern(path)], ok=(0, 1))
    if rc:
        return None
    return flags.decode(), hg.run("cat", "-r", rev, paths=[pattern(path)])[1]


def copy_source(hg, rev, path):
    """Where path came from on rev's side since the merge's common ancestor (a rename)."""
    out = hg.out("status", "-C", "-a", "--rev", "ancestor(p1(), p2())", "--rev", rev,
                 paths=[pattern(path)])
    lines = out.splitlines()
    return lines[1].strip() if len(lines) > 1 and lines[1].startswith("  ") else None


def side(hg, rev, path, other_rev):
    """(path on this side, flags, content): the path itself or, if this side does not
    have it because the other side renamed it, the name it had here; None if deleted."""
    found = version(hg, rev, path)
    if found is not None:
        return (path,) + found
    source = copy_source(hg, other_rev, path)
    if source:
        found = version(hg, rev, source)
        if found is not None:
            return (source,) + found
    return None


def last_change(hg, rev, path):
    """(date, changeset id, host) of the newest commit on rev's side touching path.

    The newest by date then id, not by revision number: numbers differ between
    clones, and both machines must come to the same answer."""
    out = hg.out("log", "-r", "::%s" % rev, "-T",
                 "{date|hgdate}\\0{node}\\0{author|person}\\0{desc|firstline}\\n",
                 paths=[pattern(path)])
    best = None
    for line in out.splitlines():
        date, node, author, subject = line.split("\0", 3)
        entry = (int(date.split()[0]), node, host_of(subject) or author)
        best = max(best, entry) if best else entry
    if best is None:
        date, node, author, subject = hg.out(
            "log", "-r", rev, "-T",
            "{date|hgdate}\\0{node}\\0{author|person}\\0{desc|firstline}").split("\0", 3)
        best = (int(date.split()[0]), node, host_of(subject) or author)
    return best


def put(root, rel, flags, data):
    """Write one committed version at rel (a file with its mode, or a symlink) through
    the guarded writer: over only what was there just before (hg's merge output), so
    that a write made meanwhile keeps its bytes (both versions are in history)."""
    mode = LINK if "l" in flags else EXECUTABLE if "x" in flags else "100644"
    full = os.path.join(root, rel)
    expect = None
    if os.path.islink(full):
        expect = Expect(LINK, data=os.fsencode(os.readlink(full)))
    elif os.path.isfile(full):
        with open(full, "rb") as f:
            executable = os.fstat(f.fileno()).st_mode & 0o100
            expect = Expect(EXECUTABLE if executable else "100644", data=f.read())
    if not Writer(root).put(rel, mode, data, expect):
        log.warning("%s changed while the merge ran: kept as it is; both versions are in "
                    "history", rel)


def holds(root, rel, data):
    """True if rel is a file holding exactly data (a copy written before a crash)."""
    full = os.path.join(root, rel)
    if not os.path.isfile(full) or os.path.islink(full):
        return False
    with open(full, "rb") as f:
        return f.read() == data


def unresolved(hg):
    out = hg.out("resolve", "-l", "-T", "{mergestatus}\\0{path}\\0")
    fields = out.split("\0")
    return sorted(path for status, path in zip(fields[::2], fields[1::2]) if status == "U")


class WorkingCopy:
    """copies.Place for a merge in progress in a Mercurial working copy: a version
    is side()'s (path on that side, flags, content); "ours" is p1, "theirs" p2."""

    def __init__(self, hg, p1, p2):
        self.hg, self.revs = hg, {"ours": p1, "theirs": p2}

    def last_change(self, side, version):
        return last_change(self.hg, self.revs[side], version[0])

    def taken(self, rel):
        return os.path.lexists(os.path.join(self.hg.root, rel))

    def is_folder(self, rel):
        return os.path.isdir(os.path.join(self.hg.root, rel))

    def holds(self, rel, version):
        return holds(self.hg.root, rel, version[2])

    def write(self, rel, version):
        put(self.hg.root, rel, *version[1:])


def resolve_one(hg, path, p1, p2):
    """Settle one file hg could not merge by copies.keep_both -> {"path", "copy",
    "host"} or None."""
    copy, written = keep_both(path, side(hg, p1, path, p2), side(hg, p2, path, p1),
                              WorkingCopy(hg, p1, p2))
    if written:
        hg.run("add", "-q", paths=sorted({pattern(p) for p in written}))
    hg.run("resolve", "-m", paths=[pattern(path)])
    return copy


def finish(hg, host):
    """Resolve what the merge in progress left and commit it -> the conflict copies."""
    p1, p2 = hg.nodes("p1()")[0], hg.nodes("p2()")[0]
    copies = [c for c in (resolve_one(hg, path, p1, p2) for path in unresolved(hg)) if c]
    left = unresolved(hg)
    if left:
        raise Failed("still unresolved after the merge: %s" % ", ".join(left[:10]))
    hg.run("commit", "-q", "-l", "-", data=os.fsencode(merge_message(host, copies)))
    return copies


def other_heads(hg):
    """Heads of the working copy's branch other than its parent, oldest first."""
    return hg.nodes("head() and branch(p1()) and not p1() and not closed()")


def sync(root, host):
    """Finish a half-done merge, merge every other head, or update -> conflict copies."""
    hg = Hg(root)
    copies = []
    if hg.nodes("p2()"):
        log.warning("finishing a merge that was left half-done")
        copies += finish(hg, host)
    for head in other_heads(hg):
        parents = hg.nodes("p1()")
        if parents and hg.nodes("%s and ::%s" % (head, parents[0])):
            continue
        if not parents or hg.nodes("%s and ::%s" % (parents[0], head)):  # behind: no merge
            hg.run("update", "-q", "--config", "commands.update.check=noconflict", "-r", head)
            continue
        hg.run(*MERGE, "-r", head, ok=(0, 1))
        copies += finish(hg, host)
    return copies


def reported(output):
    """The conflict copies a run announced, read back from its output (for the daemon)."""
    found = []
    for line in output.splitlines():
        if line.startswith(PREFIX):
            try:
                entry = json.loads(line[len(PREFIX):])
            except ValueError:
                continue
            if isinstance(entry, dict) and all(isinstance(entry.get(k), str)
                                               for k in ("path", "copy", "host")):
                found.append({k: entry[k] for k in ("path", "copy", "host")})
    return found


def working_copy_root(folder):
    """The working copy that holds folder, as `hg root` finds it (the nearest folder up
    with a .hg): found here, since every hg run costs a quarter of a CPU second."""
    path = os.path.realpath(folder)
    while True:
        if os.path.isdir(os.path.join(path, ".hg")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            raise Failed("no Mercurial working copy at %s or above it" % folder)
        path = parent


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="autosync-hgmerge",
        description="Merge a Mercurial working copy's heads after `hg pull`, keeping both "
                    "versions of a file changed on two machines (the newer at its path, the "
                    "other beside it as a conflict copy).")
    parser.add_argument("folder", nargs="?", default=".",
                        help="the working copy (default: the current folder)")
    parser.add_argument("--host", default=None,
                        help="this machine's name in the merge commit's message (default: "
                             "the host name; give the config's hostname if you set one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="autosync-hgmerge: %(message)s")
    host = args.host or socket.gethostname()
    try:
        root = working_copy_root(args.folder)
        copies = sync(root, host)
    except (Failed, OSError) as e:
        print("autosync-hgmerge: %s" % e, file=sys.stderr)
        return 1
    try:
        for c in copies:
            print(PREFIX + json.dumps(c), flush=True)
    except BrokenPipeError:  # whoever started us is gone; the merge is committed anyway
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
