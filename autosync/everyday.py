"""The committer's pause, resume and describe: their requests and the worker's side.

A mixin of committer.Committer (it uses the committer's lock, status, events
and repository), kept apart so that each file stays readable: what the user
asks for through `autosync-notify` or the tray, as opposed to the suite's own
traffic. The pause itself (its file, its end) is pause.py's.
"""
import logging
import re
import time

from autosync import cli
from autosync.messages import check_text, described
from autosync.pause import Pause, check_seconds, state_file

log = logging.getLogger("autosync.committer")

REV = re.compile(r"[0-9a-f]{4,64}")


class Everyday:
    """Pause, resume and describe, for committer.Committer (which calls init_everyday)."""

    def init_everyday(self, cfg):
        self.asked_texts = []  # describe requests the worker has not placed yet
        self.texts = []  # descriptions for the top of the next commit
        self.own_last = None  # our last commit while it is not pushed: {"message", "rev"}
        self.amended = {}  # revision -> what an amend made of it (a notification names the old)
        self.paused = Pause(state_file(cfg.path))
        self.resuming = False  # the pause was lifted: the worker catches up ("pull": pull too)
        self.replan = False  # a pause began: the worker's wait must end at its end

    # --- requests, on socket threads -------------------------------------------------

    def pause_request(self, message):
        seconds = check_seconds(message.get("seconds"))
        with self.cond:
            self.paused.start(seconds)
            fields = self.paused.fields()
            self.status_fields["paused"] = fields
            if self.status_fields["state"] == "idle":
                self.status_fields["state"] = "paused"
            self.replan = True
            self.cond.notify_all()
        log.info("paused %s", "until %s" % cli.show_time(fields["until"])
                 if fields["until"] else "until resumed")
        self.event("paused", **fields)
        return {"ok": True, "paused": fields}

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
            self.status_fields["paused"] = None
            self.cond.notify_all()
        log.info("resumed: syncing what changed while paused")
        self.event("resumed")
        return True

    def describe_request(self, message):
        text = check_text(message.get("text"))
        # rev: the commit the user pointed at (a notification's, the tray's last change);
        # without one, the last commit while unpushed, else the next one (as before).
        rev = message.get("rev")
        if rev is not None and not (isinstance(rev, str) and REV.fullmatch(rev)):
            raise ValueError("rev must be a revision's hex digits, got %r" % (rev,))
        with self.cond:
            if self.paused.active():  # an amend is a commit, a note a push: the text waits
                self.texts.append(text)
                return {"ok": True, "to": "next"}
            self.asked_texts.append((text, rev))
        return self.wait_for("describe", message.get("timeout", 600))

    def while_paused(self, message):
        """sync is refused; a pull asked for or another machine's push waits for the resume."""
        cmd = message["cmd"]
        if cmd == "sync":
            return {"ok": False, "error": "syncing is paused since %s: nothing is committed, "
                                          "pushed or pulled until autosync-notify resume"
                                          % cli.show_time(self.paused.since)}
        with self.cond:
            self.paused.owe_pull()
        if cmd == "pushed":  # still passed on (XMPP): only our own pull waits
            self.event("pushed", url=str(message.get("url") or ""), source="notify")
            return {"ok": True}
        return {"ok": True, "pulled": False, "deferred": "paused: pulled on resume"}

    # --- the worker's side -----------------------------------------------------------

    def commit(self, changes, rescan, note=None):
        """A commit with the descriptions waiting for it; True if one was made."""
        with self.cond:
            texts, self.texts = self.texts, []
        made = self.repo.commit(changes, rescan, note=note, text="; ".join(texts) or None)
        if not made and texts:
            with self.cond:
                self.texts[:0] = texts
        return made

    def place_texts(self):
        """Descriptions asked for. One that names a commit goes on that commit: reworded
        (amendcmd) while it is our last one and unpushed, else as a note that travels
        with the branch (git: refs/notes/autosync, repository.describe_pushed); one that
        names none goes on our last commit while unpushed. The rest: the next commit."""
        with self.cond:
            ticket, asked, self.asked_texts = self.wanted["describe"], self.asked_texts, []
        result = {"ok": True, "to": "next"}
        for text, rev in asked:
            result = self.place_one(text, rev)
        self.finish("describe", ticket, result)

    def place_one(self, text, rev):
        with self.cond:
            last = self.own_last
            paused = self.paused.active()
        rev = self.amended.get(rev, rev) if rev else rev
        if last is not None and not paused and (rev is None or last["rev"] == rev):
            message = described(last["message"], text)
            new = self.repo.amend(message, last["rev"])
            if new is not None:
                with self.cond:
                    if last["rev"]:
                        self.amended[last["rev"]] = new
                    self.own_last = {"message": message, "rev": new}
                    self.status_fields["last_commit"] = {"time": time.time(), "rev": new,
                                                         "message": message.split("\n")[0]}
                log.info("described the last commit: %s", message.split("\n")[0])
                self.event("described", rev=new, text=text, to="last",
                           subject=message.split("\n")[0])
                return {"ok": True, "to": "last", "rev": new}
        if rev is not None and not paused:
            subject = self.repo.describe_pushed(rev, text)
            if subject is not None:
                log.info("described %s with a note: %s", rev[:12], text)
                self.event("described", rev=rev, text=text, to="note", subject=subject)
                return {"ok": True, "to": "note", "rev": rev, "subject": subject}
        with self.cond:
            self.texts.append(text)
        self.event("described", rev=rev or "", text=text, to="next", subject="")
        return {"ok": True, "to": "next"}
