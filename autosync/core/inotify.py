"""pyinotify as the watcher needs it: two patches and a quiet log.

pyinotify 0.9.6 decodes file names as strict UTF-8 and dies on any other
bytes, encodes watched paths strictly, and hides why a watch failed. The
watcher gets names decoded as os.fsdecode does, a call when the kernel
has no watch left (ENOSPC), said once by watcher/watchlimit.py instead of a log
line per folder, and on each event whether pyinotify made it up (`made_up`:
the IN_CREATE it invents for what a new folder already holds). pyinotify's
own log lines never reach the log: the watcher says what they would mean.
"""
import ctypes
import errno
import logging
import os

import pyinotify

MASK = (pyinotify.IN_CREATE | pyinotify.IN_MODIFY | pyinotify.IN_CLOSE_WRITE
        | pyinotify.IN_ATTRIB | pyinotify.IN_DELETE | pyinotify.IN_MOVED_FROM
        | pyinotify.IN_MOVED_TO | pyinotify.IN_MOVE_SELF | pyinotify.IN_DELETE_SELF)


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


class _Silent(logging.Filter):
    """pyinotify's own lines, raw (`... -unknown-path ... <Watch wd=1 ...>` when the
    synced folder is moved, one error per folder refused a watch): the watcher says
    what they mean once, in words (watcher/watcher.py, watcher/watchlimit.py)."""

    def filter(self, record):
        return False


class _Raw(pyinotify._RawEvent):
    """pyinotify's raw event without its constructor, which formats the event as
    text for a debug line on every event, logged or not (a third of the watcher's
    time in an untar, measured)."""

    def __init__(self, wd, mask, cookie, name):
        self._str = None
        self.wd, self.mask, self.cookie, self.name = wd, mask, cookie, name


class _WatchManager(pyinotify.WatchManager):
    """pyinotify's WatchManager, finding a watch by its path in a dict. pyinotify looks
    up every name a new folder holds (for the IN_CREATEs it makes up) by comparing it
    with every watch's path: 10,000 files written into new folders among 10,000 watched
    ones cost the watcher 5-6 s. Adds keep the dict; a removal, and a move (pyinotify
    renames the moved folder's watches in place), have it built again when next needed."""

    def __init__(self):
        super().__init__()
        self.by_path = None  # path -> wd (the first, as pyinotify's own scan finds)

    def add_watch(self, *args, **kwargs):
        added = super().add_watch(*args, **kwargs)
        if self.by_path is not None:
            for path, wd in added.items():
                if wd >= 0:
                    self.by_path.setdefault(os.path.normpath(path), wd)
        return added

    def del_watch(self, wd):
        self.by_path = None
        super().del_watch(wd)

    def rm_watch(self, *args, **kwargs):
        self.by_path = None
        return super().rm_watch(*args, **kwargs)

    def paths_changed(self):
        """A watched folder moved: its watches' paths (and those below) are new."""
        self.by_path = None

    def get_wd(self, path):
        if self.by_path is None:
            self.by_path = {}
            for wd, watch in self.watches.items():
                self.by_path.setdefault(watch.path, wd)
        return self.by_path.get(os.path.normpath(path))


class DecodingNotifier(pyinotify.Notifier):
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
            self._eventq.append(_Raw(wd, mask, cookie, os.fsdecode(name)))
            offset += 16 + length

    def process_events(self):
        """pyinotify's loop (without its unused options), telling which events it made up."""
        while self._eventq:
            raw = self._eventq.popleft()
            if self._watch_manager.get_watch(raw.wd) is None \
                    and not raw.mask & pyinotify.IN_Q_OVERFLOW:
                continue  # a watch removed meanwhile (its IN_IGNORED came first)
            event = self._sys_proc_fun(raw)
            if raw.mask & pyinotify.IN_MOVE_SELF:
                self._watch_manager.paths_changed()
            event.made_up = type(raw) is not _Raw  # not read from the kernel
            self._default_proc_fun(event)
        self._sys_proc_fun.cleanup()


class Inotify:
    """One inotify instance: watches added recursively, events read without waiting.

    `on_event(event)` gets pyinotify's events (moves paired, pathname set);
    `refused(path)` is called when the kernel has no watch left for a folder;
    `excluded(path)` says which folders are never watched.
    """

    def __init__(self, on_event, refused, excluded, follow_root=False):
        self.wm = _WatchManager()
        _add_watch_calls(self.wm, refused)
        if not any(isinstance(f, _Silent) for f in pyinotify.log.filters):
            pyinotify.log.addFilter(_Silent())
        self.notifier = DecodingNotifier(self.wm, on_event)
        os.set_blocking(self.wm.get_fd(), False)  # drain() must never wait
        self.excluded = excluded
        # IN_DONT_FOLLOW: a watch never goes through a link (unless the synced
        # folder itself is one: then its target is what the user syncs).
        self.mask = MASK | (0 if follow_root else pyinotify.IN_DONT_FOLLOW)

    def fileno(self):
        return self.wm.get_fd()

    def watch(self, folder, recursive):
        """Watch `folder` (and, if recursive, every folder below it); False if refused."""
        wds = self.wm.add_watch(folder, self.mask, rec=recursive, auto_add=True,
                                exclude_filter=self.excluded, quiet=True)
        return wds.get(folder, -1) >= 0

    def wd(self, folder):
        """The watch descriptor of a watched folder, or None."""
        return self.wm.get_wd(os.path.normpath(folder))

    def close(self):
        """Every watch ends with the instance (the kernel drops its queue too)."""
        self.wm.close()

    def watched(self):
        """The folders that have a watch."""
        return {w.path for w in self.wm.watches.values()}

    def __len__(self):
        return len(self.wm.watches)

    def drain(self):
        """Hand every event the kernel has queued to on_event; never waits."""
        self.notifier.read_events()
        self.notifier.process_events()
