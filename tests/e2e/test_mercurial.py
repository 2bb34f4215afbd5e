"""End-to-end: two Mercurial clones of one central repository, kept in sync by
the real suite with docs/examples/mercurial.autosync's commands. The central
repository's changegroup hook tells the daemons that a push arrived. The
example's pullcmd runs autosync-hgmerge (bin/ is put first on PATH), so two
machines changing the same file while apart keep both versions, as with git."""
import os
import shutil
import subprocess
import time

import pytest

from base import wait_until
from helpers import committed, every_kind_kept, share, sync_both
from helpers import HgMachine, dvcs_autosync, notify_hook
from base import hg

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")]


def test_two_mercurial_clones_stay_in_sync(tmp_path, central):
    a, b = HgMachine(tmp_path, "a", central), HgMachine(tmp_path, "b", central)
    notify_hook(central, (a, b))
    try:
        a.start(), b.start()

        def write(m, rel, data):
            os.makedirs(os.path.dirname(os.path.join(m.path, rel)), exist_ok=True)
            with open(os.path.join(m.path, rel), "wb") as f:
                f.write(data)

        write(a, "notes/todo.txt", b"buy milk\n")
        photo = os.urandom(4096)
        write(a, "photo.jpg", photo)
        in_sync(central, a, b, "a's new files to reach b")
        assert b.files()["notes/todo.txt"] == b"buy milk\n"

        # An edit and a removal on b (hg tracks the edit itself: modifycmd is empty).
        write(b, "notes/todo.txt", b"buy milk\nand bread\n")
        os.unlink(os.path.join(b.path, "photo.jpg"))
        in_sync(central, a, b, "b's edit and removal to reach a")
        assert a.files() == {"README": b"synced folder\n", "notes/todo.txt": b"buy milk\nand bread\n"}

        os.rename(os.path.join(a.path, "notes"), os.path.join(a.path, "lists"))
        in_sync(central, a, b, "a's move to reach b")
        assert b.files()["lists/todo.txt"] == b"buy milk\nand bread\n"
        assert not os.path.exists(os.path.join(b.path, "notes"))
        assert hg("files", "-r", "tip", cwd=central).split() == ["README", "lists/todo.txt"]
        # Recorded as a rename, so the file's history goes on under its new name.
        assert "lists/todo.txt (notes/todo.txt)" in hg(
            "log", "-r", "tip", "--template", "{file_copies}", cwd=central)
        assert "moved: lists/todo.txt (from notes/todo.txt)" in hg(
            "log", "-r", "tip", "--template", "{desc}", cwd=central)

        # The example's logcmd and restorecmd: a removed file comes back and syncs.
        log = dvcs_autosync("log", os.path.join(a.path, "photo.jpg"), "--config", a.config)
        assert [line.split()[4:] for line in log.splitlines()] == [["removed"], ["added"]]
        dvcs_autosync("restore", os.path.join(a.path, "photo.jpg"), "--config", a.config)
        in_sync(central, a, b, "the restored photo to reach b")
        assert b.files()["photo.jpg"] == photo

        # A name hg refuses is held back and said; a name hg would read as a pattern,
        # made with it, is committed as itself and reaches b.
        write(a, "new\nline", b"hg refuses this name\n")
        write(a, "glob:*", b"a file, not a pattern\n")
        wait_until(lambda: b.files().get("glob:*") == b"a file, not a pattern\n"
                   and a.status().get("held_back") == ["new\nline"], 40, 0.1,
                   "glob:* to reach b, and a to hold back the name hg refuses")
        assert "new\nline" not in b.files()
        assert sorted(hg("files", "-r", "tip", cwd=central).split()) == [
            "README", "glob:*", "lists/todo.txt", "photo.jpg"]
        assert "Mercurial cannot record a name" in a.status()["last_error"]
    finally:
        a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()


# --- both versions kept: the Mercurial example's pullcmd and autosync-hgmerge ---------------

def write(m, rel, data):
    full = os.path.join(m.path, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)


def in_sync(central, a, b, what):
    """Both machines idle with the central repository, holding the same files."""
    wait_until(lambda: a.settled(central) and b.settled(central)
               and a.files() == b.files(), 40, 0.1, what)


def settle(central, *machines):
    wait_until(lambda: all(m.settled(central) for m in machines), 40, 0.1,
               " and ".join(m.name for m in machines) + " to settle")


def no_markers_in_history(central):
    history = hg("log", "-p", "--git", cwd=central)
    assert "<<<<<<<" not in history and ">>>>>>>" not in history


@pytest.fixture
def pair(tmp_path, central):
    a, b = HgMachine(tmp_path, "a", central), HgMachine(tmp_path, "b", central)
    notify_hook(central, (a, b))
    yield a.start(), b.start()
    a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()


@pytest.mark.slow  # 70 CPU s of Mercurial: the rule is in test_hgmerge's real-hg test of the same name
def test_mercurial_every_kind_of_conflict_keeps_both_versions(central, pair):
    a, b = pair
    for name in ("notes.txt", "gone-on-a.txt", "gone-on-b.txt"):
        write(a, name, b"base of %s\n" % name.encode())
    write(a, "pic.bin", b"\x89PNG\0base\xff")
    write(a, "merged.txt", b"one\ntwo\nthree\nfour\nfive\n")
    share(a, b, central)
    b.cut_off()
    # b, apart: its versions are committed first, so they are the older ones.
    write(b, "notes.txt", b"b's notes\n")
    write(b, "gone-on-a.txt", b"b changed this\n")
    os.unlink(os.path.join(b.path, "gone-on-b.txt"))
    write(b, "new.txt", b"b made this\n")
    write(b, "pic.bin", b"\x89PNG\0from b\xfe")
    write(b, "merged.txt", b"one\ntwo\nthree\nfour\nfive by b\n")
    committed(b)
    time.sleep(1.1)  # commit dates have one-second resolution
    write(a, "notes.txt", b"a's notes\n")
    os.unlink(os.path.join(a.path, "gone-on-a.txt"))
    write(a, "gone-on-b.txt", b"a changed this\n")
    write(a, "new.txt", b"a made this\n")
    write(a, "pic.bin", b"\x89PNG\0from a\xfd")
    write(a, "merged.txt", b"one by a\ntwo\nthree\nfour\nfive\n")
    settle(central, a)
    b.reconnect()
    sync_both(a, b, central)

    files = a.files()
    assert b.files() == files
    every_kind_kept(files)
    # Changes in different places of a text file are merged, as git does: no copy.
    assert files["merged.txt"] == b"one by a\ntwo\nthree\nfour\nfive by b\n"
    assert len(files) == 10  # README + 6 files + 3 copies: no .orig, nothing else
    tip = {f: subprocess.run(["hg", "cat", "-r", "tip", "path:" + f], cwd=central, check=True,
                             stdout=subprocess.PIPE).stdout
           for f in hg("files", "-r", "tip", cwd=central).splitlines()}
    assert tip == files
    for m in (a, b):
        m.never_mid_merge()
        assert m.head() == b.head()
    assert hg("heads", "-T", "x", cwd=central) == "x"
    no_markers_in_history(central)
    # Said once, in the merge commit: one line per copy.
    merges = hg("log", "-r", "merge()", "-T", "{desc}\\0", cwd=central).strip("\0").split("\0")
    assert len(merges) == 1
    assert merges[0].startswith("autosync on %s: merged, 3 conflicts" % socket_host())
    assert sorted(merges[0].splitlines()[2:]) == sorted(
        "conflict: %s (other version kept as %s)" % (p.split(" (")[0] + os.path.splitext(p)[1], p)
        for p in files if "(conflict from" in p)

    # Syncing goes on afterwards.
    write(b, "after.txt", b"after\n")
    share(b, a, central)
    assert a.files()["after.txt"] == b"after\n"


def socket_host():
    import socket
    return socket.gethostname()


@pytest.mark.slow  # 35 s of Mercurial's CPU: the rule is in test_hgmerge's real-hg tests
def test_mercurial_merging_side_keeps_its_newer_version(central, pair):
    a, b = pair
    write(a, "doc/plan.md", b"v1\n")
    share(a, b, central)
    b.cut_off()
    write(a, "doc/plan.md", b"a's plan\n")
    settle(central, a)
    time.sleep(1.1)
    write(b, "doc/plan.md", b"b's plan\n")
    committed(b)
    b.reconnect()
    sync_both(a, b, central)
    files = a.files()
    assert b.files() == files
    assert files["doc/plan.md"] == b"b's plan\n"
    found = {p: c for p, c in files.items() if p.startswith("doc/plan (conflict from ")}
    assert list(found.values()) == [b"a's plan\n"] and list(found)[0].endswith(").md")
    for m in (a, b):
        m.never_mid_merge()
    no_markers_in_history(central)


def test_the_mercurial_example_restores_a_removed_folder(tmp_path, central):
    a, b = HgMachine(tmp_path, "a", central), HgMachine(tmp_path, "b", central)
    notify_hook(central, (a, b))
    try:
        a.start(), b.start()

        notes = os.path.join(a.path, "notes")
        os.makedirs(os.path.join(notes, "old"))
        for rel, data in (("todo.txt", b"buy milk\n"), ("old/list.txt", b"bread\n"),
                          ("run.sh", b"#!/bin/sh\n")):
            with open(os.path.join(notes, rel), "wb") as f:
                f.write(data)
        os.chmod(os.path.join(notes, "run.sh"), 0o755)
        os.symlink("todo.txt", os.path.join(notes, "latest"))
        in_sync(central, a, b, "a's notes to reach b")
        wanted = a.files()
        shutil.rmtree(notes)
        in_sync(central, a, b, "the removal to reach b")
        assert "notes/todo.txt" not in b.files()
        commits = len(hg("log", "-T", "x\n", cwd=central).split())

        out = dvcs_autosync("restore", notes, "--config", a.config)
        assert out.splitlines()[:4] == ["brought back notes/%s" % n for n in
                                        ("latest", "old/list.txt", "run.sh", "todo.txt")]
        in_sync(central, a, b, "the restored folder to reach b")
        assert a.files() == b.files() == wanted
        assert os.readlink(os.path.join(b.path, "notes", "latest")) == "todo.txt"
        assert os.stat(os.path.join(b.path, "notes", "run.sh")).st_mode & 0o111
        assert len(hg("log", "-T", "x\n", cwd=central).split()) == commits + 1
        assert "restore of notes as it was at " in hg("log", "-r", "tip", "--template", "{desc}",
                                                       cwd=central)
    finally:
        a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()


def test_the_mercurial_example_describes_the_last_commit_until_it_is_pushed(tmp_path, central):
    a = HgMachine(tmp_path, "a", central)
    a.settings["pushdelay"] = "60"  # time to describe it before it goes
    a.write_config()
    try:
        a.start()
        write(a, "tax.txt", b"2025\n")
        write(a, "draft.txt", b"not yet\n")
        wait_until(lambda: "2 added" in hg("log", "-r", ".", "-T", "{desc}", cwd=a.path), 20,
                   what="the commit")
        out = a.notify("describe", "Tax forms").stdout.strip()
        assert out == "described the last commit (not pushed yet)"
        desc = hg("log", "-r", ".", "-T", "{desc}", cwd=a.path)
        assert desc.startswith("Tax forms (autosync on ") and "added: tax.txt" in desc
        assert hg("status", "--change", ".", cwd=a.path).split() == [
            "A", "draft.txt", "A", "tax.txt"]
        assert "Tax forms" not in hg("log", "-T", "{desc}\n", cwd=central)
        a.notify("sync")
        assert "Tax forms (autosync on " in hg("log", "-T", "{desc}\n", cwd=central)
        assert a.notify("describe", "Later").stdout.strip() == \
            "the text goes at the top of the next commit"
    finally:
        a.stop()
    assert "Traceback" not in a.logtext()
