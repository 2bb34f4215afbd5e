"""copies.py: conflict copies' names written, read back and found, and the keep-both
policy that git's merges (vcs/pull/finish.py, vcs/pull/git.py) and Mercurial's (vcs/pull/hg.py) share,
here against a Place made of dicts (the real ones: e2e/test_keep_both, test_gitpull,
test_hgmerge, e2e/test_mercurial)."""
import os
import subprocess
import sys
import time

import pytest

from autosync.core import copies
from autosync.vcs.pull.keep_both import keep_both

# --- conflict copies' names read back (dvcs-autosync conflicts, the tray) ---------------

WHEN = time.mktime((2026, 12, 3, 10, 15, 2, 0, 0, -1))


@pytest.mark.parametrize("path, host", [
    ("notes.txt", "laptop"), ("doc/plan.md", "desk"), (".bashrc", "a"), ("Makefile", "b"),
    ("a (conflict from x 2026-01-01 000000).txt", "y"), ("pics/my photo.jpeg", "both sides")])
def test_copy_names_are_read_back(path, host):
    name = copies.copy_name(path, host, WHEN, lambda n: True)
    assert copies.read_copy_name(name) == copies.Copy(name, path, host, WHEN)
    taken = {name}
    second = copies.copy_name(path, host, WHEN, lambda n: n not in taken)
    assert second != name
    assert copies.read_copy_name(second) == copies.Copy(second, path, host, WHEN)


@pytest.mark.parametrize("name", ["notes.txt", "a (conflict from x).txt",
                                  "a (conflict from x 2026-13-01 000000).txt",
                                  "a (conflicts from x 2026-01-01 000000).txt"])
def test_other_names_are_not_copies(name):
    assert copies.read_copy_name(name) is None


def test_find_copies_skips_metadata(tmp_path):
    made = [copies.copy_name("f.txt", "x", WHEN + i, lambda n: True) for i in (0, 1)]
    for rel in made + [".git/" + made[0], "g.txt"]:
        os.makedirs(os.path.dirname(str(tmp_path / rel)), exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert [c.copy for c in copies.find_copies(str(tmp_path))] == sorted(made)


def test_a_copy_of_a_copy_of_a_long_name_fits_the_file_system(tmp_path):
    long = "é" * 100 + ".txt"  # 204 bytes
    first = copies.copy_name(long, "laptop", 1700000000, lambda n: True)
    second = copies.copy_name(first, "desktop", 1700000100, lambda n: True)
    for name in (first, second):
        assert len(os.fsencode(name)) <= 255
        (tmp_path / name).write_bytes(b"x")  # the file system takes it
    assert second.endswith(").txt") and "conflict from desktop" in second


def test_a_copy_from_another_person_names_the_person_and_is_read_back():
    name = copies.copy_name("doc/plan.md", "laptop", WHEN, lambda n: True, person="Bob Ng")
    assert name.endswith("plan (conflict from Bob Ng on laptop %s).md"
                         % time.strftime("%Y-%m-%d %H%M%S", time.localtime(WHEN)))
    assert copies.read_copy_name(name) == copies.Copy(name, "doc/plan.md", "laptop", WHEN,
                                                      "Bob Ng")
    odd = copies.copy_name("f", "h", WHEN, lambda n: True, person="a/b\nc")
    assert copies.read_copy_name(odd).person == "a_b_c"
    assert copies.read_copy_name(copies.copy_name("f", "h", WHEN, lambda n: True)).person is None


# --- the keep-both policy, one conflicted path ------------------------------------------

class Place:
    """A folder as a dict {path: version}; last: {"ours"|"theirs": (time, id, host)}."""

    def __init__(self, files=(), folders=(), last=None):
        self.files, self.folders, self.last, self.order = dict(files), set(folders), last, []

    def last_change(self, side, version):
        return self.last[side]

    def taken(self, rel):
        return rel in self.files or rel in self.folders

    def is_folder(self, rel):
        return rel in self.folders

    def holds(self, rel, version):
        return self.files.get(rel) == version

    def write(self, rel, version):
        self.files[rel] = version
        self.order.append(rel)


X, Y = (WHEN, "a" * 40, "x"), (WHEN + 60, "b" * 40, "y")


@pytest.mark.parametrize("mine, other", [(X, Y), (Y, X)])
def test_the_newer_version_stays_on_both_machines(mine, other):
    """Whichever machine merges (its side is "ours"), the path ends with y's newer
    version and x's is beside it, named for x and the time of x's change."""
    versions = {X: "from x", Y: "from y"}
    place = Place({"f.txt": "merge output"}, last={"ours": mine, "theirs": other})
    made, written = keep_both("f.txt", versions[mine], versions[other], place)
    name = copies.copy_name("f.txt", "x", WHEN, lambda n: True)
    assert made == {"path": "f.txt", "copy": name, "host": "x"}
    assert place.files == {"f.txt": "from y", name: "from x"}
    assert place.order == written == [name, "f.txt"]  # the loser first: a crash keeps both


def test_a_tie_in_time_goes_to_the_larger_id():
    place = Place(last={"ours": (WHEN, "b" * 40, "x"), "theirs": (WHEN, "a" * 40, "y")})
    made, _ = keep_both("f.txt", "mine", "theirs", place)
    assert place.files["f.txt"] == "mine" and made["host"] == "y"


def test_a_name_holding_the_loser_is_used_again_another_is_not():
    """A copy written before a crash is taken again; a name holding anything else is
    skipped (` 2`)."""
    first = copies.copy_name("f.txt", "x", WHEN, lambda n: True)
    place = Place({first: "from x"}, last={"ours": X, "theirs": Y})
    assert keep_both("f.txt", "from x", "from y", place)[0]["copy"] == first
    place = Place({first: "something else"}, last={"ours": X, "theirs": Y})
    second = keep_both("f.txt", "from x", "from y", place)[0]["copy"]
    assert second != first and place.files[first] == "something else"
    assert copies.read_copy_name(second).path == "f.txt"


def test_a_folder_that_took_the_name_keeps_it():
    place = Place(folders={"f.txt"}, last={"ours": X, "theirs": Y})
    made, written = keep_both("f.txt", "from x", "from y", place)
    both = copies.copy_name("f.txt", copies.BOTH_SIDES, WHEN, lambda n: True)
    assert "f.txt" not in place.files and place.files[both] == "from y"
    assert place.files[made["copy"]] == "from x" and written == [made["copy"], both]


@pytest.mark.parametrize("ours, theirs", [("changed", None), (None, "changed")])
def test_a_change_is_kept_over_a_delete(ours, theirs, caplog):
    place = Place()
    assert keep_both("f.txt", ours, theirs, place) == (None, ["f.txt"])
    assert place.files == {"f.txt": "changed"}
    assert "f.txt was changed on one side and deleted on the other: kept" in caplog.text


def test_deleted_on_both_sides_writes_nothing():
    place = Place()
    assert keep_both("f.txt", None, None, place) == (None, [])
    assert place.files == {}


def test_the_mercurial_helper_loads_no_git_plumbing():
    """autosync-hgmerge takes the policy from vcs/pull/keep_both.py, not from git's vcs/pull/finish.py."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, autosync.vcs.pull.hg; print(' '.join(sys.modules))"],
        stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    assert "autosync.vcs.pull.keep_both" in loaded
    assert not {"autosync.vcs.pull.finish", "autosync.vcs.pull.git", "autosync.vcs.git"} & set(loaded)


ALICE, BOB = "Alice <alice@example.org>", "Bob <bob@example.org>"


@pytest.mark.parametrize("x_author, y_author, person", [
    (ALICE, BOB, "Alice"), (ALICE, ALICE, None), (ALICE, "Alice <other@example.org>", "Alice"),
    (None, BOB, None)])
def test_a_copy_names_the_person_when_the_other_side_is_another_person(
        x_author, y_author, person):
    """Two people: the copy (x's older version) says whose it is; one person's own
    machines (same author), or an author not known, keep the plain name."""
    place = Place(last={"ours": X + (x_author,), "theirs": Y + (y_author,)})
    made, _ = keep_both("f.txt", "from x", "from y", place)
    assert made["copy"] == copies.copy_name("f.txt", "x", WHEN, lambda n: True, person=person)
    assert made.get("person") == person
    assert copies.read_copy_name(made["copy"]).person == person
