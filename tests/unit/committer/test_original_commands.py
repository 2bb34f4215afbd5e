"""The original's git command strings run as the shipped ones (config.ORIGINAL_GIT_COMMANDS),
so a drop-in user's folder move is one staging operation, not one per file (issue 32)."""
import collections
import os
import stat

import pytest

from autosync.core import config
from base import ORIGINAL_COMMANDS, git
from repos import repo  # noqa: F401  (the fixture)


def test_the_original_strings_are_the_shipped_ones_and_nothing_else_is():
    for name, text in ORIGINAL_COMMANDS.items():
        if name in config.ORIGINAL_GIT_COMMANDS:
            assert config.shipped_form(name, text) == config.GIT_COMMANDS[name], name
    # as the original's example file writes them (a trailing blank, an indented line)
    assert config.shipped_form("movecmd", "git rm %s \n    git add %s") == \
        config.GIT_COMMANDS["movecmd"]
    assert config.shipped_form("rmcmd", "git rm -r %s") == config.GIT_COMMANDS["rmcmd"]
    for name, text in (("addcmd", "git add -f %s"), ("movecmd", "git mv %s %s"),
                       ("statuscmd", "hg status"), ("commitcmd", "git commit -a -m %s"),
                       ("pushcmd", "git push")):
        assert config.shipped_form(name, text) == text


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """Every git the daemon's code runs is counted (a wrapper first on PATH)."""
    real_git = [p for p in (os.path.join(d, "git") for d in os.environ["PATH"].split(":"))
                if os.access(p, os.X_OK)][0]
    bindir, count = tmp_path / "bin", tmp_path / "count"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text('#!/bin/sh\necho "$1" >> %s\nexec %s "$@"\n' % (count, real_git))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))

    def runs():
        return count.read_text().split() if count.exists() else []
    return runs


def test_a_folder_of_2000_files_moved_with_the_original_strings_is_one_staging(repo, counted):
    """The original's movecmd (`git rm %s` / `git add %s`) refuses a folder; run as itself
    it was 2,000 `git rm` and 2,000 `git add`. As the shipped one: a few gits, and one
    commit of 2,000 exact renames."""
    folder = repo.path / "photos"
    folder.mkdir()
    for i in range(2000):
        (folder / ("img%04d.jpg" % i)).write_bytes(b"picture %d\n" % i)
    git("add", "-A", cwd=repo.path)
    git("commit", "-q", "-m", "photos", cwd=repo.path)
    r, reports = repo(**{k: v for k, v in ORIGINAL_COMMANDS.items()
                         if k in config.ORIGINAL_GIT_COMMANDS})
    os.rename(folder, repo.path / "pictures")
    before = len(counted())
    assert r.commit([{"action": "moved", "path": "pictures", "src": "photos"}])
    runs = counted()[before:]
    by_kind = sorted(collections.Counter(runs).items())
    print("gits run for the move: %d %s" % (len(runs), by_kind))
    assert len(runs) <= 20, by_kind
    assert runs.count("rm") <= 1 and runs.count("add") <= 1, by_kind
    status = git("show", "-M", "--name-status", "--format=", "HEAD", cwd=repo.path).decode()
    renames = [l for l in status.splitlines() if l.startswith("R100")]
    assert len(renames) == 2000 and len(status.splitlines()) == 2000
    (message, listed), _ = reports.named("committed")[0]
    assert message.startswith("autosync on testhost: 2000 moved")
