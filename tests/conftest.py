"""Shared fixtures: a private HOME, a bare git remote on disk, and machines
(clones with a config file) on which the real suite runs."""
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)  # fixture modules (prosody.py, dbus_session.py) import by name


def git(*args, cwd=None, check=True):
    """Run git and return its stdout as bytes."""
    return subprocess.run(("git",) + args, cwd=cwd, check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout


def wait_until(predicate, timeout=30.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def tree(machine):
    """{relative path: content} of a machine's working tree, without DVCS metadata."""
    found = {}
    for root, dirs, files in os.walk(machine.path):
        dirs[:] = [d for d in dirs if d not in (".git", ".hg")]
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                found[os.path.relpath(full, machine.path)] = f.read()
    return found


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    """Each test gets its own HOME and git identity; the user's settings never leak in."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    for key, value in (("user.name", "Test"), ("user.email", "test@example.org"),
                       ("init.defaultBranch", "main"), ("pull.rebase", "false")):
        git("config", "--global", key, value)
    return home


class Remote:
    """A bare repository on disk with one first commit on main."""

    def __init__(self, path):
        self.path = str(path)
        git("init", "-q", "--bare", self.path)
        seed = str(path) + ".seed"
        git("clone", "-q", self.path, seed)
        with open(os.path.join(seed, "README"), "w") as f:
            f.write("synced folder\n")
        git("add", "README", cwd=seed)
        git("commit", "-q", "-m", "first", cwd=seed)
        git("push", "-q", "origin", "HEAD:main", cwd=seed)

    def files(self):
        """{path bytes: content bytes} of what main holds on the remote."""
        names = git("--git-dir", self.path, "ls-tree", "-r", "-z", "--name-only", "main")
        return {n: git("--git-dir", self.path, "cat-file", "blob", "main:" + os.fsdecode(n))
                for n in names.split(b"\0") if n}

    def commit_count(self):
        return int(git("--git-dir", self.path, "rev-list", "--count", "main"))

    def log(self, *args):
        return git("--git-dir", self.path, "log", *args).decode("utf-8", "replace")


class Machine:
    """A clone of the remote with its own config file, and the suite running on it."""

    def __init__(self, base, name, remote, **settings):
        self.name = name
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        git("clone", "-q", remote.path, self.path)
        self.settings = dict(path=self.path, syncmethod="none", notifymethod="none",
                             readfrequency="0.2", maxwait="3", pushdelay="0",
                             pullinterval="0")
        self.settings.update(settings)
        self.dvcs = {}
        self.xmpp = {}
        self.proc = None
        self.write_config()

    def write_config(self):
        lines = ["[autosync]"] + ["%s = %s" % kv for kv in self.settings.items()]
        if self.dvcs:
            lines += ["[dvcs]"] + ["%s = %s" % kv for kv in self.dvcs.items()]
        if self.xmpp:
            lines += ["[xmpp]"] + ["%s = %s" % kv for kv in self.xmpp.items()]
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(self.config, 0o600)  # it may hold a password

    def start(self, wait=True):
        self.logfile = open(self.log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "autosync.supervisor", "-v",
                                      self.config], stdout=self.logfile, stderr=self.logfile,
                                     stdin=subprocess.DEVNULL)
        if wait:
            wait_until(lambda: self.status().get("state") == "idle", 30,
                       what="%s to start" % self.name)
            wait_until(lambda: b"watching" in open(self.log, "rb").read(), 30,
                       what="%s's watcher" % self.name)
        return self

    def notify(self, *args, check=True):
        result = subprocess.run([sys.executable, "-m", "autosync.notify", "--config",
                                 self.config] + list(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        if check and result.returncode != 0:
            raise AssertionError("autosync-notify %s: %s" % (args, result.stderr))
        return result

    def status(self):
        import json
        result = self.notify("--json", "status", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else {}

    def settled(self, remote):
        """True once nothing is pending, nothing unpushed, and the remote has our HEAD."""
        s = self.status()
        if s.get("state") != "idle" or s.get("pending") or s.get("unpushed"):
            return False
        if self.dirty():
            return False
        head = git("rev-parse", "HEAD", cwd=self.path).strip()
        return head == git("--git-dir", remote.path, "rev-parse", "main").strip()

    def read(self, rel):
        """The content of a file in the folder, or None if it is not there."""
        try:
            with open(os.path.join(self.path, rel), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def dirty(self):
        """Paths git sees changed that the suite should have committed."""
        from autosync.config import load
        from autosync.watcher import Ignore
        ignore = Ignore(self.path, load(self.config).ignorepath)
        out = git("status", "--porcelain", "-z", "--no-renames", cwd=self.path)
        return [os.fsdecode(e[3:]) for e in out.split(b"\0")
                if e and not ignore(os.fsdecode(e[3:]).rstrip("/"))]

    def children(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid), "-a"], stdout=subprocess.PIPE,
                             text=True).stdout
        found = {}
        for line in out.splitlines():
            words = line.split()
            for word in words:
                if word.startswith("autosync."):
                    found[word.split(".", 1)[1]] = int(words[0])
        return found

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def logtext(self):
        return open(self.log, "rb").read().decode("utf-8", "replace")


@pytest.fixture
def remote(tmp_path):
    return Remote(tmp_path / "remote.git")


@pytest.fixture
def machines(tmp_path, remote):
    """machines("a", "b", readfrequency="0.5") -> started Machine objects; stopped afterwards."""
    made = []

    def make(*names, start=True, **settings):
        new = [Machine(tmp_path, name, remote, **settings) for name in names]
        made.extend(new)
        for m in new:
            if start:
                m.start()
        return new if len(new) > 1 else new[0]

    yield make
    for m in made:
        m.stop()
