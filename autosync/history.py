"""dvcs-autosync log and restore: the versions of a file, and getting one back.

History is read with the config's logcmd and restorecmd (git by default), so
they work for any DVCS. Neither commits anything: a restore writes the old
content into the folder, and the running daemon syncs it like any change.
"""
import argparse
import collections
import datetime
import os
import re
import sys
import time

from autosync import cli, commands
from autosync.messages import describe, printable

Version = collections.namedtuple("Version", "rev time author host action")

AGO = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>second|minute|hour|day|week)s?\s+ago")
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
# What logcmd and restorecmd must hold: the path; the revision, then the path.
PLACEHOLDERS = {"logcmd": 1, "restorecmd": 2}


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
        """PATH as given on the command line -> the path relative to the folder ("." for it)."""
        for norm in (os.path.abspath, os.path.realpath):
            rel = os.path.relpath(norm(path), norm(self.cfg.path))
            if rel != ".." and not rel.startswith("../"):
                return rel
        raise HistoryError("%s is not inside the synced folder %s" % (path, self.cfg.path))

    def versions(self, rel):
        folder_like = rel == "." or os.path.isdir(os.path.join(self.cfg.path, rel))
        try:
            output = self.cmd["logcmd"].output(rel, cwd=self.cfg.path)
        except commands.CommandFailed as e:
            raise HistoryError(str(e)) from None
        return parse_log(output, rel, folder_like)

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
            if len(matches) == 1:
                return matches[0]
        moment = parse_when(at)
        for version in versions:  # newest first
            if version.time <= moment:
                return version
        raise HistoryError("%s has no version as early as %s" % (rel, at))

    def restore(self, rel, at=None):
        """Write `rel` as it was into the folder; -> the Version restored."""
        target = os.path.join(self.cfg.path, rel)
        if rel == "." or os.path.isdir(target):
            raise HistoryError("%s is a folder; restore works on files" % rel)
        version = self.pick(self.versions(rel), rel, at)
        if version.action == "removed" or version.action.startswith("moved to"):
            raise HistoryError("%s did not exist after %s %s (%s); pick an earlier version"
                               % (rel, version.rev[:12], cli.show_time(version.time), version.action))
        folder = os.path.dirname(target)
        os.makedirs(folder, exist_ok=True)
        # Written beside the file and renamed over it, so the daemon never sees half
        # a file; the name ends in ~, which the watcher ignores as editor junk.
        tmp = os.path.join(folder, ".%s.%d.restore~" % (os.path.basename(target), os.getpid()))
        try:
            with open(tmp, "wb") as out:
                self._content(version.rev, rel, out)
            if os.path.exists(target):
                os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        return version

    def _content(self, rev, rel, out):
        """Run restorecmd; its last command's stdout (bytes, unchanged) goes to `out`."""
        try:
            out.write(self.cmd["restorecmd"].output_bytes(rev, rel, cwd=self.cfg.path))
        except commands.CommandFailed as e:
            raise HistoryError("%s did not exist at %s, or restorecmd failed: %s"
                               % (rel, rev[:12], e)) from None


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
    restore = sub.add_parser("restore", help="bring a file (also a removed one) back as it was")
    restore.add_argument("path", help="the file, as it is or was named")
    restore.add_argument("--at", metavar="WHEN",
                         help="a time ('2024-05-01 14:30', '3 hours ago', '@SECONDS') or a "
                              "revision from log (default: the version before the last change)")
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
        version = history.restore(rel, args.at)
    except HistoryError as e:
        print("dvcs-autosync %s: %s" % (args.command, e), file=sys.stderr)
        return 1
    print("restored %s as it was at %s (%s, %s on %s)"
          % (rel, cli.show_time(version.time), version.rev[:12], version.action, version.host))
    if not os.path.exists(cfg.socket):
        print("no dvcs-autosync runs for %s: the restored file is synced when it starts"
              % cfg.path)
    return 0
