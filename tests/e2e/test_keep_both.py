"""End-to-end: two real clients change the same files while apart; both versions survive."""
import os
import time

import pytest


from autosync.vcs.pull import finish as conflicts
from base import git, tree
from helpers import settle, write
from helpers import committed, copies, cut_off, every_kind_kept, never_mid_merge_nor_markers
from helpers import reconnect, share, sync_both



def test_every_kind_of_conflict_keeps_both_versions(machines, remote, commands):
    a, b = machines("a", "b", dvcs=commands)
    for name in ("notes.txt", "gone-on-a.txt", "gone-on-b.txt"):
        write(a, name, b"base of %s\n" % name.encode())
    write(a, "pic.bin", b"\x89PNG\0base\xff")
    # A rename that meets another file (issue 41 item 5): a renames d0/f2.txt onto
    # d1/f3.txt, which b made; both change its fifth line. git's stage is then its
    # own merge with markers, which the daemon once committed.
    lines = [b"line %d\n" % n for n in range(1, 11)]
    write(a, "d0/f2.txt", b"".join(lines))
    share(a, b, remote)
    url = cut_off(b)
    # b, apart: its versions are committed first, so they are the older ones.
    write(b, "notes.txt", b"b's notes\n")
    write(b, "gone-on-a.txt", b"b changed this\n")
    os.unlink(os.path.join(b.path, "gone-on-b.txt"))
    write(b, "new.txt", b"b made this\n")
    write(b, "pic.bin", b"\x89PNG\0from b\xfe")
    b_f2 = b"".join(lines[:4] + [b"five from b\n"] + lines[5:])
    write(b, "d0/f2.txt", b_f2)
    write(b, "d1/f3.txt", b"b made f3\n")
    committed(b)
    time.sleep(1.1)  # commit times have one-second resolution
    write(a, "notes.txt", b"a's notes\n")
    os.unlink(os.path.join(a.path, "gone-on-a.txt"))
    write(a, "gone-on-b.txt", b"a changed this\n")
    write(a, "new.txt", b"a made this\n")
    write(a, "pic.bin", b"\x89PNG\0from a\xfd")
    os.makedirs(os.path.join(a.path, "d1"))
    os.rename(os.path.join(a.path, "d0", "f2.txt"), os.path.join(a.path, "d1", "f3.txt"))
    a_f3 = b"".join(lines[:4] + [b"five from a\n"] + lines[5:])
    write(a, "d1/f3.txt", a_f3)
    settle(a, remote)
    reconnect(b, url)
    sync_both(a, b, remote)

    files = tree(a)
    assert tree(b) == files
    every_kind_kept(files)
    assert files["d1/f3.txt"] == a_f3  # a's is the newest; b's two versions beside it
    assert sorted(c for p, c in files.items() if p.startswith("d1/f3 (conflict from ")) == \
        sorted([b"b made f3\n", b_f2])
    assert len(files) == 12  # README + 6 files + 5 copies, nothing else
    assert remote.files() == {k.encode(): v for k, v in files.items()}
    never_mid_merge_nor_markers(remote, a, b)

    # Told once per conflict: status, event log line, and the merge commit says it.
    status = b.status()
    assert sorted(status["conflicts"]) == sorted(
        p for p in files if "(conflict from" in p)
    assert b.logtext().count("conflict in notes.txt") == 1
    assert "5 conflicts" in remote.log("--format=%s")
    # a only fast-forwarded to b's merge: told all the same, from the merge's message.
    assert sorted(a.status()["conflicts"]) == sorted(status["conflicts"])
    assert a.logtext().count("conflict in notes.txt (merged on") == 1


def test_merging_side_keeps_its_newer_version(machines, remote, commands):
    a, b = machines("a", "b", dvcs=commands)
    write(a, "doc/plan.md", b"v1\n")
    share(a, b, remote)
    url = cut_off(b)
    write(a, "doc/plan.md", b"a's plan\n")
    settle(a, remote)
    time.sleep(1.1)
    write(b, "doc/plan.md", b"b's plan\n")
    committed(b)
    reconnect(b, url)
    sync_both(a, b, remote)
    files = tree(a)
    assert tree(b) == files
    assert files["doc/plan.md"] == b"b's plan\n"
    found = {p: c for p, c in files.items() if p.startswith("doc/plan (conflict from ")}
    assert list(found.values()) == [b"a's plan\n"] and list(found)[0].endswith(").md")
    never_mid_merge_nor_markers(remote, a, b)
    # Syncing goes on afterwards.
    write(a, "after.txt", b"after\n")
    share(a, b, remote)
    assert tree(b)["after.txt"] == b"after\n"


def test_both_sides_pick_the_same_winner(tmp_path, remote):
    """The winner depends on the commits only, not on which machine merges."""
    from autosync.vcs.pull import finish as conflicts
    clones = []
    for name, text in (("x", b"from x\n"), ("y", b"from y\n")):
        path = str(tmp_path / name)
        git("clone", "-q", remote.path, path)
        with open(os.path.join(path, "f.txt"), "wb") as f:
            f.write(text)
        git("add", "f.txt", cwd=path)
        git("commit", "-q", "-m", "autosync on %s: 1 added" % name, cwd=path)
        clones.append(path)
    x, y = clones
    git("fetch", "-q", y, "HEAD:other", cwd=x)
    git("fetch", "-q", x, "HEAD:other", cwd=y)
    results = []
    for path in (x, y):
        git("merge", "-q", "--no-edit", "other", cwd=path, check=False)
        made = conflicts.resolve(path)
        with open(os.path.join(path, "f.txt"), "rb") as f:
            results.append((f.read(), made[0]["host"]))
        assert not git("diff", "--cached", "--name-only", "--diff-filter=U", cwd=path)
    assert results[0] == results[1]  # same content at the path, same host in the copy name


def test_a_repository_without_a_commit_has_no_killed_pull_to_undo(tmp_path):
    """Before the first commit there is no HEAD to compare with: nothing to put back, and
    no `git diff HEAD` error at every start."""
    folder = str(tmp_path / "fresh")
    git("init", "-q", folder)
    with open(os.path.join(folder, "f.txt"), "w") as f:
        f.write(">>>>>>> " + "a" * 40 + "\n")
    assert conflicts.undo_killed_pull(folder) == []


@pytest.mark.parametrize("settings", [
    {"syncmethod": "ssh"},  # its link watches a remote on a local path, without ssh
    {"pullinterval": "300"},  # syncmethod = none, pulled every 300 s (and at start)
], ids=["ssh", "pullinterval"])
def test_an_older_edit_made_while_stopped_goes_beside_the_newer_pulled_one(machines, remote,
                                                                          settings):
    # The daemon pulls at start before it commits what changed while it was stopped.
    a, b = machines("a", "b", **settings)
    write(a, "notes.txt", b"base\n")
    share(a, b, remote)
    b.stop()
    write(b, "notes.txt", b"b's edit, made while b was stopped\n")
    before = time.time() - 30  # half a minute before a's edit
    os.utime(os.path.join(b.path, "notes.txt"), (before, before))
    write(a, "notes.txt", b"a's edit, made later\n")
    settle(a, remote)
    b.start()
    settle(b, remote)
    a.notify("pull")
    settle(a, remote)
    files = tree(b)
    assert tree(a) == files
    assert files["notes.txt"] == b"a's edit, made later\n"  # the newer at its place
    assert list(copies(files, "notes", ".txt").values()) == \
        [b"b's edit, made while b was stopped\n"]
    log = b.logtext()
    assert "conflict in notes.txt: changed here before this pull and not committed (made " \
        "while the daemon was stopped or paused)" in log
    assert "while the pull ran" not in log
