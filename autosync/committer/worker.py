"""The committer's worker: decides what the repository does next, and does it.

One thread does all repository work, one thing at a time, and decides when: pushes
after `pushdelay`, retries after a backoff (while git counts unpushed commits, or the
last push failed), pulls on a timer while no XMPP or ssh link says when
(`pullinterval`) and, slower, while one does (`safetypull`). It takes what the requests
(committer/requests.py) handed it (committer/handover.py) and serves the tickets they
wait on.

While paused it only waits; on resume it catches up as at start-up (pull, one commit
of everything, push). Every commit, pull and push begins through `working()`: under
the lock a pause and a stop take, and only while not paused nor stopping (a stop lets
one commit begin: of the changes the watcher handed over, no rescan). A pause that
comes while one runs is answered once it has ended (pausing.py). Between its steps it
runs the repository's upkeep (committer/maintenance.py).

A part that committer.Committer owns, handed the parts it uses at its construction.
"""
import contextlib
import logging
import os
import time

from autosync.committer import maintenance
from autosync.committer.handover import joined
from autosync.core import cli
from autosync.vcs import largefiles, sizes

log = logging.getLogger("autosync.committer")

# A quick commit's index is settled after its push; before it only if the push is
# further away than this (seconds: a long pushdelay).
SETTLE_BEFORE_PUSH = 2.0
# A pull asked for with the original's syncmethod = none (local history only): none made.
LOCAL_ONLY = {"ok": True, "pulled": False, "localonly": True}


class Worker:
    """The worker thread's loop (run) and its steps."""

    def __init__(self, cfg, handover, status, schedule, pausing, descriptions, reports, repo):
        self.cfg, self.handover, self.cond = cfg, handover, handover.cond
        self.status, self.schedule, self.pausing = status, schedule, pausing
        self.descriptions, self.reports, self.repo = descriptions, reports, repo
        self.told_still_unpushed = False  # said once that a push left commits unpushed
        # maintenancecmd, between the worker's steps
        self.upkeep = maintenance.Upkeep(self, gitenv=repo.gitenv)
        # The largefiles key: git-annex takes files above it (the repository's gitenv) ...
        largefiles.warn_without_annex(cfg, log)
        # ... and after a push or a pull, the old versions the remote holds are not kept here.
        self.trimmer = largefiles.Trimmer(cfg.path, repo.gitenv) \
            if getattr(cfg, "largefiles", "") else None

    @property
    def stopping(self):
        return self.handover.stopping

    def run(self):
        """The worker thread: start-up's catch-up, then a step whenever there is work,
        the upkeep between steps, until a stop."""
        self.unless_the_folder_went(self.startup)
        while True:
            with self.cond:
                # (wait_for answers has_work() as it last found it: whether this step works)
                worked = self.cond.wait_for(self.has_work,
                                            timeout=self.upkeep.timeout(self.sleep_time()))
                if self.stopping and (not self.handover.pending or self.pausing.active()):
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
            self.handover.url = url
            # What changed while the suite was stopped: a rescan, now or on resume.
            self.handover.pending.add([], rescan=True)
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
                    changes, rescan = self.handover.pending.take()
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
        if owed or pulls > self.handover.done["pull"]:
            self.pausing.owe_pull()
        if pulls > self.handover.done["pull"]:
            self.handover.finish("pull", pulls, {"ok": True, "pulled": False,
                                        "deferred": "paused: pulled on resume"})
        if syncs > self.handover.done["sync"]:
            self.handover.finish("sync", syncs, self.pausing.refused())

    def idle(self):
        self.status.state("paused" if self.pausing.active() else "idle")

    def has_work(self):
        paused = self.pausing.paused
        if paused.active():
            return self.stopping or self.pausing.replan or paused.expired()
        return (bool(self.handover.pending) or self.stopping or bool(self.pausing.resuming)
                or self.handover.wanted["describe"] > self.handover.done["describe"]
                or self.handover.wanted["pull"] > self.handover.done["pull"]
                or self.handover.wanted["sync"] > self.handover.done["sync"]
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
                self.held_back(self.handover.wanted["pull"], self.handover.wanted["sync"], False)
                return
            resuming, self.pausing.resuming = self.pausing.resuming, False
        if resuming:
            self.catch_up("changes made while paused",
                          resuming == "pull" or self.cfg.syncmethod != "none"
                          or bool(self.cfg.pullinterval))
        if self.handover.wanted["describe"] > self.handover.done["describe"]:
            with self.cond:
                ticket = self.handover.wanted["describe"]
            with self.working("commit") as begun:  # rewording is committing
                placed = self.descriptions.place(self.pausing.active if begun
                                                 else lambda: True)
            self.handover.finish("describe", ticket, placed)
        if self.repo.still_written_due():  # files left out while open, looked at again
            closed = self.repo.still_written_ready()
            with self.cond:
                self.handover.pending.add(closed)
        committing = self.begin("commit")
        try:
            with self.cond:
                changes, rescan = self.handover.pending.take() if committing else ([], False)
                if self.stopping:
                    rescan = False  # the stop's last commit: the batches handed over only
                if changes or rescan:
                    self.status.state("committing")  # never idle with the changes taken
                pulls, syncs = self.handover.wanted["pull"], self.handover.wanted["sync"]
                notes, self.handover.notes = self.handover.notes, []
                push_due, timer_pull, retry, woken = self.schedule.take(time.monotonic())
                if "commit" in retry and (not committing or self.stopping):
                    retry.discard("commit")
                    if not self.stopping:  # paused: the resume's commit looks at everything
                        self.handover.pending.add([], rescan=True)
            sync = syncs > self.handover.done["sync"] and not self.stopping
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
            self.handover.noted += here
        else:
            notes = here + notes
        if pulls > self.handover.done["pull"] or timer_pull or "pull" in retry or woken:
            with self.working("pull") as begun:
                if begun:
                    pulled = LOCAL_ONLY if self.cfg.localonly else self.repo.pull()
                    if pulled.get("ok") and not self.cfg.localonly:
                        self.trim()
                    self.handover.finish("pull", pulls, pulled)
            if not begun:  # paused (or stopping) since the step began: not pulled
                self.held_back(pulls, syncs, owed=True)
        sync = sync and syncs > self.handover.done["sync"]  # (else answered: paused meanwhile)
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
                self.handover.notes[:0] = notes  # kept for the commit of their change
        if sync:
            noted, self.handover.noted = self.handover.noted + (notes if committed else []), []
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
            self.handover.finish("sync", syncs, {"ok": error is None, "committed": committed,
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
            self.handover.url = url
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

    def commit(self, changes, rescan, note=None):
        """A commit with the descriptions waiting for it; True if one was made."""
        texts = self.descriptions.take_texts()
        made = self.repo.commit(changes, rescan, note=note, text="; ".join(texts) or None)
        if not made and texts:
            self.descriptions.give_back(texts)
        return made
