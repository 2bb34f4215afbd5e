"""autosync.paths: the runtime folder, socket paths, and the one walk up to the root."""
import os

from autosync.core import paths


def test_runtime_dir_under_xdg_runtime_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert paths.runtime_dir() == str(tmp_path / "autosync")


def test_runtime_dir_without_xdg_is_per_user(monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert paths.runtime_dir() == "/tmp/autosync-%d" % os.getuid()
    monkeypatch.setenv("XDG_RUNTIME_DIR", "")  # set but empty counts as unset
    assert paths.runtime_dir() == "/tmp/autosync-%d" % os.getuid()


def test_socket_for_names_the_real_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    os.symlink(tmp_path / "a", tmp_path / "link")
    path = paths.socket_for(str(tmp_path / "a"))
    assert os.path.dirname(path) == str(tmp_path / "run" / "autosync")
    assert os.path.basename(path).endswith(".sock") and len(os.path.basename(path)) == 21
    assert paths.socket_for(str(tmp_path / "link")) == path  # through a link: same daemon
    assert paths.socket_for(str(tmp_path / "a") + "/") == path
    assert paths.socket_for(str(tmp_path / "b")) != path


def test_upwards_ends_at_the_root():
    assert list(paths.upwards("/a/b/c")) == ["/a/b/c", "/a/b", "/a", "/"]
    assert list(paths.upwards("/")) == ["/"]


def test_find_socket_walks_up_and_takes_the_nearest(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    outer = tmp_path / "Sync"
    inner = outer / "inner"
    (inner / "deep").mkdir(parents=True)
    (tmp_path / "run" / "autosync").mkdir(parents=True)
    assert paths.find_socket(str(inner / "deep")) is None
    open(paths.socket_for(str(outer)), "w").close()
    assert paths.find_socket(str(inner / "deep")) == paths.socket_for(str(outer))
    assert paths.find_socket(str(outer)) == paths.socket_for(str(outer))
    open(paths.socket_for(str(inner)), "w").close()
    assert paths.find_socket(str(inner / "deep")) == paths.socket_for(str(inner))
    assert paths.find_socket(str(tmp_path)) is None  # never downwards


def test_find_marker_nearest_first(tmp_path):
    (tmp_path / "repo" / ".hg").mkdir(parents=True)
    (tmp_path / "repo" / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub" / "a" / "b").mkdir(parents=True)
    assert paths.find_marker(str(tmp_path / "repo" / "sub" / "a" / "b")) == str(
        tmp_path / "repo" / "sub" / ".git")
    assert paths.find_marker(str(tmp_path / "repo")) == str(tmp_path / "repo" / ".hg")


def test_find_marker_takes_files_and_dangling_links(tmp_path):
    (tmp_path / "fossil" / "sub").mkdir(parents=True)
    (tmp_path / "fossil" / ".fslckout").write_text("")  # fossil's checkout is a file
    assert paths.find_marker(str(tmp_path / "fossil" / "sub")) == str(
        tmp_path / "fossil" / ".fslckout")
    (tmp_path / "wt").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "wt" / ".git")  # a worktree's link, gone
    assert paths.find_marker(str(tmp_path / "wt")) == str(tmp_path / "wt" / ".git")


def test_find_marker_none_outside_a_working_tree(tmp_path):
    (tmp_path / "plain").mkdir()
    marker = paths.find_marker(str(tmp_path / "plain"))
    # tmp_path may itself lie in some working tree; never inside the folder then.
    assert marker is None or not marker.startswith(str(tmp_path))


def test_in_one_folder_the_order_of_the_markers_decides(tmp_path):
    (tmp_path / ".hg").mkdir()
    (tmp_path / ".git").mkdir()
    assert paths.find_marker(str(tmp_path)) == str(tmp_path / ".git")


def test_metadata_is_the_markers_as_a_set():
    assert paths.METADATA == set(paths.REPOSITORY_MARKERS)
    assert len(paths.METADATA) == len(paths.REPOSITORY_MARKERS)
    assert {".git", ".hg", ".bzr", "_darcs", ".svn", ".fossil"} <= paths.METADATA
