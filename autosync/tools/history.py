"""dvcs-autosync log and restore: the versions of a path, and getting one back.

History is read with the config's logcmd, listcmd and restorecmd (git by
default; vcs/history.py), so they work for any DVCS. A restore makes a file, a folder or the
whole synced folder what it was at a moment: the running daemon commits the
folder first (or nothing is restored), then the old files are written into
the folder and those that did not exist then removed, never over a file that
is not exactly in the newest commit (tools/rewind.py), and the daemon commits the
result as one change whose message says what was restored.
"""
import argparse
import collections
import os
import sys

from autosync.core import cli
from autosync.fs import guarded
from autosync.vcs.history import History, HistoryError
from autosync.core.ignore import Ignore
from autosync.core.messages import TEXT_MAX, escaped, printable
from autosync.tools.progress import Progress
from autosync.tools.rewind import Rewind
from autosync.core.protocol import NoDaemon, Untrusted, ask


def restore(history, rel, at=None, dry_run=False, before_write=None, progress=None):
    """Make `rel` (a file, a folder, or "." for everything) what it was at `at`, read
    from `history` (vcs/history.py's History).

    -> (Version, [Change] made, [(path, why)] failed). Nothing is written with dry_run;
    before_write(version), if given, is called before the first write, if any."""
    version = history.pick(history.versions(rel), rel, at)
    entries = history.entries(version.rev, rel)
    wanted = {path: entry[0] for path, entry in entries.items()}
    if not wanted:
        raise HistoryError("%s did not exist at %s %s (%s); pick an earlier version"
                           % (rel, version.rev[:12], cli.show_time(version.time),
                              version.action))
    ignore = Ignore(history.cfg.path, history.cfg.ignorepath)
    if rel != "." and ignore(rel):
        raise HistoryError("%s is not synced (DVCS metadata, editor junk, ignorepath or "
                           ".gitignore): restore leaves it alone" % printable(rel))
    history.bring(version.rev, rel, entries, ignore)
    rewind = Rewind(history, version.rev, rel, wanted, ignore)
    if before_write is not None:
        rewind.before_write = lambda: before_write(version)
    rewind.progress = progress
    try:
        changes = rewind.run(dry_run)
    except guarded.Refused as e:  # before anything was written
        raise HistoryError("cannot restore %s: %s" % (printable(rel), e)) from None
    failed = {path for path, _ in rewind.failed}
    return version, [c for c in changes if c.path not in failed], rewind.failed


SAID = {"restored": ("restored %s", "would restore %s"),
        "brought back": ("brought back %s", "would bring back %s"),
        "removed": ("removed %s (still in history)", "would remove %s (it stays in history)"),
        "kept": ("kept %s: it did not exist then, but it is not in history yet",
                 "would keep %s: it did not exist then, but it is not in history yet"),
        "changed": ("kept %s as it is: it is not in history as it is now",
                    "would keep %s as it is: it is not in history as it is now")}
KEPT = ("kept", "changed")  # what restore leaves as it is


def summary(changes):
    counts = collections.Counter(c.action for c in changes)
    return ", ".join("%d %s" % (counts[a], a) for a in SAID if counts[a])


def restore_note(rel, version):
    """The line the restore's commit message carries (one printable line, TEXT_MAX at most)."""
    tail = " as it was at %s (%s)" % (cli.show_time(version.time), version.rev[:12])
    name = "the whole folder" if rel == "." else printable(rel)
    room = TEXT_MAX - len("restore of ") - len(tail)
    if len(name) > room:
        name = name[:room - 3] + "..."
    return "restore of %s%s" % (name, tail)


def ask_daemon(cfg, request, timeout=600.0):
    """Send one request to the folder's daemon -> its reply, or None when none runs."""
    try:
        return ask(cfg.socket, dict(request, timeout=timeout), timeout=timeout + 5)
    except NoDaemon:
        return None
    except Untrusted as e:
        raise HistoryError(str(e)) from None
    except (OSError, ValueError) as e:
        return {"ok": False, "error": "talking to the daemon failed: %s" % e}


def note_first(cfg, note, paths):
    """Hand the daemon the note of a change about to be written: it goes on the commit
    of that change, whichever comes first, the watcher's batch or the sync after.
    -> the note still to send with that sync (no daemon, or one that does not know
    the note request), else None."""
    reply = ask_daemon(cfg, {"cmd": "note", "note": note, "paths": paths}, timeout=10.0)
    return None if reply is not None and reply.get("ok") else note


def commit_first(cfg, done):
    """Have the daemon commit the folder as it is now, before anything in it is
    written -> its reply, or None when no daemon runs. HistoryError, saying why in
    one line, when that commit cannot be made: paused, a rebase, a timeout, any
    error of the daemon's (a push that failed after the commit is no such error:
    what matters is that the folder is in history, here). `done`: "restored"..."""
    reply = ask_daemon(cfg, {"cmd": "sync"})
    if reply is None or reply.get("ok"):
        return reply
    error = str(reply.get("error") or "no reason given")
    if error.startswith("push: "):
        return reply
    raise HistoryError("the daemon could not commit the folder first, so nothing was %s: "
                       "%s" % (done, error))


def restore_command(cfg, history, rel, at, dry_run):
    """`restore`: print what changes, write it, and have the daemon commit it as one."""
    if not dry_run:
        # Everything in the folder goes into history first, so that what the restore
        # removes or overwrites can be brought back too, and "the last change" is
        # the last one made, even one the daemon had not committed yet. With no
        # daemon, only what is exactly in the newest commit is written over.
        commit_first(cfg, "restored")
    owed = []  # the note, if the daemon could not take it before the writes

    def hand_note(version):
        owed.append(note_first(cfg, restore_note(rel, version), [rel]))
    version, changes, failed = restore(history, rel, at, dry_run, before_write=hand_note,
                                               progress=Progress())
    kept = [c for c in changes if c.action in KEPT]
    changes = [c for c in changes if c.action not in KEPT]
    held = sum(c.action == "changed" for c in kept)
    when = "%s (%s, %s on %s)" % (cli.show_time(version.time), version.rev[:12],
                                   version.action, version.host)
    for change in changes + kept:
        print(SAID[change.action][dry_run] % printable(change.path))
    for path, why in failed:
        print(escaped("could not restore %s: %s" % (printable(path), why)), file=sys.stderr)
    name = "the whole folder" if rel == "." else printable(rel)
    but = ", but for %d kept as %s" % (held, "it is" if held == 1 else "they are") \
        if held else ""
    code = 1 if failed or (held and not dry_run) else 0
    if held and not dry_run:
        print("restore left %s: run it again once the daemon has committed %s" % (
            "1 path as it is: it changed after the newest commit" if held == 1 else
            "%d paths as they are: they changed after the newest commit" % held,
            "it" if held == 1 else "them"), file=sys.stderr)
    if not changes:
        if not held:
            print("%s is already as it was at %s: nothing to do" % (name, when))
        return code
    if dry_run:
        print("would make %s as it was at %s%s: %s; nothing written"
              % (name, when, but, summary(changes)))
        return code
    print("%s is as it was at %s%s: %s" % (name, when, but, summary(changes)))
    owed = [n for n in owed if n]
    reply = ask_daemon(cfg, dict({"cmd": "sync"}, **({"note": owed[0]} if owed else {})))
    if reply is None:
        print("no dvcs-autosync runs for %s: the restore is committed and synced when it "
              "starts" % cfg.path)
    elif reply.get("committed") or reply.get("noted"):
        print(escaped("committed%s" % (" and pushed" if reply.get("pushed") else
                                       ", not pushed yet: %s" % reply.get("error"))))
    elif reply.get("ok"):
        print("the daemon had committed the restored files already, in an ordinary change")
    else:
        print(escaped("the daemon did not commit the restore: %s" % reply.get("error")),
              file=sys.stderr)
        return 1
    return code


def made_by(versions):
    """Who made each version, as log shows it: its machine, and in a folder changed by
    more than one person (a shared folder, docs/sharing.md) `PERSON on HOST`."""
    people = {v.author for v in versions}
    return [("%s on %s" % (v.author, v.host)) if len(people) > 1 and v.host != v.author
            else v.host for v in versions]


def print_versions(versions, out=sys.stdout):
    who = made_by(versions)
    width = max([len(w) for w in who] + [4])
    for v, by in zip(versions, who):
        # host, action and text are another machine's words (its commit message, author)
        out.write(escaped("%s  %s  %-*s  %s%s" % (cli.show_time(v.time), v.rev[:12], width,
                                                  by, v.action,
                                                  "  -- " + v.text if v.text else "")) + "\n")


def parse(argv):
    p = argparse.ArgumentParser(prog="dvcs-autosync",
                                description="Look at and bring back earlier versions.")
    sub = p.add_subparsers(dest="command", required=True)
    log = sub.add_parser("log", help="list the versions of a file, or of the whole folder")
    log.add_argument("path", nargs="?", help="a file or folder (default: the synced folder)")
    restore = sub.add_parser("restore", help="make a file, a folder or the whole folder (.) "
                                             "what it was, also a removed one")
    restore.add_argument("path", help="a file or folder, as it is or was named; . for all")
    restore.add_argument("--at", metavar="WHEN",
                         help="a time ('2024-05-01 14:30', '3 hours ago', '@SECONDS') or a "
                              "revision from log (default: the version before the last change)")
    restore.add_argument("--dry-run", action="store_true",
                         help="list what would change, and write nothing")
    for command in (log, restore):
        command.add_argument("--config", help="configuration file (default: ~/.autosync)")
    return p.parse_args(argv)


def relative(folder, path):
    """PATH as given on the command line -> the path relative to `folder` ("." for it),
    for `log`, `restore` and `conflicts --keep`; HistoryError if it is not inside.

    A relative PATH is taken from the current folder inside the synced folder, and
    from the synced folder elsewhere (as the mass-delete warning's command names it)."""
    if not os.path.isabs(path) and _outside(folder, os.getcwd()):
        rel = os.path.normpath(path)
        if rel != ".." and not rel.startswith("../"):
            return rel
    for norm in (os.path.abspath, os.path.realpath):
        rel = os.path.relpath(norm(path), norm(folder))
        if rel != ".." and not rel.startswith("../"):
            return rel
    raise HistoryError("%s is not inside the synced folder %s" % (path, folder))


def _outside(folder, here):
    rels = [os.path.relpath(norm(here), norm(folder))
            for norm in (os.path.abspath, os.path.realpath)]
    return all(rel == ".." or rel.startswith("../") for rel in rels)


def main(argv):
    args = parse(argv)
    cfg = cli.load(args.config)
    try:
        history = History(cfg)
        rel = relative(cfg.path, args.path) if args.path else "."
        if args.command == "log":
            versions = history.versions(rel)
            if not versions:
                print("%s has no history" % printable(rel), file=sys.stderr)
                return 1
            print_versions(versions)
            return 0
        return restore_command(cfg, history, rel, args.at, args.dry_run)
    except HistoryError as e:
        print(escaped("dvcs-autosync %s: %s" % (args.command, e)), file=sys.stderr)
        return 1
