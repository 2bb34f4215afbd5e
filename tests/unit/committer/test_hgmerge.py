"""hgmerge.py (autosync-hgmerge): the Mercurial example's merge that keeps both
versions, run by hand on real Mercurial clones of one central repository."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import tree
from conftest import hg

pytestmark = pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")


def hgmerge(path, *args):
    return subprocess.run([sys.executable, "-m", "autosync.committer.hgmerge"] + list(args), cwd=path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_mercurial_both_sides_pick_the_same_winner(tmp_path, central):
    """The winner depends on the changesets only, not on which machine merges; what is
    printed is read back by hgmerge.reported, one entry per conflict copy."""
    from autosync.committer import hgmerge as module
    clones = []
    for name, text in (("x", b"from x\n"), ("y", b"from y\n")):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        with open(os.path.join(path, "f.txt"), "wb") as f:
            f.write(text)
        hg("add", "-q", "f.txt", cwd=path)
        hg("commit", "-q", "-m", "autosync on %s: 1 added" % name, cwd=path)
        clones.append(path)
    x, y = clones
    hg("pull", "-q", y, cwd=x)
    hg("pull", "-q", x, cwd=y)
    results = []
    for path in (x, y):
        done = hgmerge(path, "--host", "merger")
        assert done.returncode == 0, done.stderr
        made = module.reported(done.stdout)
        assert len(made) == 1 and made[0]["path"] == "f.txt"
        assert "conflict in f.txt" in done.stderr
        with open(os.path.join(path, "f.txt"), "rb") as f:
            results.append((f.read(), made[0]["host"]))
        assert hg("resolve", "-l", cwd=path) == "" and hg("status", cwd=path) == ""
        assert hg("log", "-r", ".", "-T", "{desc|firstline}", cwd=path) == \
            "autosync on merger: merged, 1 conflicts"
    assert results[0] == results[1]  # same content at the path, same host in the copy name
    # Nothing more to do: a second run changes nothing and prints nothing.
    again = hgmerge(x)
    assert again.returncode == 0 and again.stdout == ""


def test_mercurial_half_done_merge_is_finished(tmp_path, central):
    """A merge left with unresolved files (a crash) is finished by the next run."""
    clones = []
    for name in ("x", "y"):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        with open(os.path.join(path, "README"), "w") as f:
            f.write("changed on %s\n" % name)
        hg("commit", "-q", "-m", "autosync on %s: 1 modified" % name, cwd=path)
        clones.append(path)
    x, y = clones
    hg("pull", "-q", y, cwd=x)
    from autosync.committer.hgmerge import MERGE
    merge = subprocess.run(("hg",) + MERGE, cwd=x,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert merge.returncode == 1  # unresolved: markers in README
    done = hgmerge(x)
    assert done.returncode == 0, done.stderr
    x_files = {p: c for p, c in tree(type("M", (), {"path": x})).items()}
    assert len(x_files) == 2 and all(b"<<<<<<<" not in c for c in x_files.values())
    assert hg("log", "-r", "p2()", "-T", "x", cwd=x) == "" and hg("resolve", "-l", cwd=x) == ""


def test_mercurial_update_refuses_to_merge_uncommitted_changes(tmp_path, central):
    """Behind the head with a local edit of a file the pull changed: no markers, exit 1
    (the daemon then commits the edit and pulls again, which merges)."""
    x, y = str(tmp_path / "x"), str(tmp_path / "y")
    hg("clone", "-q", central, x)
    hg("clone", "-q", central, y)
    with open(os.path.join(y, "README"), "w") as f:
        f.write("from y\n")
    hg("commit", "-q", "-m", "autosync on y: 1 modified", cwd=y)
    hg("push", "-q", cwd=y)
    with open(os.path.join(x, "README"), "w") as f:
        f.write("from x, not committed\n")
    hg("pull", "-q", cwd=x)
    assert hgmerge(x).returncode == 1
    with open(os.path.join(x, "README")) as f:
        assert f.read() == "from x, not committed\n"
    hg("commit", "-q", "-m", "autosync on x: 1 modified", cwd=x)
    done = hgmerge(x, "--host", "x")
    assert done.returncode == 0, done.stderr
    assert len(hgmerge_reported(done.stdout)) == 1


def hgmerge_reported(output):
    from autosync.committer.hgmerge import reported
    return reported(output)


def test_mercurial_every_kind_of_conflict_keeps_both_versions(tmp_path, central):
    """Both sides changed while apart, in every way (edited on both, edited on one and
    removed on the other, added on both, a binary, a text changed in different places):
    the newer side's version stays at the path, the other beside it, a mergeable text is
    merged, and the merge is one commit that names each copy. (The daemons' part, pull
    then autosync-hgmerge, is tests/e2e/test_mercurial.py's.)"""
    import re
    import socket
    import time
    from helpers import every_kind_kept
    host = socket.gethostname()
    base = str(tmp_path / "base")
    hg("clone", "-q", central, base)
    start = {"notes.txt": b"base of notes\n", "gone-on-a.txt": b"base of gone-on-a\n",
             "gone-on-b.txt": b"base of gone-on-b\n", "pic.bin": b"\x89PNG\0base\xff",
             "merged.txt": b"one\ntwo\nthree\nfour\nfive\n"}
    for name, data in start.items():
        with open(os.path.join(base, name), "wb") as f:
            f.write(data)
    hg("add", "-q", cwd=base)
    hg("commit", "-q", "-m", "autosync on %s: 5 added" % host, cwd=base)
    hg("push", "-q", cwd=base)

    def side(name, edits, removed):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        for rel, data in edits.items():
            with open(os.path.join(path, rel), "wb") as f:
                f.write(data)
        os.unlink(os.path.join(path, removed))
        hg("addremove", "-q", cwd=path)
        hg("commit", "-q", "-m", "autosync on %s: changed" % host, cwd=path)
        return path

    # b's commit first, so that it is the older one.
    b = side("b", {"notes.txt": b"b's notes\n", "gone-on-a.txt": b"b changed this\n",
                   "new.txt": b"b made this\n", "pic.bin": b"\x89PNG\0from b\xfe",
                   "merged.txt": b"one\ntwo\nthree\nfour\nfive by b\n"}, "gone-on-b.txt")
    time.sleep(1.1)  # commit dates have one-second resolution
    a = side("a", {"notes.txt": b"a's notes\n", "gone-on-b.txt": b"a changed this\n",
                   "new.txt": b"a made this\n", "pic.bin": b"\x89PNG\0from a\xfd",
                   "merged.txt": b"one by a\ntwo\nthree\nfour\nfive\n"}, "gone-on-a.txt")
    hg("pull", "-q", b, cwd=a)
    done = hgmerge(a, "--host", host)
    assert done.returncode == 0, done.stderr
    files = tree(type("M", (), {"path": a}))
    every_kind_kept(files)
    assert files["merged.txt"] == b"one by a\ntwo\nthree\nfour\nfive by b\n"
    assert len(files) == 10  # README + 6 files + 3 copies: no .orig, nothing else
    assert hg("status", cwd=a) == "" and hg("resolve", "-l", cwd=a) == ""
    assert hg("heads", "-T", "x", cwd=a) == "x"
    tip = {f: subprocess.run(["hg", "cat", "-r", ".", "path:" + f], cwd=a, check=True,
                             stdout=subprocess.PIPE).stdout
           for f in hg("files", "-r", ".", cwd=a).splitlines()}
    assert tip == files  # committed as it is on disk
    assert not re.search(r"^(<<<<<<<|>>>>>>>)", hg("log", "-p", "--git", cwd=a), re.M)
    message = hg("log", "-r", ".", "-T", "{desc}", cwd=a)
    assert message.startswith("autosync on %s: merged, 3 conflicts" % host)
    assert sorted(message.splitlines()[2:]) == sorted(
        "conflict: %s (other version kept as %s)" % (p.split(" (")[0] + os.path.splitext(p)[1], p)
        for p in files if "(conflict from" in p)


def test_the_working_copy_is_found_from_a_folder_inside_it_as_hg_root_finds_it(tmp_path):
    from autosync.committer import hgmerge as module
    root = tmp_path / "wc"
    (root / ".hg").mkdir(parents=True)
    (root / "a" / "b").mkdir(parents=True)
    assert module.working_copy_root(str(root / "a" / "b")) == os.path.realpath(root)
    assert module.working_copy_root(str(root)) == os.path.realpath(root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises(module.Failed, match="no Mercurial working copy"):
        module.working_copy_root(str(outside))
    done = hgmerge(str(outside))
    assert done.returncode == 1 and done.stderr.startswith("autosync-hgmerge: no Mercurial")
