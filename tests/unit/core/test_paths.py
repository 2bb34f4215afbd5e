"""autosync.paths: the runtime folder, socket paths, and the one walk up to the root."""
import os
import shutil
import socket
import stat

import pytest

from autosync.core import paths


def test_runtime_dir_under_xdg_runtime_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert paths.runtime_dir() == str(tmp_path / "autosync")


def without_runtime_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    made = []
    real = paths.private_tmp

    def tracked():  # every folder it makes in /tmp is removed after the test
        found = real()
        made.append(found)
        return found
    monkeypatch.setattr(paths, "private_tmp", tracked)
    return made


@pytest.fixture
def no_xdg(monkeypatch, tmp_path):
    made = without_runtime_dir(monkeypatch, tmp_path)
    yield made
    for folder in set(made):
        shutil.rmtree(folder, ignore_errors=True)


def test_runtime_dir_without_xdg_is_unguessable_private_and_remembered(no_xdg, tmp_path):
    """Without XDG_RUNTIME_DIR: never a name of /tmp another user can make first (they
    made /tmp/autosync-UID and got the held ssh connection's sessions)."""
    first = paths.runtime_dir()
    assert first != "/tmp/autosync-%d" % os.getuid()
    assert os.path.dirname(first) == "/tmp" and \
        os.path.basename(first).startswith("autosync-%d-" % os.getuid())
    st = os.lstat(first)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert paths.runtime_dir() == first  # remembered: every program finds the same
    link = tmp_path / "state" / "autosync" / ("runtime." + socket.gethostname())
    assert os.readlink(link) == first
    os.rmdir(first)  # /tmp cleaned: a new one, not the old name
    second = paths.runtime_dir()
    assert second != first and os.path.isdir(second)
    os.chmod(second, 0o777)  # not private any more: never used again
    third = paths.runtime_dir()
    assert third not in (first, second) and stat.S_IMODE(os.lstat(third).st_mode) == 0o700


def test_without_a_state_folder_the_refusal_names_a_safe_fix(no_xdg, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "file"))  # cannot hold a folder
    with pytest.raises(paths.NotPrivate) as refused:
        paths.runtime_dir()
    said = str(refused.value)
    assert "\n" not in said and "set XDG_RUNTIME_DIR to a folder only you can enter" in said
    assert "socket =" not in said
    assert paths.find_socket(str(tmp_path)) is None  # a client finds no daemon, no trace


def test_private_folder_refuses_what_others_may_enter_or_own(tmp_path):
    mine = str(tmp_path / "mine")
    assert paths.private_folder(mine) == mine
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
    os.chmod(mine, 0o755)
    with pytest.raises(paths.NotPrivate, match="its mode is 0755, others may enter it"):
        paths.private_folder(mine)
    assert paths.private_folder(mine, others=0o022) == mine
    os.symlink(mine, str(tmp_path / "link"))
    with pytest.raises(paths.NotPrivate, match="not a folder"):
        paths.check_private(str(tmp_path / "link"))
    if os.getuid() == 0:
        os.chown(mine, 4242, 4242)
        with pytest.raises(paths.NotPrivate, match="belongs to uid 4242, not to you"):
            paths.private_folder(mine, others=0o022)


def test_the_socket_folder_fits_a_socket_s_path(no_xdg, monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    folder = paths.socket_folder(61)
    assert folder == paths.private_tmp() and len(folder) + 1 + 61 < paths.SUN_PATH
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert paths.socket_folder(8) == str(tmp_path / "run" / "autosync")  # it fits there


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
