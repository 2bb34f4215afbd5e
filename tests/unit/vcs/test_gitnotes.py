"""gitnotes.py: descriptions of pushed commits travel between clones, none lost.
Real git: a bare remote and two clones."""
from autosync.vcs import gitnotes
from base import Remote, git


def clones(tmp_path):
    remote = Remote(tmp_path / "remote.git")
    made = []
    for name in ("a", "b"):
        path = str(tmp_path / name)
        git("clone", "-q", remote.path, path)
        made.append(path)
    rev = git("rev-parse", "HEAD", cwd=made[0]).strip().decode()
    return remote, made, rev


def test_a_note_goes_to_the_remote_and_comes_back_on_the_other_clone(tmp_path):
    remote, (a, b), rev = clones(tmp_path)
    assert gitnotes.add(a, rev, "Tax forms") == "first"
    assert gitnotes.push(a)
    assert git("--git-dir", remote.path, "notes", "--ref=autosync", "show", rev) == \
        b"Tax forms\n"
    assert gitnotes.texts(b) == {}
    gitnotes.fetch(b)
    assert gitnotes.texts(b) == {rev: "Tax forms"}


def test_notes_added_on_both_clones_meanwhile_are_all_kept(tmp_path):
    remote, (a, b), rev = clones(tmp_path)
    gitnotes.add(a, rev, "from a")
    gitnotes.add(b, rev, "from b")
    assert gitnotes.push(a)
    assert gitnotes.push(b)  # refused at first: fetched, merged, pushed again
    gitnotes.fetch(a)
    for clone in (a, b):
        assert sorted(gitnotes.texts(clone)[rev].split("; ")) == ["from a", "from b"]


def test_a_commit_not_in_the_branch_gets_no_note(tmp_path):
    remote, (a, b), rev = clones(tmp_path)
    assert gitnotes.add(a, "ab" * 20, "nowhere") is None
    assert gitnotes.texts(a) == {}


def test_fetching_from_a_remote_without_notes_is_quiet(tmp_path):
    remote, (a, b), rev = clones(tmp_path)
    gitnotes.fetch(a)
    assert gitnotes.texts(a) == {}
