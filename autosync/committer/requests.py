"""The committer's requests: what comes in on its socket (docs/protocol.md), and the
system bus' wake-up, answered.

A part that committer.Committer owns (it uses the committer's lock and its parts):
each request checked (a bad one: a one-line error), then handed to the worker
(committer/handover.py) and, for pull, sync and describe, waited on; or answered from
the status at once. Every request is answered from one table, `table`, whose names
are protocol.REQUESTS (a test keeps them equal; subscribe is the server's own).
"""
import logging
import os

from autosync.core import cli, problems
from autosync.core.messages import ACTIONS, TEXT_MAX
from autosync.committer.handover import Note

log = logging.getLogger("autosync.committer")

# A batch's rescan `reason` (protocol.RESCANS), as the log says it.
RESCAN_WHY = {"start": "it has just started",
              "committer-restarted": "the committer restarted: events may have been missed",
              "drained": "a pull ended: what it did not write is looked for",
              "overflow": "the kernel's event queue overflowed",
              "folder-back": "the synced folder is back"}


def check_note(note):
    """A request's note: None, or one printable line of at most TEXT_MAX characters."""
    if note is not None and not (isinstance(note, str) and note.isprintable()
                                 and 0 < len(note) <= TEXT_MAX):
        raise ValueError("note must be one printable line of at most %d characters" % TEXT_MAX)
    return note


def check_change(change):
    """Refuse a batch entry that is not what the protocol allows."""
    if not isinstance(change, dict) or change.get("action") not in ACTIONS:
        raise ValueError("each change needs an action among %s" % ", ".join(ACTIONS))
    for key in ("path", "src") if change["action"] == "moved" else ("path",):
        path = change.get(key)
        if not isinstance(path, str) or not path or os.path.isabs(path) \
                or ".." in path.split("/") or "\0" in path:
            raise ValueError("bad %s in change: %.100r" % (key, path))
    return {k: change[k] for k in ("action", "path", "src") if k in change}


class Requests:
    """The answers to the socket's requests (handle), on the socket's threads: they only
    queue work and wait for it."""

    def __init__(self, handover, status, schedule, pausing, descriptions, reports, repo):
        self.handover, self.cond = handover, handover.cond
        self.status, self.schedule, self.pausing = status, schedule, pausing
        self.descriptions, self.reports, self.repo = descriptions, reports, repo
        # Every request the committer answers (subscribe: the server's own).
        self.table = {
            "status": self.status_request, "batch": self.batch_request,
            "sync": self.sync_request, "pull": self.sync_request,
            "pushed": self.pushed_request, "link": self.link_request,
            "watch": self.watch_reported, "pause": self.pausing.pause_request,
            "resume": self.pausing.resume_request, "describe": self.describe_request,
            "note": self.note_request,
        }

    def handle(self, message, client):
        cmd = message.get("cmd")
        handler = self.table.get(cmd) if isinstance(cmd, str) else None
        if handler is None:
            return {"ok": False, "error": "unknown cmd %.50r" % (cmd,)}
        try:
            return handler(message)
        except ValueError as e:
            return {"ok": False, "error": str(e)}

    def status_request(self, message):
        with self.cond:
            # rescan: a look at the whole folder is asked and not begun (then: committing)
            status = dict(self.status.snapshot(), pending=sorted(self.handover.pending.changes),
                          rescan=self.handover.pending.rescan)
        status["problems"] = problems.problems(status)
        status["headline"] = problems.headline(status, when=cli.show_time)
        return {"ok": True, "status": status}

    def batch_request(self, message):
        changes = message.get("changes", [])
        if not isinstance(changes, list):
            return {"ok": False, "error": "changes must be a list"}
        changes = [check_change(c) for c in changes]
        with self.cond:  # numbered before the worker can take it (committer/fsmonitor.py)
            self.repo.received(changes, bool(message.get("rescan")))
            self.handover.pending.add(changes, bool(message.get("rescan")))
            if message.get("rescan"):  # logged once queued: the status shows it from now
                log.info("the watcher asks for a rescan: %s",
                         RESCAN_WHY.get(message.get("reason"), "no reason given"))
            self.cond.notify_all()
        self.repo.publish_received()  # for git commands run now
        return {"ok": True, "queued": len(changes)}

    def sync_request(self, message):
        """sync and pull: wait for the worker (a sync's note first on its commit)."""
        if self.pausing.active():
            if message["cmd"] == "sync":
                return self.pausing.refused()
            self.pausing.owe_pull()
            return {"ok": True, "pulled": False, "deferred": "paused: pulled on resume"}
        note = check_note(message.get("note"))
        if note:
            with self.cond:
                self.handover.notes.append(Note(note, None))
        return self.handover.wait_for(message["cmd"], message.get("timeout", 600))

    def note_request(self, message):
        """A note for the commit of a change about to be written (a restore, a settle):
        it goes on the next commit touching `paths`, whether the watcher's batch of the
        written files or the sync asked for after them comes first."""
        note = check_note(message.get("note"))
        paths = message.get("paths")
        if not note or not isinstance(paths, list) or not paths:
            raise ValueError("note needs a note and paths (a list)")
        paths = [p if p == "." else check_change({"action": "added", "path": p})["path"]
                 for p in paths]
        with self.cond:
            self.handover.notes.append(Note(note, paths))
        return {"ok": True}

    def pushed_request(self, message):
        """Someone pushed: pass the word on (XMPP), and fetch it ourselves (while paused:
        on resume)."""
        self.status.event("pushed", url=str(message.get("url") or "") or self.handover.url,
                          source="notify")
        if self.pausing.active():
            self.pausing.owe_pull()
            return {"ok": True}
        with self.cond:
            self.handover.wanted["pull"] += 1
            self.cond.notify_all()
        return {"ok": True}

    def link_request(self, message):
        up = bool(message.get("up"))
        error = message.get("error")
        with self.cond:
            changed, self.schedule.link_up = up != self.schedule.link_up, up
            polled = message.get("polled") if up else None
            held = message.get("held") if up else None
            polled = polled if isinstance(polled, (int, float)) else None
            self.status.update(link="up" if up else "down", link_polled=polled,
                               link_why=error[:600] if polled and isinstance(error, str)
                               else None,
                               link_held=held if isinstance(held, bool) else None)
            # The listener announces this revision unless it already has: a push
            # made before it logged in or subscribed is not missed.
            upstream, url = self.status["upstream"], self.handover.url
            self.cond.notify_all()
        if changed:  # the tray shows a machine without announcements as offline
            self.status.event("link", up=up)
        # A login or certificate refused is a problem by name; a link that is merely
        # not up yet (connecting) is not.
        if up:
            self.reports.succeeded("link")
        elif isinstance(error, str) and error:
            self.reports.failed("link", error[:300])
        return {"ok": True, "upstream": upstream, "url": url}

    def describe_request(self, message):
        if not self.descriptions.ask(message, self.pausing.active()):
            return {"ok": True, "to": "next"}
        return self.handover.wait_for("describe", message.get("timeout", 600))

    def watch_reported(self, message):
        """The watcher says how many folders have no inotify watch, and what to do about it."""
        if "folder" in message:
            return self.folder_reported(message["folder"])
        unwatched, problem = message.get("unwatched"), message.get("problem")
        if not isinstance(unwatched, int) or isinstance(unwatched, bool) or unwatched < 0 \
                or (unwatched and not isinstance(problem, str)):
            return {"ok": False, "error": "watch needs unwatched (a count) and, unless it is 0, "
                                          "problem (text)"}
        self.repo.unwatched(bool(unwatched))  # changes in such folders are never sent
        with self.cond:
            told = self.status["watch"]
            self.status.update(watch={"unwatched": unwatched, "problem": problem}
                               if unwatched else None)
        if unwatched and not told:  # a notification, once (the watcher has logged it)
            self.status.event("failed", op="watch", error=problem)
        return {"ok": True}

    def folder_reported(self, problem):
        """The watcher says the synced folder is away (text), or back at its place (None)."""
        if problem is not None and not isinstance(problem, str):
            return {"ok": False, "error": "folder must be a text or null"}
        self.repo.folder_away(problem)  # nothing is committed while it is away
        with self.cond:
            self.status.update(folder=problem)
            self.cond.notify_all()
        if problem:  # the problem "folder": said once (log, event), in the headline
            self.reports.failed("folder", problem)
        else:
            self.reports.succeeded("folder")
        return {"ok": True}

    def wake(self, reason):
        """The machine woke up or its network came back (wakeup.SystemBusListener): pull, then push
        what waits, at once. Several before the worker gets to it are one.
        -> False while paused: the pull waits for the resume."""
        with self.cond:
            if self.pausing.active():
                self.pausing.owe_pull()  # as another machine's push: pulled on resume
                return False
            self.schedule.woken = True
            self.cond.notify_all()
            return True
