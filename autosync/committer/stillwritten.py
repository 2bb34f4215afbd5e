"""Files left out of the commit while some process holds them open for writing (issue 32).

Every commit the committer makes (a batch, the rescan at start, after a pull, on
resume, a sync) leaves out a file that is still open for writing
(fs/stillopen.py asks the kernel): a half-written file would become a version on
every machine. Such a file is kept here and committed once it is closed: the
watcher's IN_CLOSE_WRITE sends it then; should that event be missed (the file was
opened before the watcher ran, events were lost), the committer looks at the
files kept here again, after RECHECK seconds and then less and less often (up to
RECHECK_MAX), and commits each one found closed.

A file held open for long (a log that is only ever appended, a download that
stalls) gets a version FIRST_VERSION after it was first found open, then at
doubling intervals (up to LONGEST_GAP apart), and its last one when it is closed.
An empty one gets none while open (a lock file may stay open, empty, for hours).
The times are counted from when the committer first found the file open: at or
after its first write, so a file closed within FIRST_VERSION of its first write
gets exactly one version, the whole one.

Whether a file is open is asked only of fs/stillopen.py (the folder's floor, a fact of
the kernel now); what is here is the committer's policy over that answer (versions while
open, the looks again, the status' `writing`), so it stays the committer's own.
"""
import logging
import os
import time

from autosync.fs import stillopen
from autosync.core.messages import printable
from autosync.core.retry import Backoff

log = logging.getLogger("autosync.committer")

FIRST_VERSION = 600.0  # seconds open for writing before a file gets a version anyway
LONGEST_GAP = 86400.0  # the doubling gaps between those versions stop at a day
RECHECK, RECHECK_MAX = 1.0, 30.0  # looks for a close that no event told of


class Entry:
    def __init__(self, change, now):
        self.change = change
        self.since = now  # first found open
        self.due = now + FIRST_VERSION  # when it gets a version while still open
        self.gap = FIRST_VERSION


class StillWritten:
    """The files left out because they are open for writing: path -> Entry."""

    def __init__(self, folder, report, clock=time.monotonic, held_open=stillopen.held_open):
        self.folder, self.report, self.clock = folder, report, clock
        self.held_open = held_open
        self.files = {}
        self.backoff = Backoff(RECHECK, RECHECK_MAX)
        self.look_at = None  # when to look at them again
        self.shown = []  # what the status says
        self.granted = set()  # given a version while open by this commit (leave_out on)

    def leave_out(self, changes):
        """The changes without those of files held open for writing (kept here, and
        said), except a version due while open."""
        self.granted = set()  # a new commit
        candidates = [c["path"] for c in changes if c["action"] != "removed"]
        held = self.judge(candidates, {c["path"]: c for c in changes})
        return [c for c in changes if c["action"] == "removed" or c["path"] not in held]

    def judge(self, paths, changes=None):
        """Of these paths (about to be committed), those to leave out now."""
        if not paths:
            return set()
        now = self.clock()
        open_now = self.held_open(self.folder, paths)
        out, new = set(), []
        for rel in paths:
            entry = self.files.get(rel)
            if rel not in open_now:
                if entry is not None:
                    del self.files[rel]
                continue
            change = (changes or {}).get(rel) or {"action": "modified", "path": rel}
            if entry is None:
                entry = self.files[rel] = Entry(change, now)
                new.append(rel)
            elif change["action"] != "modified":
                entry.change = change  # ("added" and "moved" say more than "modified")
            if rel in self.granted:
                continue
            if now >= entry.due and not self.empty(rel):
                self.granted.add(rel)
                entry.gap = min(LONGEST_GAP, 2 * entry.gap)
                entry.due = now + entry.gap
                log.info("%s has been open for writing for %d minutes: committed as it is "
                         "now; its next version in %d minutes, or when it is closed",
                         printable(rel), (now - entry.since) // 60, entry.gap // 60)
                continue
            out.add(rel)
        if new:
            log.info("left out of the commit while open for writing (committed once "
                     "closed): %s", ", ".join(map(printable, sorted(new))))
            self.backoff.reset()
            self.plan(now)
        self.told()
        return out

    def empty(self, rel):
        try:
            return os.lstat(os.path.join(self.folder, rel)).st_size == 0
        except OSError:
            return False

    def plan(self, now):
        """The next look: after the backoff, or when a version while open is due."""
        if not self.files:
            self.look_at = None
            return
        self.look_at = now + self.backoff.next()
        due = [e.due for e in self.files.values() if e.due > now]
        if due:
            self.look_at = min(self.look_at, min(due))

    def told(self):
        """The status lists them (`writing`)."""
        if not self.files:
            self.look_at = None
        if sorted(self.files) != self.shown:
            self.shown = sorted(self.files)
            self.report.status(writing=list(self.shown))

    def wait(self, now=None):
        """Seconds until the next look (0: now), or None with nothing kept."""
        if self.look_at is None:
            return None
        return max(0.0, self.look_at - (self.clock() if now is None else now))

    def due(self, now=None):
        return self.wait(now) == 0.0

    def recheck(self):
        """The kept files that may go into a commit now: closed (or gone) since, or due
        for a version while open (not empty). The commit judges them again. -> changes."""
        now = self.clock()
        open_now = self.held_open(self.folder, list(self.files)) if self.files else set()
        ready = []
        for rel, entry in list(self.files.items()):
            if rel not in open_now:
                del self.files[rel]
                ready.append(entry.change)
            elif now >= entry.due and not self.empty(rel):
                ready.append(entry.change)
        self.plan(now)
        self.told()
        return ready
