"""What a batch of file events amounts to.

A Batch records only which paths were touched, which moves happened, and
which files a writer still holds open (written, not yet closed: the kernel
says when a writer is done, so no timer has to guess). When it closes, each touched path is compared with what the folder held
when the batch opened (the Tree). That makes editors' save dances (rename
to a backup, write anew, delete the backup) and a file created and removed
within a batch come out right whatever order the events came in.
"""
import os
import time

# How long the folder must be quiet after every file written in a batch was
# closed. Measured (vim, sed -i, write-then-rename): an editor's last rename,
# chmod or backup removal follows its close within a millisecond; 50 ms
# leaves room for a loaded machine.
SETTLE = 0.05
# A burst that has run for a while (an untar, an rsync) may pause longer than
# an editor between two files: the pause that ends a batch grows with the
# batch's age (a tenth of it), up to this.
SETTLE_MAX = 1.0


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
        self.writing = set()  # files written and not closed by their writer yet
        self.created = None  # when the last file was created (its first write may follow)
        self.rescan = False
        self.first = self.last = None

    def touch(self, rel, isdir=False, now=None):
        (self.dirs if isdir else self.files).add(rel)
        now = time.monotonic() if now is None else now
        self.first = self.first or now
        self.last = now

    def written(self, rel):
        """Written to and not closed yet: the batch waits for the close."""
        self.writing.add(rel)

    def was_created(self, now=None):
        """A file was created: its creator's first write may come a moment later, so the
        batch stays open for SETTLE at least, whatever readfrequency says (even 0)."""
        self.created = time.monotonic() if now is None else now

    def closed(self, rel):
        """Closed by its writer, or gone (removed)."""
        self.writing.discard(rel)

    def closed_under(self, folder):
        self.writing = {w for w in self.writing if not w.startswith(folder + "/")}

    def forget_vanished(self, root):
        """Files moved out of the folder while open say nothing more: stop waiting for them."""
        if self.writing:
            self.writing = {w for w in self.writing if os.path.lexists(os.path.join(root, w))}

    def rescan_all(self, now=None):
        """Events were lost: compare the whole folder, and have the committer rescan it,
        when this batch closes."""
        self.rescan = True
        self.writing.clear()  # what was open is found by the rescan
        self.touch("", True, now)

    def move(self, src, dst, isdir, now=None):
        # A file renamed while open is closed under its new name.
        if src in self.writing:
            self.writing.discard(src)
            self.writing.add(dst)
        if isdir:
            prefix = src + "/"
            self.writing = {dst + w[len(src):] if w.startswith(prefix) else w
                            for w in self.writing}
            self.dir_moves.append((src, dst))
            self.touch(src, True, now)
            self.touch(dst, True, now)
        else:
            self.moves[dst] = self.moves.pop(src, src)
            self.touch(src, False, now)
            self.touch(dst, False, now)

    def quiet(self, readfrequency):
        """The quiet that closes the batch: the user's readfrequency, or the settle time."""
        if readfrequency is not None:
            return readfrequency
        return min(SETTLE_MAX, max(SETTLE, (self.last - self.first) / 10))

    def due(self, now, readfrequency, longest):
        """Seconds until this batch should close (0: now), or None if empty.

        It closes once no file in it is still open for writing and the folder
        was then quiet (readfrequency if set, else the settle time), or at
        `longest` (maxwait) after it opened, whatever is still open."""
        if self.first is None:
            return None
        end = self.first + longest
        if not self.writing:
            quiet_end = self.last + self.quiet(readfrequency)
            if self.created is not None:
                quiet_end = max(quiet_end, self.created + SETTLE)
            end = min(end, quiet_end)
        return max(0.0, end - now)

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
