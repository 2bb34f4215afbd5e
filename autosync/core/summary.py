"""Turns the committer's events into few, readable messages.

Used for desktop notifications (autosync-desktop) and for XMPP `alsonotify`.
Pure logic: no I/O and no clock of its own. Callers pass `now` (monotonic
seconds) to feed() and due(), and show whatever Messages come back.

Levels (the `notifylevel` key):

* quiet   -- only failures and conflicts;
* normal  -- failures and conflicts at once, plus one summary per sync burst,
             at most one summary every `min_interval` seconds;
* verbose -- failures and conflicts, plus one message per commit and per pull.

A pause and its end are told once each, at normal and verbose. With
`describe` on, a message about changes made here carries the action
DESCRIBE (the desktop shows it as a "Describe..." button).
"""
import time
from dataclasses import dataclass

from autosync.core.messages import escaped, printable, split_subject

LEVELS = ("quiet", "normal", "verbose")
DEFAULT_LEVEL = "normal"

# Urgencies as the desktop notification specification numbers them.
LOW, NORMAL, CRITICAL = 0, 1, 2

MAX_NAMES = 3  # file names shown in a summary before "and N more"
DESCRIBE = ("describe", "Describe...")  # an action: its key, its label


@dataclass(frozen=True)
class Message:
    title: str
    body: str = ""
    urgency: int = NORMAL
    actions: tuple = ()  # (key, label) pairs the user may pick
    rev: str = ""  # the commit DESCRIBE is for: the newest one made here that it tells of

    def __post_init__(self):
        # Names are quoted where they are put in (printable); whatever else came from
        # another machine (a host, an error with a tool's words) acts on no terminal either.
        object.__setattr__(self, "title", escaped(self.title))
        object.__setattr__(self, "body", escaped(self.body))

    def text(self):
        """Title and body as plain text, for a chat message or a log line."""
        return self.title + ("\n" + self.body if self.body else "")


class Changes:
    """Files changed on one side (here, or elsewhere) during a burst."""

    def __init__(self):
        self.names = {}  # path -> None: an ordered set, so a file saved twice counts once
        self.unnamed = 0  # changes known only by their count (the event's list was cut)
        self.unknown = False  # a pull that said something changed, but not what
        self.hosts = {}

    def add(self, paths, count=None, hosts=()):
        for path in paths:
            self.names[path] = None
        if count is None:
            self.unknown = self.unknown or not paths
        else:
            self.unnamed += max(0, count - len(paths))
        for host in hosts:
            self.hosts[host] = None

    def __bool__(self):
        return bool(self.names or self.unnamed or self.unknown)

    def count(self):
        return len(self.names) + self.unnamed

    def files(self):
        """'3 files', or '' when the number is not known."""
        n = self.count()
        if self.unknown and not n:
            return ""
        return "1 file" if n == 1 else "%d files" % n

    def listing(self):
        """'a.txt, b.txt, c.txt and 9 more'."""
        shown = [printable(name) for name in list(self.names)[:MAX_NAMES]]
        rest = self.count() - len(shown)
        if not shown:
            return ""
        if rest > 0:
            return "%s and %d more" % (", ".join(shown), rest)
        if len(shown) == 1:
            return shown[0]
        return "%s and %s" % (", ".join(shown[:-1]), shown[-1])


class Burst:
    """Local commits and pulled changes waiting to be told in one message."""

    def __init__(self, now):
        self.first = self.last = now
        self.local = Changes()
        self.remote = Changes()
        self.rev = ""  # the newest commit made here in the burst

    def message(self, folder, actions=()):
        remote, local = self.remote, self.local
        if remote:
            hosts = " and ".join(remote.hosts)
            if remote.files():
                what = remote.files() + (" from " + hosts if hosts else " updated")
            else:
                what = "Changes from " + hosts if hosts else "Changes pulled"
            if local:
                what += ", %s saved here" % local.count()
        else:
            what = local.files() + " saved"
        lines = []
        if remote.listing():
            source = "From %s: " % hosts if hosts else "Pulled: "
            lines.append((source if local else "") + remote.listing())
        if local.listing():
            lines.append(("Saved here: " if remote else "") + local.listing())
        # Changes from another machine are news; the user's own saves are not.
        urgency = NORMAL if remote else LOW
        return Message(_titled(folder, what), "\n".join(lines), urgency,
                       actions if local else (), self.rev if local else "")


class Summariser:
    """Feed it events; show the Messages that feed(), due() and flush() return."""

    def __init__(self, level=DEFAULT_LEVEL, min_interval=60.0, settle=2.0, folder="",
                 repeat_after=600.0, describe=False):
        """`settle`: quiet seconds that end a burst. `repeat_after`: how long the
        very same failure, repeated with no success in between, stays unsaid.
        `describe`: messages about local changes offer DESCRIBE."""
        if level not in LEVELS:
            raise ValueError("expected one of %s, got %r" % (", ".join(LEVELS), level))
        self.level = level
        self.min_interval = min_interval
        self.settle = settle
        self.folder = folder
        self.repeat_after = repeat_after
        self.burst = None
        self.last_summary = None  # when the last burst summary went out
        self.failures = {}  # op -> (error, when it was told)
        self.actions = (DESCRIBE,) if describe else ()

    def feed(self, event, now):
        """Messages to show now for this event (often none)."""
        handler = {
            "failed": self._failed,
            "recovered": self._recovered,
            "conflict": self._conflict,
            "mass-delete": self._mass_delete,
            "committed": self._committed,
            "pulled": self._pulled,
            "pushed": self._pushed,
            "stopping": self._stopping,
            "paused": self._paused,
            "resumed": self._resumed,
            "described": self._described,
        }.get(event.get("event"))
        return handler(event, now) if handler else []

    def next_due(self):
        """When due() will have a summary to give; None while nothing waits."""
        if self.burst is None:
            return None
        # A burst ends after `settle` quiet seconds, or after `min_interval`
        # seconds of non-stop activity, so a busy folder still hears something.
        at = min(self.burst.last + self.settle, self.burst.first + self.min_interval)
        if self.last_summary is not None:
            at = max(at, self.last_summary + self.min_interval)
        return at

    def due(self, now):
        """The waiting summary, if its time has come."""
        at = self.next_due()
        if at is None or now < at:
            return []
        return self.flush(now)

    def flush(self, now):
        """The waiting summary now, whatever the time (the daemon is stopping)."""
        if self.burst is None:
            return []
        message = self.burst.message(self.folder, self.actions)
        self.burst = None
        self.last_summary = now
        return [message]

    # --- one method per event ---------------------------------------------------

    def _failed(self, event, now):
        op = str(event.get("op") or "sync")
        error = str(event.get("error") or "unknown error")
        told = self.failures.get(op)
        # A remote that stays away fails every retry: say so once, not fifty times.
        if told and told[0] == error and now - told[1] < self.repeat_after:
            return []
        self.failures[op] = (error, now)
        return [Message(_titled(self.folder, "%s failed" % op.capitalize()), error, NORMAL)]

    def _recovered(self, event, now):
        """The end of a failure that was told: told once too."""
        op = str(event.get("op") or "sync")
        if self.failures.pop(op, None) is None:
            return []
        return [Message(_titled(self.folder, "%s works again" % op.capitalize()),
                        "Syncing goes on.", NORMAL)]

    def _conflict(self, event, now):
        path = printable(event["path"]) if event.get("path") else "a file"
        body = "Both versions are kept"
        if event.get("copy"):
            body += "; the other one is %s" % printable(event["copy"])
        if event.get("host"):
            body += " (from %s)" % event["host"]
        return [Message(_titled(self.folder, "Conflict in %s" % path), body + ".", CRITICAL)]

    def _mass_delete(self, event, now):
        # Said at every level, quiet included: it may be an accident, and it is synced.
        count = _number(event.get("count"), 0)
        body = "%d files were removed and the removal is synced. To undo it: %s" % (
            count, event.get("restore") or "dvcs-autosync restore")
        return [Message(_titled(self.folder, "%d files removed" % count), body, CRITICAL)]

    def _committed(self, event, now):
        self.failures.pop("commit", None)
        paths = _paths(event.get("changes"))
        rev = event.get("rev") if isinstance(event.get("rev"), str) else ""
        return self._add("local", paths, _number(event.get("count"), len(paths)), (), now, rev)

    def _described(self, event, now):
        """The user's description was placed: which change got it (always told: asked for)."""
        text, subject = str(event.get("text") or ""), str(event.get("subject") or "")
        rev = str(event.get("rev") or "")[:12]
        if event.get("to") == "next":
            body = "\u201c%s\u201d goes at the top of the next change made here." % text
        else:
            # The summary, without the text just given at its top.
            summary = split_subject(subject)[1] if subject else ""
            body = "\u201c%s\u201d is on the change %s%s%s." % (
                text, rev, ": " if summary else "", summary)
        return [Message(_titled(self.folder, "Description saved"), body, LOW)]

    def _pulled(self, event, now):
        self.failures.pop("pull", None)
        count = _number(event.get("count"), None)
        paths = _paths(event.get("files"))
        # A timer pull that brought nothing is no news. Without "changed" or a
        # count, nothing says the pull changed anything, so stay quiet.
        if not (event.get("changed") or count or paths):
            return []
        hosts = event.get("hosts") or ([event["host"]] if event.get("host") else [])
        return self._add("remote", paths, count, [str(h) for h in hosts], now)

    def _pushed(self, event, now):
        if event.get("source") != "notify":  # another machine's push is not ours
            self.failures.pop("push", None)
        return []

    def _paused(self, event, now):
        if self.level == "quiet":  # the user paused it: no error
            return []
        until = event.get("until")
        if isinstance(until, (int, float)) and not isinstance(until, bool):
            body = "Syncing starts again at %s." % time.strftime("%Y-%m-%d %H:%M",
                                                                  time.localtime(until))
        else:
            body = "Syncing starts again when you run dvcs-autosync resume."
        return [Message(_titled(self.folder, "Paused"), body + " Changes are kept and "
                        "committed then, in one commit.", NORMAL)]

    def _resumed(self, event, now):
        if self.level == "quiet":
            return []
        return [Message(_titled(self.folder, "Syncing again"), "", LOW)]

    def _stopping(self, event, now):
        return self.flush(now)  # the committer goes: tell what is waiting now

    def _add(self, side, paths, count, hosts, now, rev=""):
        if self.level == "quiet":
            return []
        burst = Burst(now) if self.level == "verbose" or self.burst is None else self.burst
        getattr(burst, side).add(paths, count, hosts)
        burst.rev = rev or burst.rev
        burst.last = now
        if self.level == "verbose":
            return [burst.message(self.folder, self.actions)]
        self.burst = burst
        return []


def _titled(folder, what):
    # With several synced folders, the title says which one.
    return "%s: %s" % (folder, what) if folder else what


def _paths(changes):
    """The paths of an event's change list (dicts with "path", or plain strings)."""
    paths = []
    for change in changes or []:
        path = change.get("path") if isinstance(change, dict) else change
        if isinstance(path, str) and path:
            paths.append(path)
    return paths


def _number(value, default):
    return value if isinstance(value, int) and not isinstance(value, bool) else default
