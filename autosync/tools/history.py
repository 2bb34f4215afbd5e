"""dvcs-autosync log and restore: the versions of a path, and getting one back.

History is read with the config's logcmd, listcmd and restorecmd (git by
default), so they work for any DVCS. A restore makes a file, a folder or the
whole synced folder what it was at a moment: the running daemon commits the
folder first (or nothing is restored), then the old files are written into
the folder and those that did not exist then removed, never over a file that
is not exactly in the newest commit (tools/rewind.py), and the daemon commits the
result as one change whose message says what was restored.
"""
import argparse
import collections
import datetime
import os
import re
import sys
import time

from autosync.core import cli
from autosync.fs import guarded
from autosync.vcs import commands, git, gitnotes, largefiles, thin
from autosync.core.ignore import Ignore
from autosync.core.messages import TEXT_MAX, action_of, escaped, printable, text_of
from autosync.tools.progress import Progress
from autosync.tools.rewind import MODES, Rewind
from autosync.core.protocol import NoDaemon, Untrusted, ask

# text: what the user said the change was (autosync-notify describe), or None.
Version = collections.namedtuple("Version", "rev time author host action text",
                                 defaults=(None,))

AGO = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>second|minute|hour|day|week)s?\s+ago")
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
# What logcmd, listcmd and restorecmd must hold: the path; the revision, then the path.
PLACEHOLDERS = {"logcmd": 1, "listcmd": 2, "restorecmd": 2}


class HistoryError(Exception):
    """Something the user asked for cannot be done; str() is one line."""


def parse_log(output, rel, folder_like):
    """logcmd's output: NUL-ended records of "REV UNIXTIME AUTHOR\\nMESSAGE", newest first."""
    versions = []
    for record in output.split("\0"):
        record = record.lstrip("\n")
        if not record.strip():
            continue
        first, _, message = record.partition("\n")
        words = first.split(" ", 2)
        if len(words) < 2:
            raise HistoryError("logcmd printed %r, expected 'REVISION UNIXTIME AUTHOR'"
                               % first[:80])
        rev, stamp, author = words[0], words[1], words[2] if len(words) > 2 else ""
        try:
            when = float(stamp)
        except ValueError:
            raise HistoryError("logcmd printed %r as a time, expected seconds since 1970"
                               % stamp[:40]) from None
        host, action = action_of(message, rel, folder_like)
        versions.append(Version(rev, when, author, host or author, action, text_of(message)))
    return versions


def parse_when(text, now=None):
    """A moment: "@SECONDS", an ISO date and time (local), "N hours ago", "yesterday"."""
    now = time.time() if now is None else now
    text = text.strip().lower()
    if text.startswith("@"):
        try:
            return float(text[1:])
        except ValueError:
            pass
    if text in ("now", "yesterday"):
        return now - (86400 if text == "yesterday" else 0)
    ago = AGO.fullmatch(text)
    if ago:
        return now - float(ago.group("n")) * UNITS[ago.group("unit")]
    try:
        return datetime.datetime.fromisoformat(text.upper()).timestamp()
    except ValueError:
        raise HistoryError("cannot read %r as a time: use e.g. '2024-05-01 14:30', "
                           "'3 hours ago', '@1714566600' or a revision from `log`"
                           % text) from None


class History:
    """The versions of paths in one synced folder, through its config's commands."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.cmd = {}
        for name, wanted in PLACEHOLDERS.items():
            template = commands.Template(name, cfg.commands.get(name, ""))
            if template.empty or template.nargs != wanted:
                raise HistoryError("%s: [dvcs] %s: expected a command with %d %%s, got %r "
                                   "(see docs/beyond-git.md)"
                                   % (cfg.file, name, wanted, template.text))
            self.cmd[name] = template
        self.gitdir = False  # the repository's git folder, None if it is no git; read once

    def versions(self, rel):
        full = os.path.join(self.cfg.path, rel)
        folder_like = rel == "." or os.path.isdir(full)
        try:
            output = self.cmd["logcmd"].output(rel, cwd=self.cfg.path)
        except commands.CommandFailed as e:
            raise HistoryError(str(e)) from None
        versions = parse_log(output, rel, folder_like)
        if not os.path.lexists(full) and all(v.action == "changed" for v in versions):
            versions = parse_log(output, rel, True)  # no message names it: a removed folder
        return self.with_notes(versions)

    def with_notes(self, versions):
        """git: the descriptions given after a push (notes, vcs/gitnotes.py) beside the text."""
        if not self.is_git():
            return versions
        notes = gitnotes.texts(self.cfg.path)
        return [v._replace(text="; ".join(t for t in (v.text, notes[v.rev]) if t))
                if v.rev in notes else v for v in versions]

    def pick(self, versions, rel, at):
        """The version to bring back: the one before the last change, or the one at `at`."""
        if not versions:
            raise HistoryError("%s has no history" % rel)
        if at is None:
            if len(versions) < 2:
                raise HistoryError("%s has only one version, which it has now" % rel)
            return versions[1]
        if re.fullmatch(r"[0-9a-f]{4,64}", at):
            matches = [v for v in versions if v.rev.startswith(at)]
            if not matches and rel != ".":  # a revision that did not touch rel
                matches = [v for v in self.versions(".") if v.rev.startswith(at)]
            if len(matches) == 1:
                return matches[0]
        moment = parse_when(at)
        for version in versions:  # newest first
            if version.time <= moment:
                return version
        raise HistoryError("%s has no version as early as %s" % (rel, at))

    def restore(self, rel, at=None, dry_run=False, before_write=None, progress=None):
        """Make `rel` (a file, a folder, or "." for everything) what it was at `at`.

        -> (Version, [Change] made, [(path, why)] failed). Nothing is written with dry_run;
        before_write(version), if given, is called before the first write, if any."""
        version = self.pick(self.versions(rel), rel, at)
        entries = self.entries(version.rev, rel)
        wanted = {path: entry[0] for path, entry in entries.items()}
        if not wanted:
            raise HistoryError("%s did not exist at %s %s (%s); pick an earlier version"
                               % (rel, version.rev[:12], cli.show_time(version.time),
                                  version.action))
        ignore = Ignore(self.cfg.path, self.cfg.ignorepath)
        if rel != "." and ignore(rel):
            raise HistoryError("%s is not synced (DVCS metadata, editor junk, ignorepath or "
                               ".gitignore): restore leaves it alone" % printable(rel))
        self.bring(version.rev, rel, entries, ignore)
        rewind = Rewind(self, version.rev, rel, wanted, ignore)
        if before_write is not None:
            rewind.before_write = lambda: before_write(version)
        rewind.progress = progress
        try:
            changes = rewind.run(dry_run)
        except guarded.Refused as e:  # before anything was written
            raise HistoryError("cannot restore %s: %s" % (printable(rel), e)) from None
        failed = {path for path, _ in rewind.failed}
        return version, [c for c in changes if c.path not in failed], rewind.failed

    def bring(self, rev, rel, entries, ignore):
        """A thin machine (vcs/thin.py): the contents restore will read, fetched from the
        remote in one go before anything is read or written; HistoryError in one line
        when the remote cannot give them."""
        if not self.is_git():
            return
        oids = [oid for path, (mode, oid) in entries.items() if oid and not ignore(path)]
        try:
            thin.bring(self.cfg.path, oids, "the versions of %s at %s" % (printable(rel),
                                                                          rev[:12]))
        except thin.Unreachable as e:
            raise HistoryError("cannot restore %s: %s; nothing written" % (printable(rel), e)) \
                from None
        # git-annex (largefiles): an old version this machine dropped, got back first.
        try:
            missing = largefiles.bring(self.cfg.path, oids)
        except largefiles.ExpireError as e:
            missing = [str(e)]
        if missing:
            raise HistoryError("cannot restore %s: git-annex could not get %d version(s) "
                               "(expired, or no repository holding them is reachable: %s); "
                               "nothing written" % (printable(rel), len(missing), missing[0]))

    def newest(self):
        """The newest revision of the folder (what the working tree was last committed as)."""
        versions = self.versions(".")
        if not versions:
            raise HistoryError("the synced folder has no history")
        return versions[0].rev

    def listing(self, rev, rel):
        """{path: mode} of the files at or below `rel` at `rev` (listcmd)."""
        return {path: entry[0] for path, entry in self.entries(rev, rel).items()}

    def entries(self, rev, rel):
        """{path: (mode, git blob id or None)} of the files at or below `rel` at `rev`."""
        try:
            output = self.cmd["listcmd"].output_bytes(rev, rel, cwd=self.cfg.path)
        except commands.CommandFailed as e:
            raise HistoryError("listing %s at %s failed (is [dvcs] listcmd right for your "
                               "DVCS? see docs/beyond-git.md): %s" % (rel, rev[:12], e)) from None
        return {path: entry for path, entry in parse_entries(output).items()
                if rel == "." or path == rel or path.startswith(rel + "/")}

    # --- what the newest commit holds, for the guarded writer --------------------------

    def is_git(self):
        if self.gitdir is False:
            self.gitdir = git.git_dir(self.cfg.path)
        return self.gitdir is not None

    def expect(self, rev, path, entry):
        """guarded.Expect of the version of path at rev, given its entries() entry: by
        git blob id when listcmd printed one (git compares it as `git status` does,
        through clean filters: git-annex, line endings), else by restorecmd's bytes."""
        mode, oid = entry
        if oid is not None and self.is_git():
            return guarded.Expect(mode, oid=oid)
        return guarded.Expect(mode, data=self.content(rev, path))

    def confirm(self, rel, fd):
        """The blob id git would store for the open file fd at rel (its clean filters
        applied); the name goes to git on stdin, off the command line (git.hash_open)."""
        return git.hash_open(self.cfg.path, rel, fd)

    def writer(self):
        """The guarded writer for the folder (`confirm` with git)."""
        return guarded.Writer(self.cfg.path, confirm=self.confirm if self.is_git() else None)

    def content(self, rev, rel):
        """A file's content (a link's target) at `rev`: restorecmd's last command's stdout."""
        try:
            return self.cmd["restorecmd"].output_bytes(rev, rel, cwd=self.cfg.path)
        except commands.CommandFailed as e:
            raise HistoryError("%s did not exist at %s, or restorecmd failed: %s"
                               % (rel, rev[:12], e)) from None


def parse_list(output):
    """listcmd's output -> {path: mode}: records "MODE[ MORE]<TAB>PATH", ended by NUL (or by
    newlines when there is no NUL at all); git ls-tree's own format is one such."""
    return {path: entry[0] for path, entry in parse_entries(output).items()}


def parse_entries(output):
    """listcmd's output -> {path: (mode, blob id)}; the id is MORE's when it reads as git
    ls-tree's "blob ID", else None."""
    text = os.fsdecode(output)
    found = {}
    for record in text.split("\0") if "\0" in text else text.split("\n"):
        if not record.strip("\n"):
            continue
        meta, tab, path = record.partition("\t")
        words = meta.strip().split(" ")
        mode = words[0]
        if not tab or not path or not re.fullmatch(r"[0-7]{6}", mode):
            raise HistoryError("listcmd printed %r, expected 'MODE<TAB>PATH' records"
                               % record[:80])
        oid = words[2] if len(words) == 3 and words[1] == "blob" and \
            re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", words[2]) else None
        if mode in MODES:  # 160000 (a nested repository) and others are left alone
            found[os.path.normpath(path)] = (mode, oid)
    return found


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
    version, changes, failed = history.restore(rel, at, dry_run, before_write=hand_note,
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


def print_versions(versions, out=sys.stdout):
    width = max([len(v.host) for v in versions] + [4])
    for v in versions:
        # host, action and text are another machine's words (its commit message, author)
        out.write(escaped("%s  %s  %-*s  %s%s" % (cli.show_time(v.time), v.rev[:12], width,
                                                  v.host, v.action,
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
