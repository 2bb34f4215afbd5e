"""What autosync-tray shows: the committer's status and events folded into one view.

View keeps what the committer said (a `status` reply when subscribed, then
each event) and answers with the state (idle, syncing, paused, offline,
conflict, error), its icon and StatusNotifierItem status, the tooltip, and
the recent changes. No D-Bus and no socket here: desktop/tray.py does the talking.
"""
import collections
import os
import time

from autosync.core import underway
from autosync.core.copies import read_copy_name
from autosync.core.messages import SUMMARY, escaped, split_subject

# state -> (icon name from the freedesktop icon theme, StatusNotifierItem Status)
LOOKS = {
    "idle": ("emblem-default", "Passive"),
    "syncing": ("emblem-synchronizing", "Active"),
    "paused": ("media-playback-pause", "Active"),
    "offline": ("network-offline", "Active"),
    "conflict": ("dialog-warning", "NeedsAttention"),
    "error": ("dialog-error", "NeedsAttention"),
}
REMOTE_OPS = ("push", "pull")  # their failures mean the remote is out of reach
RECENT = 5  # changes the menu lists


def clock(stamp):
    """A unix time as the tray says it: the time today, else date and time."""
    today = time.strftime("%Y-%m-%d") == time.strftime("%Y-%m-%d", time.localtime(stamp))
    return time.strftime("%H:%M" if today else "%Y-%m-%d %H:%M", time.localtime(stamp))


def summary(message):
    """`autosync on HOST: 2 added` (or a hand-made subject) -> `HOST: 2 added`; a
    described commit's subject, `TEXT (autosync on HOST: 2 added)`, read by
    messages.split_subject, the same."""
    first = split_subject(message.strip().split("\n")[0])[1]
    found = SUMMARY.fullmatch(first)
    return "%s: %s" % (found.group("host"), found.group("summary")) if found else first


class View:
    """The state of one synced folder as the tray shows it."""

    def __init__(self, folder):
        self.folder = folder
        # Why the committer is not there, or None: nothing is known before its status.
        self.daemon = "waiting for the daemon"
        self.pulling = False
        self.progress = None  # a long step under way (core/underway.py), as the status says
        self.unpushed = 0
        self.paused = None  # {"since", "until"} while paused
        self.offline = None  # why the remote is out of reach
        self.link = None  # the XMPP or ssh link: "up", "down", or None (syncmethod none)
        self.syncmethod = None  # which link it is (the status says)
        self.localonly = False  # the original's syncmethod = none: history kept here only
        self.error = None  # the last failure that is not the remote's
        self.copies = set()  # conflict copies known, relative paths
        self.last_commit = self.last_push = None
        self.recent = collections.deque(maxlen=RECENT)  # (time, text), oldest first

    # --- what comes in

    def status(self, status):
        """A `status` reply: everything afresh (the committer may have restarted)."""
        self.daemon = None
        # Only a pull's end is told (pull-finished); a commit's or a push's is told only
        # when it made or sent something, so the worker's other states would stick.
        self.pulling = status.get("state") == "pulling"
        self.progress = status.get("progress")
        self.unpushed = status.get("unpushed") or 0
        self.paused = status.get("paused")
        self.link = status.get("link")
        self.syncmethod = status.get("syncmethod")
        self.localonly = bool(status.get("localonly"))
        self.last_commit, self.last_push = status.get("last_commit"), status.get("last_push")
        pull = status.get("last_pull") or {}
        if "failing" in status:  # what fails now, by name (core/problems.py)
            failing = status["failing"] or {}
            away = REMOTE_OPS + ("link",)  # the other machines are out of reach
            remote = [e for op, e in failing.items() if op in away]
            local = [e for op, e in failing.items() if op not in away]
            self.offline = remote[0] if remote else None
            self.error = local[0] if local else None
            return self._rest(status)
        error = status.get("last_error")
        remote = bool(error) and error.split(":")[0] in REMOTE_OPS
        self.offline = error if remote else ("the last pull failed"
                                             if pull.get("ok") is False else None)
        self.error = None if remote else error
        self._rest(status)

    def _rest(self, status):
        self.found_copies(status.get("conflicts") or [])
        if self.last_commit and not self.recent:
            self.recent.append((self.last_commit["time"], summary(self.last_commit["message"])))

    def lost(self, why):
        """The subscription ended or failed: nothing is synced that the tray would see."""
        if self.daemon != "the daemon stopped":  # (a stop said so already)
            self.daemon = "no connection to the daemon (%s)" % why

    def history(self, versions):
        """The last few changes from the log at start (history.Version, newest first)."""
        older = [(v.time, "%s: %s" % (v.host, v.action)) for v in versions[:RECENT]]
        known = list(self.recent)
        self.recent.clear()
        self.recent.extend(sorted(set(older + known)))

    def found_copies(self, paths):
        self.copies.update(p for p in paths if read_copy_name(p))
        self.copies = {p for p in self.copies
                       if os.path.lexists(os.path.join(self.folder, p))}

    def event(self, event):
        name = event.get("event")
        stamp = event.get("time") or time.time()
        if name == "committed":
            self.last_commit = {"time": stamp, "message": event.get("message", ""),
                                "rev": event.get("rev") or ""}
            self.recent.append((stamp, summary(event.get("message", ""))))
            self.unpushed += 1
            self.error = None
            self.found_copies([c.get("path", "") for c in event.get("changes") or []])
        elif name == "pushed" and event.get("source") == "committer":
            self.last_push = {"time": stamp, "url": event.get("url")}
            self.unpushed, self.offline, self.error = 0, None, None
        elif name == "progress":
            self.progress = event.get("progress")
        elif name == "pull-started":
            self.pulling = True
        elif name == "pull-finished":
            self.pulling = False
            if event.get("ok", True):
                self.offline = None
        elif name == "pulled" and event.get("count"):
            hosts = ", ".join(event.get("hosts") or []) or "another machine"
            self.recent.append((stamp, "%s: %d file%s pulled" % (
                hosts, event["count"], "" if event["count"] == 1 else "s")))
            self.found_copies(event.get("files") or [])
        elif name == "conflict":
            self.found_copies([event.get("copy") or ""])
        elif name == "failed":
            text = "%s: %s" % (event.get("op"), event.get("error"))
            if event.get("op") in REMOTE_OPS:
                self.offline = text
            else:
                self.error = text
        elif name == "recovered":
            if event.get("op") in REMOTE_OPS + ("link",):
                self.offline = None
            else:
                self.error = None
        elif name == "paused":
            self.paused = {"since": event.get("since"), "until": event.get("until")}
        elif name == "resumed":
            self.paused = None
        elif name == "link":
            self.link = "up" if event.get("up") else "down"
        elif name == "stopping":
            self.daemon = "the daemon stopped"

    # --- what goes out

    def name(self):
        """One of LOOKS' states."""
        if self.error:
            return "error"
        if self.copies:
            return "conflict"
        if self.paused:
            return "paused"
        if self.offline or self.daemon or self.link == "down":
            return "offline"
        if self.pulling or (self.unpushed and not self.localonly) or self.progress:
            return "syncing"
        return "idle"

    def headline(self):
        """The state in words: the tooltip's first line and the menu's first item."""
        name = self.name()
        if name == "error":
            return escaped("Error: " + self.error)
        if name == "conflict":
            return "%d conflict cop%s to look at" % (len(self.copies),
                                                     "y" if len(self.copies) == 1 else "ies")
        if name == "paused":
            until = self.paused.get("until")
            return "Paused " + ("until %s" % clock(until) if until else "until resumed")
        if name == "offline":
            if self.daemon:
                return escaped("Not syncing: " + self.daemon)
            return escaped("Offline: " + (self.offline
                                  or "no %s link: other machines' changes come by timer"
                                  % ("ssh" if self.syncmethod == "ssh" else "XMPP")))
        if name == "syncing" and self.progress:  # a first sync of many files, say
            return "Syncing: " + underway.text(self.progress, when=clock)
        if name == "idle" and self.localonly:  # its commits are never pushed
            return "History kept here only (syncmethod = none, as for the original)"
        return "Syncing" if name == "syncing" else "Everything is synced"

    def tooltip(self):
        """(title, text) of the StatusNotifierItem's tooltip."""
        lines = [self.headline()]
        if self.last_commit:
            lines.append("Last change: %s %s" % (clock(self.last_commit["time"]),
                                                  summary(self.last_commit["message"])))
        lines.append("Last push: %s" % (clock(self.last_push["time"]) if self.last_push
                                        else "none since the daemon started"))
        lines.append("Conflict copies: %d" % len(self.copies))
        return ("dvcs-autosync: %s" % escaped(os.path.basename(self.folder.rstrip("/"))),
                "\n".join(map(escaped, lines)))

    def changes(self):
        """The recent changes, newest first, as menu labels."""
        return [escaped("%s  %s" % (clock(t), text)) for t, text in reversed(self.recent)]
