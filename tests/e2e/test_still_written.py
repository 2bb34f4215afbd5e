"""End-to-end: a file still being written is never a version (issue 32, item 4)."""
import hashlib
import os
import subprocess
import time

import pytest

from base import git, wait_until
from helpers import Writer, settle, write


def history_of(remote, name):
    """Every content `name` had in the remote's history, oldest first."""
    revs = remote.log("--format=%H", "--reverse", "--", name).split()
    return [git("--git-dir", remote.path, "cat-file", "blob", "%s:%s" % (rev, name))
            for rev in revs]


def batches_closed(machine):
    return machine.logtext().count("batch closed (")


def test_a_file_written_since_before_the_start_gets_one_version_the_whole_one(
        machines, remote):
    """A writer opens a file before the daemon starts and writes on through every path that
    commits: the rescan at start, the watcher's batch at maxwait, a sync, the rescan after a
    pull, a resume. The writer is driven step by step (no clock): each step waits for the
    product to have done that commit. Only the closed file becomes a version."""
    a, b = machines("a", "b")
    a.stop()
    chunks = [b"chunk %d " % i * 1000 + b"\n" for i in range(7)]
    writer = Writer(os.path.join(a.path, "export.bin"))
    try:
        writer.write(chunks[0])
        write(a, "before.txt", b"written while stopped\n")
        a.start()  # the rescan at start
        wait_until(lambda: a.status().get("writing") == ["export.bin"], 30,
                   what="the open file left out at start")
        wait_until(lambda: git("ls-tree", "--name-only", "HEAD", cwd=a.path) ==
                   b"README\nbefore.txt\n", 30, what="the rest committed at start")
        assert "left out of the commit while open for writing" in a.logtext()

        closed = batches_closed(a)
        writer.write(chunks[1])  # the watcher's batch waits for the close, up to maxwait
        wait_until(lambda: batches_closed(a) > closed, 30, what="the batch at maxwait")

        writer.write(chunks[2])
        a.notify("sync")  # the sync's rescan
        writer.write(chunks[3])
        write(b, "from-b.txt", b"b\n")
        settle(b, remote)
        a.notify("pull")  # the rescan (or the paths sent) after a pull
        wait_until(lambda: a.read("from-b.txt") == b"b\n", 30, what="a to pull")
        writer.write(chunks[4])
        a.notify("pause")
        writer.write(chunks[5])
        a.notify("resume")  # the catch-up on resume
        a.notify("sync")
        assert a.status().get("writing") == ["export.bin"]
        assert history_of(remote, "export.bin") == []
        writer.write(chunks[6])
    finally:
        writer.close()
    settle(a, remote)
    assert history_of(remote, "export.bin") == [b"".join(chunks)]
    assert a.status().get("writing") == []


def blob_hashes(remote, name):
    """The SHA-256 of every content `name` had in the remote's history, oldest first."""
    revs = remote.log("--format=%H", "--reverse", "--", name).split()
    found = []
    for rev in revs:
        digest = hashlib.sha256()
        with subprocess.Popen(["git", "--git-dir", remote.path, "cat-file", "blob",
                               "%s:%s" % (rev, name)], stdout=subprocess.PIPE) as p:
            for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
                digest.update(chunk)
        found.append(digest.hexdigest())
    return found


@pytest.mark.slow
def test_the_issue_s_writers_as_it_gave_them(machines, remote):
    """Issue 32's two writers at its own sizes, at the shipped maxwait (10 s), not
    scaled down as the tests above: one opened before the daemon starts and writes for
    20 s; one writes 300 MB over 60 s. Each gets one version, the whole file, whatever
    the maxwaits, rescans and batches in between (`tests/run.sh -m slow`). The sleeps
    are the writers' pace, the workload itself; nothing waits on a guess."""
    a = machines("a", maxwait="10")
    settle(a, remote)
    a.stop()
    early = Writer(os.path.join(a.path, "export.bin"))
    written = hashlib.sha256()
    try:
        for i in range(41):
            chunk = os.urandom(64 * 1024)
            early.write(chunk)
            written.update(chunk)
            if i == 0:
                a.start()  # the start-up rescan finds it open
            time.sleep(0.5)
    finally:
        early.close()
    big = hashlib.sha256()
    with open(os.path.join(a.path, "video.bin"), "wb") as f:
        for _ in range(60):
            chunk = os.urandom(5 * 1000 * 1000)
            f.write(chunk)
            f.flush()
            big.update(chunk)
            time.sleep(1)
    settle(a, remote, timeout=180)
    assert blob_hashes(remote, "export.bin") == [written.hexdigest()]
    assert blob_hashes(remote, "video.bin") == [big.hexdigest()]
