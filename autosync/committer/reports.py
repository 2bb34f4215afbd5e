"""The committer's side of the repository's reports.

committer/repository/ reports through a small interface (repository.Report: state,
status, failed, succeeded, look_again, committed, pulled, event, last_error)
so that it decides nothing about when. Reports is that interface for
committer.Committer, made of the parts it owns:

* Status (committer/status.py): the status fields, one schema (FIELDS), the state's
  changes checked against protocol.STATES, and the events published;
* Schedule (committer/schedule.py): when the next push, retry and timer pull are due,
  and the backoffs that space the retries.

Every part uses the committer's lock (`cond`, re-entrant).
"""
import logging
import time

from autosync.core.messages import MESSAGE_LINES

log = logging.getLogger("autosync.committer")


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
