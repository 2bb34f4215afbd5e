"""ignorepath is kept out of git's own scans (startupcmd), and nothing else is."""
import os
import subprocess

from autosync import ignorepath
from autosync.config import Config
from conftest import git


def test_patterns_are_anchored_and_escaped(tmp_path):
    assert ignorepath.anchored(str(tmp_path / "sub" / "build"), str(tmp_path)) == "/sub/build"
    assert ignorepath.anchored(str(tmp_path / "a*b #c"), str(tmp_path)) == "/a\\*b\\ \\#c"


def test_git_add_all_leaves_ignorepath_and_keeps_the_users_excludes(tmp_path, monkeypatch):
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
    env = ignorepath.git_environment(cfg, str(top / ".git"), str(tmp_path / "x.exclude"))
    monkeypatch.setattr(os, "environ", dict(os.environ, **env))
    subprocess.run(["git", "add", "-A"], cwd=str(folder), env=os.environ, check=True)
    staged = git("diff", "--cached", "--name-only", cwd=str(top)).decode().split()
    assert staged == ["synced/keep.txt", "synced/src/kept.c"]


def test_nothing_is_set_without_ignorepath_or_git(tmp_path):
    assert ignorepath.git_environment(Config(path=str(tmp_path), ignorepath=[]), "/x/.git",
                                      str(tmp_path / "e")) == {}
    assert ignorepath.git_environment(Config(path=str(tmp_path), ignorepath=["b"]), None,
                                      str(tmp_path / "e")) == {}
