"""Writing one path of the folder back as it was at a revision (for `restore`).

A Rewind plans first: what to write, bring back, remove or keep. A file is
overwritten or removed only if it is exactly what the newest commit holds
there; one that differs (edited after that commit, or never committed) is
kept as it is and said. Every old content is fetched first into a staging
folder named like editor junk (which the watcher and git leave out); then
everything is written within milliseconds through one guarded.Writer, which
checks each file again up to the instant it is replaced, never writes
through a symbolic link and never outside the folder. So the daemon's
watcher sees one quick burst, and the sync that follows commits it.
tools/history.py finds the revision and lists what it held; this module only writes.
"""
import collections
import os
import shutil
import stat
import tempfile

from autosync.fs import guarded
from autosync.core.paths import METADATA

MODES = ("100644", "100755", "120000")
EXECUTABLE, LINK = "100755", "120000"


def nested(folder):
    """A folder holding its own repository: never looked into."""
    return any(os.path.lexists(os.path.join(folder, m)) for m in METADATA)


def same(full, st, mode, data):
    """Is the file at `full` already what `mode` and `data` say?"""
    if mode == LINK or stat.S_ISLNK(st.st_mode):
        return mode == LINK and stat.S_ISLNK(st.st_mode) and os.readlink(os.fsencode(full)) == data
    if st.st_size != len(data) or bool(st.st_mode & 0o100) != (mode == EXECUTABLE):
        return False
    with open(full, "rb") as f:
        return f.read() == data


# action: restored, brought back, removed; kept (did not exist then, not in history:
# not removed); changed (not as the newest commit holds it: neither written nor removed).
Change = collections.namedtuple("Change", "action path")


class Rewind:
    """Make one path of the folder what it was at a revision: plan, then write.

    Nothing the watcher ignores (DVCS metadata, editor junk, ignorepath, .gitignore)
    is read, written or removed. run() raises guarded.Refused, before writing
    anything, when a folder above the path is a symbolic link or a file."""

    def __init__(self, history, rev, rel, wanted, ignore):
        self.history, self.rev, self.rel = history, rev, rel
        self.root = history.cfg.path
        self.ignore = ignore
        self.wanted = {p: m for p, m in wanted.items() if not self.ignore(p)}
        self.writer = history.writer()
        self.newest = None  # (revision, {path: entry} at or below rel), read when needed
        self.staging = None  # the folder holding the fetched contents
        self.staged = 0  # how many it holds
        self.failed = []  # (path, why) of what could not be written or removed

    def full(self, path):
        return os.path.normpath(os.path.join(self.root, path))

    def check_way(self):
        """Refused if a folder above rel is a link or a file: nothing is read through it."""
        try:
            os.close(self.writer.folder(self.rel))
        except FileNotFoundError:
            pass  # a removed folder: made when it is filled

    def present(self):
        """{path: os.stat_result} of what is at or below rel now (files and links)."""
        top = self.full(self.rel)  # (tools/history.py refuses a rel that is ignored)
        try:
            st = os.lstat(top)
        except (FileNotFoundError, NotADirectoryError):  # (check_way ran just before)
            return {}
        if not stat.S_ISDIR(st.st_mode):
            return {self.rel: st} if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else {}
        found = {}
        for folder, dirs, files in os.walk(top):
            base = os.path.relpath(folder, self.root)
            keep = []
            for name in dirs:
                rel = os.path.normpath(os.path.join(base, name))
                if os.path.islink(os.path.join(folder, name)):
                    files.append(name)  # a link to a folder is a link
                elif not self.ignore(rel, isdir=True) and not nested(os.path.join(folder, name)):
                    keep.append(name)
            dirs[:] = keep
            for name in files:
                rel = os.path.normpath(os.path.join(base, name))
                st = os.lstat(os.path.join(folder, name))
                if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and not self.ignore(rel):
                    found[rel] = st
        return found

    def committed(self, path):
        """guarded.Expect of the newest commit's version if the file at path is exactly
        that; None if it differs or is not in history (then it is never overwritten)."""
        if self.newest is None:
            rev = self.history.newest()
            self.newest = rev, self.history.entries(rev, self.rel)
        rev, listed = self.newest
        if path not in listed:
            return None
        expect = self.history.expect(rev, path, listed[path])
        return expect if self.writer.holds(path, expect) else None

    before_write = None  # called once the plan writes anything, before the first write
    progress = None  # a tools/progress.Progress: how far reading and writing got

    def counted(self, doing, done, total, size):
        if self.progress is not None:
            self.progress.files(doing, done, total, size)

    def run(self, dry_run):
        self.check_way()
        now = self.present()
        changes, writes, removals = [], [], []
        read = 0
        try:
            for n, path in enumerate(sorted(self.wanted), start=1):
                mode = self.wanted[path]
                data = self.history.content(self.rev, path)
                read += len(data)
                self.counted("reading the old versions", n, len(self.wanted), read)
                expect = None
                if path in now:
                    if same(self.full(path), now[path], mode, data):
                        continue
                    expect = self.committed(path)
                    if expect is None:
                        changes.append(Change("changed", path))
                        continue
                changes.append(Change("restored" if path in now else "brought back", path))
                if not dry_run:
                    writes.append((path, mode, self.stage(data), expect))
            for path in sorted(p for p in now if p not in self.wanted):
                expect = self.committed(path)
                if expect is None:
                    listed = self.newest[1]
                    changes.append(Change("changed" if path in listed else "kept", path))
                    continue
                changes.append(Change("removed", path))
                removals.append((path, expect))
            if not dry_run:
                if (writes or removals) and self.before_write is not None:
                    self.before_write()  # planned: something is written within milliseconds
                kept = self.apply(removals, writes)
                changes = [Change("changed", c.path) if c.path in kept else c for c in changes]
        finally:
            if self.progress is not None:
                self.progress.clear()
            if self.staging:
                shutil.rmtree(self.staging, ignore_errors=True)
        return sorted(changes, key=lambda c: c.path)

    def stage(self, data):
        """Keep one old content in the staging folder until the burst; -> its name."""
        if self.staging is None:
            self.staging = tempfile.mkdtemp(prefix=".autosync-restore.", suffix="~",
                                            dir=self.root)
        name = os.path.join(self.staging, "%d~" % self.staged)
        self.staged += 1
        with open(name, "xb") as out:
            out.write(data)
        return name

    def apply(self, removals, writes):
        """Remove what did not exist, then put every staged file in its place, each only
        if it still is what the newest commit holds; -> the paths kept as they were."""
        kept = set()
        for path, expect in removals:
            # (the writer removes the folders this empties, never the synced folder)
            self.guarded(path, kept, self.writer.remove, path, expect)
        if self.progress is not None:
            self.progress.clear()  # a new count: writing
        written = 0
        for n, (path, mode, staged, expect) in enumerate(writes, start=1):
            with open(staged, "rb") as f:
                data = f.read()
            self.guarded(path, kept, self.writer.put, path, mode, data, expect)
            written += len(data)
            self.counted("writing", n, len(writes), written)
        return kept

    def guarded(self, path, kept, write, *args):
        try:
            if write(*args):
                return
        except guarded.Refused as e:
            self.failed.append((path, str(e)))
            return
        except OSError as e:
            self.failed.append((path, e.strerror or str(e)))
            return
        full = self.full(path)
        if os.path.isdir(full) and not os.path.islink(full):
            # e.g. a folder that holds ignored files is where the file goes
            self.failed.append((path, "a folder is in its place"))
        else:
            kept.add(path)  # written or removed by someone else since the plan: theirs stays
