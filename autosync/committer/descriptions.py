"""The committer's part for the describe request: where each text goes.

A part that committer.Committer owns (it uses the committer's lock, its Status and
its repository): the describe request's texts, and where each goes (our last commit
reworded, a pushed one's note, or the next commit).
"""
import logging
import re
import time

from autosync.core.messages import check_text, described

log = logging.getLogger("autosync.committer")

REV = re.compile(r"[0-9a-f]{4,64}")


class Descriptions:
    """Texts asked for by `describe`, and our last commit while it may be reworded."""

    def __init__(self, cond, status):
        self.cond, self.status, self.repo = cond, status, None
        self.asked_texts = []  # describe requests the worker has not placed yet: (text, rev)
        self.texts = []  # descriptions for the top of the next commit
        self.own_last = None  # our last commit while it is not pushed: {"message", "rev"}
        self.amended = {}  # revision -> what an amend made of it (a notification names the old)

    def ask(self, message, paused):
        """A describe request checked -> True when it waits for the worker, False when it
        went to the next commit (while paused: an amend is a commit, a note a push)."""
        text = check_text(message.get("text"))
        # rev: the commit the user pointed at (a notification's, the tray's last change);
        # without one, the last commit while unpushed, else the next one (as before).
        rev = message.get("rev")
        if rev is not None and not (isinstance(rev, str) and REV.fullmatch(rev)):
            raise ValueError("rev must be a revision's hex digits, got %r" % (rev,))
        with self.cond:
            if paused:
                self.texts.append(text)
                return False
            self.asked_texts.append((text, rev))
            return True

    def take_texts(self):
        with self.cond:
            texts, self.texts = self.texts, []
            return texts

    def give_back(self, texts):
        """Texts a commit did not take: first on the next one."""
        with self.cond:
            self.texts[:0] = texts

    def place(self, is_paused):
        """Descriptions asked for. One that names a commit goes on that commit: reworded
        (amendcmd) while it is our last one and unpushed, else as a note that travels
        with the branch (git: refs/notes/autosync, repository.describe_pushed); one that
        names none goes on our last commit while unpushed. The rest: the next commit.
        -> the answer to the last one."""
        with self.cond:
            asked, self.asked_texts = self.asked_texts, []
        result = {"ok": True, "to": "next"}
        for text, rev in asked:
            result = self.place_one(text, rev, is_paused)
        return result

    def place_one(self, text, rev, is_paused):
        with self.cond:
            last = self.own_last
            paused = is_paused()
        rev = self.amended.get(rev, rev) if rev else rev
        if last is not None and not paused and (rev is None or last["rev"] == rev):
            message = described(last["message"], text)
            new = self.repo.amend(message, last["rev"])
            if new is not None:
                with self.cond:
                    if last["rev"]:
                        self.amended[last["rev"]] = new
                    self.own_last = {"message": message, "rev": new}
                    self.status.update(last_commit={"time": time.time(), "rev": new,
                                                    "message": message.split("\n")[0]})
                log.info("described the last commit: %s", message.split("\n")[0])
                self.status.event("described", rev=new, text=text, to="last",
                                  subject=message.split("\n")[0])
                return {"ok": True, "to": "last", "rev": new}
        if rev is not None and not paused:
            subject = self.repo.describe_pushed(rev, text)
            if subject is not None:
                log.info("described %s with a note: %s", rev[:12], text)
                self.status.event("described", rev=rev, text=text, to="note", subject=subject)
                return {"ok": True, "to": "note", "rev": rev, "subject": subject}
        with self.cond:
            self.texts.append(text)
        self.status.event("described", rev=rev or "", text=text, to="next", subject="")
        return {"ok": True, "to": "next"}
