"""dvcs-autosync log and restore: the versions of a path, and getting one back.

History is read with the config's logcmd, listcmd and restorecmd (git by
default), so they work for any DVCS. A restore makes a file, a folder or the
whole synced folder what it was at a moment: it writes the old files into the
folder, removes those that did not exist then, and asks the running daemon to
commit the result as one change whose message says what was restored.
"""
import argparse
import collections
import datetime
import os
import re
import stat
import sys
import time

from autosync import cli, commands
from autosync.ignore import Ignore
from autosync.messages import describe, printable
from autosync.paths import METADATA
from autosync.protocol import NoDaemon, Untrusted, connect

Version = collections.namedtuple("Version", "rev time author host action")

AGO = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>second|minute|hour|day|week)s?\s+ago")
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
# What logcmd, listcmd and restorecmd must hold: the path; the revision, then the path.
PLACEHOLDERS = {"logcmd": 1, "listcmd": 2, "restorecmd": 2}
NOTE_MAX = 300  # characters of the note a sync request may carry (committer.NOTE_MAX)


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
        host, action = describe(message, rel, folder_like)
        versions.append(Version(rev, when, author, host or author, action))
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

    def relative(self, path):
        """PATH as given on the command line -> the path relative to the folder ("." for it).

        A relative PATH is taken from the current folder inside the synced folder, and
        from the synced folder elsewhere (as the mass-delete warning's command names it)."""
        if not os.path.isabs(path) and self._outside(os.getcwd()):
            rel = os.path.normpath(path)
            if rel != ".." and not rel.startswith("../"):
                return rel
        for norm in (os.path.abspath, os.path.realpath):
            rel = os.path.relpath(norm(path), norm(self.cfg.path))
            if rel != ".." and not rel.startswith("../"):
                return rel
        raise HistoryError("%s is not inside the synced folder %s" % (path, self.cfg.path))

    def _outside(self, folder):
        rels = [os.path.relpath(norm(folder), norm(self.cfg.path))
                for norm in (os.path.abspath, os.path.realpath)]
        return all(rel == ".." or rel.startswith("../") for rel in rels)

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
        return versions

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

    def restore(self, rel, at=None, dry_run=False):
        """Make `rel` (a file, a folder, or "." for everything) what it was at `at`.

        -> (Version, [Change] made, [(path, why)] failed). Nothing is written with dry_run."""
        version = self.pick(self.versions(rel), rel, at)
        wanted = self.listing(version.rev, rel)
        if not wanted:
            raise HistoryError("%s did not exist at %s %s (%s); pick an earlier version"
                               % (rel, version.rev[:12], cli.show_time(version.time),
                                  version.action))
        rewind = Rewind(self, version.rev, rel, wanted)
        changes = rewind.run(dry_run)
        failed = {path for path, _ in rewind.failed}
        return version, [c for c in changes if c.path not in failed], rewind.failed

    def newest(self):
        """The newest revision of the folder (what the working tree was last committed as)."""
        versions = self.versions(".")
        if not versions:
            raise HistoryError("the synced folder has no history")
        return versions[0].rev

    def listing(self, rev, rel):
        """{path: mode} of the files at or below `rel` at `rev` (listcmd)."""
        try:
            output = self.cmd["listcmd"].output_bytes(rev, rel, cwd=self.cfg.path)
        except commands.CommandFailed as e:
            raise HistoryError("listing %s at %s failed (is [dvcs] listcmd right for your "
                               "DVCS? see docs/beyond-git.md): %s" % (rel, rev[:12], e)) from None
        return {path: mode for path, mode in parse_list(output).items()
                if rel == "." or path == rel or path.startswith(rel + "/")}

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
    text = os.fsdecode(output)
    found = {}
    for record in text.split("\0") if "\0" in text else text.split("\n"):
        if not record.strip("\n"):
            continue
        meta, tab, path = record.partition("\t")
        mode = meta.strip().split(" ")[0]
        if not tab or not path or not re.fullmatch(r"[0-7]{6}", mode):
            raise HistoryError("listcmd printed %r, expected 'MODE<TAB>PATH' records"
                               % record[:80])
        if mode in MODES:  # 160000 (a nested repository) and others are left alone
            found[os.path.normpath(path)] = mode
    return found


Change = collections.namedtuple("Change", "action path")


class Rewind:
    """Make one path of the folder what it was at a revision: plan, then write.

    Nothing the watcher ignores (DVCS metadata, editor junk, ignorepath, .gitignore)
    is read, written or removed. Contents are fetched first into temporary files
    named like editor junk, so that the folder then changes within milliseconds: the
    daemon's watcher sees one quick burst, and the sync that follows commits it."""

    def __init__(self, history, rev, rel, wanted):
        self.history, self.rev, self.rel = history, rev, rel
        self.root = history.cfg.path
        self.ignore = Ignore(self.root, history.cfg.ignorepath)
        if rel != "." and self.ignore(rel):
            raise HistoryError("%s is not synced (DVCS metadata, editor junk, ignorepath or "
                               ".gitignore): restore leaves it alone" % printable(rel))
        self.wanted = {p: m for p, m in wanted.items() if not self.ignore(p)}
        self.temps = {}  # path -> temporary file holding its old content
        self.failed = []  # (path, why) of what could not be written or removed

    def full(self, path):
        return os.path.normpath(os.path.join(self.root, path))

    def present(self):
        """{path: os.stat_result} of what is at or below rel now (files and links)."""
        top = self.full(self.rel)
        if self.rel != "." and self.ignore(self.rel):
            return {}
        try:
            st = os.lstat(top)
        except FileNotFoundError:
            return {}
        if not stat.S_ISDIR(st.st_mode):
            return {self.rel: st} if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else {}
        found = {}
        for folder, dirs, files in os.walk(top):
            base = os.path.relpath(folder, self.root)
            keep = []
            for name in dirs:
                rel = os.path.normpath(os.path.join(base, name))
                if os.path.islink(os.path.join(folder, name)):
                    files.append(name)  # a link to a folder is a link
                elif not self.ignore(rel, isdir=True) and not nested(os.path.join(folder, name)):
                    keep.append(name)
            dirs[:] = keep
            for name in files:
                rel = os.path.normpath(os.path.join(base, name))
                st = os.lstat(os.path.join(folder, name))
                if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and not self.ignore(rel):
                    found[rel] = st
        return found

    def run(self, dry_run):
        now = self.present()
        changes = []
        try:
            for path in sorted(self.wanted):
                mode = self.wanted[path]
                data = self.history.content(self.rev, path)
                if path in now and same(self.full(path), now[path], mode, data):
                    continue
                changes.append(Change("restored" if path in now else "brought back", path))
                if not dry_run:
                    self.temps[path] = self.stash(path, mode, data, now.get(path))
            gone = sorted(p for p in now if p not in self.wanted)
            if gone:
                # Only what history holds is removed: a file the daemon has not committed
                # (none runs, or its commit failed) stays.
                kept = set(gone) - set(self.history.listing(self.history.newest(), self.rel))
                gone = [p for p in gone if p not in kept]
                changes += [Change("kept", p) for p in kept]
            changes += [Change("removed", p) for p in gone]
            if not dry_run:
                self.apply(gone)
        finally:
            for tmp in self.temps.values():
                if os.path.lexists(tmp):
                    os.unlink(tmp)
        return sorted(changes, key=lambda c: c.path)

    def stash(self, path, mode, data, st):
        """Write one old content to a temporary file near its place; -> its name."""
        folder = os.path.dirname(self.full(path))
        while not os.path.isdir(folder):  # a removed folder is made only when it is filled
            folder = os.path.dirname(folder)
        tmp = os.path.join(folder, ".autosync-restore.%d.%d~" % (os.getpid(), len(self.temps)))
        if mode == LINK:
            os.symlink(data, tmp)
            return tmp
        with open(tmp, "wb") as out:
            out.write(data)
        perms = st.st_mode & 0o7777 if st is not None and stat.S_ISREG(st.st_mode) \
            else 0o666 & ~UMASK
        if mode == EXECUTABLE:
            perms |= (perms & 0o444) >> 2  # x wherever r
        else:
            perms &= ~0o111
        os.chmod(tmp, perms)
        return tmp

    def apply(self, gone):
        """Remove what did not exist, then put every stashed file in its place."""
        top = self.full(self.rel)
        for path in gone:
            try:
                os.unlink(self.full(path))
            except OSError as e:
                self.failed.append((path, e.strerror or str(e)))
        # Folders emptied by the removals go too (never the synced folder itself, nor
        # rel unless a file takes its place).
        for path in gone:
            folder = os.path.dirname(self.full(path))
            while folder != self.root and (folder != top or self.rel in self.wanted) \
                    and is_below(folder, top):
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = os.path.dirname(folder)
        for path, tmp in sorted(self.temps.items()):
            target = self.full(path)
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(tmp, target)
            except OSError as e:  # e.g. a folder that holds ignored files is in the way
                self.failed.append((path, e.strerror or str(e)))


UMASK = os.umask(0o022)
os.umask(UMASK)
MODES = ("100644", "100755", "120000")
EXECUTABLE, LINK = "100755", "120000"


def nested(folder):
    """A folder holding its own repository: never looked into."""
    return any(os.path.lexists(os.path.join(folder, m)) for m in METADATA)


def is_below(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def same(full, st, mode, data):
    """Is the file at `full` already what `mode` and `data` say?"""
    if mode == LINK or stat.S_ISLNK(st.st_mode):
        return mode == LINK and stat.S_ISLNK(st.st_mode) and os.readlink(os.fsencode(full)) == data
    if st.st_size != len(data) or bool(st.st_mode & 0o100) != (mode == EXECUTABLE):
        return False
    with open(full, "rb") as f:
        return f.read() == data


SAID = {"restored": ("restored %s", "would restore %s"),
        "brought back": ("brought back %s", "would bring back %s"),
        "removed": ("removed %s (still in history)", "would remove %s (it stays in history)"),
        "kept": ("kept %s: it did not exist then, but it is not in history yet",
                 "would keep %s: it did not exist then, but it is not in history yet")}


def summary(changes):
    counts = collections.Counter(c.action for c in changes)
    return ", ".join("%d %s" % (counts[a], a) for a in SAID if counts[a])


def restore_note(rel, version):
    """The line the restore's commit message carries (one printable line, NOTE_MAX at most)."""
    tail = " as it was at %s (%s)" % (cli.show_time(version.time), version.rev[:12])
    name = "the whole folder" if rel == "." else printable(rel)
    room = NOTE_MAX - len("restore of ") - len(tail)
    if len(name) > room:
        name = name[:room - 3] + "..."
    return "restore of %s%s" % (name, tail)


def ask_daemon(cfg, request, timeout=600.0):
    """Send one request to the folder's daemon -> its reply, or None when none runs."""
    try:
        conn = connect(cfg.socket)
    except NoDaemon:
        return None
    except Untrusted as e:
        raise HistoryError(str(e)) from None
    try:
        return conn.request(dict(request, timeout=timeout), timeout=timeout + 5)
    except (OSError, ValueError) as e:
        return {"ok": False, "error": "talking to the daemon failed: %s" % e}
    finally:
        conn.close()


def rewind(cfg, history, rel, at, dry_run):
    """`restore`: print what changes, write it, and have the daemon commit it as one."""
    if not dry_run:
        # Everything in the folder goes into history first, so that what the restore
        # removes or overwrites can be brought back too, and "the last change" is
        # the last one made, even one the daemon had not committed yet.
        reply = ask_daemon(cfg, {"cmd": "sync"})
        if reply is not None and not reply.get("ok") and \
                str(reply.get("error", "")).startswith("commit"):
            raise HistoryError("the daemon could not commit the folder as it is now, so "
                               "nothing was restored: %s" % reply.get("error"))
    version, changes, failed = history.restore(rel, at, dry_run)
    kept = [c for c in changes if c.action == "kept"]
    changes = [c for c in changes if c.action != "kept"]
    when = "%s (%s, %s on %s)" % (cli.show_time(version.time), version.rev[:12],
                                   version.action, version.host)
    for change in changes + kept:
        print(SAID[change.action][dry_run] % printable(change.path))
    for path, why in failed:
        print("could not restore %s: %s" % (printable(path), why), file=sys.stderr)
    name = "the whole folder" if rel == "." else printable(rel)
    if not changes:
        print("%s is already as it was at %s: nothing to do" % (name, when))
        return 1 if failed else 0
    if dry_run:
        print("would make %s as it was at %s: %s; nothing written"
              % (name, when, summary(changes)))
        return 0
    print("%s is as it was at %s: %s" % (name, when, summary(changes)))
    reply = ask_daemon(cfg, {"cmd": "sync", "note": restore_note(rel, version)})
    if reply is None:
        print("no dvcs-autosync runs for %s: the restore is committed and synced when it "
              "starts" % cfg.path)
    elif reply.get("committed"):
        print("committed%s" % (" and pushed" if reply.get("pushed") else
                               ", not pushed yet: %s" % reply.get("error")))
    elif reply.get("ok"):
        print("the daemon had committed the restored files already, in an ordinary change")
    else:
        print("the daemon did not commit the restore: %s" % reply.get("error"), file=sys.stderr)
        return 1
    return 1 if failed else 0


def print_versions(versions, out=sys.stdout):
    width = max([len(v.host) for v in versions] + [4])
    for v in versions:
        out.write("%s  %s  %-*s  %s\n" % (cli.show_time(v.time), v.rev[:12], width, v.host,
                                          v.action))


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


def main(argv):
    args = parse(argv)
    cfg = cli.load(args.config)
    try:
        history = History(cfg)
        rel = history.relative(args.path) if args.path else "."
        if args.command == "log":
            versions = history.versions(rel)
            if not versions:
                print("%s has no history" % rel, file=sys.stderr)
                return 1
            print_versions(versions)
            return 0
        return rewind(cfg, history, rel, args.at, args.dry_run)
    except HistoryError as e:
        print("dvcs-autosync %s: %s" % (args.command, e), file=sys.stderr)
        return 1
