"""recovery: is the synced folder still ours, a stale index.lock, commands a killed
committer left running; with real folders and real processes."""
import os
import shutil
import sys

import pytest

from autosync.vcs import daemon_identity, recovery
from autosync.vcs.folder import Folder, _identity, remote_of
from base import git, wait_until


@pytest.fixture
def repo(tmp_path):
    folder = str(tmp_path / "Sync")
    git("init", "-q", folder)
    os.mkdir(os.path.join(folder, "sub"))
    return folder


@pytest.fixture
def spawn(spawn):
    """conftest's spawn, for `python -c code` that prints "ready" once set up (or argv)."""
    def start(code, cwd=None, env=None, argv=None):
        proc = spawn(argv or [sys.executable, "-c", code], cwd=cwd, env=env)
        if argv is None:
            assert proc.stdout.readline() == b"ready\n"
        return proc
    return start


HOLD = "import sys; f = open(%r); print('ready', flush=True); sys.stdin.read()"


def test_an_untouched_folder_has_no_problem(repo):
    assert Folder(repo).problem() is None
    sub = Folder(os.path.join(repo, "sub"))
    assert sub.marker == os.path.join(repo, ".git")  # found above the synced subfolder
    assert sub.problem() is None


def test_a_removed_folder_is_gone(repo):
    folder = Folder(repo)
    shutil.rmtree(repo)
    assert "is gone" in folder.problem() and repo in folder.problem()


def test_a_replaced_folder_is_noticed(repo):
    folder = Folder(repo)
    os.rename(repo, repo + ".old")  # the old one stays, so the new one gets another inode
    os.mkdir(repo)
    os.rename(repo + ".old/.git", repo + "/.git")  # even with the metadata moved along
    assert "was replaced by another folder" in folder.problem()


def test_a_lost_git_folder_is_noticed(repo):
    folder = Folder(repo)
    shutil.rmtree(os.path.join(repo, ".git"))
    problem = folder.problem()
    assert "repository metadata" in problem and os.path.join(repo, ".git") in problem
    assert "\n" not in problem


def test_a_folder_without_metadata_is_never_safe(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "(none found)" in Folder(str(plain)).problem()


def test_an_absent_lock_is_none(repo):
    assert recovery.clear_stale_lock(os.path.join(repo, ".git", "index.lock"), repo) is None


def test_an_orphan_lock_is_removed(repo):
    lock = os.path.join(repo, ".git", "index.lock")
    open(lock, "w").close()
    assert recovery.clear_stale_lock(lock, repo) is True
    assert not os.path.lexists(lock)


def test_a_lock_a_live_process_holds_open_stays(repo, spawn, tmp_path):
    lock = os.path.join(repo, ".git", "index.lock")
    open(lock, "w").close()
    holder = spawn(HOLD % lock, cwd=str(tmp_path))  # not inside the repository
    assert recovery.lock_holders(lock, repo) == [holder.pid]
    assert recovery.clear_stale_lock(lock, repo) is False
    assert os.path.exists(lock)
    holder.stdin.close()
    holder.wait()
    assert recovery.clear_stale_lock(lock, repo) is True


def test_a_git_process_working_inside_keeps_the_lock(repo, spawn, tmp_path):
    """A git between opening the lock and writing it may hold no descriptor on it yet."""
    lock = os.path.join(repo, ".git", "index.lock")
    open(lock, "w").close()
    fake_git = str(tmp_path / "git-sleeper")  # the kernel names the process after the file
    os.symlink(shutil.which("sleep"), fake_git)
    proc = spawn(None, cwd=os.path.join(repo, "sub"), argv=[fake_git, "60"])
    other = spawn(None, cwd=str(tmp_path), argv=[fake_git, "60"])  # outside: not a holder
    for started in (proc, other):  # Popen can return before exec() has renamed the process
        wait_until(lambda: comm(started.pid) == "git-sleeper", 10, what="exec")
    assert recovery.clear_stale_lock(lock, repo) is False
    assert proc.pid in recovery.lock_holders(lock, repo)
    assert other.pid not in recovery.lock_holders(lock, repo)


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def daemon_env():
    return dict(os.environ, **daemon_identity.variables())


def test_leftover_commands_are_ours_inside_the_folder(repo, spawn, tmp_path):
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    ours = spawn(code, cwd=os.path.join(repo, "sub"), env=daemon_env())
    users = spawn(code, cwd=repo, env={k: v for k, v in os.environ.items()
                                        if k != daemon_identity.NAME})
    elsewhere = spawn(code, cwd=str(tmp_path), env=daemon_env())
    found = recovery.leftover_commands(repo)
    assert ours.pid in found
    assert users.pid not in found and elsewhere.pid not in found


def test_wait_for_leftovers_is_none_when_nothing_is_left(repo):
    assert recovery.wait_for_leftovers(repo, timeout=10) is None


def test_wait_for_leftovers_waits_for_a_command_to_end(repo, spawn):
    code = "import sys, time; print('ready', flush=True); time.sleep(0.5)"
    proc = spawn(code, cwd=repo, env=daemon_env())
    assert recovery.wait_for_leftovers(repo, timeout=30) is True
    assert proc.poll() is not None  # it ended (or is a zombie: no longer working)
    assert recovery.leftover_commands(repo) == []


def test_wait_for_leftovers_gives_up_at_the_timeout(repo, spawn):
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    proc = spawn(code, cwd=repo, env=daemon_env())
    assert recovery.wait_for_leftovers(repo, timeout=0.3) is False
    assert proc.poll() is None


def origin(path):
    """What remoteurlcmd says by default, run by hand."""
    return git("config", "--get", "remote.origin.url", cwd=path, check=False).decode().strip()


@pytest.fixture
def clones(tmp_path):
    """A bare remote with one commit, and a function making clones of it."""
    bare = str(tmp_path / "remote.git")
    git("init", "-q", "--bare", "-b", "main", bare)
    seed = str(tmp_path / "seed")
    git("clone", "-q", bare, seed)
    (tmp_path / "seed" / "f.txt").write_text("f\n")
    git("add", "f.txt", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("push", "-q", "origin", "HEAD:main", cwd=seed)
    return lambda path, url=bare: git("clone", "-q", url, path)


def test_our_folder_moved_away_and_back_is_ours(repo):
    folder = Folder(repo, origin)
    os.rename(repo, repo + ".x")
    assert folder.examine()[0] == "away" and "is gone" in folder.problem()
    os.rename(repo + ".x", repo)
    assert folder.examine() == ("ours", None) and folder.problem() is None


def test_another_clone_of_the_same_remote_is_taken_on(clones, tmp_path):
    sync = str(tmp_path / "Sync")
    clones(sync)
    folder = Folder(sync, origin)
    shutil.rmtree(sync)
    clones(sync)
    assert folder.problem() is None  # taken on: from now on it is the folder we compare
    assert folder.identity == _identity(sync)
    assert folder.marker == os.path.join(sync, ".git")


def test_a_clone_at_work_is_waited_for(clones, tmp_path):
    sync = str(tmp_path / "Sync")
    clones(sync)
    folder = Folder(sync, origin)
    shutil.rmtree(sync)
    folder.set_away("gone")  # the watcher saw it go (a new folder may reuse its inode)
    folder.set_away(None)
    os.mkdir(sync)  # an empty folder: a mount point, or a clone about to begin
    assert folder.examine()[0] == "away"
    os.rmdir(sync)
    clones(sync)
    lock = os.path.join(sync, ".git", "index.lock")
    open(lock, "w").close()  # its checkout at work
    verdict, line = folder.examine()
    assert verdict == "away" and "being made" in line
    os.unlink(lock)
    os.rename(os.path.join(sync, ".git", "index"), os.path.join(sync, ".git", "index.x"))
    assert folder.examine()[0] == "away"  # a commit checked out, no index yet: not done
    os.rename(os.path.join(sync, ".git", "index.x"), os.path.join(sync, ".git", "index"))
    assert folder.examine() == ("ours", None)


def test_anything_else_in_its_place_is_foreign(clones, tmp_path):
    sync = str(tmp_path / "Sync")
    clones(sync)
    folder = Folder(sync, origin)
    shutil.rmtree(sync)
    folder.set_away("gone")  # the watcher saw it go (a new folder may reuse its inode)
    folder.set_away(None)
    git("init", "-q", sync)  # a repository, another remote (none)
    verdict, line = folder.examine()
    assert verdict == "foreign" and "not a clone of %s" % folder.url in line
    assert folder.problem() == line and "\n" not in line
    shutil.rmtree(sync)
    os.mkdir(sync)
    (tmp_path / "Sync" / "notes.txt").write_text("x")  # a plain folder with files
    assert folder.examine()[0] == "foreign"
    # Without a remote to compare, only our own folder is ours.
    shutil.rmtree(sync)
    clones(sync)
    assert Folder(sync).examine()[0] == "ours"
    bare = Folder(sync)
    os.rename(sync, sync + ".old")  # kept meanwhile: the clone gets another inode
    clones(sync)
    assert bare.examine()[0] == "foreign"


def test_a_folder_the_watcher_says_is_away_is_not_committed(repo):
    folder = Folder(repo, origin)
    folder.set_away("the synced folder is gone")
    assert folder.problem() == "the synced folder is gone"
    folder.set_away(None)
    assert folder.problem() is None


def test_remote_of_runs_remoteurlcmd_in_the_folder(repo):
    from autosync.vcs.commands import Template
    git("remote", "add", "origin", "https://example.org/x.git", cwd=repo)
    remote = remote_of(Template("remoteurlcmd", "git config --get remote.origin.url"))
    assert remote(repo) == "https://example.org/x.git"
    assert remote(os.path.dirname(repo)) == ""  # fails there: no remote to compare
    assert remote_of(Template("remoteurlcmd", "")) is None
