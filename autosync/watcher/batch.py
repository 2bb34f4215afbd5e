"""What a batch of file events amounts to.

A Batch records only which paths were touched, which moves happened, and
which files a writer still holds open (written, not yet closed: the kernel
says when a writer is done, so no timer has to guess). When it closes, each touched path is compared with what the folder held
when the batch opened (the Tree). That makes editors' save dances (rename
to a backup, write anew, delete the backup) and a file created and removed
within a batch come out right whatever order the events came in.

A file still open when its batch closes at `maxwait` is what `Growing`
decides on: an empty one waits on (its writer has not said anything yet),
one with content is sent, and each further wait for it doubles. A file so
carried into the next batch (a log appended to for hours) neither opens nor
holds open the batches after it: they close by its due time, and the saves
beside it as soon as they are done, not at maxwait. The committer
leaves a file still open for writing out of its commits until it is closed
(committer/stillwritten.py, which also gives a file open for long its versions).
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
# batch's age (a tenth of it), up to this. On a loaded machine (CPU or disk
# busy) a burst's writer pauses longer than on a quiet one: the pause that
# ends a batch is also twice the longest it saw between two of its events
# while nothing was open (the machine's own pace), again up to this; a batch
# begun within twice the last one's closing pause (the burst goes on, after
# maxwait or a pause) keeps the longest pause seen so far.
SETTLE_MAX = 1.0
# A file still written at maxwait waits twice as long before each further
# version, up to this: a long download makes a few versions, not one per maxwait.
LONGEST_WAIT = 600.0


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

    def __init__(self, previous=None, learned=0.0):
        """previous: when the last event of the batch before came; learned: the longest
        pause of the burst it was part of (the one that closed it, if one did). A burst
        that goes on in this batch keeps that patience."""
        self.previous, self.learned = previous, learned
        self.gap = 0.0  # the longest pause between two events while nothing was open
        self.files = set()
        self.dirs = set()
        self.moves = {}  # destination -> where its content was when the batch opened
        self.dir_moves = []  # (src, dst) of folders
        self.writing = set()  # files written and not closed by their writer yet
        # Files a writer created and holds open, written nothing to yet: left out of
        # the commit (an empty version would reach every machine) without holding
        # the batch back (a lock file may stay open, empty, for hours).
        self.fresh = set()
        self.created = None  # when the last file was created (its first write may follow)
        # Files still written that the batch before left out (Growing) -> when the next
        # version of each is due; their writes neither open this batch nor hold it open.
        self.carried = {}
        self.rescan = False  # or why the committer should rescan: a REASONS word
        self.first = self.last = None

    def touch(self, rel, isdir=False, now=None):
        (self.dirs if isdir else self.files).add(rel)
        if not isdir and rel in self.carried and rel in self.writing:
            return  # a carried file's writer goes on: its due time closes the batch
        now = time.monotonic() if now is None else now
        self.paused(now)
        self.first = self.first or now
        self.last = now

    def paused(self, now):
        """An event at `now`: the pause before it, if nothing was open meanwhile, tells
        how long this burst's writer may pause (see SETTLE_MAX)."""
        if self.last is not None:
            before, longest = self.last, SETTLE_MAX
        else:
            # The batch's first event: the burst before goes on only if it comes within
            # twice the pause that closed the last batch. A save made a second after the
            # last one is a new change, and waits SETTLE, not twice that second.
            before, longest = self.previous, 2 * max(self.learned, SETTLE)
        if before is not None and not self.held_open() and now - before <= longest:
            self.gap = max(self.gap, now - before)
            if self.last is None:  # the burst goes on: as patient as it was
                self.gap = max(self.gap, self.learned)

    def written(self, rel):
        """Written to and not closed yet: the batch waits for the close."""
        self.writing.add(rel)
        self.fresh.discard(rel)

    def carry(self, rel, due):
        """A file still written that the batch before left out (Growing.leave_out): this
        batch closes by `due` for its next version, whatever else it holds."""
        self.files.add(rel)
        self.written(rel)
        self.carried[rel] = due

    def carried_due(self, now):
        """Whether the next version of a carried file still written is due at `now`."""
        return any(due <= now for rel, due in self.carried.items() if rel in self.writing)

    def held_open(self):
        """The files still written that hold this batch open (not the carried ones)."""
        return self.writing.difference(self.carried) if self.carried else self.writing

    def opened_new(self, rel):
        """Created by a writer that holds it open: not committed until it writes or closes."""
        self.fresh.add(rel)

    def was_created(self, now=None):
        """A file was created: its creator's first write may come a moment later, so the
        batch stays open for SETTLE at least, whatever readfrequency says (even 0)."""
        self.created = time.monotonic() if now is None else now

    def closed(self, rel, now=None):
        """Closed by its writer, or gone (removed)."""
        self.writing.discard(rel)
        self.fresh.discard(rel)
        if self.carried.pop(rel, None) is not None:
            self.touch(rel, now=now)  # its last version, as soon as the folder is quiet

    def closed_under(self, folder):
        self.writing = {w for w in self.writing if not w.startswith(folder + "/")}
        self.fresh = {w for w in self.fresh if not w.startswith(folder + "/")}

    def forget_vanished(self, root):
        """Files moved out of the folder while open say nothing more: stop waiting for them."""
        if self.writing:
            self.writing = {w for w in self.writing if os.path.lexists(os.path.join(root, w))}
        if self.fresh:
            self.fresh = {w for w in self.fresh if os.path.lexists(os.path.join(root, w))}

    def rescan_when_closed(self, now=None, reason="start"):
        """Have the committer rescan when this batch closes: after the settle time, and
        only once every file open for writing in it is closed (a rescan takes a file
        as it is: empty, or half-written)."""
        self.rescan = reason
        now = time.monotonic() if now is None else now
        self.first = self.first or now
        self.last = now

    def rescan_all(self, now=None):
        """Events were lost: compare the whole folder, and have the committer rescan it,
        when this batch closes."""
        self.rescan = "overflow"
        self.writing.clear()  # what was open is found by the rescan
        self.fresh.clear()
        self.touch("", True, now)

    def move(self, src, dst, isdir, now=None):
        # A file renamed while open is closed under its new name; a file renamed over one
        # still open (an editor's save over a log a program appends to) is closed: the
        # name is the renamed file's now, whatever the old one's writer still does.
        for open_files in (self.writing, self.fresh):
            was_open = src in open_files
            open_files.discard(src)
            if was_open:
                open_files.add(dst)
            elif not isdir:
                open_files.discard(dst)
        if not isdir and dst in self.carried and src not in self.carried:
            del self.carried[dst]
        elif src in self.carried:
            self.carried[dst] = self.carried.pop(src)
        if isdir:
            prefix = src + "/"
            self.writing = {dst + w[len(src):] if w.startswith(prefix) else w
                            for w in self.writing}
            self.fresh = {dst + w[len(src):] if w.startswith(prefix) else w
                          for w in self.fresh}
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
        return min(SETTLE_MAX, max(SETTLE, (self.last - self.first) / 10, 2 * self.gap))

    def due(self, now, readfrequency, longest):
        """Seconds until this batch should close (0: now), or None if empty.

        It closes once no file in it is still open for writing and the folder
        was then quiet (readfrequency if set, else the settle time), or at
        `longest` (maxwait) after it opened, whatever is still open."""
        carried = [due for rel, due in self.carried.items() if rel in self.writing]
        if self.first is None:
            return max(0.0, min(carried) - now) if carried else None
        end = self.first + longest
        if not self.held_open():
            quiet_end = self.last + self.quiet(readfrequency)
            if self.created is not None:
                quiet_end = max(quiet_end, self.created + SETTLE)
            end = min(end, quiet_end)
        return max(0.0, min([end] + carried) - now)

    def gone_unknown(self, root, tree):
        """A file or folder touched in this batch that is gone now and that the tree never
        held. In a pull's batch: one the pull wrote and a local writer removed before the
        pull ended; the batch's changes cannot name that removal (created and removed
        nets to nothing here), only git can (HEAD has it): a rescan."""
        for rel in self.files:
            if not tree.has(rel) and not os.path.lexists(os.path.join(root, rel)):
                return True
        for folder in self.dirs:
            if folder and not os.path.lexists(os.path.join(root, folder)) and \
                    next(tree.files_under(folder), None) is None:
                return True
        return False

    def close(self, root, tree, ignore, leave=()):
        """The changes this batch amounts to; brings the tree up to date.

        `leave`: files left out (still being written: a later batch takes them)."""
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
        files.difference_update(leave)
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


class Growing:
    """Files still open for writing when their batch closed at maxwait.

    An empty one is left out: its creator has written nothing yet, and an
    empty version would reach every machine. One with content is sent (the
    committer asks the kernel whether it is still open, and keeps it until it
    is closed), and then waits twice as long as the last time (from maxwait, up to
    LONGEST_WAIT) before the next version; its close ends the wait at once
    (the batch closes then, and it is forgotten here)."""

    def __init__(self):
        self.files = {}  # rel -> (when it may be committed again, the wait after that)

    def leave_out(self, batch, root, maxwait, now):
        """(left, carried) of the batch's written, still open files: those that wait on
        (not committed by this batch), and {file: when its next version is due} of every
        one of them, for the next batch to carry (Batch.carry)."""
        self.files = {rel: v for rel, v in self.files.items() if rel in batch.writing}
        left, carried = set(), {}
        for rel in batch.writing:
            try:
                empty = os.lstat(os.path.join(root, rel)).st_size == 0
            except OSError:
                continue  # gone: the batch records that
            due, wait = self.files.get(rel, (now, maxwait))
            if empty:
                left.add(rel)
                carried[rel] = now + maxwait  # nothing to send yet: asked again then
            elif now < due:
                left.add(rel)
                carried[rel] = due
            else:
                wait = min(LONGEST_WAIT, 2 * wait)
                self.files[rel] = (now + wait, wait)
                carried[rel] = now + wait
        return left, carried
