"""What the watcher leaves out, git's own scans (startupcmd) leave out too, and nothing else."""
import subprocess

import pytest

from autosync.vcs import excludes
from autosync.vcs.git_environment import GitEnvironment
from autosync.vcs.commands import environment
from autosync.core.config import Config
from base import git


def add_all(cwd, ex):
    """git add -A with the excludes file `ex` in force, as the committer runs it."""
    subprocess.run(["git", "add", "-A"], cwd=str(cwd),
                   env=environment(gitenv=GitEnvironment(excludes=ex.where)), check=True)


def staged(top):
    return sorted(git("diff", "--cached", "--name-only", "-z", cwd=str(top)).decode().split("\0"))[1:]


def test_patterns_are_anchored_and_escaped(tmp_path):
    assert excludes.anchored(str(tmp_path / "sub" / "build"), str(tmp_path)) == "/sub/build"
    assert excludes.anchored(str(tmp_path / "a*b #c"), str(tmp_path)) == "/a\\*b\\ \\#c"


def test_git_add_all_leaves_ignorepath_and_keeps_the_users_excludes(tmp_path):
    top = tmp_path / "repo"
    git("init", "-q", str(top))
    folder = top / "synced"  # path may be a folder inside the working tree
    for rel in ("keep.txt", "build/out.o", "src/packages/p.tar", "mine.secret", "src/kept.c"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("x")
    user = tmp_path / "global-ignore"
    user.write_text("*.secret\n")
    git("config", "--global", "core.excludesFile", str(user))
    cfg = Config(path=str(folder), ignorepath=["build", "src/packages"])
    add_all(folder, excludes.Excludes(cfg, str(top / ".git"), str(tmp_path / "x.exclude")))
    assert staged(top) == ["synced/keep.txt", "synced/src/kept.c"]


@pytest.mark.parametrize("junk", [".notes.txt.swp", ".notes.txt.swx", "notes.txt~", "4913",
                                  "#notes.txt#", ".#notes.txt", ".~lock.report.odt#",
                                  ".goutputstream-X1Y2", "notes.txt.kate-swp",
                                  "notes.txt.tmp.12345"])
def test_a_rescan_leaves_editors_files_out_like_the_watcher(tmp_path, junk):
    """vim's swap file present during a rescan must never reach history."""
    from autosync.core.ignore import Ignore
    top = tmp_path / "repo"
    git("init", "-q", str(top))
    (top / "sub").mkdir()
    for rel in ("notes.txt", junk, "sub/" + junk):
        (top / rel).write_text("x")
    assert Ignore(str(top))(junk) and Ignore(str(top))("sub/" + junk)  # the watcher agrees
    add_all(top, excludes.Excludes(Config(path=str(top), ignorepath=[]), str(top / ".git"),
                                   str(tmp_path / "x.exclude")))
    assert staged(top) == ["notes.txt"]


def test_nested_repositories_are_left_out_until_their_git_goes(tmp_path):
    top = tmp_path / "repo"
    git("init", "-q", str(top))
    git("init", "-q", str(top / "projects" / "tool"))
    (top / "projects" / "tool" / "main.c").write_text("x")
    (top / "kept.txt").write_text("x")
    ex = excludes.Excludes(Config(path=str(top), ignorepath=[]), str(top / ".git"),
                           str(tmp_path / "x.exclude"))
    assert ex.leave_out(["projects/tool"]) == ["projects/tool"]
    assert ex.leave_out(["projects/tool"]) == []  # said once
    add_all(top, ex)
    assert staged(top) == ["kept.txt"]
    ex.take_back(["projects/tool"])
    subprocess.run(["rm", "-rf", str(top / "projects" / "tool" / ".git")], check=True)
    add_all(top, ex)
    assert staged(top) == ["kept.txt", "projects/tool/main.c"]


def test_the_users_git_config_count_is_kept_and_ours_wins(monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "pull.rebase")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    env = environment()
    assert env["GIT_CONFIG_KEY_0"] == "pull.rebase" and env["GIT_CONFIG_VALUE_0"] == "true"
    out = subprocess.run(["git", "config", "--get", "pull.rebase"], env=env,
                         stdout=subprocess.PIPE, text=True).stdout
    assert out.strip() == "false"
