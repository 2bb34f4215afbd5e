"""The committer's schedule: when the next push, retry and timer pull are due, and the
backoffs that space the retries. Uses the committer's lock (`cond`, re-entrant).
committer/reports.py applies the repository's reports to it.
"""
import time

from autosync.core.retry import Backoff

BACKOFF_MAX = 60.0  # the longest wait between retries of a failed push, pull or commit
LINKED = ("xmpp", "ssh")  # syncmethods whose link tells when to pull (autosync-xmpp, -sshlink)


def backoffs():
    """One backoff per operation: 2 s doubling up to a minute; the remote's with jitter,
    so that machines that lost it together do not come back together."""
    return {"commit": Backoff(2.0, BACKOFF_MAX), "pull": Backoff(2.0, BACKOFF_MAX, jitter=0.2),
            "push": Backoff(2.0, BACKOFF_MAX, jitter=0.2)}


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
