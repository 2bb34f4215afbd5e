"""The history of a synced folder: the versions of its paths, and what a revision held.

Read with the config's logcmd, listcmd and restorecmd (git by default), so it works
for any DVCS. Used by `dvcs-autosync log`, `restore` and `conflicts` (tools/history.py,
tools/conflicts.py, which write) and by the tray (its recent changes).
"""
import collections
import datetime
import os
import re
import time

from autosync.fs import guarded
from autosync.vcs import commands, git, gitnotes, largefiles, thin
from autosync.vcs.thin import BLOB_MODES
from autosync.core.messages import action_of, printable, text_of

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
        if mode in BLOB_MODES:  # 160000 (a nested repository) and others are left alone
            found[os.path.normpath(path)] = (mode, oid)
    return found
