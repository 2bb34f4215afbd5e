"""What the committer is told by its repository: status, events, the next retry.

repository.py reports through a small interface (state, status, failed,
succeeded, look_again, committed, pulled, event) so that it decides nothing
about when; this mixin of committer.Committer is that interface: it keeps
the status fields, publishes the events and sets when the worker's next
push, retry or timer pull is due. It uses the committer's lock (`cond`).
"""
import logging
import time

from autosync.messages import MESSAGE_LINES
from autosync.protocol import EVENTS, STATES

log = logging.getLogger("autosync.committer")

BACKOFF_MAX = 60.0  # the longest wait between retries of a failed push, pull or commit


class Reports:
    """The `report` side of committer.Committer (tests/fakes.Reports records the same calls)."""

    def state(self, name):
        assert name in STATES, name
        self.status(state=name)

    def status(self, **fields):
        with self.cond:
            self.status_fields.update(fields)

    def last_error(self):
        with self.cond:
            return self.status_fields["last_error"]

    def failed(self, op, error, retry=None, quiet=False):
        """op failed: said (log, `failed` event) when it starts failing or fails anew in
        other words, and kept in the status' `failing` until op works again."""
        text = "%s: %s" % (op, error)
        # The same failure in other words is news; the same words around another command
        # line (a commit's message differs at each try) are not.
        key = getattr(error, "output", None) or str(error)
        with self.cond:
            keys = self.__dict__.setdefault("failure_keys", {})
            new = op not in self.status_fields["failing"] or keys.get(op) != key
            keys[op], self.status_fields["failing"][op] = key, text
        quiet = quiet or not new
        if not quiet:
            log.error("%s failed: %s", op, error)
        with self.cond:
            self.status_fields["last_error"] = text
            if retry == "push":
                delay = min(BACKOFF_MAX, self.cfg.pushdelay + self.backoff["push"].next())
                self.push_at = time.monotonic() + delay
            elif retry:
                self.retry_at[retry] = time.monotonic() + self.backoff[retry].next()
        if not quiet:
            self.event("failed", op=op, error=str(error))

    def succeeded(self, op):
        with self.cond:
            if op in self.backoff:
                self.backoff[op].reset()
            was = self.status_fields["failing"].pop(op, None)
        if was:  # the problem's end is told once, as its start was
            log.warning("%s works again", op)
            self.event("recovered", op=op, error=was)

    def look_again(self, seconds):
        with self.cond:
            self.retry_at["commit"] = time.monotonic() + seconds

    def recount(self, upstream=False):
        """The unpushed commits read from the repository (and with `upstream`, the upstream
        revision too), never only remembered: a restart forgets nothing. Another DVCS
        cannot say: the count kept here stands. -> the count."""
        count = self.repo.unpushed()  # commands: not under the lock
        rev = self.repo.upstream() if upstream else None
        with self.cond:
            if count is not None:
                self.status_fields["unpushed"] = count
            if upstream:
                self.status_fields["upstream"] = rev
            return self.status_fields["unpushed"]

    def committed(self, message, listed):
        rev = self.repo.head()  # what describe may reword (a command: not under the lock)
        with self.cond:
            self.status_fields["last_commit"] = {"time": time.time(), "rev": rev,
                                                 "message": message.split("\n")[0]}
            self.status_fields["unpushed"] += 1  # another DVCS; git's count follows
            self.push_at = time.monotonic() + self.cfg.pushdelay
            self.own_last = {"message": message, "rev": rev}
        self.recount()
        log.info("%s", message.split("\n")[0])
        self.event("committed", message=message, changes=listed[:MESSAGE_LINES],
                   count=len(listed), host=self.cfg.hostname, rev=rev or "")

    def pulled(self, ok):
        self.recount(upstream=True)  # a merge commit, or the remote has ours now
        with self.cond:
            self.status_fields["last_pull"] = {"time": time.time(), "ok": ok}
            self.own_last = None  # a merge or another's commit may be on top now
            if self.cfg.pullinterval:
                self.next_timer_pull = time.monotonic() + self.cfg.pullinterval
            if self.cfg.safetypull:
                self.next_safety_pull = time.monotonic() + self.cfg.safetypull
            if ok and self.status_fields["unpushed"]:
                self.push_at = time.monotonic()  # a merge may wait to go out too

    def event(self, name, **fields):
        assert name in EVENTS, name
        fields.update(event=name, time=time.time())
        self.server.publish(fields)
