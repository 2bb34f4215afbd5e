"""What the history page shows, read only: the folders this user syncs, each one's
status (from its daemon's socket), its timeline, a file's versions and contents, the
files removed from it, its conflict copies.

Nothing here writes: the page's changes go through the product's own commands and
requests (web/actions.py). History is read through vcs/history.py (logcmd, listcmd,
restorecmd: any DVCS); the timeline's files and the removed files are git's own
(`git log --name-status`), shown for git folders only.
"""
import collections
import difflib
import json
import os
import re
import subprocess
import sys
import types

from autosync.core import config, daemons, problems, protocol, underway
from autosync.core.cli import show_time
from autosync.core.copies import read_copy_name
from autosync.core.ignore import Ignore
from autosync.core.paths import folder_id
from autosync.vcs import git, gitnotes
from autosync.vcs.history import History, HistoryError
from autosync.core.messages import SUMMARY, host_of, split_subject

TIMELINE = 200  # changes shown at once
PREVIEW = 512 * 1024  # bytes of a text shown; a longer one is cut
IMAGES = {".png": ("image/png", b"\x89PNG\r\n\x1a\n"), ".gif": ("image/gif", b"GIF8"),
          ".jpg": ("image/jpeg", b"\xff\xd8\xff"), ".jpeg": ("image/jpeg", b"\xff\xd8\xff"),
          ".webp": ("image/webp", b"RIFF")}
STATUS_WORDS = {"A": "added", "M": "modified", "T": "modified", "D": "removed"}


class SyncedFolder:
    """One synced folder, by its config file."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.id = folder_id(cfg.path)
        self.path = cfg.path

    def history(self):
        return History(self.cfg)

    def is_git(self):
        return git.git_dir(self.path) is not None


def find(given, home=None):
    """{id: SyncedFolder} for the config files `given` and those of this user's running daemons
    that share our HOME (the same person's: a test's or another session's daemons of the
    same uid are left out); a file that cannot be read is left out."""
    home = os.path.realpath(home or os.path.expanduser("~"))
    files = list(given)
    for pid, args, file in daemons.running():
        env = daemons.environ_of(pid)
        if os.path.realpath(env.get("HOME") or "/") == home and \
                not daemons.is_original(args, "/proc/%d/cwd" % pid, "/proc/%d/exe" % pid):
            files.append(file)
    found = {}
    for file in files:
        try:
            cfg = config.load(file, check_path=False, warn=False)
        except (config.ConfigError, OSError):
            continue
        folder = SyncedFolder(cfg)
        found.setdefault(folder.id, folder)
    return found


# --- status ---------------------------------------------------------------------------

def status(folder):
    """The daemon's status, or None when no daemon answers."""
    try:
        reply = protocol.ask(folder.cfg.socket, {"cmd": "status"}, timeout=10)
    except (protocol.NoDaemon, protocol.Untrusted, protocol.ProtocolError, OSError, ValueError):
        return None
    return reply.get("status") if reply.get("ok") else None


def state(folder):
    """{"colour", "words", "fix", "progress", "paused", "running"} as `status` says it."""
    found = status(folder)
    if found is None:
        return {"colour": "off", "words": "not running: no dvcs-autosync runs for this folder",
                "fix": "start it: dvcs-autosync --config %s (or its systemd unit)"
                       % folder.cfg.file, "progress": None, "paused": False, "running": False}
    listed = problems.problems(found)
    words = problems.headline(found, when=show_time)
    colour = "ok"
    if found.get("paused"):
        colour = "paused"
    elif listed:
        colour = "bad"
    elif words.startswith("syncing") or words == "committing":
        colour = "busy"
    fix = None
    if listed:
        words = "NOT syncing: %s" % listed[0]["error"] if not found.get("paused") else \
            "paused" + (" until %s" % show_time(found["paused"]["until"])
                        if found["paused"].get("until") else " until you resume")
        fix = listed[0]["fix"] if not found.get("paused") else None
    return {"colour": colour, "words": words, "fix": fix, "running": True,
            "progress": underway.text(found["progress"], when=show_time)
            if found.get("progress") else None,
            "paused": bool(found.get("paused")),
            "last_push": found.get("last_push"), "unpushed": found.get("unpushed", 0)}


def big_files(folder):
    """The big files' history rule in words, or None without `largefiles`."""
    cfg = folder.cfg
    if not cfg.largefiles:
        return None
    keep = ("versions replaced more than %s ago are dropped for good at each upkeep, "
            "never a file's current version nor one another machine has not got yet"
            % cfg.largefileskeep) if cfg.largefileskeep else \
        "every version is kept (dvcs-autosync expire drops old ones when you ask)"
    return "Files of %s or more go through git-annex: %s. This machine keeps about one " \
           "copy of each; an older version's preview needs the remote." % (cfg.largefiles,
                                                                         keep)


# --- the timeline ---------------------------------------------------------------------

Change = collections.namedtuple("Change", "rev time host author subject text files")
HEADER = re.compile(r"\x1e([0-9a-f]{40,64})\x1f(\d+)\x1f([^\x1f]*)\x1f(.*)", re.S)


def timeline(folder, rel=None, limit=TIMELINE):
    """[Change] newest first, of the folder or of `rel` (a file or a subfolder);
    files: [(what, path)]."""
    if not folder.is_git():
        return _timeline_elsewhere(folder, rel)
    args = ["log", "-z", "--no-renames", "--name-status", "-n", str(limit),
            "--format=%x1e%H%x1f%ct%x1f%an%x1f%B", "--"]
    out = git.git(folder.path, *args + ([rel] if rel else []), check=False) or b""
    notes = gitnotes.texts(folder.path)
    changes = []
    tokens = os.fsdecode(out).split("\0")
    i = 0
    while i < len(tokens):
        head = HEADER.fullmatch(tokens[i])
        i += 1
        if not head:
            continue
        rev, stamp, author, message = head.groups()
        files = []
        while i + 1 < len(tokens) and re.fullmatch(r"\n?[ACDMRTUXB]", tokens[i]):
            files.append((STATUS_WORDS.get(tokens[i].strip(), "changed"), tokens[i + 1]))
            i += 2
        subject = message.strip("\n").partition("\n")[0]
        text, summary = split_subject(subject)
        ours = SUMMARY.fullmatch(summary)
        text = "; ".join(t for t in (text, notes.get(rev)) if t) or None
        changes.append(Change(rev, int(stamp), host_of(subject) or author, author,
                              ours.group("summary") if ours else summary, text, files))
    return changes


def _timeline_elsewhere(folder, rel):
    try:
        versions = folder.history().versions(rel or ".")
    except HistoryError:
        return []
    return [Change(v.rev, v.time, v.host, v.author, v.action, v.text, [])
            for v in versions[:TIMELINE]]


def machines(changes):
    """[(host, time of its newest change)] of the hosts the timeline names, newest first."""
    seen = {}
    for change in changes:
        seen.setdefault(change.host, change.time)
    return sorted(seen.items(), key=lambda item: -item[1])


# --- one file -------------------------------------------------------------------------

def versions(folder, rel):
    """vcs/history.py's versions of a path, newest first ([] when it has none)."""
    try:
        return folder.history().versions(rel)
    except HistoryError:
        return []


def content(folder, rev, rel):
    """The bytes of rel at rev, or None when it did not exist then."""
    try:
        return folder.history().content(rev, rel)
    except HistoryError:
        return None


def image_type(rel, data):
    """The content type of an image we show (by its name and its first bytes), or None."""
    kind = IMAGES.get(os.path.splitext(rel)[1].lower())
    if kind and data is not None and data.startswith(kind[1]):
        return kind[0]
    return None


def as_text(data):
    """The text of a version for its preview, or None when it is not text."""
    if data is None or b"\0" in data[:8192]:
        return None
    try:
        return data[:PREVIEW].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start > PREVIEW - 4:  # a character cut at the end
            return data[:e.start].decode("utf-8")
        return None


def diff(old, new):
    """[(kind, line)] of a unified diff of two texts; kind: add, del, hunk, same."""
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        lines.append((kind, line))
    return lines


# --- removed files and conflict copies ------------------------------------------------

Removed = collections.namedtuple("Removed", "path rev time host")


def removed(folder, limit=100):
    """[Removed] files that history holds and the folder no longer does, newest first
    (git only); ignored paths left out."""
    if not folder.is_git():
        return []
    out = git.git(folder.path, "log", "-z", "--diff-filter=D", "--no-renames", "--name-only",
                  "--format=%x1e%H%x1f%ct%x1f%an%x1f%s", check=False) or b""
    ignore = Ignore(folder.path, folder.cfg.ignorepath)
    found, seen = [], set()
    head = None
    for token in os.fsdecode(out).split("\0"):
        token = token.lstrip("\n")
        match = re.fullmatch(r"\x1e([0-9a-f]{40,64})\x1f(\d+)\x1f([^\x1f]*)\x1f(.*)", token,
                             re.S)
        if match:
            head = match.groups()
            continue
        if not token or head is None or token in seen:
            continue
        seen.add(token)
        if os.path.lexists(os.path.join(folder.path, token)) or ignore(token) or \
                read_copy_name(token):
            continue
        found.append(Removed(token, head[0], int(head[1]), host_of(head[3]) or head[2]))
        if len(found) >= limit:
            break
    return found


def conflicts(folder):
    """The conflict copies as `dvcs-autosync conflicts --json` lists them:
    objects with copy, path, host, time and mine; the tool's error as an exception."""
    done = subprocess.run([sys.executable, "-m", "autosync.supervisor", "conflicts", "--json",
                           "--config", folder.cfg.file], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    if done.returncode:
        raise HistoryError(done.stderr.decode("utf-8", "replace").strip() or "conflicts failed")
    return [types.SimpleNamespace(**c) for c in json.loads(done.stdout.decode("utf-8"))]
