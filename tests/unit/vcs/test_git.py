"""gitrepo: what the committer asks git directly, on real repositories in tmp_path."""
import hashlib
import os

import pytest

from autosync.vcs import git as gitrepo
from base import git


def write(path, text):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "w") as f:
        f.write(text)


def commit_all(folder, message="work"):
    git("add", "-A", cwd=folder)
    git("commit", "-q", "-m", message, cwd=folder)


@pytest.fixture
def repo(tmp_path):
    folder = str(tmp_path / "repo")
    git("init", "-q", "-b", "main", folder)
    write(os.path.join(folder, "keep.txt"), "kept\n")
    write(os.path.join(folder, "edit.txt"), "before\n")
    write(os.path.join(folder, "gone.txt"), "to be removed\n")
    write(os.path.join(folder, "old.txt"), "a file long enough to be seen as renamed\n" * 20)
    write(os.path.join(folder, "sub", "inner.txt"), "inner\n")
    commit_all(folder, "first")
    return folder


def inner_repository(path):
    git("init", "-q", path)
    write(os.path.join(path, "x"), "x\n")
    git("add", "x", cwd=path)
    git("commit", "-q", "-m", "inner", cwd=path)


def by_path(changes):
    return {c["path"]: c for c in changes}


def test_git_dir_is_absolute_and_none_outside_git(repo, tmp_path):
    assert gitrepo.git_dir(os.path.join(repo, "sub")) == os.path.join(repo, ".git")
    outside = tmp_path / "plain"
    outside.mkdir()
    assert gitrepo.git_dir(str(outside)) is None


def test_staged_changes_name_every_kind_of_change(repo):
    write(os.path.join(repo, "edit.txt"), "after\n")
    write(os.path.join(repo, "new.txt"), "new\n")
    git("rm", "-q", "gone.txt", cwd=repo)
    git("mv", "old.txt", "renamed.txt", cwd=repo)
    inner_repository(os.path.join(repo, "project"))
    git("add", "edit.txt", "new.txt", "project", cwd=repo)
    changes = by_path(gitrepo.staged_changes(repo))
    assert changes == {
        "edit.txt": {"action": "modified", "path": "edit.txt"},
        "new.txt": {"action": "added", "path": "new.txt"},
        "gone.txt": {"action": "removed", "path": "gone.txt"},
        "renamed.txt": {"action": "moved", "path": "renamed.txt", "src": "old.txt"},
        "project": {"action": "added", "path": "project", "gitlink": True},
    }


def test_staged_changes_are_relative_to_a_subfolder(repo):
    write(os.path.join(repo, "sub", "inner.txt"), "changed\n")
    write(os.path.join(repo, "edit.txt"), "outside the subfolder\n")
    git("add", "-A", cwd=repo)
    assert gitrepo.staged_changes(os.path.join(repo, "sub")) == [
        {"action": "modified", "path": "inner.txt"}]


def test_staged_changes_keep_odd_names(repo):
    name = "a name with\nnewline and caf\u00e9"
    write(os.path.join(repo, name), "odd\n")
    git("add", "-A", cwd=repo)
    assert gitrepo.staged_changes(repo) == [{"action": "added", "path": name}]


def test_nothing_staged_is_an_empty_list_and_no_repository_is_none(repo, tmp_path):
    assert gitrepo.staged_changes(repo) == []
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitrepo.staged_changes(str(plain)) is None


def test_changed_paths_below_a_subfolder_are_relative_to_it(repo):
    sub = os.path.join(repo, "sub")
    write(os.path.join(sub, "inner.txt"), "modified\n")
    write(os.path.join(sub, "deeper", "new.txt"), "untracked, in an untracked folder\n")
    write(os.path.join(repo, "edit.txt"), "outside: not listed\n")
    os.remove(os.path.join(repo, "gone.txt"))  # outside too
    removed, other = gitrepo.changed_paths(sub)
    assert removed == []
    assert sorted(other) == ["deeper/new.txt", "inner.txt"]

    os.remove(os.path.join(sub, "inner.txt"))
    removed, other = gitrepo.changed_paths(sub)
    assert removed == ["inner.txt"] and other == ["deeper/new.txt"]


def test_changed_paths_at_the_top(repo):
    os.remove(os.path.join(repo, "gone.txt"))
    write(os.path.join(repo, "edit.txt"), "after\n")
    git("rm", "-q", "--cached", "keep.txt", cwd=repo)  # staged removal, file still there
    removed, other = gitrepo.changed_paths(repo)
    assert sorted(removed) == ["gone.txt", "keep.txt"]
    # The file is still there, untracked now: git sees it as new as well.
    assert sorted(other) == ["edit.txt", "keep.txt"]


def test_untracked_repositories_lists_nested_ones_but_not_ignored_or_plain_folders(repo):
    inner_repository(os.path.join(repo, "project"))
    inner_repository(os.path.join(repo, "sub", "tool"))
    inner_repository(os.path.join(repo, "ignored"))
    write(os.path.join(repo, ".gitignore"), "ignored/\n")
    write(os.path.join(repo, "plain", "file.txt"), "just an untracked folder\n")
    assert sorted(gitrepo.untracked_repositories(repo)) == ["project", "sub/tool"]
    assert gitrepo.untracked_repositories(os.path.join(repo, "sub")) == ["tool"]


def test_untracked_repositories_outside_git_is_empty(tmp_path):
    assert gitrepo.untracked_repositories(str(tmp_path)) == []


def test_submodules_are_the_declared_paths_relative_to_the_folder(repo, tmp_path):
    assert gitrepo.submodules(repo) == set()
    write(os.path.join(repo, ".gitmodules"),
          '[submodule "lib"]\n\tpath = sub/lib\n\turl = ../lib\n'
          '[submodule "other"]\n\tpath = other\n\turl = ../other\n')
    assert gitrepo.submodules(repo) == {"sub/lib", "other"}
    assert gitrepo.submodules(os.path.join(repo, "sub")) == {"lib", "../other"}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitrepo.submodules(str(plain)) == set()


def test_head_is_none_before_the_first_commit(tmp_path):
    folder = str(tmp_path / "empty")
    git("init", "-q", folder)
    assert gitrepo.head(folder) is None
    write(os.path.join(folder, "a"), "a\n")
    commit_all(folder)
    assert gitrepo.head(folder) == git("rev-parse", "HEAD", cwd=folder).strip()


def test_pulled_names_the_files_and_each_host_once(repo):
    before = gitrepo.head(repo)
    write(os.path.join(repo, "one.txt"), "1\n")
    commit_all(repo, "autosync on laptop: 1 added\n\nadded: one.txt")
    write(os.path.join(repo, "sub", "two.txt"), "2\n")
    commit_all(repo, "autosync on desktop: 1 added\n\nadded: sub/two.txt")
    write(os.path.join(repo, "one.txt"), "1 again\n")
    commit_all(repo, "autosync on laptop: 1 modified\n\nmodified: one.txt")
    write(os.path.join(repo, "three.txt"), "by hand\n")
    commit_all(repo, "a commit made by hand")
    after = gitrepo.head(repo)
    got = gitrepo.pulled(repo, before, after)
    assert got["changed"] is True
    assert sorted(got["files"]) == ["one.txt", "sub/two.txt", "three.txt"]
    assert got["count"] == 3
    assert sorted(got["hosts"]) == ["desktop", "laptop"]

    relative = gitrepo.pulled(os.path.join(repo, "sub"), before, after)
    assert relative["files"] == ["two.txt"] and relative["count"] == 1


def test_pulled_without_a_change(repo):
    head = gitrepo.head(repo)
    assert gitrepo.pulled(repo, head, head) == {"changed": False, "files": [], "hosts": []}
    # A first pull into an empty clone: something came, no diff to name.
    assert gitrepo.pulled(repo, None, head) == {"changed": True, "files": [], "hosts": []}
    assert gitrepo.pulled(repo, None, None)["changed"] is False


def test_pulled_caps_the_file_list_but_counts_all(repo):
    before = gitrepo.head(repo)
    for i in range(205):
        write(os.path.join(repo, "many", "f%03d" % i), "%d\n" % i)
    commit_all(repo, "autosync on laptop: 205 added")
    got = gitrepo.pulled(repo, before, gitrepo.head(repo))
    assert len(got["files"]) == 200 and got["count"] == 205 and got["hosts"] == ["laptop"]


def test_git_raises_one_line_on_failure(repo):
    with pytest.raises(RuntimeError, match="^git rev-parse: ") as caught:
        gitrepo.git(repo, "rev-parse", "--verify", "no-such-ref")
    assert "\n" not in str(caught.value)
    assert gitrepo.git(repo, "rev-parse", "--verify", "no-such-ref", check=False) is None


def test_git_says_why_in_git_s_words(tmp_path):
    """Not a list's repr of the last line: git's fatal/error/hint lines, one line."""
    folder = str(tmp_path / "fresh")
    git("init", "-q", folder)
    with pytest.raises(RuntimeError) as caught:
        gitrepo.git(folder, "diff", "HEAD", "--name-only")
    assert str(caught.value).startswith("git diff: fatal: ambiguous argument 'HEAD'")
    assert "[" not in str(caught.value) and "\n" not in str(caught.value)


def test_paths_go_on_stdin_with_their_literal_meaning(repo):
    names = ["secret salary.txt", "-dash", "*", "new\nline"]
    for name in names:
        write(os.path.join(repo, name), "x\n")
    gitrepo.git(repo, "add", "-A", "--", paths=names)
    assert sorted(gitrepo.tracked_files(repo)) == sorted(
        names + ["edit.txt", "gone.txt", "keep.txt", "old.txt", "sub/inner.txt"])
    gitrepo.git(repo, "reset", "-q", "--", paths=["*"])   # only the file named `*`
    staged = {c["path"] for c in gitrepo.staged_changes(repo)}
    assert staged == {"secret salary.txt", "-dash", "new\nline"}


def test_tracked_files_are_relative_to_the_folder(repo):
    write(os.path.join(repo, "untracked.txt"), "not tracked\n")
    assert sorted(gitrepo.tracked_files(repo)) == [
        "edit.txt", "gone.txt", "keep.txt", "old.txt", "sub/inner.txt"]
    assert gitrepo.tracked_files(os.path.join(repo, "sub")) == ["inner.txt"]


def test_head_of_the_upstream_is_what_the_remote_had(repo, tmp_path):
    assert gitrepo.head(repo, "@{upstream}") is None  # no remote at all
    bare = str(tmp_path / "remote.git")
    git("clone", "-q", "--bare", repo, bare)
    clone = str(tmp_path / "clone")
    git("clone", "-q", bare, clone)
    assert gitrepo.head(clone, "@{upstream}") == gitrepo.head(clone) == gitrepo.head(repo)
    write(os.path.join(clone, "local.txt"), "not pushed yet\n")
    commit_all(clone)
    assert gitrepo.head(clone, "@{upstream}") == gitrepo.head(repo) != gitrepo.head(clone)


def test_unpushed_counts_what_the_upstream_lacks_and_without_one_what_no_remote_has(
        repo, tmp_path):
    assert gitrepo.unpushed(repo) == (1, False)  # no remote at all: every commit
    assert gitrepo.unpushed(str(tmp_path)) is None  # not a repository
    bare = str(tmp_path / "remote.git")
    git("clone", "-q", "--bare", repo, bare)
    clone = str(tmp_path / "clone")
    git("clone", "-q", bare, clone)
    assert gitrepo.unpushed(clone) == (0, True)
    for i in range(2):
        write(os.path.join(clone, "local%d.txt" % i), "not pushed yet\n")
        commit_all(clone)
    assert gitrepo.unpushed(clone) == (2, True)
    git("push", "-q", cwd=clone)
    assert gitrepo.unpushed(clone) == (0, True)
    write(os.path.join(clone, "local2.txt"), "on a branch without upstream\n")
    git("checkout", "-q", "-b", "own", cwd=clone)
    commit_all(clone)
    assert gitrepo.unpushed(clone) == (1, False)  # on no remote branch


def test_hash_open_is_git_s_id_of_the_open_file(tmp_path):
    """Through clean filters (CRLF to LF here), the name on stdin, git reading the file
    itself; None once the path is not the open file any more, or it changed."""
    folder = str(tmp_path / "r")
    git("init", "-q", folder)
    write(os.path.join(folder, ".gitattributes"), "*.txt text eol=crlf\n")
    name = "secret salary.txt"
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(b"one\r\n")
    expected = hashlib.sha1(b"blob 4\0one\n").hexdigest()   # the content as committed
    with open(path, "rb") as held:
        assert gitrepo.hash_open(folder, name, held.fileno()) == expected
        os.rename(path, path + ".old")
        with open(path, "wb") as f:
            f.write(b"one\r\n")
        assert gitrepo.hash_open(folder, name, held.fileno()) is None  # another file now
    with open(path, "rb") as held:
        assert gitrepo.hash_open(folder, "gone.txt", held.fileno()) is None
