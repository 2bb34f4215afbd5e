"""autosync-committer: batches -> commits, pushes and pulls.

The only program of the suite that runs DVCS commands (through
committer/repository/). It owns the control socket (docs/protocol.md): the watcher
sends it batches, the XMPP listener asks it to pull, and everyone may
subscribe to what it does.

One worker thread does all repository work, one thing at a time, and
decides when: pushes after `pushdelay`, retries after a backoff (while git
counts unpushed commits, or the last push failed), pulls on a timer while no
XMPP or ssh link says when (`pullinterval`) and, slower, while one does
(`safetypull`). Socket threads only queue work and wait for it. A resume from
suspend or the network coming back (committer/wakeup.py, a thread of this process)
asks for a pull and a push at once.

While paused the worker only waits; on resume it catches up as at start-up
(pull, one commit of everything, push). Every commit, pull and push begins through
`working()`: under the lock a pause and a stop take, and only while not paused nor
stopping (a stop lets one commit begin: of the changes the watcher handed over, no
rescan). A pause that comes while one runs is answered once it has ended (pausing.py).

The committer owns its parts: its Status (committer/status.py) and Schedule
(committer/schedule.py), with Reports (committer/reports.py), what the repository
reports to, its Pausing (committer/pausing.py) and Descriptions
(committer/descriptions.py). Requests are answered from one table,
`requests`, whose names are protocol.REQUESTS (a test keeps them equal).
"""
import contextlib
import logging
import os
import sys
import threading
import time

from autosync.committer import maintenance, wakeup
from autosync.core import cli, problems
from autosync.vcs import largefiles, sizes
from autosync.committer.descriptions import Descriptions
from autosync.committer.pausing import Pausing
from autosync.committer.reports import Reports
from autosync.committer.schedule import LINKED, Schedule
from autosync.committer.status import Status
from autosync.core.messages import ACTIONS, TEXT_MAX
from autosync.core.protocol import Server
from autosync.committer.repository import Repository
from autosync.core.stopflag import StopFlag

log = logging.getLogger("autosync.committer")

# A quick commit's index is settled after its push; before it only if the push is
# further away than this (seconds: a long pushdelay).
SETTLE_BEFORE_PUSH = 2.0
# A pull asked for with the original's syncmethod = none (local history only): none made.
LOCAL_ONLY = {"ok": True, "pulled": False, "localonly": True}

# A batch's rescan `reason` (protocol.RESCANS), as the log says it.
RESCAN_WHY = {"start": "it has just started",
              "committer-restarted": "the committer restarted: events may have been missed",
              "drained": "a pull ended: what it did not write is looked for",
              "overflow": "the kernel's event queue overflowed",
              "folder-back": "the synced folder is back"}


class Pending:
    """Changes received from the watcher and not committed yet, one entry per path."""

    def __init__(self):
        self.changes = {}
        self.rescan = False

    def add(self, changes, rescan=False):
        for change in changes:
            old = self.changes.pop(change["path"], None)
            if old and old["action"] == "added" and change["action"] == "modified":
                change = old  # still new to the repository
            self.changes[change["path"]] = change
        self.rescan = self.rescan or rescan

    def take(self):
        changes, rescan = list(self.changes.values()), self.rescan
        self.changes, self.rescan = {}, False
        return changes, rescan

    def __bool__(self):
        return bool(self.changes) or self.rescan


class Note:
    """A line for the top of a commit message; `paths`: the change it belongs to (a path
    and what is below it, "." the whole folder), or None: the next sync's commit."""

    def __init__(self, text, paths):
        self.text, self.paths = text, paths

    def touched_by(self, changes):
        if self.paths is None:
            return False
        if "." in self.paths:
            return bool(changes)
        touched = {c.get(k) for c in changes for k in ("path", "src") if c.get(k)}
        return any(t == p or t.startswith(p + "/") or p.startswith(t + "/")
                   for t in touched for p in self.paths)


def joined(notes):
    return "; ".join(n.text for n in notes) or None


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


class Committer:
    def __init__(self, cfg, server=Server, repository=Repository):
        self.cfg = cfg
        # Re-entrant: the signal handler may call stop() while this thread holds it.
        self.cond = threading.Condition(threading.RLock())
        self.pending = Pending()
        self.stopping = False
        self.wanted = {"pull": 0, "sync": 0, "describe": 0}  # requests made, by kind
        self.done = {"pull": 0, "sync": 0, "describe": 0}  # requests served
        self.results = {}
        # What a commit message says first (a restore's, a settle's): Note()s, placed on
        # the next commit touching their paths, else on the next sync's commit.
        self.notes = []
        self.noted = []  # notes placed since the last sync answered (its reply says so)
        self.told_still_unpushed = False  # said once that a push left commits unpushed
        self.url = ""  # the remote's address, for announcements (remoteurlcmd)
        self.status = Status(self.cond, lambda fields: self.server.publish(fields),
                             path=cfg.path, host=cfg.hostname, syncmethod=cfg.syncmethod,
                             link="down" if cfg.syncmethod in LINKED else None,
                             **({"localonly": True} if cfg.localonly else {}))
        self.schedule = Schedule(cfg, self.cond)
        self.pausing = Pausing(cfg, self.cond, self.status)
        self.descriptions = Descriptions(self.cond, self.status)
        self.reports = Reports(cfg, self.cond, self.status, self.schedule, self.descriptions)
        self.server = server(cfg.socket, self.handle)
        self.repo = repository(cfg, self.reports)
        self.reports.repo = self.descriptions.repo = self.repo
        # Every request the committer answers (subscribe: the server's own).
        self.requests = {
            "status": self.status_request, "batch": self.batch_request,
            "sync": self.sync_request, "pull": self.sync_request,
            "pushed": self.pushed_request, "link": self.link_request,
            "watch": self.watch_reported, "pause": self.pausing.pause_request,
            "resume": self.pausing.resume_request, "describe": self.describe_request,
            "note": self.note_request,
        }
        # maintenancecmd, between the worker's steps
        self.upkeep = maintenance.Upkeep(self, gitenv=self.repo.gitenv)
        # The largefiles key: git-annex takes files above it (the repository's gitenv) ...
        largefiles.warn_without_annex(cfg, log)
        # ... and after a push or a pull, the old versions the remote holds are not kept here.
        self.trimmer = largefiles.Trimmer(cfg.path, self.repo.gitenv) \
            if getattr(cfg, "largefiles", "") else None

    # --- requests, on socket threads -------------------------------------------------

    def handle(self, message, client):
        cmd = message.get("cmd")
        handler = self.requests.get(cmd) if isinstance(cmd, str) else None
        if handler is None:
            return {"ok": False, "error": "unknown cmd %.50r" % (cmd,)}
        try:
            return handler(message)
        except ValueError as e:
            return {"ok": False, "error": str(e)}

    def status_request(self, message):
        with self.cond:
            # rescan: a look at the whole folder is asked and not begun (then: committing)
            status = dict(self.status.snapshot(), pending=sorted(self.pending.changes),
                          rescan=self.pending.rescan)
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
            self.pending.add(changes, bool(message.get("rescan")))
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
                self.notes.append(Note(note, None))
        return self.wait_for(message["cmd"], message.get("timeout", 600))

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
            self.notes.append(Note(note, paths))
        return {"ok": True}

    def pushed_request(self, message):
        """Someone pushed: pass the word on (XMPP), and fetch it ourselves (while paused:
        on resume)."""
        self.status.event("pushed", url=str(message.get("url") or "") or self.url,
                          source="notify")
        if self.pausing.active():
            self.pausing.owe_pull()
            return {"ok": True}
        with self.cond:
            self.wanted["pull"] += 1
            self.cond.notify_all()
        return {"ok": True}

    def link_request(self, message):
        up = bool(message.get("up"))
        error = message.get("error")
        with self.cond:
            changed, self.schedule.link_up = up != self.schedule.link_up, up
            polled = message.get("polled") if up else None
            held = message.get("held") if up else None
            self.status.update(link="up" if up else "down",
                               link_polled=polled if isinstance(polled, (int, float)) else None,
                               link_held=held if isinstance(held, bool) else None)
            # The listener announces this revision unless it already has: a push
            # made before it logged in or subscribed is not missed.
            upstream, url = self.status["upstream"], self.url
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
        return self.wait_for("describe", message.get("timeout", 600))

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

    def wait_for(self, kind, timeout):
        """Ask the worker for a pull or a sync and wait until one that began after now ends."""
        with self.cond:
            self.wanted[kind] += 1
            ticket = self.wanted[kind]
            self.cond.notify_all()
            ok = self.cond.wait_for(lambda: self.done[kind] >= ticket or self.stopping,
                                    timeout=float(timeout))
            if self.done[kind] < ticket and self.stopping:
                return {"ok": False, "stopping": True,
                        "error": "the daemon is stopping before the %s was made" % kind}
            if not ok or self.done[kind] < ticket:
                return {"ok": False, "error": "%s did not finish in time" % kind}
            return dict(self.results[kind])

    # --- the worker: decides what the repository does next ---------------------------

    def run(self):
        # Before anyone can ask: the status never says 0 wrongly.
        self.reports.recount(upstream=True)
        self.server.start()
        self.unless_the_folder_went(self.startup)
        while True:
            with self.cond:
                # (wait_for answers has_work() as it last found it: whether this step works)
                worked = self.cond.wait_for(self.has_work,
                                            timeout=self.upkeep.timeout(self.sleep_time()))
                if self.stopping and (not self.pending or self.pausing.active()):
                    break  # pending changes while paused: the rescan on resume finds them
            self.unless_the_folder_went(self.step)
            # (in this thread: never beside a commit, push or pull)
            self.unless_the_folder_went(lambda: self.upkeep.tick(worked))
        self.status.state("stopped")

    def unless_the_folder_went(self, work):
        """Run `work`. The folder gone in the middle of it (moved, deleted or unmounted
        between the repository's check and a command, whose working folder then does not
        exist) is the folder problem, told and looked at again (a rescan once it is
        back), not the end of the worker: it died, and the committer with it."""
        try:
            work()
        except FileNotFoundError as e:
            if os.path.isdir(self.cfg.path):
                raise
            log.warning("the synced folder went away during a commit, pull or push (%s)", e)
            self.repo.safe("commit")  # says why (status, log, notification); looks again
            self.idle()

    def startup(self):
        self.repo.recover()
        url = self.repo.remote_url()
        with self.cond:
            self.url = url
            # What changed while the suite was stopped: a rescan, now or on resume.
            self.pending.add([], rescan=True)
        self.reports.recount(upstream=True)  # what an earlier run left unpushed
        if self.cfg.localonly:
            log.info("%s: syncmethod = none in an original configuration: local history "
                     "only, as for the original (commits; never a push nor a pull); to push "
                     "and pull every 300 s, add pullinterval = 300 to [autosync]",
                     self.cfg.file)
        if self.pausing.active():
            log.info("paused since %s: nothing is synced until dvcs-autosync resume",
                     cli.show_time(self.pausing.paused.since))
        else:
            # Pulled first, as on resume, whenever this machine pulls at all: an edit made
            # while stopped then meets the other machines' newer versions by the README's
            # rule (vcs/pull/git.py, keep_beside: the newer at its place); committed first, it
            # would count as made now.
            self.catch_up("changes found at start-up", self.cfg.syncmethod != "none"
                          or bool(self.cfg.pullinterval))
        self.idle()

    def catch_up(self, note, pull):
        """Pull, commit what `pending` holds, push: at start and on resume. A rescan when
        it asks for one: at start (startup() asks), or after missed events; else (a
        resume: the watcher ran all along) the commit costs what changed."""
        if pull and not self.cfg.localonly:
            with self.working("pull") as begun:
                if begun:
                    self.repo.pull()
            if not begun and self.pausing.active():
                self.pausing.owe_pull()  # paused again at once: pulled on the next resume
        with self.working("commit") as begun:
            if begun:
                with self.cond:
                    changes, rescan = self.pending.take()
                    self.status.state("committing")  # never idle with the changes taken
                if changes or not self.stopping:  # stopping: the batches handed over only
                    self.commit(changes, bool(rescan) and not self.stopping, note)
        with self.working("push") as begun:
            if begun:
                self.push(force=True)

    def begin(self, op):
        """May `op` ("commit", "pull", "push") begin now? -> True, and it is under way
        until end(). Asked under the lock a pause and a stop take, so a pause either came
        first (nothing begins) or waits for its end (Pausing.pause_request). Never while
        paused; while stopping only a commit (the stop's last, of the batches handed
        over: no rescan), never a pull or a push."""
        with self.cond:
            if self.pausing.active() or (self.stopping and op != "commit"):
                return False
            self.pausing.under_way = op
            return True

    def end(self):
        with self.cond:
            self.pausing.under_way = None
            self.cond.notify_all()

    @contextlib.contextmanager
    def working(self, op):
        """`with self.working(op) as begun:` begin() and, if begun, end() after."""
        begun = self.begin(op)
        try:
            yield begun
        finally:
            if begun:
                self.end()

    def held_back(self, pulls, syncs, owed):
        """A pause (or a stop) came in the middle of a step: its pull and sync requests
        are answered as they are while paused, and a pull it owed is kept for the resume.
        (A stop's are answered by wait_for.)"""
        if not self.pausing.active():
            return
        if owed or pulls > self.done["pull"]:
            self.pausing.owe_pull()
        if pulls > self.done["pull"]:
            self.finish("pull", pulls, {"ok": True, "pulled": False,
                                        "deferred": "paused: pulled on resume"})
        if syncs > self.done["sync"]:
            self.finish("sync", syncs, self.pausing.refused())

    def idle(self):
        self.status.state("paused" if self.pausing.active() else "idle")

    def has_work(self):
        paused = self.pausing.paused
        if paused.active():
            return self.stopping or self.pausing.replan or paused.expired()
        return (bool(self.pending) or self.stopping or bool(self.pausing.resuming)
                or self.wanted["describe"] > self.done["describe"]
                or self.wanted["pull"] > self.done["pull"]
                or self.wanted["sync"] > self.done["sync"]
                or self.schedule.due(time.monotonic())
                or self.repo.still_written_due())

    def sleep_time(self):
        paused = self.pausing.paused
        if paused.active():
            return None if paused.until is None else max(0.0, paused.until - time.time())
        waits = [w for w in (self.schedule.sleep_time(), self.repo.still_written_wait())
                 if w is not None]
        return min(waits) if waits else None

    def step(self):
        with self.cond:
            self.pausing.replan = False
            expired = self.pausing.paused.expired()
        if expired:
            self.pausing.lift()
        with self.cond:
            if self.pausing.active():
                self.held_back(self.wanted["pull"], self.wanted["sync"], False)
                return
            resuming, self.pausing.resuming = self.pausing.resuming, False
        if resuming:
            self.catch_up("changes made while paused",
                          resuming == "pull" or self.cfg.syncmethod != "none"
                          or bool(self.cfg.pullinterval))
        if self.wanted["describe"] > self.done["describe"]:
            with self.cond:
                ticket = self.wanted["describe"]
            with self.working("commit") as begun:  # rewording is committing
                placed = self.descriptions.place(self.pausing.active if begun
                                                 else lambda: True)
            self.finish("describe", ticket, placed)
        if self.repo.still_written_due():  # files left out while open, looked at again
            closed = self.repo.still_written_ready()
            with self.cond:
                self.pending.add(closed)
        committing = self.begin("commit")
        try:
            with self.cond:
                changes, rescan = self.pending.take() if committing else ([], False)
                if self.stopping:
                    rescan = False  # the stop's last commit: the batches handed over only
                if changes or rescan:
                    self.status.state("committing")  # never idle with the changes taken
                pulls, syncs = self.wanted["pull"], self.wanted["sync"]
                notes, self.notes = self.notes, []
                push_due, timer_pull, retry, woken = self.schedule.take(time.monotonic())
                if "commit" in retry and (not committing or self.stopping):
                    retry.discard("commit")
                    if not self.stopping:  # paused: the resume's commit looks at everything
                        self.pending.add([], rescan=True)
            sync = syncs > self.done["sync"] and not self.stopping
            # A note goes on the commit that holds its paths' changes (the batch of a
            # restore's writes); a sync's own note on the batch's commit too, if it syncs.
            here = [n for n in notes if (n.paths is None and sync) or n.touched_by(changes)]
            notes = [n for n in notes if n not in here]
            made = False
            if changes or rescan or "commit" in retry:
                # A retry rescans: the changes of the failed attempt are still in the folder.
                made = self.commit(changes, rescan or "commit" in retry, joined(here))
        finally:
            if committing:
                self.end()
        if made:
            self.noted += here
        else:
            notes = here + notes
        if pulls > self.done["pull"] or timer_pull or "pull" in retry or woken:
            with self.working("pull") as begun:
                if begun:
                    pulled = LOCAL_ONLY if self.cfg.localonly else self.repo.pull()
                    if pulled.get("ok") and not self.cfg.localonly:
                        self.trim()
                    self.finish("pull", pulls, pulled)
            if not begun:  # paused (or stopping) since the step began: not pulled
                self.held_back(pulls, syncs, owed=True)
        sync = sync and syncs > self.done["sync"]  # (else answered: paused meanwhile)
        if sync:
            with self.working("commit") as begun:
                # The rest goes on the sync's commit (a rescan): a note whose change it does
                # not hold either was committed already or was never written; dropped.
                committed = begun and self.commit([], True, note=joined(notes))
            if not begun:
                sync = False  # paused since the step began: answered by held_back
                self.held_back(pulls, syncs, owed=False)
        if not sync:
            with self.cond:
                self.notes[:0] = notes  # kept for the commit of their change
        if sync:
            noted, self.noted = self.noted + (notes if committed else []), []
            committed = committed or made
            error = self.repo.commit_error or self.repo.blocked
            with self.working("push") as begun:
                pushed = self.push(force=True) if begun else False
            if not begun:
                error = self.pausing.refused()["error"] if self.pausing.active() else \
                    "the daemon is stopping before the push was made"
            elif pushed is False:
                error = self.reports.last_error()
            self.repo.settle_index()  # `git status` right after a sync is clean
            self.finish("sync", syncs, {"ok": error is None, "committed": committed,
                                        "pushed": bool(pushed),
                                        **({"noted": True} if noted else {}),
                                        **({"error": error} if error else {})})
        elif push_due or woken:
            with self.working("push") as begun:
                if begun:
                    self.push()  # woken: now, not after a backoff that grew while offline
        # A quick commit's index entries (committer/quickcommit.py): once the change is pushed,
        # unless its push waits long (pushdelay); a command reading the index settles too.
        with self.cond:
            push_at = self.schedule.push_at
        if push_at is None or push_at - time.monotonic() > SETTLE_BEFORE_PUSH:
            self.repo.settle_index()
        self.idle()

    def push(self, force=False):
        """Push if there is anything (or force); True pushed, None nothing to push, False failed.

        Only a push that took a new revision to the remote is announced: the other
        machines (the original among them) would pull for nothing."""
        if self.cfg.localonly:
            return None  # the original's syncmethod = none: never a push
        with self.cond:
            self.schedule.pushing()
            unpushed, owed = self.status["unpushed"], self.schedule.push_owed
            if not unpushed and not force and not owed:
                return None
        if not self.repo.push(expect_new=unpushed > 0 or owed):
            self.schedule.pushed(False)
            return False
        url, upstream = self.repo.remote_url(), self.repo.pushed_rev
        with self.cond:
            self.schedule.pushed(True)
            self.url = url
            self.descriptions.own_last = None  # pushed: never reworded
            # The upstream is in the status before the event goes out: a listener that
            # missed the event reads it in its next answer to link-up.
            self.status.update(unpushed=0,  # another DVCS; git's count follows
                               upstream=upstream,
                               last_push={"time": time.time(), "url": url},
                               last_error=self.repo.commit_error)  # still said if so
        if self.repo.pushed_new:
            self.status.event("pushed", url=url, source="committer", rev=upstream or "")
        self.trim()
        left = self.reports.recount()
        if left and not self.told_still_unpushed:
            self.told_still_unpushed = True  # pushcmd pushes elsewhere than the upstream branch?
            log.warning("the push worked, yet %d commit(s) are still not on the upstream branch "
                        "(does pushcmd push to another remote or branch?)", left)
        return True

    def trim(self):
        """largefiles: drop here the annexed versions no current file uses that the remote
        holds, then tell the remote what this machine holds (vcs/largefiles.py, Trimmer);
        a failure is said and syncing goes on."""
        if self.trimmer is None:
            return
        try:
            dropped = self.trimmer.run()
        except (OSError, largefiles.ExpireError) as e:
            log.warning("large files: old versions not dropped here: %s", e)
            return
        if dropped:
            log.info("large files: dropped here %d old version(s) the remote holds (%s)",
                     len(dropped), sizes.human(sum(size or 0 for _, size in dropped)))
        try:
            self.trimmer.tell()  # what this machine got and dropped, for expire elsewhere
        except (OSError, largefiles.ExpireError) as e:
            log.warning("large files: the remote was not told what this machine holds: %s", e)

    def finish(self, kind, ticket, result):
        with self.cond:
            self.done[kind] = max(self.done[kind], ticket)
            self.results[kind] = result
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = self.reports.stopping = True
            self.cond.notify_all()
        self.repo.stop()  # a pull under way ends now, not when its fetch would

    def commit(self, changes, rescan, note=None):
        """A commit with the descriptions waiting for it; True if one was made."""
        texts = self.descriptions.take_texts()
        made = self.repo.commit(changes, rescan, note=note, text="; ".join(texts) or None)
        if not made and texts:
            self.descriptions.give_back(texts)
        return made


def main(argv=None):
    cfg = cli.start("autosync-committer", __doc__, argv, client=False)
    try:
        committer = Committer(cfg)
    except OSError as e:
        cli.die("autosync-committer: %s" % (e.strerror or e))
    worker = threading.Thread(target=committer.run, name="worker", daemon=True)
    # The handler only asks the worker to stop; it finishes the commit in flight
    # (the supervisor's patience bounds that) and the join below returns.
    StopFlag(wake=committer.stop).install()
    worker.start()
    wakeups = wakeup.SystemBusListener(committer.wake).start()
    worker.join()
    wakeups.stop(wait=False)  # a daemon thread: it never holds the exit up
    committer.status.event("stopping")
    committer.server.close()
    committer.repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
