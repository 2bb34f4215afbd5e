"""A pulled rename is applied as a rename (issue 32): a folder of 2,000 files moved on
one machine is never missing on the other, not for one poll; the commit records the
same blobs under the new names. Real daemons, the shipped settings."""
import os
import threading

import pytest

from base import git, wait_until
from helpers import settle, write

COUNT = 2000


class Watch(threading.Thread):
    """Polls every file of a move on the other machine, back to back (each poll about
    10 ms): the old name, then the new one; a file under neither is a violation."""

    def __init__(self, folder, pairs):
        super().__init__(daemon=True)
        self.pairs = [(os.path.join(folder, a), os.path.join(folder, b)) for a, b in pairs]
        self.missing, self.polls, self.stop = [], 0, False

    def run(self):
        while not self.stop:
            for old, new in self.pairs:
                if not (os.path.lexists(old) or os.path.lexists(new)):
                    self.missing.append(new)
            self.polls += 1

    def done(self):
        return all(os.path.lexists(new) and not os.path.lexists(old) for old, new in self.pairs)


@pytest.mark.e2e
def test_a_moved_folder_of_2000_files_is_never_missing_on_the_other_machine(machines, remote):
    a, b = machines("a", "b")
    names = ["sub%d/f%04d.txt" % (i % 4, i) for i in range(COUNT)]
    for name in names:
        write(a, os.path.join("Photos", name), b"photo %d\n" % names.index(name))
    settle(a, remote)
    b.notify("pull")
    settle(b, remote)
    pairs = [(os.path.join("Photos", n), os.path.join("Pictures", "2026", n)) for n in names]
    watch = Watch(b.path, pairs)
    watch.start()
    os.makedirs(os.path.join(a.path, "Pictures"))
    os.rename(os.path.join(a.path, "Photos"), os.path.join(a.path, "Pictures", "2026"))
    settle(a, remote)
    b.notify("pull")
    try:
        wait_until(watch.done, 60, what="the move on b")
    finally:
        watch.stop = True
        watch.join()
    assert watch.polls > 0 and watch.missing == []
    settle(b, remote)
    # One commit of exact renames: the same blobs under the new names.
    renames = git("diff-tree", "-r", "-z", "-M100%", "--raw", "main~1", "main", cwd=remote.path)
    fields = renames.split(b"\0")
    statuses = [f for f in fields if f.startswith(b":")]
    assert len(statuses) == COUNT
    assert all(s.split()[-1] == b"R100" and s.split()[2] == s.split()[3] for s in statuses)
    assert git("rev-parse", "HEAD", cwd=b.path) == git("rev-parse", "main", cwd=remote.path)


@pytest.mark.e2e
def test_a_move_there_and_an_edit_made_here_while_stopped_keep_both(machines, remote):
    """The edit is committed at start, then merged with the move: the edit follows the
    file to its new name (git's merge), the moved folder arrives whole."""
    a, b = machines("a", "b")
    write(a, "docs/plan.txt", b"plan\n")
    write(a, "single.txt", b"single\n")
    settle(a, remote)
    b.notify("pull")
    settle(b, remote)
    b.stop()
    write(b, "single.txt", b"single, edited on b\n")
    os.rename(os.path.join(a.path, "docs"), os.path.join(a.path, "papers"))
    os.rename(os.path.join(a.path, "single.txt"), os.path.join(a.path, "renamed.txt"))
    settle(a, remote)
    b.start()
    b.notify("sync")
    settle(b, remote)
    a.notify("pull")
    settle(a, remote)
    for m in (a, b):
        assert m.read("papers/plan.txt") == b"plan\n" and m.read("docs/plan.txt") is None
        assert m.read("renamed.txt") == b"single, edited on b\n"
