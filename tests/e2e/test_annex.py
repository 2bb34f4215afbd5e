"""End-to-end: large files through git-annex (docs/examples/git-annex.autosync).

A 5 MB binary changed several times reaches the second machine with the
right content each time, while the remote's git history grows by pointers
only; the content lives in the remote's annex."""
import os
import shutil
import subprocess
import sys

import pytest

from base import ROOT, git, wait_until
from helpers import use_example
from helpers import annex, annex_bytes, annexed_pair, folder_bytes

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")]

SIZE = 5 * 1000 * 1000


def git_bytes(repo):
    """Bytes of the repository's git objects (compressed, as stored), not the annex's content."""
    return folder_bytes(os.path.join(repo, "objects"))


def test_large_file_versions_travel_through_the_annex(machines, remote):
    # The rule is shared by every clone through the git-annex branch.
    a, b = annexed_pair(machines, remote, rule="largerthan=1mb or include=*.iso")

    def reaches_b(rel, data):
        wait_until(lambda: b.read(rel) == data and a.settled(remote) and b.settled(remote),
                   60, 0.1, "%s to reach b" % rel)

    before = git_bytes(remote.path)
    versions = []
    for i in range(3):
        versions.append(os.urandom(SIZE))
        with open(os.path.join(a.path, "video.bin"), "wb") as f:
            f.write(versions[-1])
        reaches_b("video.bin", versions[-1])
    growth = git_bytes(remote.path) - before
    print("remote git objects grew by %d bytes for 3 versions of a %d byte file; annex holds %d"
          % (growth, SIZE, annex_bytes(remote.path)))
    assert growth < 100 * 1000  # pointers, commits and git-annex logs
    assert annex_bytes(remote.path) >= 3 * SIZE
    assert remote.files()[b"video.bin"].startswith(b"/annex/objects/")

    # A small text file stays an ordinary git file; the chosen pattern goes to the annex.
    with open(os.path.join(b.path, "notes.txt"), "wb") as f:
        f.write(b"small\n")
    with open(os.path.join(b.path, "tiny.iso"), "wb") as f:
        f.write(b"iso\n")
    wait_until(lambda: a.read("notes.txt") == b"small\n" and a.read("tiny.iso") == b"iso\n"
               and a.settled(remote) and b.settled(remote), 60, 0.1, "b's files to reach a")
    files = remote.files()
    assert files[b"notes.txt"] == b"small\n"
    assert files[b"tiny.iso"].startswith(b"/annex/objects/")

    # restore gives back the annexed content, not the pointer.
    result = subprocess.run([sys.executable, "-m", "autosync.supervisor", "restore",
                             os.path.join(a.path, "video.bin"), "--config", a.config],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 0, result.stderr
    reaches_b("video.bin", versions[1])
    assert "Traceback" not in a.logtext() + b.logtext()


def test_git_annex_over_ssh_goes_through_the_held_connection(machines, remote, tmp_path,
                                                             monkeypatch):
    """Over ssh, git-annex's transfers (its git-annex-shell p2pstdio) go through the one
    connection the daemon holds to the server, as git's push and fetch do: no login per
    push and pull (git-annex's own ssh made one each, 0.4-1 s; tests/benchmarks/JOURNAL.md,
    "Big files over ssh")."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from sshd import Sshd, missing
    if missing():
        pytest.skip(missing())
    server = Sshd(tmp_path / "sshd").start()
    try:
        # Plain `ssh` (git's, the daemon's, and git-annex's own) reaches this server: ssh
        # reads ~/.ssh from the passwd entry, not $HOME, so an `ssh` first on PATH gives it
        # the server's client files.
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "ssh").write_text('#!/bin/sh\nexec %s -F %s "$@"\n' % (
            shutil.which("ssh"), server.client_config))
        (bin_dir / "ssh").chmod(0o755)
        monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
        monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
        annex(remote.path, "init", "-q", "remote")
        git("--git-dir", remote.path, "config", "user.name", "server")  # git-annex-shell
        git("--git-dir", remote.path, "config", "user.email", "server@example.org")
        made = []
        for name in ("a", "b"):
            m = machines(name, start=False, largefiles="100kb", syncmethod="ssh")
            git("remote", "set-url", "origin", server.url(remote.path), cwd=m.path)
            annex(m.path, "init", "-q", name)
            assert git("config", "--get", "remote.origin.annex-uuid", cwd=m.path).strip()
            annex(m.path, "sync", "-q", "--no-content")
            use_example(m, "git-annex.autosync")
            made.append(m)
        a, b = made
        for m in made:
            m.start()
            wait_until(lambda: m.status().get("link") == "up", 60, 0.1, "%s's link" % m.name)

        def version(data):
            with open(os.path.join(a.path, "video.bin"), "wb") as f:
                f.write(data)
            wait_until(lambda: b.read("video.bin") == data and a.settled(remote) and
                       b.settled(remote), 60, 0.1, "the version on b")

        version(os.urandom(SIZE // 10))
        logins = server.logtext().count("Accepted publickey for")
        for _ in range(2):  # each: a's git annex sync (push), then b's (pull)
            version(os.urandom(SIZE // 10))
        assert remote.files()[b"video.bin"].startswith(b"/annex/objects/")
        assert annex_bytes(remote.path) >= 3 * SIZE // 10
        assert server.logtext().count("Accepted publickey for") == logins
        assert "Traceback" not in a.logtext() + b.logtext()
    finally:
        server.stop()
