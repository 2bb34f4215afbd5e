"""autosync-watcher: file events -> batches for the committer.

inotify is read continuously (core/inotify.py), so the kernel queue does not
overflow while we wait; the waiting happens here, in a Batch (watcher/batch.py),
which closes once every file written in it was closed by its writer and
the folder was then quiet for a moment (`readfrequency`, if the user set
it), or at `maxwait`. What is never
synced is decided by core/ignore.py. The committer's events come in through a
client.Subscription: around its pulls the watcher sets the pull's own
writes aside (the pull lock). SIGTERM and SIGINT are only recorded; the
loop then hands over the open batch and stops.

The synced folder itself may go away (moved, deleted, unmounted, replaced):
its own watch says so, and a look at its identity every IDENTITY_EVERY
seconds catches what inotify cannot see (a mount over it). Then nothing is
watched or sent, and the committer is told (it commits nothing meanwhile).
A folder back at the path is watched again and rescanned once it is quiet,
when it is ours or another clone of our remote (folder.Folder);
anything else is one line, and the suite stops.
"""
import logging
import os
import select
import stat
import sys
import time

import pyinotify

from autosync.core import cli, client
from autosync.vcs.folder import GONE, Folder, remote_of
from autosync.watcher import watchlimit
from autosync.watcher.batch import Batch, Growing, Tree
from autosync.vcs.commands import Template
from autosync.core.ignore import Ignore
from autosync.core.inotify import Inotify
from autosync.core.protocol import NoDaemon, ProtocolError, Untrusted, connect
from autosync.core.retry import Backoff
from autosync.core.stopflag import StopFlag

log = logging.getLogger("autosync.watcher")

RECONNECT_WAIT = 60.0  # the supervisor restarts a dead committer within its backoff (30 s)
RESEND_TRIES = 3
SUBSCRIBED = object()  # in the inbox: a (new) subscription to the committer's events began
IDENTITY_EVERY = 2.0  # seconds between looks at the folder's identity (a stat)
BACK_POLL = 0.5  # seconds between looks for a folder back at the path
BACK_QUIET = 2.0  # a new folder at the path is judged once it was quiet this long
# The synced folder's own watch says it went away (IN_IGNORED: its watch ended).
ROOT_GONE = (pyinotify.IN_MOVE_SELF | pyinotify.IN_DELETE_SELF | pyinotify.IN_UNMOUNT
             | pyinotify.IN_IGNORED)


class Watcher:
    def __init__(self, cfg, stop=None):
        self.cfg = cfg
        self.root = cfg.path
        self.prefix = cfg.path.rstrip("/") + "/"
        self.stop = stop if stop is not None else StopFlag()
        self.ignore = Ignore(self.root, cfg.ignorepath)
        self.tree = Tree()
        self.batch = Batch()
        self.growing = Growing()  # files still written when their batch closed at maxwait
        self.pull_batch = None  # collects what a pull writes, while one runs
        commands = getattr(cfg, "commands", {})
        self.folder = Folder(self.root, remote_of(
            Template("remoteurlcmd", commands["remoteurlcmd"])
            if commands.get("remoteurlcmd") else None))
        self.root_wd = None
        self.lost = False  # the folder's own watch said it went away
        self.away = None  # while the folder is away: what the committer was told
        self.returning = None  # a new folder at the path, watched until it is quiet
        self.returning_identity = None
        self.stirred = 0.0  # when that folder changed last
        self.look_at = time.monotonic() + IDENTITY_EVERY  # the next look at its identity
        self.foreign = None  # the folder was replaced by something else: why we stop
        self.foreign_told = False
        self.stopping = False
        self.conn = None  # for requests; the events come through self.subscription
        self.inbox = client.Inbox()
        self.subscribed_before = False
        self.unwatched = watchlimit.Unwatched(self.root, self.never_watched)
        self.poll_at = None  # when to look at folders without a watch next
        self.watch_report = None  # the last "watch" request sent while some have none

    def rel(self, path):
        # Events' paths start with the root as given: a slice, not relpath (per event).
        if path.startswith(self.prefix):
            return path[len(self.prefix):].rstrip("/")
        rel = os.path.relpath(path, self.root)
        return "" if rel == "." else rel

    def excluded(self, path):
        """pyinotify's filter: no watch below ignored folders, and never through a symlink.

        pyinotify lists each new folder and makes up IN_CREATE|IN_ISDIR events for
        what it holds, taking a link to a folder for a folder: without this, a
        link to /usr would have it watch all of /usr."""
        rel = self.rel(path)
        return rel != "" and (rel.startswith("..") or os.path.islink(path)
                              or self.ignore(rel, True))

    def never_watched(self, path, isdir):
        rel = self.rel(path)
        return rel.startswith("..") or os.path.islink(path) or self.ignore(rel, isdir)

    def on_event(self, event):
        if self.away is not None or self.lost:
            self.stirred = time.monotonic()  # a folder being made (a clone, a copy)
            return  # the old folder's queued events name paths that are not ours now
        if event.mask & pyinotify.IN_Q_OVERFLOW:  # an event of no watch (no wd)
            log.warning("the kernel's event queue overflowed: rescanning everything")
            self.batch.rescan_all()
            return
        if event.wd == self.root_wd and event.mask & ROOT_GONE:
            self.lost = True
            return
        path = event.pathname
        rel = self.rel(path)
        if rel == "" or rel.startswith("..") or event.mask & pyinotify.IN_IGNORED:
            return
        # A symlink is a file to us, even when pyinotify's made-up event says folder.
        isdir = bool(event.mask & pyinotify.IN_ISDIR) and not os.path.islink(path)
        if rel.rpartition("/")[2] == ".gitignore":
            self.ignore.forget(rel.rpartition("/")[0])
        batch = self.pull_batch or self.batch
        src = getattr(event, "src_pathname", None)
        if event.mask & pyinotify.IN_MOVED_TO and src:
            src_rel = self.rel(src)
            if not self.ignore(src_rel, isdir) and not self.ignore(rel, isdir):
                batch.move(src_rel, rel, isdir)
                return
            if not self.ignore(src_rel, isdir):  # moved into editor junk: gone from here
                batch.touch(src_rel, isdir)
        if event.mask & (pyinotify.IN_MOVE_SELF | pyinotify.IN_DELETE_SELF):
            return  # the parent folder's event tells us the same
        if isdir and not event.mask & (pyinotify.IN_CREATE | pyinotify.IN_DELETE
                                       | pyinotify.IN_MOVED_TO | pyinotify.IN_MOVED_FROM):
            return  # a folder's own times or mode: no DVCS records them
        if not self.ignore(rel, isdir):
            batch.touch(rel, isdir)
            self.follow_writer(batch, event.mask, rel, isdir, getattr(event, "made_up", True))

    def follow_writer(self, batch, mask, rel, isdir, made_up=True):
        """Which files a writer still holds open: the batch waits for their close. A
        close during a pull reaches the open batch too, which may wait for that file
        (opened before the pull): else it would wait on, for ever."""
        both = (batch, self.batch) if batch is not self.batch else (batch,)
        if mask & pyinotify.IN_CLOSE_WRITE or (mask & pyinotify.IN_DELETE and not isdir):
            for each in both:
                each.closed(rel)
        elif mask & (pyinotify.IN_DELETE | pyinotify.IN_MOVED_FROM) and isdir:
            for each in both:
                each.closed_under(rel)
        elif not isdir and mask & pyinotify.IN_MODIFY:
            batch.written(rel)
        elif not isdir and mask & pyinotify.IN_CREATE:
            # A first write within the settle time is waited for.
            batch.was_created()
            if not made_up and _opened_new(os.path.join(self.root, rel)):
                batch.opened_new(rel)

    def send(self, changes, rescan=False):
        """rescan: False, or why the committer should rescan (a protocol.RESCANS word)."""
        if not changes and not rescan:
            return
        message = {"cmd": "batch", "changes": changes, "rescan": bool(rescan)}
        if rescan:
            message["reason"] = rescan
        reply = self.request(message)
        if not reply.get("ok"):
            log.error("the committer refused a batch: %s", reply.get("error"))

    def request(self, message):
        """One request to the committer; if it went away, reconnect and send it again."""
        for attempt in range(1, RESEND_TRIES + 1):
            try:
                if self.conn is None:
                    self.conn = self.connect()
                return self.conn.request(message, timeout=60)
            except (OSError, ProtocolError, NoDaemon) as e:
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                if attempt == RESEND_TRIES or self.stopping:
                    raise  # stopping: the committer may be gone for good
                log.warning("the committer went away (%s): reconnecting to send again", e)
                # What happened while nobody listened is found by a rescan.
                if message.get("cmd") == "batch":
                    message = dict(message, rescan=True, reason="committer-restarted")

    def connect(self):
        """A connection for requests, waiting for a committer that is (re)starting."""
        deadline = time.monotonic() + RECONNECT_WAIT
        backoff = Backoff(0.05, 1.0)
        while True:
            try:
                conn = connect(self.cfg.socket)
                if self.watch_report is not None:  # a restarted committer knows nothing
                    conn.request(self.watch_report, timeout=10)
                return conn
            except Untrusted:
                raise
            except (OSError, ProtocolError, NoDaemon):
                # A committer that is dying may still accept, then reset: try again.
                if time.monotonic() > deadline:
                    raise
                time.sleep(backoff.next())

    def close_batch(self):
        now = time.monotonic()
        # Why it closes, for whoever reads the log (tests count a burst's batches by it):
        # its writers done and the folder quiet, or maxwait reached while it went on.
        batch = self.batch
        why = "at maxwait" if batch.first is not None and \
            now >= batch.first + self.cfg.maxwait else \
            "a file still written is due" if batch.carried_due(now) else \
            "quiet %.2f s" % batch.quiet(self.cfg.readfrequency) if batch.last is not None \
            else "quiet"
        # The burst may go on (after maxwait, or a pause): the next batch knows how long
        # it paused so far.
        self.batch = Batch(previous=batch.last, learned=max(
            batch.gap, batch.quiet(self.cfg.readfrequency) if why.startswith("quiet") and
            batch.last is not None else 0.0))
        # Files still written wait on in the next batch, as Growing decides.
        leave, carried = self.growing.leave_out(batch, self.root, self.cfg.maxwait, now)
        for rel, due in carried.items():
            self.batch.carry(rel, due)
        # Created and still empty: left out until written to or closed, without a
        # touch (nothing to wait for until then).
        fresh = {rel for rel in batch.fresh if _empty(os.path.join(self.root, rel))}
        self.batch.fresh |= fresh
        changes = batch.close(self.root, self.tree, self.ignore, leave | fresh)
        log.debug("batch closed (%s): %d changes%s", why, len(changes),
                  " + rescan" if batch.rescan else "")
        self.send(changes, batch.rescan)

    def on_committer_event(self, event):
        if event is SUBSCRIBED:
            if self.subscribed_before:
                # A restarted committer: a pull that began may never say it
                # finished, and what happened meanwhile is found by a rescan.
                self.pull_batch = None
                self.send([], rescan="committer-restarted")
            self.subscribed_before = True
            return
        name = event.get("event")
        if name == "pull-started":
            self.drain()
            self.pull_batch = Batch()
            log.debug("a pull started: what it writes is set aside")
        elif name == "pull-finished" and self.pull_batch is not None:
            # Everything the pull wrote is queued by now: the kernel queues
            # events when the write happens, before git returns.
            self.drain()
            batch, self.pull_batch = self.pull_batch, None
            gone = batch.gone_unknown(self.root, self.tree)  # (asked before close updates the tree)
            changes = batch.close(self.root, self.tree, self.ignore, batch.fresh)
            log.debug("the pull finished: %d changes made while it ran", len(changes))
            self.batch.fresh |= batch.fresh  # created by a local writer, still empty
            # A file a local writer still holds open waits for its close, in
            # the open batch, whichever lock: committed half-written, it would
            # reach every machine so.
            for rel in batch.writing:
                self.batch.touch(rel)
                self.batch.written(rel)
            settled = [c for c in changes if c["path"] not in batch.writing]
            # Both replays below need the batch's changes to say everything; a file the
            # pull wrote and a writer removed before it ended is in none of them
            # (Batch.gone_unknown): then the rescan.
            if self.cfg.pulllock == "optimized" and not gone:
                # Replay: what the pull wrote is already committed, so adding
                # it again changes nothing; local changes made meanwhile are kept.
                self.send(settled)
            elif event.get("guarded") and not gone and not _ignore_rules_touched(changes):
                # conservative, after the committer's own git pull (vcs/pull/git.py, every
                # write made through the guarded writer): every path written during the
                # pull, by it or by anyone, is in this batch, so staging exactly these
                # paths as they are now is what a rescan would find, without reading
                # the whole folder. The pull's own writes are in the index already and
                # stage nothing; a local edit made meanwhile, to a pulled path or any
                # other, is committed. (A .gitignore the pull changed may un-ignore files
                # no event names: then the rescan below.)
                self.send(settled)
            elif self.batch.held_open():
                # below: once the writers closed their files (not a carried one's: a log
                # open for hours; the committer leaves a file open for writing out)
                self.batch.rescan = "drained"
            else:
                # conservative: what we threw away may hold a local edit made the
                # instant a pulled file appeared. A rescan asked for now runs after
                # every event thrown away, so it finds that edit.
                self.send([], rescan="drained")

    def drain(self):
        self.inotify.drain()

    def start_watching(self):
        started = time.monotonic()
        self.unwatched = watchlimit.Unwatched(self.root, self.never_watched)
        self.poll_at = None
        self.tree = Tree()
        self.inotify = Inotify(self.on_event, self.refused, self.excluded,
                               follow_root=os.path.islink(self.root))
        self.inotify.watch(self.root, recursive=True)
        self.root_wd = self.inotify.wd(self.root)
        for rel in self.tree.scan(self.root, "", self.ignore):
            self.tree.add(rel)
        log.info("watching %s: %d folders%s, %d files in %.2f s", self.root,
                 len(self.inotify), " (more have no watch: see below)"
                 if self.unwatched.tops else "", len(self.tree), time.monotonic() - started)

    # --- folders without a watch (watcher/watchlimit.py) ---------------------------------

    def refused(self, path):
        """The kernel had no watch left for this folder: poll it, starting now."""
        self.unwatched.failed(path)
        if self.poll_at is None:
            self.poll_at = time.monotonic()

    def watch_again(self, folder):
        return self.inotify.watch(folder, recursive=False)

    def poll_unwatched(self):
        """Look at the folders that have no watch; try to watch them again."""
        changed, still = self.unwatched.poll(
            self.inotify.watched(), self.watch_again,
            lambda folder: self.tree.dirs.get(self.rel(folder), ()))
        for path, isdir in changed:
            rel = self.rel(path)
            if not self.ignore(rel, isdir):
                self.batch.touch(rel, isdir)
        self.poll_at = time.monotonic() + watchlimit.POLL_EVERY if self.unwatched.tops else None
        self.report_watches(still)

    def report_watches(self, still):
        """Tell the log (once) and the committer (for status and a notification)."""
        if still:
            folders = len(self.inotify) + still
            problem = watchlimit.problem_text(still, folders, watchlimit.current_limit())
            if self.watch_report is None:
                log.warning("%s", problem)
            elif self.watch_report["unwatched"] == still:
                return
            self.watch_report = {"cmd": "watch", "unwatched": still, "problem": problem}
            self.request(self.watch_report)
        elif self.watch_report is not None:
            log.info("every folder has an inotify watch again (%d folders)",
                     len(self.inotify))
            self.watch_report = None
            self.request({"cmd": "watch", "unwatched": 0, "problem": None})

    def run(self):
        self.subscription = client.Subscription(
            self.cfg.socket, self.inbox.put, on_subscribed=lambda: self.inbox.put(SUBSCRIBED),
            backoff=Backoff(0.05, 2.0), logger=log, name="watcher-events").start()
        try:
            self.start_watching()
            # Whatever changed while no watcher ran is found by the committer's rescan,
            # sent with the first batch: a file being written as we start is waited for.
            self.batch.rescan_when_closed()
            status = self.loop()
            if self.stop and self.away is None:
                # Hand over what this batch holds; the committer commits it before it stops.
                self.stopping = True
                self.drain()
                self.close_batch()
            self.stop_returning()
            return status
        finally:
            self.subscription.close()

    def loop(self):
        while self.foreign is None and not self.stop:
            if self.away is not None:
                self.wait_for_folder()
                continue
            timeout = self.batch.due(time.monotonic(), self.cfg.readfrequency, self.cfg.maxwait)
            for at in (self.poll_at, self.look_at):
                if at is not None:
                    wait = max(0.0, at - time.monotonic())
                    timeout = wait if timeout is None else min(timeout, wait)
            ready, _, _ = select.select([self.inbox, self.inotify], [], [], timeout)
            # The committer's events first: a pull-started sets the pull's writes aside.
            for event in self.inbox.take():
                self.on_committer_event(event)
            if self.inotify in ready:
                self.drain()
            if time.monotonic() >= self.look_at:
                self.look_at = time.monotonic() + IDENTITY_EVERY
                try:
                    self.lost = self.lost or _identity(self.root) != self.folder.identity
                except OSError:
                    self.lost = True
            if self.lost:
                self.went_away()
                continue
            if self.poll_at is not None and time.monotonic() >= self.poll_at:
                self.poll_unwatched()
            self.batch.forget_vanished(self.root)
            if self.batch.due(time.monotonic(), self.cfg.readfrequency, self.cfg.maxwait) == 0:
                self.close_batch()
        if self.stop:
            return 0
        if not self.foreign_told:
            log.error("%s", self.foreign)
        return cli.STOP_ALL

    # --- the synced folder itself away, and back ----------------------------------------

    def went_away(self):
        """The folder is not at its place (or not the one we watched): nothing is watched
        or sent until it is back. The open batch is dropped: its paths may be another
        folder's now; the rescan on return finds what it held."""
        self.lost = False
        self.inotify.close()
        self.batch, self.pull_batch, self.growing = Batch(), None, Growing()
        problem = GONE % self.root  # what is there now, if anything, is judged later
        self.stirred = time.monotonic()
        if not self.tell_folder(problem):
            log.warning("%s", problem)

    def tell_folder(self, problem):
        """-> True once the committer knows (it says it: log, notification, status)."""
        self.away = problem
        self.folder.set_away(problem)
        try:
            return self.request({"cmd": "watch", "folder": problem}).get("ok", False)
        except (OSError, ProtocolError, NoDaemon) as e:
            log.warning("could not tell the committer about the folder: %s", e)
            return False

    def wait_for_folder(self):
        """While away: look for a folder at the path, watch a new one until it is quiet,
        then take it on (ours, or another clone of our remote), or stop (anything else)."""
        ready, _, _ = select.select([self.inbox] + ([self.returning] if self.returning else []),
                                    [], [], BACK_POLL)
        for event in self.inbox.take():
            if event is SUBSCRIBED and self.subscribed_before:
                self.tell_folder(self.away)  # a restarted committer knows nothing
            self.subscribed_before = self.subscribed_before or event is SUBSCRIBED
        if self.returning is not None and self.returning in ready:
            self.returning.drain()
        try:
            identity = _identity(self.root)
        except OSError:
            identity = None
        if identity != self.returning_identity:  # gone, or replaced again
            self.stop_returning()
        if identity is None:
            return
        if self.returning is None and os.path.isdir(self.root):
            # A new folder (or ours again): its changes say when it is quiet.
            self.returning = Inotify(self.on_event, lambda path: None, self.excluded)
            self.returning.watch(self.root, recursive=True)
            self.returning_identity = identity
            self.stirred = time.monotonic()
            return
        if self.returning is not None and time.monotonic() - self.stirred < BACK_QUIET:
            return
        verdict, problem = self.folder.examine()
        if verdict == "ours":
            self.come_back()
        elif verdict == "foreign":
            self.stop_returning()
            self.foreign = problem + ": stopping; start dvcs-autosync again to sync it instead"
            self.foreign_told = self.tell_folder(self.foreign)
        elif problem != self.away:
            self.stirred = time.monotonic()
            self.tell_folder(problem)

    def stop_returning(self):
        if self.returning is not None:
            self.returning.close()
            self.returning = self.returning_identity = None

    def come_back(self):
        self.stop_returning()
        self.away = None
        self.folder.set_away(None)
        self.start_watching()
        self.look_at = time.monotonic() + IDENTITY_EVERY
        log.warning("the synced folder %s is back: watching it again, and rescanning",
                    self.root)
        self.request({"cmd": "watch", "folder": None})
        self.send([], rescan="folder-back")


def _ignore_rules_touched(changes):
    """Does a change name a .gitignore (which may make files no event names count)?"""
    return any(os.path.basename(c.get(k, "")) == ".gitignore"
               for c in changes for k in ("path", "src"))


def _identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _empty(path):
    try:
        return os.lstat(path).st_size == 0
    except OSError:
        return False


def _opened_new(path):
    """Was this file, just created, opened by a writer (and not made by link(), a
    symlink, mknod or a socket's bind, which no close follows)? pyinotify's made-up
    IN_CREATE (for what a new folder already holds) is no creation either."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def main(argv=None):
    cfg = cli.start("autosync-watcher", __doc__, argv)
    watcher = Watcher(cfg)
    watcher.stop.wake = watcher.inbox.wake
    watcher.stop.install(wake_fd=watcher.inbox.wake_w)
    return watcher.run()


if __name__ == "__main__":
    sys.exit(main())
