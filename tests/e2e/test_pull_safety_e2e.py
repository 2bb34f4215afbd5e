"""End-to-end, real daemons: what the guarded pull refuses or cannot write is named in
status and never becomes this machine's change (issue 31)."""
import os

import pytest

from base import git, wait_until
from helpers import settle, write
from repos import plant, small_tmpfs


def attacker(tmp_path, remote):
    """A plain clone of the remote, as someone who can push has."""
    path = str(tmp_path / "evil")
    git("clone", "-q", remote.path, path)
    return path


def failing(machine, name):
    return (machine.status().get("failing") or {}).get(name)


@pytest.mark.e2e
def test_a_planted_hook_is_named_in_status_and_nothing_of_it_runs(machines, remote, tmp_path):
    b = machines("b")
    evil = attacker(tmp_path, remote)
    proof = tmp_path / "ran"
    hook = b"#!/bin/sh\ntouch %s\n" % os.fsencode(str(proof))
    plant(evil, [("100755", ".git/hooks/post-merge", hook),
                 ("100755", ".git/hooks/post-commit", hook)])
    before = git("rev-parse", "HEAD", cwd=b.path)
    b.notify("pull", check=False)
    wait_until(lambda: failing(b, "unsafe"), 30, what="the refusal in status")
    text = b.notify("status").stdout
    assert "NOT syncing" in text and "refuses to check out" in text, text
    assert git("rev-parse", "HEAD", cwd=b.path) == before
    write(b, "mine.txt", b"b's own work\n")   # b still commits its own work
    wait_until(lambda: b"mine.txt" in git("ls-tree", "--name-only", "HEAD", cwd=b.path), 30,
               what="b's commit")
    assert not proof.exists()
    assert not os.path.exists(os.path.join(b.path, ".git", "hooks", "post-merge"))
    # Taken out upstream (a commit that removes the path), the pulls go on.
    base = git("rev-parse", "HEAD~1^{tree}", cwd=evil).decode().strip()
    rev = git("commit-tree", base, "-p", "HEAD", "-m", "planted path removed", cwd=evil
              ).decode().strip()
    git("push", "-q", "origin", rev + ":main", cwd=evil)
    b.notify("pull", check=False)
    wait_until(lambda: not failing(b, "unsafe"), 30, what="the problem to clear")
    settle(b, remote)
    assert not proof.exists()


@pytest.fixture
def small_disk(tmp_path):
    yield from small_tmpfs(tmp_path, "8m")


@pytest.mark.e2e
def test_a_full_disk_during_a_pull_pushes_no_reversion_and_both_converge(
        machines, remote, small_disk, tmp_path):
    a = machines("a")
    b = machines("b", start=False)
    # b's folder on the small disk, its .git on the ordinary one.
    b.path = str(small_disk / "b")
    git("clone", "-q", "--separate-git-dir", str(tmp_path / "b.git"), remote.path, b.path)
    b.settings["path"] = b.path
    b.write_config()
    b.start()
    write(a, "notes.txt", b"first\n")
    write(a, "old.txt", b"to be removed\n")
    settle(a, remote)
    b.notify("pull")
    settle(b, remote)
    free = os.statvfs(b.path).f_bavail * os.statvfs(b.path).f_frsize
    filler = small_disk / "filler"   # outside b's folder, on the same disk
    with open(filler, "wb") as f:
        f.write(b"\0" * (free - (1 << 20)))
    write(a, "notes.txt", b"edited on a\n")
    os.unlink(os.path.join(a.path, "old.txt"))
    write(a, "video.bin", os.urandom(3 << 20))   # will not fit on b
    settle(a, remote)
    tip = git("rev-parse", "HEAD", cwd=a.path)
    b.notify("pull", check=False)
    wait_until(lambda: failing(b, "unwritten"), 30, what="the full disk in status")
    text = b.notify("status").stdout
    assert "NOT syncing" in text and "No space left on device" in text, text
    write(b, "b.txt", b"b writes meanwhile\n")   # b's own commits go on, alone
    wait_until(lambda: b"b.txt" in git("ls-tree", "--name-only", "HEAD", cwd=b.path), 30,
               what="b's own commit")
    mine = git("rev-list", "HEAD", "--not", tip.decode().strip(), cwd=b.path).decode().split()
    assert mine   # b's commit of b.txt, made while the pull could not be written
    for rev in mine:
        message = git("log", "-1", "--format=%B", rev, cwd=b.path).decode()
        assert "notes.txt" not in message and "old.txt" not in message, message
    assert git("rev-parse", "main", cwd=remote.path) == tip  # nothing of b's pushed over it
    os.unlink(filler)
    b.notify("pull", check=False)   # (it is tried again by itself, with backoff)
    wait_until(lambda: not failing(b, "unwritten"), 60, what="the pull once space is free")
    settle(b, remote)
    a.notify("pull")
    settle(a, remote)
    for m in (a, b):
        assert m.read("notes.txt") == b"edited on a\n" and m.read("old.txt") is None
        assert len(m.read("video.bin")) == 3 << 20 and m.read("b.txt") == b"b writes meanwhile\n"


@pytest.mark.e2e
def test_a_pulled_submodule_survives_the_suite_s_next_commits(machines, remote, tmp_path):
    b = machines("b")
    evil = attacker(tmp_path, remote)   # (an ordinary user's push: a gitlink)
    sub = git("rev-parse", "HEAD", cwd=evil).decode().strip()
    plant(evil, [("160000", "nested", sub)])
    b.notify("pull")
    settle(b, remote)
    write(b, "after.txt", b"a commit after the pull\n")
    settle(b, remote)
    b.notify("sync")   # the rescan too
    settle(b, remote)
    assert git("ls-tree", "main", "nested", cwd=remote.path).split()[:3] == \
        [b"160000", b"commit", sub.encode()]


@pytest.mark.e2e
def test_rules_pulled_with_their_files_are_not_applied_twice(machines, remote, tmp_path):
    """One push brings a .gitattributes and the files it filters (a clean/smudge pair
    standing in for git-crypt, and eol=crlf): b's daemon writes them by the new rules
    and commits nothing of its own over them, where it wrote the stored bytes and then
    pushed them encrypted twice."""
    b = machines("b")
    plain = attacker(tmp_path, remote)
    for folder in (plain, b.path):
        git("config", "filter.crypt.clean", "sed 's/^/ENC:/'", cwd=folder)
        git("config", "filter.crypt.smudge", "sed 's/^ENC://'", cwd=folder)
    for rel, text in ((".gitattributes", b"secrets.env filter=crypt\n*.crlf text eol=crlf\n"),
                      ("secrets.env", b"KEY=1\n"), ("notes.crlf", b"one\ntwo\n")):
        with open(os.path.join(plain, rel), "wb") as f:
            f.write(text)
    git("add", "-A", cwd=plain)
    git("commit", "-q", "-m", "rules and their files", cwd=plain)
    git("push", "-q", cwd=plain)
    stored = remote.files()
    b.notify("pull")
    settle(b, remote)
    assert b.read("secrets.env") == b"KEY=1\n" and b.read("notes.crlf") == b"one\r\ntwo\r\n"
    assert remote.files() == stored and stored[b"secrets.env"] == b"ENC:KEY=1\n"
