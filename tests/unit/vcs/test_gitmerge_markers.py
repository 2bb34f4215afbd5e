"""No conflict marker of git's reaches a file or a commit (issue 41 item 5).

Where a renamed file collides with another path (rename/add, rename/rename(2to1)) and
its own content merge conflicts, git's stage 2 or 3 entry is not a side's committed
version but git's merge of it, markers included ("this may result in nested conflict
markers"): `<<<<<<<< HEAD-ID:d1/f3.txt` ... `>>>>>>>> THEIRS-ID:d0/f2.txt`. The product
kept that entry as one side's version. Two histories that make it, each merged both
ways the product merges: in objects (gitpull, a plain pullcmd) and in the working tree
after git's own merge stopped (gitmerge.resolve, any other pullcmd)."""
import os
import re

import pytest

from autosync.core.copies import read_copy_name
from autosync.vcs.pull import finish as gitmerge, git as gitpull
from base import git

MARKER = re.compile(rb"^(<{7,}|>{7,}|={7,})", re.M)


def put(repo, rel, text):
    full = os.path.join(repo, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def commit(repo, message):
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).decode().strip()


def rename_meets_added_file(repo):
    """The issue's paths: ours renames d0/f2.txt to d1/f3.txt and changes a line; theirs
    changes that line of d0/f2.txt and adds a file of its own as d1/f3.txt.
    -> (ours, theirs, the committed versions every one of which must stay in a file)."""
    lines = ["line %d\n" % n for n in range(1, 11)]

    def changed(text):  # line 5 changed: still the same file for git's rename detection
        return "".join(lines[:4] + [text] + lines[5:])
    put(repo, "d0/f2.txt", "".join(lines))
    commit(repo, "base")
    git("checkout", "-q", "-b", "theirs", cwd=repo)
    put(repo, "d0/f2.txt", changed("five from theirs\n"))
    put(repo, "d1/f3.txt", "a file of theirs\n")
    theirs = commit(repo, "theirs")
    git("checkout", "-q", "main", cwd=repo)
    os.mkdir(os.path.join(repo, "d1"))
    git("mv", "d0/f2.txt", "d1/f3.txt", cwd=repo)
    put(repo, "d1/f3.txt", changed("five from ours\n"))
    ours = commit(repo, "ours")
    return ours, theirs, {changed("five from ours\n"), changed("five from theirs\n"),
                          "a file of theirs\n"}


def criss_cross_renames(repo):
    """git's t6416 "nested conflicts", as data: L1 and R1 change a and b apart; L2
    merges R1 and renames b to m, R2 merges L1 and renames a to m, each settling the
    conflicts its own way. Merging L2 and R2 has two merge bases (a virtual one with
    conflicts of its own) and two renames onto m, each a content conflict."""
    lines = "".join("Random base content line %d\n" % n for n in range(1, 11))
    put(repo, "a", lines + "a\n")
    put(repo, "b", lines + "b\n")
    commit(repo, "initial")
    git("branch", "R", cwd=repo)
    for name in ("a", "b"):
        put(repo, name, lines + "%s\n%s_L1\n" % (name, name))
    l1 = commit(repo, "L1")
    git("checkout", "-q", "R", cwd=repo)
    for name in ("a", "b"):
        put(repo, name, lines + "%s\n%s_R1\n" % (name, name))
    r1 = commit(repo, "R1")
    merges, settled = [], set()
    for branch, other, moved, tag in (("main", r1, "b", "L2"), ("R", l1, "a", "R2")):
        git("checkout", "-q", branch, cwd=repo)
        git("merge", "-q", other, cwd=repo, check=False)  # conflicts, settled by hand:
        for name in ("a", "b"):
            settled.add(lines + "%s\n%s_%s\n" % (name, name, tag))
            put(repo, name, lines + "%s\n%s_%s\n" % (name, name, tag))
        git("add", "a", "b", cwd=repo)
        git("mv", moved, "m", cwd=repo)
        merges.append(commit(repo, tag))
    git("checkout", "-q", "main", cwd=repo)
    return merges[0], merges[1], settled


HISTORIES = [rename_meets_added_file, criss_cross_renames]


@pytest.fixture
def repo(tmp_path):
    path = str(tmp_path / "repo")
    git("init", "-q", "-b", "main", path)
    return path


def marked(repo, tree):
    """The paths of tree whose content holds a line of git's conflict markers."""
    out = git("ls-tree", "-r", "-z", tree, cwd=repo).split(b"\0")
    found = []
    for entry in filter(None, out):
        info, path = entry.split(b"\t", 1)
        if MARKER.search(git("cat-file", "blob", info.split()[2].decode(), cwd=repo)):
            found.append(path.decode())
    return found


def contents(repo, tree):
    out = git("ls-tree", "-r", "-z", "--name-only", tree, cwd=repo).decode()
    return {p: git("cat-file", "blob", "%s:%s" % (tree, p), cwd=repo).decode()
            for p in out.split("\0") if p}


@pytest.mark.parametrize("history", HISTORIES)
def test_a_merge_in_objects_keeps_committed_versions_never_git_s_markers(repo, history):
    ours, theirs, kept = history(repo)
    # (the product's own merge of a plain pull, run on the two commits)
    puller = gitpull.GitPull(repo, os.path.join(repo, ".git"), "here", [])
    tree, copies = puller.merge(ours, theirs)
    assert marked(repo, tree) == []
    files = contents(repo, tree)
    assert kept <= set(files.values())  # every version of the collision is in a file
    assert {c["copy"] for c in copies} == {p for p in files if read_copy_name(p)}


@pytest.mark.parametrize("history", HISTORIES)
def test_a_stopped_merge_in_the_working_tree_keeps_committed_versions(repo, history):
    ours, theirs, kept = history(repo)
    git("merge", "-q", theirs, cwd=repo, check=False)  # git's own merge, as a pullcmd's
    assert gitmerge.merging(os.path.join(repo, ".git"))  # stopped on its conflicts
    copies = gitmerge.resolve(repo)
    git("commit", "-q", "--no-edit", cwd=repo)
    assert git("status", "--porcelain", "--untracked-files=all", cwd=repo) == b""
    assert marked(repo, "HEAD") == []
    files = contents(repo, "HEAD")
    assert kept <= set(files.values())
    assert {c["copy"] for c in copies} == {p for p in files if read_copy_name(p)}


def test_markers_of_a_killed_pull_s_renamed_file_are_put_back(repo):
    """A pull killed mid-merge leaves markers without MERGE_HEAD; on a renamed file the
    label names the path too (`>>>>>>> ID:d0/f2.txt`, longer markers when nested): the
    file goes back to the last commit all the same, not into the next commit."""
    ours, theirs, _ = rename_meets_added_file(repo)
    path = os.path.join(repo, "d1", "f3.txt")
    with open(path, "rb") as f:
        committed = f.read()
    for marker in (">>>>>>>", ">>>>>>>>"):
        with open(path, "w") as f:  # as a `git merge` of theirs writes it, then killed
            f.write("line 5 here\n=======\nline 5 there\n%s %s:d0/f2.txt\n" % (marker, theirs))
        assert gitmerge.undo_killed_pull(repo) == ["d1/f3.txt"]
        with open(path, "rb") as f:
            assert f.read() == committed
