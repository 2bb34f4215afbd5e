"""autosync-committer: batches -> commits, pushes and pulls.

The only program of the suite that runs DVCS commands (through
repository.py). It owns the control socket (docs/protocol.md): the watcher
sends it batches, the XMPP listener asks it to pull, and everyone may
subscribe to what it does.

One worker thread does all repository work, one thing at a time, and
decides when: pushes after `pushdelay`, retries after a backoff (while git
counts unpushed commits, or the last push failed), pulls on a timer while no
XMPP or ssh link says when (`pullinterval`) and, slower, while one does
(`safetypull`). Socket threads only queue work and wait for it. A resume from
suspend or the network coming back (wakeup.py, a thread of this process)
asks for a pull and a push at once.

While paused the worker only waits; on resume it catches up as at start-up
(pull, one commit of everything, push). Pause, resume, describe: everyday.py.
"""
import logging
import os
import sys
import threading
import time

from autosync import cli, largefiles, maintenance, problems, wakeup
from autosync.everyday import Everyday
from autosync.reports import BACKOFF_MAX, Reports
from autosync.messages import ACTIONS
from autosync.protocol import Server
from autosync.repository import Repository
from autosync.retry import Backoff
from autosync.stopflag import StopFlag

log = logging.getLogger("autosync.committer")

NOTE_MAX = 300  # characters of a sync request's note
LINKED = ("xmpp", "ssh")  # syncmethods whose link tells when to pull (autosync-xmpp, -sshlink)


def backoffs():
    """One backoff per operation: 2 s doubling up to a minute; the remote's with jitter,
    so that machines that lost it together do not come back together."""
    return {"commit": Backoff(2.0, BACKOFF_MAX), "pull": Backoff(2.0, BACKOFF_MAX, jitter=0.2),
            "push": Backoff(2.0, BACKOFF_MAX, jitter=0.2)}


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


class Committer(Reports, Everyday):
    def __init__(self, cfg, server=Server, repository=Repository):
        self.cfg = cfg
        # Re-entrant: the signal handler may call stop() while this thread holds it.
        self.cond = threading.Condition(threading.RLock())
        self.pending = Pending()
        self.stopping = False
        self.wanted = {"pull": 0, "sync": 0, "describe": 0}  # requests made, by kind
        self.done = {"pull": 0, "sync": 0, "describe": 0}  # requests served
        self.results = {}
        self.notes = []  # what the next sync's commit message says first (e.g. a restore)
        self.init_everyday(cfg)
        self.push_at = None  # when the next push is due
        self.push_owed = False  # the last push failed: the retry pushes, whatever the count
        self.told_still_unpushed = False  # said once that a push left commits unpushed
        self.url = ""  # the remote's address, for announcements (remoteurlcmd)
        self.retry_at = {"commit": None, "pull": None}  # when a failed one is tried again
        self.backoff = backoffs()
        self.link_up = False  # the XMPP listener tells us when it is up
        self.woken = False  # resumed, or the network is back: pull, then push what waits
        self.next_timer_pull = time.monotonic() + cfg.pullinterval if cfg.pullinterval else None
        self.next_safety_pull = time.monotonic() + cfg.safetypull if cfg.safetypull else None
        self.status_fields = {"state": "starting", "path": cfg.path, "host": cfg.hostname,
                              "last_commit": None, "last_push": None, "last_pull": None,
                              "unpushed": 0, "last_error": None, "conflicts": [],
                              "failing": {},  # op -> its error, while it fails (problems.py)
                              "waiting": None,  # why there is nothing to pull yet
                              "held_back": [], "nested_repositories": [],
                              "watch": None,  # the watcher's report while folders have no watch
                              "folder": None,  # the watcher's report while the folder is away
                              "paused": self.paused.fields(),
                              "upstream": None,  # git: the upstream branch's revision
                              "syncmethod": cfg.syncmethod,  # which link (problems.py)
                              "link": "down" if cfg.syncmethod in LINKED else None}
        self.server = server(cfg.socket, self.handle)
        self.repo = repository(cfg, self)
        self.upkeep = maintenance.Upkeep(self)  # maintenancecmd, between the worker's steps
        largefiles.apply(cfg, log)  # the largefiles key: git-annex takes files above it

    # --- requests, on socket threads -------------------------------------------------

    def handle(self, message, client):
        cmd = message.get("cmd")
        if cmd == "status":
            with self.cond:
                status = dict(self.status_fields, pending=sorted(self.pending.changes),
                              failing=dict(self.status_fields["failing"]))
            status["problems"] = problems.problems(status)
            status["headline"] = problems.headline(status, when=cli.show_time)
            return {"ok": True, "status": status}
        if cmd == "batch":
            changes = message.get("changes", [])
            if not isinstance(changes, list):
                return {"ok": False, "error": "changes must be a list"}
            try:
                changes = [check_change(c) for c in changes]
            except ValueError as e:
                return {"ok": False, "error": str(e)}
            with self.cond:
                self.pending.add(changes, bool(message.get("rescan")))
                self.cond.notify_all()
            return {"ok": True, "queued": len(changes)}
        if cmd in ("pause", "resume", "describe"):
            try:
                return getattr(self, cmd + "_request")(message)
            except ValueError as e:
                return {"ok": False, "error": str(e)}
        if cmd in ("sync", "pull", "pushed") and self.paused.active():
            return self.while_paused(message)
        if cmd in ("sync", "pull"):
            note = message.get("note")
            if note is not None and not (isinstance(note, str) and note.isprintable()
                                         and 0 < len(note) <= NOTE_MAX):
                return {"ok": False, "error": "note must be one printable line of at most %d "
                                              "characters" % NOTE_MAX}
            if note:
                with self.cond:
                    self.notes.append(note)
            return self.wait_for(cmd, message.get("timeout", 600))
        if cmd == "pushed":
            # Someone pushed: pass the word on (XMPP), and fetch it ourselves.
            self.event("pushed", url=str(message.get("url") or ""), source="notify")
            with self.cond:
                self.wanted["pull"] += 1
                self.cond.notify_all()
            return {"ok": True}
        if cmd == "watch":
            return self.watch_reported(message)
        if cmd == "link":
            up = bool(message.get("up"))
            error = message.get("error")
            with self.cond:
                changed, self.link_up = up != self.link_up, up
                self.status_fields["link"] = "up" if up else "down"
                # The listener announces this revision unless it already has: a push
                # made before it logged in or subscribed is not missed.
                upstream, url = self.status_fields["upstream"], self.url
                self.cond.notify_all()
            if changed:  # the tray shows a machine without announcements as offline
                self.event("link", up=up)
            # A login or certificate refused is a problem by name; a link that is merely
            # not up yet (connecting) is not.
            if up:
                self.succeeded("link")
            elif isinstance(error, str) and error:
                self.failed("link", error[:300])
            return {"ok": True, "upstream": upstream, "url": url}
        return {"ok": False, "error": "unknown cmd %.50r" % (cmd,)}

    def watch_reported(self, message):
        """The watcher says how many folders have no inotify watch, and what to do about it."""
        if "folder" in message:
            return self.folder_reported(message["folder"])
        unwatched, problem = message.get("unwatched"), message.get("problem")
        if not isinstance(unwatched, int) or isinstance(unwatched, bool) or unwatched < 0 \
                or (unwatched and not isinstance(problem, str)):
            return {"ok": False, "error": "watch needs unwatched (a count) and, unless it is 0, "
                                          "problem (text)"}
        with self.cond:
            told = self.status_fields["watch"]
            self.status_fields["watch"] = {"unwatched": unwatched, "problem": problem} \
                if unwatched else None
        if unwatched and not told:  # a notification, once (the watcher has logged it)
            self.event("failed", op="watch", error=problem)
        return {"ok": True}

    def folder_reported(self, problem):
        """The watcher says the synced folder is away (text), or back at its place (None)."""
        if problem is not None and not isinstance(problem, str):
            return {"ok": False, "error": "folder must be a text or null"}
        self.repo.where.set_away(problem)  # nothing is committed while it is away
        with self.cond:
            self.status_fields["folder"] = problem
            self.cond.notify_all()
        if problem:  # the problem "folder": said once (log, event), in the headline
            self.failed("folder", problem)
        else:
            self.succeeded("folder")
        return {"ok": True}

    def wake(self, reason):
        """The machine woke up or its network came back (wakeup.Listener): pull, then push
        what waits, at once. Several before the worker gets to it are one.
        -> False while paused: the pull waits for the resume."""
        with self.cond:
            if self.paused.active():
                self.paused.owe_pull()  # as another machine's push: pulled on resume
                return False
            self.woken = True
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
            if not ok or self.done[kind] < ticket:
                return {"ok": False, "error": "%s did not finish in time" % kind}
            return dict(self.results[kind])

    # --- the worker: decides what the repository does next ---------------------------

    def run(self):
        self.recount(upstream=True)  # before anyone can ask: the status never says 0 wrongly
        self.server.start()
        self.startup()
        while True:
            with self.cond:
                self.cond.wait_for(self._has_work,
                                   timeout=self.upkeep.timeout(self._sleep_time()))
                if self.stopping and (not self.pending or self.paused.active()):
                    break  # pending changes while paused: the rescan on resume finds them
                worked = self._has_work()
            self.step()
            self.upkeep.tick(worked)  # in this thread: never beside a commit, push or pull
        self.state("stopped")

    def startup(self):
        self.repo.recover()
        url = self.repo.remote_url()
        with self.cond:
            self.url = url
        self.recount(upstream=True)  # what an earlier run left unpushed
        if self.paused.active():
            log.info("paused since %s: nothing is synced until autosync-notify resume",
                     cli.show_time(self.paused.since))
        else:
            self.catch_up("changes found at start-up", self.cfg.syncmethod != "none")
        self.idle()

    def catch_up(self, note, pull):
        """Pull, commit everything that changed (a rescan), push: at start and on resume."""
        if pull:
            self.repo.pull()
        with self.cond:
            changes, _ = self.pending.take()
        self.commit(changes, True, note)
        self.push(force=True)

    def idle(self):
        self.state("paused" if self.paused.active() else "idle")

    def _has_work(self):
        now = time.monotonic()
        if self.paused.active():
            return self.stopping or self.replan or self.paused.expired()
        return (bool(self.pending) or self.stopping or bool(self.resuming) or self.woken
                or self.wanted["describe"] > self.done["describe"]
                or self.wanted["pull"] > self.done["pull"]
                or self.wanted["sync"] > self.done["sync"]
                or (self.push_at is not None and now >= self.push_at)
                or any(t is not None and now >= t for t in self.retry_at.values())
                or self._timer_pull_due(now))

    def _sleep_time(self):
        if self.paused.active():
            return None if self.paused.until is None else \
                max(0.0, self.paused.until - time.time())
        deadlines = [t for t in (self.push_at, self._timer_pull_at(), *self.retry_at.values())
                     if t is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _timer_pull_at(self):
        """When the next timer pull is due: every pullinterval while no link (XMPP, ssh)
        says when to pull; while one does, every safetypull, in case a message was lost."""
        if self.cfg.syncmethod in LINKED and self.link_up:
            return self.next_safety_pull
        return self.next_timer_pull

    def _timer_pull_due(self, now):
        due = self._timer_pull_at()
        return due is not None and now >= due

    def step(self):
        with self.cond:
            self.replan = False
            expired = self.paused.expired()
        if expired:
            self.lift()
        with self.cond:
            if self.paused.active():
                return
            resuming, self.resuming = self.resuming, False
        if resuming:
            self.catch_up("changes made while paused",
                          resuming == "pull" or self.cfg.syncmethod != "none"
                          or bool(self.cfg.pullinterval))
        if self.wanted["describe"] > self.done["describe"]:
            self.place_texts()
        with self.cond:
            changes, rescan = self.pending.take()
            pulls, syncs = self.wanted["pull"], self.wanted["sync"]
            notes, self.notes = self.notes, []
            now = time.monotonic()
            push_due = self.push_at is not None and now >= self.push_at
            timer_pull = self._timer_pull_due(now)
            retry = {op for op, t in self.retry_at.items() if t is not None and now >= t}
            for op in retry:
                self.retry_at[op] = None
            woken, self.woken = self.woken, False
            if woken:
                self.retry_at["pull"] = None  # this pull is the retry
        note = "; ".join(notes) or None
        made = False
        if changes or rescan or "commit" in retry:
            # A retry rescans: the changes of the failed attempt are still in the folder.
            # A sync's note (a restore's) goes on the commit that holds the batch, which
            # is often the restore's own writes.
            made = self.commit(changes, rescan or "commit" in retry,
                               note if syncs > self.done["sync"] else None)
        if pulls > self.done["pull"] or timer_pull or "pull" in retry or woken:
            self.finish("pull", pulls, self.repo.pull())
        if syncs > self.done["sync"]:
            committed = self.commit([], True, note=None if made else note) or made
            error = self.repo.commit_error or self.repo.blocked
            pushed = self.push(force=True)
            if pushed is False:
                error = self.last_error()
            self.finish("sync", syncs, {"ok": error is None, "committed": committed,
                                        "pushed": bool(pushed),
                                        **({"error": error} if error else {})})
        elif push_due or woken:
            self.push()  # woken: now, not after a backoff that grew while offline
        self.idle()

    def push(self, force=False):
        """Push if there is anything (or force); True pushed, None nothing to push, False failed.

        Only a push that took a new revision to the remote is announced: the other
        machines (the original among them) would pull for nothing."""
        with self.cond:
            self.push_at = None
            unpushed, owed = self.status_fields["unpushed"], self.push_owed
            if not unpushed and not force and not owed:
                return None
        if not self.repo.push(expect_new=unpushed > 0 or owed):
            with self.cond:
                self.push_owed = True  # another DVCS cannot count: retry all the same
            return False
        url, upstream = self.repo.remote_url(), self.repo.pushed_rev
        with self.cond:
            self.push_at = None
            self.push_owed = False
            self.url = url
            self.own_last = None  # pushed: never reworded
            # The upstream is in the status before the event goes out: a listener that
            # missed the event reads it in its next answer to link-up.
            self.status_fields.update(unpushed=0,  # another DVCS; git's count follows
                                      upstream=upstream,
                                      last_push={"time": time.time(), "url": url},
                                      last_error=self.repo.commit_error)  # still said if so
        if self.repo.pushed_new:
            self.event("pushed", url=url, source="committer", rev=upstream or "")
        left = self.recount()
        if left and not self.told_still_unpushed:
            self.told_still_unpushed = True  # pushcmd pushes elsewhere than the upstream branch?
            log.warning("the push worked, yet %d commit(s) are still not on the upstream branch "
                        "(does pushcmd push to another remote or branch?)", left)
        return True

    def finish(self, kind, ticket, result):
        with self.cond:
            self.done[kind] = max(self.done[kind], ticket)
            self.results[kind] = result
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    # --- the repository's reports (repository.py lists them) -------------------------


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
    wakeups = wakeup.Listener(committer.wake).start()
    worker.join()
    wakeups.stop(wait=False)  # a daemon thread: it never holds the exit up
    committer.event("stopping")
    committer.server.close()
    committer.repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
