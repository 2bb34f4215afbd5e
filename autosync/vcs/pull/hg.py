"""autosync-hgmerge: merge a Mercurial working copy's two heads, keeping every version.

Mercurial's counterpart of vcs/pull/finish.py (the policy is keep_both.py), run
by the Mercurial example's `pullcmd` after `hg pull`
(docs/examples/mercurial.autosync):

* a merge left half-done (a crash) is finished first;
* two heads on the working copy's branch (both machines committed while
  apart) are merged. Text changed in different places is merged by hg as
  usual. For each file hg cannot merge, the same as with git:
  - both sides have a version (edited on both, added on both): the newer one
    stays at the path, the other beside it as a conflict copy named by
    copies.copy_name, `name (conflict from HOST YYYY-MM-DD HHMMSS).ext`;
    "newer" is the side whose last commit changing the path since the two
    sides parted (what one has and the other has not) has the later date,
    ties broken by the larger changeset id, so every machine picks the same
    winner;
  - one side deleted it, the other changed it: the changed version stays;
  then the merge is committed as `autosync on HOST: merged, N conflicts` with
  one `conflict: PATH (other version kept as COPY)` line each
  (messages.merge_message). Files are written from the committed versions,
  never from merge output, so conflict markers never reach a commit;
* one head that the working copy is behind: update to it, refusing (exit 1)
  when that would merge with uncommitted changes; so does a merge, and the
  daemon then commits them and pulls again.

Every hg run costs about a quarter of a CPU second (Python starting hg), so hg
is asked about all the conflicting files at once: per side one `files`, one
`cat` (into a scratch folder in .hg) and one `log`, then one `add` and one
`resolve -m`; a rename or a deletion adds one `status` and one `files` on
the side without the path. 14 hg runs a merge, whatever the number of files;
3 a pull that is only an update, 1 a pull that brought nothing. File names
reach hg only as `path:` patterns on stdin or in a file in the scratch
folder, never on its command line.

What it did is printed once: one line per conflict copy on stdout,
`autosync-conflict {"path": ..., "copy": ..., "host": ...}` (JSON; see
reported()), and a readable line per conflict on stderr. Exit status 0 when
the working copy ends on the single head with nothing unresolved.
"""
import argparse
import collections
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from autosync.core import cli
from autosync.vcs.commands import HG_LIST, why
from autosync.vcs.pull.keep_both import keep_both
from autosync.fs.guarded import EXECUTABLE, LINK, Expect, Writer
from autosync.core.messages import escaped, host_of, merge_message, printable

log = logging.getLogger("autosync.hgmerge")

PREFIX = "autosync-conflict "
SCRATCH = "autosync-hgmerge-"  # the scratch folders' names in .hg (scratch())
LEFT_AFTER = 3600  # seconds after which a scratch folder is a killed merge's
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


def parse_nul(data):
    """hg output of NUL-ended fields -> str fields (names as os.fsdecode gives them)."""
    return data.decode("utf-8", "surrogateescape").split("\0")[:-1]


def flags_at(hg, rev, names):
    """{name: hg's flags} of those of names that rev has as files: one hg run."""
    if not names:
        return {}
    _, out = hg.run("files", "-r", rev, "-T", "{flags}\\0{path}\\0",
                    paths=[pattern(n) for n in names], ok=(0, 1))
    fields, wanted = parse_nul(out), set(names)
    # path: also matches what is under a folder of that name: only the name itself counts
    return {path: flags for flags, path in zip(fields[::2], fields[1::2]) if path in wanted}


def copy_sources(hg, rev, names):
    """{name: the name it was copied (renamed) from} for those of names that rev added
    as a copy since the merge's common ancestor: one hg run."""
    _, out = hg.run("status", "-C", "-a", "--rev", "ancestor(p1(), p2())", "--rev", rev,
                    "-T", "{path}\\0{source}\\0", paths=[pattern(n) for n in names])
    fields = parse_nul(out)
    return {path: source for path, source in zip(fields[::2], fields[1::2]) if source}


def cat(hg, rev, names, folder):
    """Write rev's version of each name under folder (folder/NAME): one hg run, whatever
    the number. hg makes each output name from the -o template (%p: the name as it is,
    nothing in it expanded); folder is inside the working copy's .hg, and the template is
    its relative name, which holds no template character (see scratch())."""
    template = os.path.relpath(folder, hg.root) + "/%p"
    assert not set("%{}\\") & set(template[:-2]), template
    hg.run("cat", "-r", rev, "-o", template, paths=[pattern(n) for n in names])


class Version(collections.namedtuple("Version", "path flags file")):
    """One side's committed version of a conflicted path: its name on that side (the
    path, or the name it had there when the other side renamed it), hg's flags, and the
    scratch file holding its bytes, read when needed, so that one path's versions are in
    memory at a time."""

    def data(self):
        with open(self.file, "rb") as f:
            return f.read()


def versions(hg, rev, other_rev, paths, folder):
    """{path: Version} of rev for each of paths it has, by the path itself or, when the
    other side renamed it, by the name it had here; a path rev deleted is left out.
    2 hg runs (files, cat), 4 when some path is missing on rev (status, files)."""
    names = {p: p for p in paths}
    flags = flags_at(hg, rev, paths)
    missing = [p for p in paths if p not in flags]
    if missing:
        sources = copy_sources(hg, other_rev, missing)
        flags.update(flags_at(hg, rev, sorted(set(sources.values()) - set(flags))))
        names.update((p, s) for p, s in sources.items() if s in flags)
    kept = {p: n for p, n in names.items() if n in flags}
    if kept:
        os.mkdir(folder)
        cat(hg, rev, sorted(set(kept.values())), folder)
    return {p: Version(n, flags[n], os.path.join(folder, n)) for p, n in kept.items()}


# One commit: fields NUL-ended, its files (as many as the count) each NUL-ended, then the
# summary line up to the newline (a summary line is the one field that may hold a NUL).
CHANGE = ("{node}\\0{date|hgdate}\\0{author|person}\\0{files|count}\\0"
          "{files % \"{file}\\0\"}{desc|firstline}\\n")


def changes(out):
    """CHANGE's output -> [(node, unix time, author, files, summary line)]."""
    found, at = [], 0

    def upto(sep):
        nonlocal at
        end = out.find(sep, at)
        end = len(out) if end < 0 else end
        field, at = out[at:end].decode("utf-8", "surrogateescape"), end + 1
        return field

    while at < len(out):
        node, date, author, count = (upto(b"\0") for _ in range(4))
        files = {upto(b"\0") for _ in range(int(count))}
        found.append((node, int(date.split()[0]), author, files, upto(b"\n")))
    return found


def last_changes(hg, rev, other_rev, names, folder):
    """{name: (date, changeset id, host, author)} of the newest commit on rev's side that
    changed each name: one hg run for all.

    "This side" is what rev has and other_rev has not (only(rev, other_rev): what was
    made while apart); "changed" is being in the commit's file list, as hg's file()
    revset has it. The newest by date then id, not by revision number: numbers differ
    between clones, and both machines must come to the same answer. A name no such
    commit changed gets rev's own commit."""
    if not names:
        return {}
    listed = os.path.join(folder, "names")
    with open(listed, "wb") as f:
        f.write(b"".join(os.fsencode(pattern(n)) + b"\0" for n in names))
    # The patterns are read from a file, not stdin: hg reads a revset's file patterns
    # once for each time it builds the revset's matcher.
    revset = "%s + (only(%s, %s) and file('listfile0:%s'))" % (
        rev, rev, other_rev, os.path.relpath(listed, hg.root))
    best, own = {}, None
    for node, date, author, files, summary in changes(
            hg.run("log", "-r", revset, "-T", CHANGE)[1]):
        entry = (date, node, host_of(summary) or author, author)
        if node == rev:
            own = entry
        for name in files.intersection(names):
            best[name] = max(best.get(name, entry), entry)
    return {n: best.get(n, own) for n in names}


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
                    "history", printable(rel))


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
    """keep_both.Place for a merge in progress in a Mercurial working copy: a version is a
    Version; "ours" is p1, "theirs" p2. Every hg question was asked before (last: each
    side's {name: last change})."""

    def __init__(self, root, last):
        self.root, self.last = root, last

    def last_change(self, side, version):
        return self.last[side][version.path]

    def taken(self, rel):
        return os.path.lexists(os.path.join(self.root, rel))

    def is_folder(self, rel):
        return os.path.isdir(os.path.join(self.root, rel))

    def holds(self, rel, version):
        return holds(self.root, rel, version.data())

    def write(self, rel, version):
        put(self.root, rel, version.flags, version.data())


def scratch(root):
    """A new private folder inside the working copy's .hg, for hg's output files: on the
    working copy's file system (not a /tmp in memory), named only with [a-z0-9_-]. One
    left by a merge that was killed (an hour old: no merge takes that long) goes first."""
    store = os.path.join(root, ".hg")
    for name in os.listdir(store):
        left = os.path.join(store, name)
        try:
            if name.startswith(SCRATCH) and time.time() - os.lstat(left).st_mtime > LEFT_AFTER:
                shutil.rmtree(left, ignore_errors=True)
        except OSError:
            pass
    return tempfile.mkdtemp(prefix=SCRATCH, dir=store)


def resolve(hg, paths, p1, p2):
    """Settle the files hg could not merge by keep_both -> [{"path", "copy",
    "host"}]. The hg runs do not grow with the number of files: per side one `files`,
    one `cat` and, when a path has a version on both sides, one `log` (and when a path
    is missing on a side, one `status` and one `files` more for the renames); then one
    `add` and one `resolve -m` for all."""
    folder = scratch(hg.root)
    try:
        ours = versions(hg, p1, p2, paths, os.path.join(folder, "ours"))
        theirs = versions(hg, p2, p1, paths, os.path.join(folder, "theirs"))
        both = [p for p in paths if p in ours and p in theirs]
        place = WorkingCopy(hg.root, {
            "ours": last_changes(hg, p1, p2, sorted({ours[p].path for p in both}), folder),
            "theirs": last_changes(hg, p2, p1, sorted({theirs[p].path for p in both}),
                                   folder)})
        copies, written = [], set()
        for path in paths:
            copy, wrote = keep_both(path, ours.get(path), theirs.get(path), place)
            copies += [copy] if copy else []
            written.update(wrote)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if written:
        hg.run("add", "-q", paths=sorted(pattern(p) for p in written))
    if paths:
        hg.run("resolve", "-m", paths=[pattern(p) for p in paths])
    return copies


def finish(hg, host, p1, p2):
    """Resolve what the merge in progress of p1 and p2 left and commit it -> the conflict
    copies."""
    copies = resolve(hg, unresolved(hg), p1, p2)
    left = unresolved(hg)
    if left:
        raise Failed("still unresolved after the merge: %s" % ", ".join(left[:10]))
    hg.run("commit", "-q", "-l", "-", data=os.fsencode(merge_message(host, copies)))
    return copies


# The working copy's parents and the other heads of its branch (oldest first), each line
# `p1 NODE`, `p2 NODE` or `head NODE`: one hg run, rendered once for the working copy.
STATE = ("{revset('p1()') % 'p1 {node}\\n'}{revset('p2()') % 'p2 {node}\\n'}"
         "{revset('head() and branch(p1()) and not p1() and not closed()')"
         " % 'head {node}\\n'}")


def state(hg):
    """-> (p1 or None, p2 or None, [other heads of the branch, oldest first])."""
    found = {"p1": [], "p2": [], "head": []}
    for line in hg.out("log", "-r", "wdir()", "-T", STATE).splitlines():
        kind, node = line.split()
        found[kind].append(node)
    return (found["p1"] or [None])[0], (found["p2"] or [None])[0], found["head"]


def sync(root, host):
    """Finish a half-done merge, merge every other head, or update -> conflict copies."""
    hg = Hg(root)
    copies = []
    p1, p2, heads = state(hg)
    if p2:
        log.warning("finishing a merge that was left half-done")
        copies += finish(hg, host, p1, p2)
        p1, _, heads = state(hg)
    for n, head in enumerate(heads):
        if n:  # the last head moved the working copy
            p1 = (hg.nodes("p1()") or [None])[0]
        # which of the two is the other's ancestor, if one is: one hg run
        related = hg.nodes("(%s and ::%s) + (%s and ::%s)" % (head, p1, p1, head)) if p1 else []
        if head in related:
            continue
        if not p1 or p1 in related:  # behind: no merge
            hg.run("update", "-q", "--config", "commands.update.check=noconflict", "-r", head)
            continue
        hg.run(*MERGE, "-r", head, ok=(0, 1))
        copies += finish(hg, host, p1, head)
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
    cli.log_to_stderr(logging.WARNING, "autosync-hgmerge: %(message)s")
    host = args.host or socket.gethostname()
    try:
        root = working_copy_root(args.folder)
        copies = sync(root, host)
    except (Failed, OSError) as e:
        print(escaped("autosync-hgmerge: %s" % e), file=sys.stderr)
        return 1
    try:
        for c in copies:
            print(PREFIX + json.dumps(c), flush=True)
    except BrokenPipeError:  # whoever started us is gone; the merge is committed anyway
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
