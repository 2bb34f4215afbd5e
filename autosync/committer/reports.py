"""The committer's parts that the repository reports to: its status, its schedule.

committer/repository.py reports through a small interface (repository.Report: state,
status, failed, succeeded, look_again, committed, pulled, event, last_error)
so that it decides nothing about when. Reports is that interface for
committer.Committer, made of the parts it owns:

* Status: the status fields, one schema (FIELDS), the state's changes checked
  against protocol.STATES, and the events published;
* Schedule: when the next push, retry and timer pull are due, and the
  backoffs that space the retries.

Every part uses the committer's lock (`cond`, re-entrant).
"""
import logging
import time

from autosync.core.messages import MESSAGE_LINES
from autosync.core.protocol import EVENTS, STATES
from autosync.core.retry import Backoff

log = logging.getLogger("autosync.committer")

BACKOFF_MAX = 60.0  # the longest wait between retries of a failed push, pull or commit
LINKED = ("xmpp", "ssh")  # syncmethods whose link tells when to pull (autosync-xmpp, -sshlink)


def backoffs():
    """One backoff per operation: 2 s doubling up to a minute; the remote's with jitter,
    so that machines that lost it together do not come back together."""
    return {"commit": Backoff(2.0, BACKOFF_MAX), "pull": Backoff(2.0, BACKOFF_MAX, jitter=0.2),
            "push": Backoff(2.0, BACKOFF_MAX, jitter=0.2)}


# --- the status -----------------------------------------------------------------------

ABSENT = object()  # a field left out of the status until it is first set

# Every field of the status (docs/protocol.md, "Status") and its value at start.
FIELDS = {
    "state": "starting", "path": None, "host": None,
    "last_commit": None, "last_push": None, "last_pull": None,
    "unpushed": 0, "last_error": None, "conflicts": [],
    "failing": {},  # op -> its error, while it fails (core/problems.py)
    "waiting": None,  # why there is nothing to pull yet
    "held_back": [], "nested_repositories": [],
    "writing": [],  # files left out while open for writing (committer/stillwritten.py)
    "watch": None,  # the watcher's report while folders have no watch
    "folder": None,  # the watcher's report while the folder is away
    "paused": None,
    "upstream": None,  # git: the upstream branch's revision
    "syncmethod": None,  # which link (core/problems.py)
    "link": None,
    "link_polled": None,  # seconds between polls, while the link polls instead of watching
    "mass_delete": ABSENT,  # the last commit that removed many files (committer/massdelete.py)
    "history": ABSENT,  # the history's size here and on the remote (vcs/sizes.py)
    "maintenance": ABSENT,  # the last maintenancecmd run (committer/maintenance.py)
}
# The state's changes: "starting" only at first, nothing after "stopped".
TRANSITIONS = {state: frozenset(STATES) - {"starting"} for state in STATES}
TRANSITIONS["stopped"] = frozenset()


class Status:
    """The status fields and the events, published through `publish(fields)`."""

    def __init__(self, cond, publish, **fields):
        self.cond, self.publish = cond, publish
        self.fields = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list)
                           else v) for k, v in FIELDS.items()}
        self.update(**fields)

    def update(self, **fields):
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise KeyError("not a status field: %s" % ", ".join(sorted(unknown)))
        if "state" in fields:
            self.check(fields["state"])
        with self.cond:
            self.fields.update(fields)

    def check(self, state):
        if state not in STATES:
            raise ValueError("not a state: %r" % (state,))
        with self.cond:
            now = self.fields["state"]
        if state != now and state not in TRANSITIONS[now]:
            raise ValueError("the state cannot go from %s to %s" % (now, state))

    def state(self, name):
        self.update(state=name)

    def __getitem__(self, key):
        with self.cond:
            value = self.fields[key]
        return None if value is ABSENT else value

    def snapshot(self):
        """A copy of every field set (the nested `failing` too)."""
        with self.cond:
            return {k: dict(v) if k == "failing" else v for k, v in self.fields.items()
                    if v is not ABSENT}

    def event(self, name, **fields):
        if name not in EVENTS:
            raise ValueError("not an event: %r" % (name,))
        fields.update(event=name, time=time.time())
        self.publish(fields)


# --- the schedule ---------------------------------------------------------------------

class Schedule:
    """When the worker pushes, retries and pulls next (monotonic times, None: not due)."""

    def __init__(self, cfg, cond):
        self.cfg, self.cond = cfg, cond
        self.push_at = None  # when the next push is due
        self.push_owed = False  # the last push failed: the retry pushes, whatever the count
        self.retry_at = {"commit": None, "pull": None}  # when a failed one is tried again
        self.backoff = backoffs()
        self.link_up = False  # the link (XMPP, ssh) says when to pull while it is up
        self.woken = False  # resumed, or the network is back: pull, then push what waits
        now = time.monotonic()
        self.next_timer_pull = now + cfg.pullinterval if cfg.pullinterval else None
        self.next_safety_pull = now + cfg.safetypull if cfg.safetypull else None

    def failed(self, retry):
        """A failure to retry: "push" (after pushdelay and its backoff), "commit" or "pull"."""
        with self.cond:
            if retry == "push":
                delay = min(BACKOFF_MAX, self.cfg.pushdelay + self.backoff["push"].next())
                self.push_at = time.monotonic() + delay
            elif retry:
                self.retry_at[retry] = time.monotonic() + self.backoff[retry].next()

    def succeeded(self, op):
        with self.cond:
            if op in self.backoff:
                self.backoff[op].reset()

    def look_again(self, seconds):
        """The repository cannot be touched now (the folder is away, a rebase is half
        done): a commit is tried again in `seconds`, and a timer or safety pull that is
        due is put off as long (still due, it kept the worker awake: a committer whose
        folder was away spun at full speed while pullinterval was set)."""
        with self.cond:
            now = time.monotonic()
            self.retry_at["commit"] = now + seconds
            if self.next_timer_pull is not None and self.next_timer_pull <= now:
                self.next_timer_pull = now + seconds
            if self.next_safety_pull is not None and self.next_safety_pull <= now:
                self.next_safety_pull = now + seconds

    def committed(self):
        with self.cond:
            self.push_at = time.monotonic() + self.cfg.pushdelay

    def pulled(self, push_now):
        with self.cond:
            if self.cfg.pullinterval:
                self.next_timer_pull = time.monotonic() + self.cfg.pullinterval
            if self.cfg.safetypull:
                self.next_safety_pull = time.monotonic() + self.cfg.safetypull
            if push_now:
                self.push_at = time.monotonic()  # a merge may wait to go out too

    def pushing(self):
        with self.cond:
            self.push_at = None

    def pushed(self, ok):
        with self.cond:
            if ok:
                self.push_at = None
            self.push_owed = not ok  # another DVCS cannot count: retry all the same

    def timer_pull_at(self):
        """When the next timer pull is due: every pullinterval while no link (XMPP, ssh)
        says when to pull; while one does, every safetypull, in case a message was lost."""
        with self.cond:
            if self.cfg.syncmethod in LINKED and self.link_up:
                return self.next_safety_pull
            return self.next_timer_pull

    def due(self, now):
        """Is anything of the schedule's due at `now`?"""
        with self.cond:
            return (self.woken or (self.push_at is not None and now >= self.push_at)
                    or any(t is not None and now >= t for t in self.retry_at.values())
                    or self._timer_pull_due(now))

    def _timer_pull_due(self, now):
        due = self.timer_pull_at()
        return due is not None and now >= due

    def sleep_time(self):
        """Seconds until the next thing due; None: nothing is."""
        with self.cond:
            deadlines = [t for t in (self.push_at, self.timer_pull_at(), *self.retry_at.values())
                         if t is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def take(self, now):
        """What is due now, taken -> (push due, timer pull due, retries due, woken)."""
        with self.cond:
            push_due = self.push_at is not None and now >= self.push_at
            timer_pull = self._timer_pull_due(now)
            retry = {op for op, t in self.retry_at.items() if t is not None and now >= t}
            for op in retry:
                self.retry_at[op] = None
            woken, self.woken = self.woken, False
            if woken:
                self.retry_at["pull"] = None  # this pull is the retry
            return push_due, timer_pull, retry, woken


# --- the report interface -------------------------------------------------------------

class Reports:
    """repository.Report for committer.Committer: the repository's reports applied to
    the committer's status, schedule and descriptions. `repo` is set once the
    repository exists (it is made with this object)."""

    def __init__(self, cfg, cond, status, schedule, descriptions):
        self.cfg, self.cond = cfg, cond
        self.status_part, self.schedule, self.descriptions = status, schedule, descriptions
        self.failure_keys = {}  # op -> the words its failure was last said in
        self.repo = None
        self.stopping = False  # the daemon stops: what a stop cut short did not fail

    def state(self, name):
        self.status_part.state(name)

    def status(self, **fields):
        self.status_part.update(**fields)

    def event(self, name, **fields):
        self.status_part.event(name, **fields)

    def last_error(self):
        return self.status_part["last_error"]

    def failed(self, op, error, retry=None, quiet=False):
        """op failed: said (log, `failed` event) when it starts failing or fails anew in
        other words, and kept in the status' `failing` until op works again."""
        if self.stopping:  # a command the stop's signal ended, most likely
            log.info("%s not finished: the daemon is stopping (%s)", op, error)
            return
        text = "%s: %s" % (op, error)
        # The same failure in other words is news; the same words around another command
        # line (a commit's message differs at each try) are not.
        key = getattr(error, "output", None) or str(error)
        with self.cond:
            failing = self.status_part.fields["failing"]
            new = op not in failing or self.failure_keys.get(op) != key
            self.failure_keys[op], failing[op] = key, text
            self.status_part.update(last_error=text)
        quiet = quiet or not new
        if not quiet:
            log.error("%s failed: %s", op, error)
        self.schedule.failed(retry)
        if not quiet:
            self.event("failed", op=op, error=str(error))

    def succeeded(self, op):
        self.schedule.succeeded(op)
        with self.cond:
            was = self.status_part.fields["failing"].pop(op, None)
        if was:  # the problem's end is told once, as its start was
            log.warning("%s works again", op)
            self.event("recovered", op=op, error=was)

    def look_again(self, seconds):
        self.schedule.look_again(seconds)

    def recount(self, upstream=False):
        """The unpushed commits read from the repository (and with `upstream`, the upstream
        revision too), never only remembered: a restart forgets nothing. Another DVCS
        cannot say: the count kept here stands. -> the count."""
        count = self.repo.unpushed()  # commands: not under the lock
        rev = self.repo.upstream() if upstream else None
        with self.cond:
            if count is not None:
                self.status_part.update(unpushed=count)
            if upstream:
                self.status_part.update(upstream=rev)
            return self.status_part["unpushed"]

    def committed(self, message, listed):
        rev = self.repo.head()  # what describe may reword (a command: not under the lock)
        with self.cond:
            self.status_part.update(last_commit={"time": time.time(), "rev": rev,
                                                 "message": message.split("\n")[0]},
                                    unpushed=self.status_part["unpushed"] + 1)  # another DVCS
            self.schedule.committed()
            self.descriptions.own_last = {"message": message, "rev": rev}
        self.recount()
        log.info("%s", message.split("\n")[0])
        self.event("committed", message=message, changes=listed[:MESSAGE_LINES],
                   count=len(listed), host=self.cfg.hostname, rev=rev or "")

    def pulled(self, ok):
        self.recount(upstream=True)  # a merge commit, or the remote has ours now
        with self.cond:
            self.status_part.update(last_pull={"time": time.time(), "ok": ok})
            self.descriptions.own_last = None  # a merge or another's commit may be on top now
            self.schedule.pulled(ok and bool(self.status_part["unpushed"]))
