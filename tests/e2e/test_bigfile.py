"""End-to-end: a big file travels between two real machines stored as it is (issue 32:
git_environment's core.bigFileThreshold, pack.compression and unpackLimit settings)."""
import hashlib
import os

from base import git, wait_until
from helpers import settle, write


def stores(git_dir):
    """(loose objects, {pack: bytes}) of a git directory's object store."""
    objects = os.path.join(git_dir, "objects")
    loose = [n for n in os.listdir(objects) if len(n) == 2]
    packs = {n: os.path.getsize(os.path.join(objects, "pack", n))
             for n in os.listdir(os.path.join(objects, "pack")) if n.endswith(".pack")}
    return loose, packs


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_big_file_reaches_the_other_machine_stored_as_it_is(machines, remote):
    for key, value in (("core.bigFileThreshold", "16m"), ("receive.unpackLimit", "1")):
        git("--git-dir", str(remote.path), "config", key, value)  # as the README asks
    a, b = machines("a", "b")
    big = os.urandom(20 << 20)  # over core.bigFileThreshold (16 MB)
    blob_packs = {}
    for m in (a, b):
        blob_packs[m.name] = set(stores(os.path.join(m.path, ".git"))[1])
    blob_packs["remote"] = set(stores(str(remote.path))[1])
    write(a, "video.bin", big)
    settle(a, remote)
    b.notify("pull")
    wait_until(lambda: os.path.exists(os.path.join(b.path, "video.bin"))
               and os.path.getsize(os.path.join(b.path, "video.bin")) == len(big)
               and digest(os.path.join(b.path, "video.bin")) == hashlib.sha256(big).hexdigest(),
               60, what="the big file on b")
    # On A (added), on the remote (received) and on B (pulled), the file sits in a new
    # pack about its own size: never deflated, never unpacked into a loose object.
    for where, git_dir in (("a", os.path.join(a.path, ".git")), ("remote", str(remote.path)),
                           ("b", os.path.join(b.path, ".git"))):
        _, packs = stores(git_dir)
        new = [size for name, size in packs.items() if name not in blob_packs[where]]
        assert any(len(big) <= size < len(big) * 1.01 for size in new), (where, new)
