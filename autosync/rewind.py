"""Writing one path of the folder back as it was at a revision (for `restore`).

A Rewind plans first (what to write, bring back, remove or keep), then
writes everything within milliseconds from temporary files, so that the
daemon's watcher sees one quick burst. history.py finds the revision and
lists what it held; this module only writes.
"""
import collections
import os
import stat

from autosync.paths import METADATA

MODES = ("100644", "100755", "120000")
EXECUTABLE, LINK = "100755", "120000"


def nested(folder):
    """A folder holding its own repository: never looked into."""
    return any(os.path.lexists(os.path.join(folder, m)) for m in METADATA)


def is_below(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def same(full, st, mode, data):
    """Is the file at `full` already what `mode` and `data` say?"""
    if mode == LINK or stat.S_ISLNK(st.st_mode):
        return mode == LINK and stat.S_ISLNK(st.st_mode) and os.readlink(os.fsencode(full)) == data
    if st.st_size != len(data) or bool(st.st_mode & 0o100) != (mode == EXECUTABLE):
        return False
    with open(full, "rb") as f:
        return f.read() == data


Change = collections.namedtuple("Change", "action path")


class Rewind:
    """Make one path of the folder what it was at a revision: plan, then write.

    Nothing the watcher ignores (DVCS metadata, editor junk, ignorepath, .gitignore)
    is read, written or removed. Contents are fetched first into temporary files
    named like editor junk, so that the folder then changes within milliseconds: the
    daemon's watcher sees one quick burst, and the sync that follows commits it."""

    def __init__(self, history, rev, rel, wanted, ignore):
        self.history, self.rev, self.rel = history, rev, rel
        self.root = history.cfg.path
        self.ignore = ignore
        self.wanted = {p: m for p, m in wanted.items() if not self.ignore(p)}
        self.temps = {}  # path -> temporary file holding its old content
        self.failed = []  # (path, why) of what could not be written or removed

    def full(self, path):
        return os.path.normpath(os.path.join(self.root, path))

    def present(self):
        """{path: os.stat_result} of what is at or below rel now (files and links)."""
        top = self.full(self.rel)  # (history.py refuses a rel that is ignored)
        try:
            st = os.lstat(top)
        except FileNotFoundError:
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

    def run(self, dry_run):
        now = self.present()
        changes = []
        try:
            for path in sorted(self.wanted):
                mode = self.wanted[path]
                data = self.history.content(self.rev, path)
                if path in now and same(self.full(path), now[path], mode, data):
                    continue
                changes.append(Change("restored" if path in now else "brought back", path))
                if not dry_run:
                    self.temps[path] = self.stash(path, mode, data, now.get(path))
            gone = sorted(p for p in now if p not in self.wanted)
            if gone:
                # Only what history holds is removed: a file the daemon has not committed
                # (none runs, or its commit failed) stays.
                kept = set(gone) - set(self.history.listing(self.history.newest(), self.rel))
                gone = [p for p in gone if p not in kept]
                changes += [Change("kept", p) for p in kept]
            changes += [Change("removed", p) for p in gone]
            if not dry_run:
                self.apply(gone)
        finally:
            for tmp in self.temps.values():
                if os.path.lexists(tmp):
                    os.unlink(tmp)
        return sorted(changes, key=lambda c: c.path)

    def stash(self, path, mode, data, st):
        """Write one old content to a temporary file near its place; -> its name."""
        folder = os.path.dirname(self.full(path))
        while not os.path.isdir(folder):  # a removed folder is made only when it is filled
            folder = os.path.dirname(folder)
        tmp = os.path.join(folder, ".autosync-restore.%d.%d~" % (os.getpid(), len(self.temps)))
        if mode == LINK:
            os.symlink(data, tmp)
            return tmp
        with open(tmp, "wb") as out:
            out.write(data)
        perms = st.st_mode & 0o7777 if st is not None and stat.S_ISREG(st.st_mode) \
            else 0o666 & ~UMASK
        if mode == EXECUTABLE:
            perms |= (perms & 0o444) >> 2  # x wherever r
        else:
            perms &= ~0o111
        os.chmod(tmp, perms)
        return tmp

    def apply(self, gone):
        """Remove what did not exist, then put every stashed file in its place."""
        top = self.full(self.rel)
        for path in gone:
            try:
                os.unlink(self.full(path))
            except OSError as e:
                self.failed.append((path, e.strerror or str(e)))
        # Folders emptied by the removals go too (never the synced folder itself, nor
        # rel unless a file takes its place).
        for path in gone:
            folder = os.path.dirname(self.full(path))
            while folder != self.root and (folder != top or self.rel in self.wanted) \
                    and is_below(folder, top):
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = os.path.dirname(folder)
        for path, tmp in sorted(self.temps.items()):
            target = self.full(path)
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(tmp, target)
            except OSError as e:  # e.g. a folder that holds ignored files is in the way
                self.failed.append((path, e.strerror or str(e)))


UMASK = os.umask(0o022)
os.umask(UMASK)
