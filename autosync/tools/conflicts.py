"""dvcs-autosync conflicts: the conflict copies in the folder, and settling one.

A merge that kept both versions of a file left the other one beside it as
`name (conflict from HOST YYYY-MM-DD HHMMSS).ext` (copies.copy_name,
docs/conflicts.md): HOST made the version in the copy, at that time. This
module lists those copies (copies.find_copies) and settles one: `--keep
mine` keeps the version this machine made, `--keep theirs` the other one; the
version kept ends at the path, the copy goes, and the version dropped stays
in history. `--keep both` keeps both as ordinary files: the copy is renamed to
`name (from HOST YYYY-MM-DD HHMMSS).ext`, a name no tool takes for a conflict copy.
`--json` lists the copies for a program (the history page). The running daemon commits first (or nothing is settled) and
commits the result (a `sync` request, as `restore` does), so it reaches every
machine as one change. Both writes go through guarded.Writer, each only over
what the newest commit holds: an edit made after it is never overwritten.
"""
import argparse
import json
import os
import sys

from autosync.core import cli
from autosync.fs import guarded
from autosync.vcs import git
from autosync.vcs.pull import finish
from autosync.core.copies import find_copies, made_by
from autosync.tools.history import ask_daemon, commit_first, note_first, relative
from autosync.vcs.history import History, HistoryError
from autosync.core.messages import TEXT_MAX, escaped, printable


def mine_is_copy(cfg, copy, is_git):
    """Is the version in the copy the one this machine made? True, False, or None when
    that cannot be told. Never by the host name the copy's name carries alone: cloned
    machines share one. In git the repository says (finish.copy_made_here: which
    side of the merge that made the copy was committed here); a copy no merge made
    (or in another DVCS) is this machine's only if its name is not another host's,
    and cannot be told when it names this machine's host."""
    if is_git:
        made = finish.copy_made_here(cfg.path, copy.copy, copy.path)
        if made != finish.NO_MERGE:
            return made
    return None if copy.host == cfg.hostname else False


def cannot_tell(copy):
    return HistoryError("cannot tell which version of %s this machine made: its history "
                        "does not say (the copy's host name, %s, may be this machine's or "
                        "another's of the same name), so nothing was settled; keep one by "
                        "hand: remove %s, or move it over %s (the other version stays in "
                        "history)" % (printable(copy.path), printable(copy.host),
                                      printable(copy.copy), printable(copy.path)))


def pick(copies, rel):
    """The copy that `rel` (a copy, or a file with exactly one copy) stands for."""
    for copy in copies:
        if copy.copy == rel:
            return copy
    mine = [c for c in copies if c.path == rel]
    if len(mine) == 1:
        return mine[0]
    if not mine:
        raise HistoryError("%s has no conflict copy (dvcs-autosync conflicts lists them)"
                           % printable(rel))
    raise HistoryError("%s has %d conflict copies: name the copy to settle, one of: %s"
                       % (printable(rel), len(mine), "; ".join(printable(c.copy) for c in mine)))


def note(copy, keep):
    """The line the settling commit's message carries (one printable line, TEXT_MAX at most)."""
    head = "conflict settled: kept %s of " % {"mine": "my version", "theirs": "their version",
                                              "both": "both versions"}[keep]
    name = printable(copy.path)
    if len(head) + len(name) > TEXT_MAX:
        name = name[:TEXT_MAX - len(head) - 3] + "..."
    return head + name


def changed(rel):
    return HistoryError("%s changed after the newest commit, so nothing was settled: run this "
                        "again once the daemon has committed it" % printable(rel))


def committed(history, writer, rev, rel):
    """guarded.Expect of the newest commit's version of rel, None if nothing is at rel;
    HistoryError if what is there differs from it: it changed after that commit (or was
    never committed)."""
    entry = history.entries(rev, rel).get(rel)
    if not os.path.lexists(os.path.join(history.cfg.path, rel)):
        return None
    expect = history.expect(rev, rel, entry) if entry else None
    if expect is None or not writer.holds(rel, expect):
        raise changed(rel)
    return expect


def version_in(writer, rel, expect):
    """The bytes of rel (a link's target) on disk, checked to be `expect`'s: the
    version to put at the file, as checked out (git-annex: the content, not a pointer)."""
    fd = writer.folder(rel)
    name = os.path.basename(rel)
    try:
        if expect.mode == guarded.LINK:
            data = os.fsencode(os.readlink(name, dir_fd=fd))
            ok = data == expect.data if expect.data is not None else \
                guarded.blob_id(len(data), [data], len(expect.oid)) == expect.oid
        else:
            with open(os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd), "rb") as f:
                data = f.read()
                if expect.data is not None:
                    ok = data == expect.data
                else:
                    ok = guarded.blob_id(len(data), [data], len(expect.oid)) == expect.oid or \
                        (writer.confirm is not None and
                         writer.confirm(rel, f.fileno()) == expect.oid)
    finally:
        os.close(fd)
    if not ok:
        raise changed(rel)
    return data


def keep_version(cfg, history, copy, keep):
    """Put the version to keep at the path and remove the copy -> what was done, one line.
    The folder is committed: each file is written only if it is still what the newest
    commit holds."""
    path = os.path.join(cfg.path, copy.path)
    writer = history.writer()
    os.close(writer.folder(copy.copy))  # Refused: a folder on the way is a link or a file
    if os.path.isdir(path) and not os.path.islink(path):
        raise HistoryError("%s is a folder now: rename or remove %s by hand"
                           % (printable(copy.path), printable(copy.copy)))
    rev = history.newest()
    spare = committed(history, writer, rev, copy.copy)
    if spare is None:
        raise HistoryError("%s is gone: nothing to settle" % printable(copy.copy))
    if keep == "both":
        return keep_both(cfg, writer, copy, spare)
    mine = mine_is_copy(cfg, copy, history.is_git())
    if mine is None:
        raise cannot_tell(copy)
    if (keep == "mine") == mine:
        # The copy's version at the path, then the copy goes: the path never lacks one.
        here = committed(history, writer, rev, copy.path)
        data = version_in(writer, copy.copy, spare)
        if not writer.put(copy.path, spare.mode, data, here):
            raise HistoryError("%s changed just now, so nothing was settled: run this again "
                               "once the daemon has committed it" % printable(copy.path))
        if not writer.remove(copy.copy, spare):
            return "%s now holds the version from %s; %s changed just now, so it stays" % (
                printable(copy.path), made_by(copy), printable(copy.copy))
        return "%s now holds the version from %s" % (printable(copy.path), made_by(copy))
    if not writer.remove(copy.copy, spare):
        raise HistoryError("%s changed just now, so nothing was settled: run this again once "
                           "the daemon has committed it" % printable(copy.copy))
    return "kept %s as it is; removed %s" % (printable(copy.path), printable(copy.copy))


def both_name(folder, copy):
    """`name (from HOST DATE).ext` beside the file, the first that is free: what a
    copy is called once both versions are kept (no longer a conflict copy's name)."""
    base = os.path.basename(copy.copy)
    marker = " (conflict from "
    at = base.rfind(marker)
    stem, rest = base[:at], base[at + len(marker):]
    tail = rest[:rest.rfind(")")]
    ext = rest[rest.rfind(")") + 1:]
    for n in range(1, 1000):
        name = "%s (from %s%s)%s" % (stem, tail, "" if n == 1 else " %d" % n, ext)
        rel = os.path.join(os.path.dirname(copy.copy), name)
        if not os.path.lexists(os.path.join(folder, rel)):
            return rel
    raise HistoryError("no free name beside %s" % printable(copy.copy))


def keep_both(cfg, writer, copy, spare):
    """Keep both versions: the copy gets an ordinary name (one rename, only while it
    holds what the newest commit holds)."""
    new = both_name(cfg.path, copy)
    if not writer.move(copy.copy, new, spare):
        raise HistoryError("%s changed just now, so nothing was settled: run this again once "
                           "the daemon has committed it" % printable(copy.copy))
    return "kept both: %s as it is, the other version as %s" % (printable(copy.path),
                                                                 printable(new))


def keep_one(cfg, rel, keep):
    history = History(cfg)
    copy = pick(find_copies(cfg.path), rel)
    # The daemon commits first, so that both versions, as they are now, are in history.
    if commit_first(cfg, "settled") is None:
        raise HistoryError("no dvcs-autosync runs for %s: start it first, so that both "
                           "versions are in history before one goes" % cfg.path)
    owed = note_first(cfg, note(copy, keep), [copy.path, copy.copy])
    print(keep_version(cfg, history, copy, keep))
    reply = ask_daemon(cfg, dict({"cmd": "sync"}, **({"note": owed} if owed else {})))
    if reply is None or not reply.get("ok"):
        print(escaped("the daemon did not commit it yet: %s" % (
            "it is not running" if reply is None else reply.get("error"))), file=sys.stderr)
        return 1
    print("committed%s" % (" and pushed" if reply.get("pushed") else ""))
    return 0


def listing_json(cfg, out=sys.stdout):
    """The copies for a program: [{"copy", "path", "host", "time", "mine"}], mine being
    true, false or null (cannot be told)."""
    is_git = git.git_dir(cfg.path) is not None
    out.write(json.dumps([dict(c._asdict(), mine=mine_is_copy(cfg, c, is_git))
                          for c in find_copies(cfg.path)]) + "\n")


def listing(cfg, out=sys.stdout):
    copies = find_copies(cfg.path)
    if not copies:
        out.write("no conflict copies in %s\n" % cfg.path)
        return
    width = max(len(made_by(c)) for c in copies)
    is_git = git.git_dir(cfg.path) is not None
    mine = [mine_is_copy(cfg, c, is_git) for c in copies]
    for c, made in zip(copies, mine):
        whose = {True: "mine", False: "theirs", None: "?"}[made]
        out.write("%s  %-*s  %-6s  %s  (copy of %s)\n" % (
            cli.show_time(c.time), width, made_by(c), whose, printable(c.copy), printable(c.path)))
    out.write("%d conflict cop%s; settle one with: dvcs-autosync conflicts --keep "
              "mine|theirs|both PATH\n" % (len(copies), "y" if len(copies) == 1 else "ies"))
    if None in mine:
        out.write("?: this machine's history cannot tell whose version the copy holds "
                  "(settle it by hand)\n")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="dvcs-autosync conflicts",
                                description="List the conflict copies in the synced folder, "
                                            "or settle one.")
    p.add_argument("--keep", choices=("mine", "theirs", "both"),
                   help="keep this machine's version (mine) or the other one (theirs) of "
                        "PATH, or both (the copy renamed to NAME (from HOST DATE))")
    p.add_argument("--json", action="store_true", help="list the copies as JSON, for programs")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="a conflict copy, or a file that has one copy")
    p.add_argument("--config", help="configuration file (default: ~/.autosync)")
    args = p.parse_args(argv)
    if bool(args.keep) != bool(args.path):
        p.error("--keep and PATH go together: --keep mine|theirs|both PATH")
    if args.json and args.keep:
        p.error("--json lists: it does not go with --keep")
    return args


def main(argv):
    """`dvcs-autosync conflicts ...`: argv starts with "conflicts"."""
    args = parse_args(argv[1:])
    cfg = cli.load(args.config)
    try:
        if args.json:
            listing_json(cfg)
            return 0
        if not args.keep:
            listing(cfg)
            return 0
        return keep_one(cfg, relative(cfg.path, args.path), args.keep)
    except (HistoryError, guarded.Refused) as e:
        print(escaped("dvcs-autosync conflicts: %s" % e), file=sys.stderr)
        return 1
    except OSError as e:
        print("dvcs-autosync conflicts: %s: %s" % (printable(e.filename), e.strerror),
              file=sys.stderr)
        return 1
