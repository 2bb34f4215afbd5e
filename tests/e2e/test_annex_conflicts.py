"""End-to-end: a file changed on both machines in a folder with `largefiles`
(docs/examples/git-annex.autosync): whichever side git-annex's pull merges,
both versions of a small file and of a big one are kept, without markers."""
import os
import shutil
import time

import pytest

from base import git, wait_until
from helpers import annexed_pair

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")]

SIZE = 2 * 1000 * 1000


def contents(machine):
    """{content: [paths]} of every file in the folder."""
    found = {}
    for top, dirs, files in os.walk(machine.path):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = os.path.join(top, name)
            with open(path, "rb") as f:
                found.setdefault(f.read(), []).append(os.path.relpath(path, machine.path))
    return found


def test_a_file_changed_on_both_machines_keeps_both_versions_small_and_big(machines, remote):
    a, b = annexed_pair(machines, remote, rule="largerthan=1mb")
    base = os.urandom(SIZE)
    for rel, data in (("notes.txt", b"base\n"), ("video.bin", base)):
        with open(os.path.join(a.path, rel), "wb") as f:
            f.write(data)
    wait_until(lambda: b.read("video.bin") == base and b.read("notes.txt") == b"base\n" and
               a.settled(remote) and b.settled(remote), 60, what="the base on b")
    b.stop()
    mine, theirs = os.urandom(SIZE), os.urandom(SIZE)
    for rel, data in (("notes.txt", b"from a\n"), ("video.bin", theirs)):
        with open(os.path.join(a.path, rel), "wb") as f:
            f.write(data)
    wait_until(lambda: a.settled(remote), 60, what="a's edits pushed")
    # git's commit times are whole seconds: b's commit, made at its start, is the newer
    # once the clock is past the second of a's (else a tie, settled by commit id)
    stamp = int(git("log", "-1", "--format=%ct", cwd=a.path))
    wait_until(lambda: time.time() >= stamp + 1, 5, what="the second after a's commit")
    for rel, data in (("notes.txt", b"from b\n"), ("video.bin", mine)):
        with open(os.path.join(b.path, rel), "wb") as f:
            f.write(data)
    b.start()
    wait_until(lambda: b.settled(remote) and a.settled(remote) and
               sorted(contents(a)) == sorted(contents(b)), 120, what="both machines alike")
    # b's edits are the newer: at the paths; a's beside them, named as any conflict copy
    for m in (a, b):
        found = contents(m)
        assert m.read("notes.txt") == b"from b\n" and m.read("video.bin") == mine, m.name
        copies = {data: paths for data, paths in found.items() if data in (b"from a\n", theirs)}
        assert len(copies) == 2 and all(len(paths) == 1 for paths in copies.values())
        for data, stem in ((b"from a\n", "notes (conflict from "),
                           (theirs, "video (conflict from ")):
            assert copies[data][0].startswith(stem), (m.name, copies[data])
        assert not any(b"<<<<<<<" in data or b">>>>>>>" in data for data in found)
        assert not [p for paths in found.values() for p in paths if ".variant-" in p]
    # both copies are in the status, and the big one went to the annex like its original
    names = [paths[0] for data, paths in contents(a).items() if data in (b"from a\n", theirs)]
    wait_until(lambda: sorted(b.status().get("conflicts") or []) == sorted(names), 30,
               what="b's status to list both copies")
    files = remote.files()
    video_copy = next(n for n in names if n.startswith("video"))
    assert files[b"video.bin"].startswith(b"/annex/objects/")
    assert files[os.fsencode(video_copy)].startswith(b"/annex/objects/")
    assert files[b"notes.txt"] == b"from b\n"
    assert "merged, 2 conflicts" in b.logtext()
