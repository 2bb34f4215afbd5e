"""End-to-end: two machines sync through an encrypted gcrypt:: remote
(git-remote-gcrypt) with a throwaway GnuPG home and key; the repository on
disk never holds a file name or content in plaintext."""
import os
import shutil
import subprocess

import pytest

from base import ROOT, Machine, git, wait_until
from helpers import use_example

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not (shutil.which("git-remote-gcrypt") and shutil.which("gpg")),
                                 reason="needs git-remote-gcrypt and gpg")]

NAME, CONTENT, EDIT = "secret-plan.txt", b"launch codes 4242\n", b"meet at the old mill\n"


@pytest.fixture
def gpg_key(tmp_path, monkeypatch):
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                    "Autosync Test <autosync@example.org>", "default", "default", "never"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(["gpg", "--list-keys", "--with-colons"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    yield next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], stderr=subprocess.DEVNULL)


class GcryptMachine(Machine):
    """A working tree whose origin is gcrypt::BARE, encrypting to `key`."""

    def __init__(self, base, name, bare, key):
        self.name = name
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        git("init", "-q", "-b", "main", self.path)
        git("remote", "add", "origin", "gcrypt::" + bare, cwd=self.path)
        git("config", "remote.origin.gcrypt-participants", key, cwd=self.path)
        git("config", "remote.origin.gcrypt-signingkey", key, cwd=self.path)
        self.settings = dict(path=self.path, syncmethod="none", notifymethod="none",
                             readfrequency="0.2", maxwait="3", pushdelay="0", pullinterval="0")
        self.proc = None
        use_example(self, "gcrypt.autosync")

    def settled(self, _remote=None):
        s = self.status()
        return (s.get("state") == "idle" and not s.get("pending") and not s.get("unpushed")
                and not s.get("last_error") and not self.dirty())

    def head(self):
        return git("rev-parse", "HEAD", cwd=self.path).strip()


def every_byte(repo):
    """All of a repository's files, and every git object in it decompressed."""
    data = []
    for root, _, names in os.walk(repo):
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                data.append(f.read())
    data.append(subprocess.run(["git", "--git-dir", repo, "cat-file", "--batch-all-objects",
                                "--batch"], stdout=subprocess.PIPE, check=True).stdout)
    return b"\n".join(data)


def test_two_machines_sync_through_an_encrypted_remote(tmp_path, gpg_key):
    bare = str(tmp_path / "remote.git")
    git("init", "-q", "--bare", "-b", "main", bare)
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"),
                os.path.join(bare, "hooks", "post-receive"))
    a = GcryptMachine(tmp_path, "a", bare, gpg_key)
    with open(os.path.join(a.path, "README"), "w") as f:
        f.write("private diary\n")
    git("add", "README", cwd=a.path)
    git("commit", "-q", "-m", "first", cwd=a.path)
    git("push", "-q", "-u", "origin", "main", cwd=a.path)
    b = GcryptMachine(tmp_path, "b", bare, gpg_key)
    git("pull", "-q", "origin", "main", cwd=b.path)
    git("branch", "-q", "-u", "origin/main", cwd=b.path)
    for m in (a, b):
        git("--git-dir", bare, "config", "--add", "autosync.config", m.config)
    try:
        a.start(), b.start()
        with open(os.path.join(a.path, NAME), "wb") as f:
            f.write(CONTENT)
        wait_until(lambda: b.read(NAME) == CONTENT and a.settled() and b.settled()
                   and a.head() == b.head(), 60, 0.1, "a's file to reach b")
        with open(os.path.join(b.path, NAME), "wb") as f:
            f.write(EDIT)
        wait_until(lambda: a.read(NAME) == EDIT and a.settled() and b.settled()
                   and a.head() == b.head(), 60, 0.1, "b's edit to reach a")
    finally:
        a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()

    stored = every_byte(bare)
    for plain in (NAME.encode(), CONTENT, EDIT, b"private diary", b"autosync on"):
        assert plain not in stored, plain
    # The same search finds them in a plaintext repository: the check can see.
    local = every_byte(os.path.join(a.path, ".git"))
    assert NAME.encode() in local and CONTENT in local and EDIT in local
