"""Real git repositories for the tests of the pull, the repository and the remote's
forced command (no machine running the suite):

* two: a bare remote and two clones with a first commit; commit, write, pull (git's
  pull as the daemon runs it), status and head on a clone;
* plant: a commit whose tree git add would never make (a path git refuses, a name twice),
  as an attacker who can push would make it;
* small_tmpfs: a small disk, to fill;
* state: the guarded writer's journal folder, private to the test;
* repo: a Repository on a clone of a real remote, reporting to a recorder;
* repos: two bare repositories in a home folder, as autosync-remote serves them (ME and
  THEM: the two git-annex UUIDs).

Fixtures are imported by name where they are used (`from repos import two  # noqa:
F401`), as prosody.py's and dbus_session.py's are.
"""
import os
import subprocess

import pytest

from autosync.committer.repository import Repository
from autosync.core.config import GIT_COMMANDS
from autosync.vcs import git as gitrepo
from autosync.vcs.pull import git as gitpull
from base import Remote, git
from fakes import Reports, config


@pytest.fixture
def two(tmp_path):
    """A remote and two clones, "a" and "b", each with a commit of z.txt and d/y.txt."""
    remote = Remote(tmp_path / "remote.git")
    clones = []
    for name in ("a", "b"):
        path = str(tmp_path / name)
        git("clone", "-q", remote.path, path)
        clones.append(path)
    a, b = clones
    os.mkdir(os.path.join(a, "d"))
    for rel, text in (("z.txt", b"first\n"), ("d/y.txt", b"y\n")):
        with open(os.path.join(a, rel), "wb") as f:
            f.write(text)
    commit(a, "autosync on a: added z.txt, d/y.txt")
    git("pull", "-q", cwd=b)
    return remote, a, b


def commit(folder, message):
    git("add", "-A", cwd=folder)
    git("commit", "-q", "-m", message, cwd=folder)
    git("push", "-q", cwd=folder)


def write(folder, rel, data):
    with open(os.path.join(folder, rel), "wb") as f:
        f.write(data)


def pull(folder, seam=None, pullcmd="git pull -q --no-rebase --no-edit"):
    puller = gitpull.GitPull(folder, gitrepo.git_dir(folder), "b", gitpull.plain_pull(pullcmd))
    puller.writer.checked = seam
    return puller.run()


def status(folder):
    return git("status", "--porcelain", "--untracked-files=all", cwd=folder).decode()


def head(folder):
    return git("rev-parse", "HEAD", cwd=folder).decode().strip()


def plant(folder, entries, message="planted"):
    """A commit on top of HEAD whose tree adds `entries` [(mode, path, content)] to
    HEAD's, built object by object as `git add` would never build it; pushed."""
    base = git("rev-parse", "HEAD^{tree}", cwd=folder).decode().strip()
    tree = base
    for mode, path, content in entries:
        tree = with_entry(folder, tree, path.split("/"), mode, content)
    rev = git("commit-tree", tree, "-p", "HEAD", "-m", message, cwd=folder).decode().strip()
    git("update-ref", "HEAD", rev, cwd=folder)
    git("push", "-q", "-f", "origin", "HEAD:main", cwd=folder)
    return rev


def with_entry(folder, tree, parts, mode, content):
    """tree with the entry at parts (a list of names, any bytes but /) set."""
    listing = git("ls-tree", "-z", tree, cwd=folder).split(b"\0") if tree else []
    rows = {}
    for row in listing:
        if row:
            info, name = row.split(b"\t", 1)
            rows[name] = info
    name = os.fsencode(parts[0])
    if len(parts) == 1:
        if mode == "160000":
            oid = content
        else:
            oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=folder,
                                 input=content, stdout=subprocess.PIPE, check=True
                                 ).stdout.decode().strip()
        kind = {"160000": "commit", "040000": "tree"}.get(mode, "blob")
        rows[name] = b"%s %s %s" % (mode.encode(), kind.encode(), oid.encode())
    else:
        sub = None
        if name in rows and rows[name].split()[1] == b"tree":
            sub = rows[name].split()[2].decode()
        sub = with_entry(folder, sub, parts[1:], mode, content)
        rows[name] = b"040000 tree %s" % sub.encode()
    data = b"".join(b"%s\t%s\0" % (info, n) for n, info in rows.items())
    return subprocess.run(["git", "mktree", "-z"], cwd=folder, input=data,
                          stdout=subprocess.PIPE, check=True).stdout.decode().strip()


def small_tmpfs(tmp_path, size):
    """A tmpfs of `size` ("4m") at tmp_path/small, unmounted (lazily) after the test."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(mount)],
                      stderr=subprocess.DEVNULL).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    where = tmp_path / "state" / "autosync" / "writing"
    where.mkdir(parents=True, mode=0o700)
    return where


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A Repository on a real clone of a real bare remote, reporting to a recorder."""
    remote = Remote(tmp_path / "remote.git")
    clone = tmp_path / "clone"
    git("clone", "-q", remote.path, str(clone))

    def make(**commands):
        reports = Reports()
        cfg = config(clone, commands=dict(GIT_COMMANDS, **commands))
        return Repository(cfg, reports), reports
    make.path, make.remote = clone, remote
    return make


ME = "bd22132c-3b41-4ae9-bd0c-c4a1883ec516"    # the asking repository's UUID
THEM = "6bea21d5-1820-426b-bad9-c4b08cc76d49"  # the served repository's


@pytest.fixture
def repos(tmp_path):
    """(served, other, home): two bare repositories in the home folder."""
    home = tmp_path / "home"
    for name in ("sync.git", "other.git"):
        git("init", "-q", "--bare", str(home / name))
    return str(home / "sync.git"), str(home / "other.git"), str(home)
