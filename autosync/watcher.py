"""autosync-watcher: file events -> batches for the committer.

inotify (through pyinotify) is read continuously, so the kernel queue does
not overflow while we wait; the waiting happens here, in a Batch. A batch
records only which paths were touched and which moves happened; when it
closes, each touched path is compared with what the folder held when the
batch opened (the Tree). That makes editors' save dances (rename to a
backup, write anew, delete the backup) and a file created and removed
within a batch come out right whatever order the events came in.
"""
import ctypes
import errno
import logging
import os
import select
import signal
import sys
import time

import pathspec
import pyinotify

from autosync import cli, watchlimit
from autosync.excludes import EDITOR_JUNK
from autosync.paths import METADATA
from autosync.protocol import LineReader, NoDaemon, ProtocolError, connect, decode

log = logging.getLogger("autosync.watcher")

MASK = (pyinotify.IN_CREATE | pyinotify.IN_MODIFY | pyinotify.IN_CLOSE_WRITE
        | pyinotify.IN_ATTRIB | pyinotify.IN_DELETE | pyinotify.IN_MOVED_FROM
        | pyinotify.IN_MOVED_TO | pyinotify.IN_MOVE_SELF | pyinotify.IN_DELETE_SELF)

# Never synced, whatever the config says: DVCS metadata, and editors' temporary,
# backup, swap and lock files (the same patterns git's own scans leave out).
EDITOR_JUNK_SPEC = pathspec.GitIgnoreSpec.from_lines(EDITOR_JUNK)


class Ignore:
    """Decides which paths are never synced: ignorepath, metadata, editor junk, .gitignore."""

    def __init__(self, root, ignorepath=()):
        self.root = root
        self.prefixes = [p.strip("/") for p in ignorepath if p.strip("/")]
        self.specs = {}  # folder -> its .gitignore's spec (None when it has none)

    def spec(self, folder):
        if folder not in self.specs:
            files = [os.path.join(self.root, folder, ".gitignore")]
            if folder == "":
                files.append(os.path.join(self.root, ".git", "info", "exclude"))
            lines = []
            for name in files:
                try:
                    with open(name, encoding="utf-8", errors="surrogateescape") as f:
                        lines += f.read().splitlines()
                except OSError:
                    pass
            spec = pathspec.GitIgnoreSpec.from_lines(lines)
            # A file of comments only is no file: skip it on the hot path.
            useful = any(p.include is not None for p in spec.patterns)
            self.specs[folder] = spec if useful else None
        return self.specs[folder]

    def forget(self, folder):
        """A .gitignore changed: read it again next time."""
        self.specs.pop(folder, None)

    def __call__(self, rel, isdir=False):
        parts = rel.split("/")
        if METADATA.intersection(parts) or EDITOR_JUNK_SPEC.match_file(parts[-1]):
            return True
        if any(rel == p or rel.startswith(p + "/") for p in self.prefixes):
            return True
        # git's rule: a path is ignored if it or a folder above it is, and the
        # deepest .gitignore that has an opinion wins.
        for depth in range(1, len(parts) + 1):
            is_dir = isdir or depth < len(parts)
            verdict = None
            for cut in range(depth):
                spec = self.spec("/".join(parts[:cut]))
                if spec is not None:
                    local = "/".join(parts[cut:depth]) + ("/" if is_dir else "")
                    result = spec.check_file(local)
                    if result.include is not None:
                        verdict = result.include
            if verdict:
                return True
        return False


class Tree:
    """The files the folder held when the current batch opened: folder -> names."""

    def __init__(self):
        self.dirs = {}

    def has(self, rel):
        folder, _, name = rel.rpartition("/")
        return name in self.dirs.get(folder, ())

    def scan(self, root, sub, ignore):
        """Every file (and symlink) below `sub`, relative to root, not ignored.

        A symlink is an entry, never a folder to enter: a link to /usr or to
        `..` costs one entry."""
        found = []
        stack = [sub] if not sub or not os.path.islink(os.path.join(root, sub)) else []
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(root, folder)))
            except OSError:
                continue
            for entry in entries:
                rel = entry.name if not folder else folder + "/" + entry.name
                isdir = entry.is_dir(follow_symlinks=False)
                if ignore(rel, isdir):
                    continue
                (stack if isdir else found).append(rel)
        return found

    def files_under(self, prefix):
        for folder, names in self.dirs.items():
            if folder == prefix or folder.startswith(prefix + "/") or prefix == "":
                for name in names:
                    yield name if not folder else folder + "/" + name

    def add(self, rel):
        folder, _, name = rel.rpartition("/")
        self.dirs.setdefault(folder, set()).add(name)

    def discard(self, rel):
        folder, _, name = rel.rpartition("/")
        names = self.dirs.get(folder)
        if names is not None:
            names.discard(name)
            if not names:
                del self.dirs[folder]

    def __len__(self):
        return sum(len(n) for n in self.dirs.values())


def is_file(path):
    """A file or a symlink (to anything): what a DVCS tracks as one entry."""
    return os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path))


class Batch:
    """What happened since the batch opened: touched paths and folders, moves."""

    def __init__(self):
        self.files = set()
        self.dirs = set()
        self.moves = {}  # destination -> where its content was when the batch opened
        self.dir_moves = []  # (src, dst) of folders
        self.rescan = False
        self.first = self.last = None

    def touch(self, rel, isdir=False, now=None):
        (self.dirs if isdir else self.files).add(rel)
        now = time.monotonic() if now is None else now
        self.first = self.first or now
        self.last = now

    def move(self, src, dst, isdir, now=None):
        if isdir:
            self.dir_moves.append((src, dst))
            self.touch(src, True, now)
            self.touch(dst, True, now)
        else:
            self.moves[dst] = self.moves.pop(src, src)
            self.touch(src, False, now)
            self.touch(dst, False, now)

    def due(self, now, quiet, longest):
        """Seconds until this batch should close (0: now), or None if empty."""
        if self.first is None:
            return None
        return max(0.0, min(self.last + quiet, self.first + longest) - now)

    def close(self, root, tree, ignore):
        """The changes this batch amounts to; brings the tree up to date."""
        changes = []
        # A folder moved inside the tree is one move, whatever it holds.
        for src, dst in self.dir_moves:
            if not os.path.isdir(os.path.join(root, src)) and os.path.isdir(os.path.join(root, dst)):
                changes.append({"action": "moved", "path": dst, "src": src})
                moved = list(tree.files_under(src))
                for rel in moved:
                    tree.discard(rel)
                for rel in tree.scan(root, dst, ignore):
                    tree.add(rel)
                self.dirs.discard(src)
                self.dirs.discard(dst)
        files = set(self.files)
        for folder in self.dirs:  # created, moved in, deleted or moved out
            if os.path.islink(os.path.join(root, folder)):
                files.add(folder)  # a link to a folder is recorded as a link
            files.update(tree.files_under(folder))
            files.update(tree.scan(root, folder, ignore))
        before = {rel: tree.has(rel) for rel in files}
        after = {rel: is_file(os.path.join(root, rel)) for rel in files}
        actions = {}
        for rel in sorted(files):
            if before[rel] and after[rel]:
                actions[rel] = "modified"
            elif after[rel]:
                actions[rel] = "added"
            elif before[rel]:
                actions[rel] = "removed"
        # A file whose old place is gone and which is new in its new place was moved.
        for dst, src in self.moves.items():
            if actions.get(dst) == "added" and actions.get(src) == "removed":
                del actions[src]
                actions[dst] = ("moved", src)
        for rel, action in actions.items():
            if isinstance(action, tuple):
                changes.append({"action": "moved", "path": rel, "src": action[1]})
                tree.discard(action[1])
                tree.add(rel)
            else:
                changes.append({"action": action, "path": rel})
                (tree.discard if action == "removed" else tree.add)(rel)
        return changes


def _add_watch_calls(wm, refused):
    """pyinotify encodes watched paths strictly: let undecodable names through.
    And pyinotify hides why a watch failed: call refused(path) when the
    kernel has no watch left (ENOSPC), wherever pyinotify adds one."""
    wrapper = wm._inotify_wrapper
    libc = getattr(wrapper, "_libc", None)
    if libc is None:
        return

    def add_watch(fd, path, mask):
        wd = libc.inotify_add_watch(fd, ctypes.create_string_buffer(os.fsencode(path)), mask)
        if wd < 0 and ctypes.get_errno() == errno.ENOSPC:
            refused(path)
        return wd
    wrapper._inotify_add_watch = add_watch


class _NoWatchLeft(logging.Filter):
    """pyinotify logs one error per folder refused a watch; we say it once, with the fix."""

    def filter(self, record):
        return "(ENOSPC)" not in record.getMessage()


class Notifier(pyinotify.Notifier):
    """pyinotify's Notifier, decoding file names the way os.fsdecode does.

    pyinotify 0.9.6 decodes names as strict UTF-8 and dies on any other bytes.
    """

    def read_events(self):
        try:
            data = os.read(self._fd, 1 << 20)
        except BlockingIOError:
            return
        offset = 0
        while offset < len(data):
            wd, mask, cookie, length = pyinotify.struct.unpack_from("iIII", data, offset)
            name = data[offset + 16:offset + 16 + length].rstrip(b"\0")
            self._eventq.append(pyinotify._RawEvent(wd, mask, cookie, os.fsdecode(name)))
            offset += 16 + length


RECONNECT_WAIT = 60.0  # the supervisor restarts a dead committer within its backoff (30 s)
RESEND_TRIES = 3


def connect_patiently(path, wait=10.0):
    """Connect to the committer, which may be starting or restarting."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return connect(path)
        except NoDaemon:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Watcher:
    def __init__(self, cfg):
        self.cfg = cfg
        self.root = cfg.path
        self.ignore = Ignore(self.root, cfg.ignorepath)
        self.tree = Tree()
        self.batch = Batch()
        self.pull_batch = None  # collects what a pull writes, while one runs
        self.vanished = False
        self.stopping = False
        self.unwatched = watchlimit.Unwatched(self.root, self.never_watched)
        self.poll_at = None  # when to look at folders without a watch next
        self.watch_report = None  # the last "watch" request sent while some have none

    def rel(self, path):
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
        if event.mask & pyinotify.IN_Q_OVERFLOW:
            log.warning("the kernel's event queue overflowed: rescanning everything")
            self.batch.rescan = True
            self.batch.touch("", True)
            return
        path = event.pathname
        if path.rstrip("/") == self.root and event.mask & (pyinotify.IN_DELETE_SELF
                                                           | pyinotify.IN_MOVE_SELF):
            self.vanished = True
            return
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
            batch.touch(src_rel, isdir)
        if event.mask & (pyinotify.IN_MOVE_SELF | pyinotify.IN_DELETE_SELF):
            return  # the parent folder's event tells us the same
        if isdir and not event.mask & (pyinotify.IN_CREATE | pyinotify.IN_DELETE
                                       | pyinotify.IN_MOVED_TO | pyinotify.IN_MOVED_FROM):
            return  # a folder's own times or mode: no DVCS records them
        if not self.ignore(rel, isdir):
            batch.touch(rel, isdir)

    def send(self, changes, rescan=False):
        if not changes and not rescan:
            return
        reply = self.request({"cmd": "batch", "changes": changes, "rescan": rescan})
        if not reply.get("ok"):
            log.error("the committer refused a batch: %s", reply.get("error"))

    def request(self, message):
        """One request to the committer; if it went away, reconnect and send it again."""
        for attempt in range(1, RESEND_TRIES + 1):
            try:
                return self.conn.request(message, timeout=60)
            except (OSError, ProtocolError) as e:
                if attempt == RESEND_TRIES or self.stopping:
                    raise  # stopping: the committer may be gone for good
                log.warning("the committer went away (%s): reconnecting to send again", e)
                self.connect()
                # What happened while nobody listened is found by a rescan.
                if message.get("cmd") == "batch":
                    message = dict(message, rescan=True)

    def connect(self):
        """(Re)connect: one connection for requests, one that carries the events."""
        deadline = time.monotonic() + RECONNECT_WAIT
        while True:
            for conn in (getattr(self, "conn", None), getattr(self, "events", None)):
                if conn is not None:
                    conn.close()
            try:
                self.conn = connect_patiently(self.cfg.socket, RECONNECT_WAIT)
                self.events = connect(self.cfg.socket)
                self.events.request({"cmd": "subscribe"}, timeout=10)
                if self.watch_report is not None:  # a restarted committer knows nothing
                    self.conn.request(self.watch_report, timeout=10)
                break
            except (OSError, ProtocolError):
                # A committer that is dying may still accept, then reset: try again.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.reader = LineReader(self.events.sock)
        # A pull that began before may never say it finished: stop ignoring
        # events (the caller's rescan covers what it wrote).
        self.pull_batch = None

    def close_batch(self):
        batch, self.batch = self.batch, Batch()
        changes = batch.close(self.root, self.tree, self.ignore)
        log.debug("batch closed: %d changes%s", len(changes), " + rescan" if batch.rescan else "")
        self.send(changes, batch.rescan)

    def on_committer_event(self, event):
        name = event.get("event")
        if name == "pull-started":
            self.drain()
            self.pull_batch = Batch()
        elif name == "pull-finished" and self.pull_batch is not None:
            # Everything the pull wrote is queued by now: the kernel queues
            # events when the write happens, before git returns.
            self.drain()
            batch, self.pull_batch = self.pull_batch, None
            changes = batch.close(self.root, self.tree, self.ignore)
            if self.cfg.pulllock == "optimized":
                # Replay: what the pull wrote is already committed, so adding
                # it again changes nothing; local changes made meanwhile are kept.
                self.send(changes)
            else:
                # conservative: what we threw away may hold a local edit made the
                # instant a pulled file appeared. A rescan asked for now runs after
                # every event thrown away, so it finds that edit.
                self.send([], rescan=True)

    def read_committer_events(self):
        """Take every line that arrived: pull-started and pull-finished may come together."""
        while True:
            try:
                line = self.reader.readline()
            except OSError:
                line = None
            if line is None:
                log.warning("the committer went away: reconnecting")
                self.connect()
                self.send([], rescan=True)
                return
            self.on_committer_event(decode(line))
            if not self.reader.has_line():
                return

    def drain(self):
        self.notifier.read_events()
        self.notifier.process_events()

    def start_watching(self):
        self.wm = pyinotify.WatchManager()
        _add_watch_calls(self.wm, self.refused)
        pyinotify.log.addFilter(_NoWatchLeft())
        self.notifier = Notifier(self.wm, self.on_event)
        os.set_blocking(self.wm.get_fd(), False)  # drain() must never wait
        started = time.monotonic()
        # IN_DONT_FOLLOW: a watch never goes through a link (unless the synced
        # folder itself is one: then its target is what the user syncs).
        mask = MASK | (0 if os.path.islink(self.root) else pyinotify.IN_DONT_FOLLOW)
        self.mask = mask
        self.wm.add_watch(self.root, mask, rec=True, auto_add=True,
                          exclude_filter=self.excluded, quiet=True)
        for rel in self.tree.scan(self.root, "", self.ignore):
            self.tree.add(rel)
        log.info("watching %s: %d folders%s, %d files in %.2f s", self.root,
                 len(self.wm.watches), " (more have no watch: see below)"
                 if self.unwatched.tops else "", len(self.tree), time.monotonic() - started)

    # --- folders without a watch (watchlimit.py) ---------------------------------

    def refused(self, path):
        """The kernel had no watch left for this folder: poll it, starting now."""
        self.unwatched.failed(path)
        if self.poll_at is None:
            self.poll_at = time.monotonic()

    def watch_again(self, folder):
        wds = self.wm.add_watch(folder, self.mask, rec=False, auto_add=True,
                                exclude_filter=self.excluded, quiet=True)
        return wds.get(folder, -1) >= 0

    def poll_unwatched(self):
        """Look at the folders that have no watch; try to watch them again."""
        watched = {w.path for w in self.wm.watches.values()}
        changed, still = self.unwatched.poll(
            watched, self.watch_again,
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
            folders = len(self.wm.watches) + still
            problem = watchlimit.problem_text(still, folders, watchlimit.current_limit())
            if self.watch_report is None:
                log.warning("%s", problem)
            elif self.watch_report["unwatched"] == still:
                return
            self.watch_report = {"cmd": "watch", "unwatched": still, "problem": problem}
            self.request(self.watch_report)
        elif self.watch_report is not None:
            log.info("every folder has an inotify watch again (%d folders)",
                     len(self.wm.watches))
            self.watch_report = None
            self.request({"cmd": "watch", "unwatched": 0, "problem": None})

    def run(self):
        self.connect()
        self.start_watching()
        # Whatever changed while no watcher ran is found by the committer's rescan.
        self.send([], rescan=True)
        try:
            return self.loop(self.wm.get_fd())
        except Stop:
            # Hand over what this batch holds; the committer commits it before it stops.
            self.stopping = True
            self.drain()
            self.close_batch()
            return 0

    def loop(self, inotify_fd):
        while not self.vanished:
            timeout = self.batch.due(time.monotonic(), self.cfg.readfrequency, self.cfg.maxwait)
            if self.poll_at is not None:
                wait = max(0.0, self.poll_at - time.monotonic())
                timeout = wait if timeout is None else min(timeout, wait)
            ready, _, _ = select.select([self.events, inotify_fd], [], [], timeout)
            if self.events in ready:
                self.read_committer_events()
            if inotify_fd in ready:
                self.drain()
            if self.poll_at is not None and time.monotonic() >= self.poll_at:
                self.poll_unwatched()
            if self.batch.due(time.monotonic(), self.cfg.readfrequency, self.cfg.maxwait) == 0:
                self.close_batch()
        log.error("the synced folder %s vanished: stopping, nothing more is committed", self.root)
        return 3


class Stop(Exception):
    """SIGTERM or SIGINT: finish the batch and leave."""


def _stop(*_):
    raise Stop()


def main(argv=None):
    cfg = cli.start("autosync-watcher", __doc__, argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return Watcher(cfg).run()


if __name__ == "__main__":
    sys.exit(main())
