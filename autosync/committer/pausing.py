"""The committer's part for the pause and resume requests: the pause's end, a pull owed.

A part that committer.Committer owns (it uses the committer's lock and its Status);
the pause itself (its file, its end) is core/pause.py's.
"""
import logging

from autosync.core import cli
from autosync.core.pause import Pause, check_seconds, state_file

log = logging.getLogger("autosync.committer")

PAUSE_WAIT = 600.0  # seconds a pause waits at most for the commit, pull or push under way


class Pausing:
    """One folder's pause as the committer sees it."""

    def __init__(self, cfg, cond, status):
        self.cond, self.status = cond, status
        self.paused = Pause(state_file(cfg.path))
        self.folder = cfg.path  # named in the answer to a pause
        self.resuming = False  # the pause was lifted: the worker catches up ("pull": pull too)
        self.replan = False  # a pause began: the worker's wait must end at its end
        # The commit, pull or push the worker runs now (Worker.working), or None. Each
        # begins only under the committer's lock and only while not paused: a pause either
        # comes first (it never begins) or waits here for its end.
        self.under_way = None
        status.update(paused=self.paused.fields())

    def active(self):
        return self.paused.active()

    def pause_request(self, message):
        """Pause; answered once nothing runs any more: what was under way when it came
        (a commit, pull or push) has ended, and nothing begins after it."""
        seconds = check_seconds(message.get("seconds"))
        with self.cond:
            self.paused.start(seconds)
            fields = self.paused.fields()
            self.status.update(paused=fields)
            self.replan = True
            self.cond.notify_all()
            doing = self.under_way
            ended = self.cond.wait_for(lambda: self.under_way is None, timeout=PAUSE_WAIT)
            if ended and self.status["state"] != "stopped":
                self.status.state("paused")
        if not ended:
            log.warning("paused, but the %s under way has not ended after %d s", doing,
                        PAUSE_WAIT)
            return {"ok": False, "error": "paused, but the %s under way has not ended after "
                                          "%d s: it may still change the folder or the remote"
                                          % (doing, PAUSE_WAIT)}
        log.info("paused %s", "until %s" % cli.show_time(fields["until"])
                 if fields["until"] else "until resumed")
        self.status.event("paused", **fields)
        return {"ok": True, "paused": fields, "path": self.folder}

    def resume_request(self, message):
        return {"ok": True, "resumed": self.lift()}

    def lift(self):
        """End the pause (asked, or run out), if any; the worker then catches up.
        Called without the lock held: the event must not keep the worker waiting."""
        with self.cond:
            if not self.paused.active():
                return False
            owed = self.paused.lift()
            self.resuming = "pull" if owed or self.resuming == "pull" else True
            self.status.update(paused=None)
            self.cond.notify_all()
        log.info("resumed: syncing what changed while paused")
        self.status.event("resumed")
        return True

    def refused(self):
        """The sync request's answer while paused."""
        return {"ok": False, "error": "syncing is paused since %s: nothing is committed, "
                                      "pushed or pulled until dvcs-autosync resume"
                                      % cli.show_time(self.paused.since)}

    def owe_pull(self):
        with self.cond:
            self.paused.owe_pull()
