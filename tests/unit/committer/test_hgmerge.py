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
