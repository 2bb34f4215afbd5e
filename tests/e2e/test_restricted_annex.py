"""The restricted key of docs/ssh.md (`command="autosync-remote serve PATH",restrict` in
the server's authorized_keys) with a folder whose big files go to git-annex
(`largefiles`): git-annex reaches the one repository through it, and nothing else. A
real sshd (tests/sshd.py), the key line `dvcs-autosync init` prints, real git-annex on
the machines and on the server. The parsing word by word: tests/unit/ssh/test_serve_annex.py."""
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from autosync.tools.init import key_line
from base import Machine, Remote, git, wait_until
from helpers import annex, annex_bytes, save_versions, use_example
from sshd import Sshd, missing

pytestmark = pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")

SIZE = 300 * 1000  # above the machines' largefiles


@pytest.fixture
def sshd(tmp_path, monkeypatch, remote):
    """A started private sshd whose only key line is the restricted one for `remote`
    (with an annex, as docs/beyond-git.md sets the server up)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    annex(remote.path, "init", "-q", "server")
    server = Sshd(tmp_path / "sshd")
    # git-annex-shell records what it got in the git-annex branch: a commit needs the
    # server user's name, as on any server where git commits.
    with open(os.path.join(server.home, ".gitconfig"), "w") as f:
        f.write("[user]\n\tname = server\n\temail = server@example.org\n")
    authorize(server, remote)
    monkeypatch.setenv("GIT_SSH_COMMAND", server.ssh_command)
    yield server.start()
    server.stop()


def authorize(server, remote, before=""):
    """The line init prints, with the program's full path (not on the sessions' PATH)."""
    line = key_line(server.url(remote.path))
    assert line == 'command="autosync-remote serve %s",restrict' % remote.path
    server.authorize(True, line.replace("autosync-remote", before + server.remote_program, 1))


def over_ssh(server, command):
    """`command` sent through the key as git-annex sends it (ssh HOST COMMAND)."""
    return subprocess.run(shlex.split(server.ssh_command) + ["-o", "ControlPath=none",
                                                             "127.0.0.1", command],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.fixture
def annexed(tmp_path, remote, sshd):
    """annexed(name) -> a machine of docs/beyond-git.md's set-up over ssh: largefiles, the
    example's commands, its annex made with `git annex init` (which asks the remote's
    annex over ssh, through the key); git-annex runs its own ssh, told the test's client
    files. Stopped before the server is."""
    made = []

    def make(name):
        m = Machine(tmp_path, name, remote, syncmethod="ssh", largefiles="100kb")
        made.append(m)
        git("remote", "set-url", "origin", sshd.url(remote.path), cwd=m.path)
        git("config", "remote.origin.annex-ssh-options", "-F " + sshd.client_config,
            cwd=m.path)
        annex(m.path, "init", "-q", name)
        use_example(m, "git-annex.autosync")
        return m
    yield make
    for m in made:
        m.stop()


def expire(machine):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor", "expire", "--config",
                           machine.config, "--older-than", "1s", "--yes"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)


@pytest.mark.e2e
def test_big_files_reach_the_other_machine_through_the_restricted_key(sshd, annexed, remote):
    a = annexed("a")
    annex(a.path, "sync", "-q", "--no-content")  # the git-annex branch, for b's clone
    b = annexed("b")
    server_uuid = git("--git-dir", remote.path, "config", "annex.uuid").strip()
    for m in (a, b):  # git-annex read the remote's annex through the key (configlist)
        assert git("config", "--get", "remote.origin.annex-uuid", cwd=m.path,
                   check=False).strip() == server_uuid
        m.start()
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    versions = save_versions(a, b, remote, 2, SIZE)
    assert remote.files()[b"video.bin"].startswith(b"/annex/objects/")  # annexed
    assert annex_bytes(remote.path) >= 2 * SIZE  # both versions, sent through the key
    # expire drops replaced versions from the server (docs/large-folders.md): the key
    # lets a machine drop, or the server's storage would only grow; unless its line says
    # `env GIT_ANNEX_SHELL_APPENDONLY=1` (docs/ssh.md), which git-annex-shell gets.
    time.sleep(2)  # the versions' age (whole seconds in commits), not a wait for the daemons
    authorize(sshd, remote, before="env GIT_ANNEX_SHELL_APPENDONLY=1 ")
    kept = expire(a)
    assert kept.returncode == 1, kept.stdout
    assert kept.stdout.splitlines()[-2].startswith("not dropped from origin: video.bin as it "
                                                   "was until "), kept.stdout
    assert kept.stdout.splitlines()[-1] == "dropped 0 versions (nothing freed); 1 refused " \
                                           "by git-annex (above)"
    assert annex_bytes(remote.path) >= 2 * SIZE
    authorize(sshd, remote)
    done = expire(a)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines()[-1] == "dropped 1 versions (300.0 kB on origin)"
    assert SIZE <= annex_bytes(remote.path) < 2 * SIZE
    assert b.read("video.bin") == versions[-1]


def test_git_annex_shell_reaches_the_served_repository_and_no_other(sshd, remote, tmp_path):
    served_uuid = git("--git-dir", remote.path, "config", "annex.uuid").decode().strip()
    said = over_ssh(sshd, "git-annex-shell 'configlist' '%s'" % remote.path)
    assert said.returncode == 0, said.stderr
    assert "annex.uuid=%s\n" % served_uuid in said.stdout
    # Another repository of the same user on the same server, one with an annex and one
    # without (which configlist's autoinit=1 would give one).
    annexed = Remote(tmp_path / "annexed.git")
    annex(annexed.path, "init", "-q", "annexed")
    plain = Remote(tmp_path / "plain.git")
    before = [git("--git-dir", r.path, "config", "--list") for r in (annexed, plain)]
    for repo in (annexed.path, plain.path):
        for command in ("git-annex-shell 'configlist' '%s'" % repo,
                        "git-annex-shell 'configlist' '%s' '--' 'autoinit=1' '--'" % repo,
                        "git-annex-shell 'p2pstdio' '%s' '%s' --uuid %s" % (
                            repo, served_uuid, served_uuid)):
            refused = over_ssh(sshd, command)
            assert (refused.returncode, refused.stdout, refused.stderr) == (
                1, "", "autosync-remote: this key may only sync %s, not %s\n" % (
                    remote.path, repo)), command
    assert [git("--git-dir", r.path, "config", "--list") for r in (annexed, plain)] == before
    # git-annex itself, in a clone of the other repository: it gets no annex there.
    clone = str(tmp_path / "clone")
    git("clone", "-q", annexed.path, clone)
    git("remote", "set-url", "origin", sshd.url(annexed.path), cwd=clone)
    git("config", "remote.origin.annex-ssh-options", "-F " + sshd.client_config, cwd=clone)
    init = subprocess.run(["git", "annex", "init", "clone"], cwd=clone, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert "autosync-remote: this key may only sync %s, not %s" % (
        remote.path, annexed.path) in init.stdout
    assert git("config", "--get", "remote.origin.annex-uuid", cwd=clone, check=False) == b""


def test_hostile_words_for_git_annex_shell_are_refused_in_one_line(sshd, remote, tmp_path):
    outside = str(tmp_path / "outside")
    git("init", "-q", "--bare", outside)
    uuid = git("--git-dir", remote.path, "config", "annex.uuid").decode().strip()
    repo = remote.path
    start = "autosync-remote: this key may only sync %s" % repo
    for command, said in (
            ("git-annex-shell 'configlist' '/'", ", not /"),
            ("git-annex-shell 'configlist' '%s'" % outside, ", not " + outside),
            ("git-annex-shell 'configlist' '%s/../outside'" % repo,
             ", not %s/../outside" % repo),
            ("git-annex-shell 'configlist' '%s' -c 'annex.x=y'" % repo,
             ": git-annex-shell configlist: -c is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' %s --uuid %s -- 'autoinit=1' -- --server" % (
                repo, uuid, uuid), ": git-annex-shell p2pstdio: words after its fields"),
            ("git-annex-shell 'gcryptsetup' '%s' x" % repo,
             ": git-annex-shell gcryptsetup is not a command it runs here (only configlist, "
             "notifychanges, p2pstdio)"),
            ("git-annex-shell 'git-receive-pack' '%s'" % outside,
             ": git-annex-shell git-receive-pack is not a command it runs here (only "
             "configlist, notifychanges, p2pstdio)"),
            ("git-annex-shell 'configlist' \"$(touch %s/pwned)\"" % tmp_path,
             ", not $(touch %s/pwned)" % tmp_path)):
        refused = over_ssh(sshd, command)
        assert (refused.returncode, refused.stdout, refused.stderr) == (
            1, "", start + said + "\n"), command
    assert not (tmp_path / "pwned").exists()


def test_a_server_without_git_annex_says_so_in_one_line(sshd, remote, tmp_path):
    # The same key line, run where the PATH has git and no git-annex-shell.
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    for program in ("git", "git-upload-pack", "git-receive-pack"):
        os.symlink(shutil.which(program), str(only_git / program))
    authorize(sshd, remote, before="env PATH=%s " % only_git)
    missing_line = "autosync-remote: git-annex-shell is not installed on this server (not " \
                   "on PATH %s): install git-annex here to sync the annexed files of %s" % (
                       only_git, remote.path)
    said = over_ssh(sshd, "git-annex-shell 'configlist' '%s'" % remote.path)
    assert (said.returncode, said.stdout, said.stderr) == (1, "", missing_line + "\n")
