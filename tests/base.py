"""What every tier of the tests builds on: the checkout's paths, git and hg run,
waiting for what the product says, a working tree read; a bare remote (Remote), a
clone running the suite (Machine), the suite run as an ordinary user (OrdinaryUser).

conftest.py makes fixtures of them. A test imports them from here, never from
conftest.py or another test (tests/unit/test_test_layout.py).
"""
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/
ROOT = os.path.dirname(HERE)  # the checkout


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


def write_during_checkout(machine, trigger, rel, content):
    """The user's write made at the worst moment of a pull: while the pull checks out
    `trigger`, `rel` gets `content` (once), through a smudge filter on `trigger`.
    -> the flag file that exists once it happened."""
    flag = str(machine.path) + ".typed"
    sneak = str(machine.path) + ".sneak.sh"
    with open(sneak, "w") as f:
        f.write("#!/bin/sh\n[ -e '%s' ] || { printf '%s' > '%s/%s'; touch '%s'; }\nexec cat\n"
                % (flag, content.replace("\n", "\\n"), machine.path, rel, flag))
    os.chmod(sneak, 0o755)
    git("config", "filter.sneak.smudge", sneak, cwd=machine.path)
    with open(os.path.join(machine.path, ".git", "info", "attributes"), "w") as f:
        f.write("%s filter=sneak\n" % trigger)
    return flag


def tree(machine):
    """{relative path: content} of a machine's working tree, without DVCS metadata."""
    found = {}
    for root, dirs, files in os.walk(machine.path):
        dirs[:] = [d for d in dirs if d not in (".git", ".hg")]
        for name in files:
            if root == machine.path and name == ".git":
                continue  # a .git file: the repository is elsewhere
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                found[os.path.relpath(full, machine.path)] = f.read()
    return found


def hg(*args, cwd=None):
    return subprocess.run(("hg",) + args, cwd=cwd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout.decode()


# Every Machine started by a test, stopped after it whoever made it (conftest's
# no_daemon_left): the machines fixture stops its own, but a helpers.Joined, made
# by init, has no fixture: its daemons were left running for hours.
STARTED = []


def remove_private_tmp(home):
    """Remove the private runtime folder of /tmp that the programs run with `home` as HOME
    made (autosync.core.paths.private_tmp, remembered in the state folder)."""
    try:
        made = os.readlink(os.path.join(home, ".local", "state", "autosync",
                                        "runtime." + socket.gethostname()))
    except OSError:
        return
    if made.startswith("/tmp/autosync-"):
        shutil.rmtree(made, ignore_errors=True)


def stat_inputs(folder, store, *repositories):
    """The stat()s of what a look at `folder` (its files, its repository `store` inside
    it: top files, git's refs, hg's store) and at other `repositories` reads: equal twice over, the
    answer of the version control is the same (a test's poll asks it again only then)."""
    seen = []
    for top, dirs, files in os.walk(folder):
        if top == folder:
            dirs[:] = [d for d in dirs if d != store]
        dirs.sort()
        for name in sorted(files) + dirs:
            st = os.lstat(os.path.join(top, name))
            seen.append((top, name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode))
    for repository in (os.path.join(folder, store),) + repositories:
        for top, dirs, files in os.walk(repository):
            below = os.path.relpath(top, repository)
            if below != "." and not below.startswith("refs") and below != "store":
                dirs[:] = []
                continue
            if below == "store":  # hg's: its changelog and manifest (not the files' data)
                dirs[:] = []
            dirs.sort()
            for name in sorted(files) + dirs:
                st = os.lstat(os.path.join(top, name))
                seen.append((top, name, st.st_size, st.st_mtime_ns, st.st_ino))
    return seen


class Remote:
    """A bare repository on disk with one first commit on main."""

    def __init__(self, path):
        self.path = str(path)
        git("init", "-q", "--bare", "-b", "main", self.path)
        seed = str(path) + ".seed"
        git("clone", "-q", self.path, seed)
        with open(os.path.join(seed, "README"), "w") as f:
            f.write("synced folder\n")
        git("add", "README", cwd=seed)
        git("commit", "-q", "-m", "first", cwd=seed)
        git("push", "-q", "origin", "HEAD:main", cwd=seed)

    def files(self):
        """{path bytes: content bytes} of what main holds on the remote."""
        # main read once: a push landing between the listing and a read changes nothing
        rev = git("--git-dir", self.path, "rev-parse", "main").decode().strip()
        names = git("--git-dir", self.path, "ls-tree", "-r", "-z", "--name-only", rev)
        return {n: git("--git-dir", self.path, "cat-file", "blob", rev + ":" + os.fsdecode(n))
                for n in names.split(b"\0") if n}

    def commit_count(self):
        return int(git("--git-dir", self.path, "rev-list", "--count", "main"))

    def log(self, *args):
        return git("--git-dir", self.path, "log", *args).decode("utf-8", "replace")


# The original dvcs-autosync's [dvcs] section, word for word (tests/data/original-autosync-example):
# users who drop the new suite in keep these.
ORIGINAL_COMMANDS = {
    "statuscmd": 'git status | grep -iq "nothing to commit"',
    "addcmd": "git add %s",
    "rmcmd": "git rm %s",
    "modifycmd": "git add %s",
    "movecmd": "git rm %s\n    git add %s",
    "startupcmd": "git add -A",
    "commitcmd": "git commit -m %s",
    "pushcmd": "git push",
    "pullcmd": "git pull",
    "remoteurlcmd": "git config --get remote.origin.url",
}


class Machine:
    """A clone of the remote with its own config file, and the suite running on it."""

    user = None  # an OrdinaryUser runs the suite, when set (see OrdinaryUser.adopt)

    def __init__(self, base, name, remote, dvcs=None, **settings):
        self.name = name
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        git("clone", "-q", remote.path, self.path)
        # readfrequency and pushdelay as shipped (not set: close-aware batches,
        # pushed at once); maxwait shorter, so that a test of an open file is quick.
        self.settings = dict(path=self.path, syncmethod="none", notifymethod="none",
                             maxwait="3", pullinterval="0")
        self.settings.update(settings)
        self.dvcs = dict(dvcs or {})
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
        argv = [sys.executable, "-m", "autosync.supervisor", "-v", self.config]
        if self.user is not None:
            argv = self.user.command(argv[1:])
        self.proc = subprocess.Popen(argv, stdout=self.logfile, stderr=self.logfile,
                                     stdin=subprocess.DEVNULL)
        STARTED.append(self)
        if wait:
            wait_until(lambda: self.status().get("state") == "idle", 30,
                       what="%s to start" % self.name)
            wait_until(lambda: b"watching" in open(self.log, "rb").read(), 30,
                       what="%s's watcher" % self.name)
        return self

    def notify(self, *args, check=True):
        argv = [sys.executable, "-m", "autosync.tools.notify", "--config", self.config] + list(args)
        if self.user is not None:  # only the daemon's own user may talk to it
            argv = self.user.command(argv[1:])
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and result.returncode != 0:
            raise AssertionError("autosync-notify %s: %s" % (args, result.stderr))
        return result

    def status(self):
        """The daemon's status ({} while it does not answer). Asked here, through the
        product's own client (autosync.core.protocol), not by starting autosync-notify:
        tests poll it every 50 ms, and a Python start each time made the suite
        CPU-bound (its own tests cover the command). As another user, through it."""
        if self.user is not None:
            import json
            result = self.notify("--json", "status", check=False)
            return json.loads(result.stdout) if result.returncode == 0 else {}
        from autosync.core import config, protocol
        try:
            path = config.load(self.config, check_path=False).socket
            # as long as a user's autosync-notify waits: a busy committer answers late
            return protocol.ask(path, {"cmd": "status"}, timeout=120).get("status") or {}
        except (OSError, ValueError, config.ConfigError, protocol.ProtocolError,
                protocol.NoDaemon, protocol.Untrusted):
            return {}

    STORE = ".git"  # the repository inside the folder

    def settled(self, remote):
        """True once nothing is pending, nothing unpushed, and the remote has our HEAD."""
        s = self.status()
        if s.get("state") != "idle" or s.get("pending") or s.get("rescan") or s.get("unpushed"):
            return False
        # Polled every 0.1 s: the version control (git, and in an annexed folder
        # git-annex's filter, which `git status` starts; hg, a quarter of a CPU second a
        # run) is asked again only when something it reads has changed.
        seen = stat_inputs(self.path, self.STORE, self.remote_store(remote))
        if getattr(self, "_asked", (None,))[0] != seen:
            self._asked = (seen, not self.dirty() and self.caught_up(remote))
        return self._asked[1]

    def remote_store(self, remote):
        return remote.path

    def caught_up(self, remote):
        """Whether the remote's main is our HEAD."""
        return git("rev-parse", "HEAD", cwd=self.path).strip() == \
            git("--git-dir", remote.path, "rev-parse", "main").strip()

    def read(self, rel):
        """The content of a file in the folder, or None if it is not there."""
        try:
            with open(os.path.join(self.path, rel), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def dirty(self):
        """Paths git sees changed that the suite should have committed."""
        from autosync.core.config import load
        from autosync.core.ignore import Ignore
        ignore = Ignore(self.path, load(self.config).ignorepath)
        out = git("status", "--porcelain", "-z", "--no-renames", "--untracked-files=all",
                  cwd=self.path)
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
                    module = word.split(".", 1)[1]  # a program by its name, as the supervisor calls it
                    found[{"ssh.link": "sshlink", "desktop.tray": "tray"}.get(module, module)] = \
                        int(words[0])
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


class OrdinaryUser:
    """Runs the suite as `nobody`, as users do: root reads everything, a user does not.

    Everything it needs lies in a folder it owns below /tmp: a copy of the code
    under test, its HOME (a git identity and nothing else), the remote and the
    clones. Its Python is a venv of the system's python3 (tests/install.sh),
    since root's own interpreter may sit where `nobody` cannot reach."""

    # tests/install.sh's venv (AUTOSYNC_VENV moves it: to a place `nobody` can reach).
    PYTHON = os.path.join(os.environ.get("AUTOSYNC_VENV", "/opt/autosync-test/venv"), "bin",
                          "python3")

    def __init__(self):
        entry = pwd.getpwnam("nobody")
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        self.base = tempfile.mkdtemp(prefix="autosync-as-nobody-", dir="/tmp")
        os.chmod(self.base, 0o755)
        self.code = os.path.join(self.base, "code")
        shutil.copytree(os.path.join(ROOT, "autosync"), os.path.join(self.code, "autosync"),
                        ignore=shutil.ignore_patterns("*.pyc.*"))  # compiled, as installed
        self.home = os.path.join(self.base, "home")
        os.mkdir(self.home)
        for key, value in (("user.name", "Nobody"), ("user.email", "nobody@example.org")):
            git("config", "--file", os.path.join(self.home, ".gitconfig"), key, value)
        # The tests, as root, look into the user's repositories.
        git("config", "--global", "--add", "safe.directory", "*")
        self.chown(self.base)

    def chown(self, path):
        for root, dirs, files in os.walk(path):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.lchown(name, self.uid, self.gid)

    def adopt(self, machine, own_socket=True):
        """Hand a machine (clone, config, socket folder) to this user; without
        own_socket it uses the default place, /tmp/autosync-UID."""
        if own_socket:
            run = os.path.join(self.base, "run-" + machine.name)
            os.mkdir(run, 0o700)
            self.chown(run)
            machine.settings["socket"] = os.path.join(run, "autosync.sock")
        machine.user = self
        machine.write_config()
        self.chown(machine.path)
        os.lchown(machine.config, self.uid, self.gid)
        return machine

    def machines(self, *names, own_socket=True, **settings):
        """A bare remote and clones of it, all this user's: -> (remote, [Machine])."""
        remote = Remote(os.path.join(self.base, "remote.git"))
        made = [self.adopt(Machine(pathlib.Path(self.base), name, remote, **settings), own_socket)
                for name in names]
        self.chown(remote.path)
        return remote, made

    def as_user(self, argv):
        """argv run as this user, with its HOME and the code under test."""
        return ["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.gid, "--clear-groups",
                "env", "HOME=" + self.home, "PYTHONPATH=" + self.code] + list(argv)

    def command(self, args):
        """The suite's Python with these arguments, as this user."""
        return self.as_user([self.PYTHON] + list(args))

    def remove(self):
        remove_private_tmp(self.home)
        shutil.rmtree(self.base, ignore_errors=True)


# A burner spins for at most this long even if the test run dies without its teardown.
BURNER_LIMIT = 1800


def suite_burners(n):
    """How many of a test's `n` busy loops to start: none in tests/run.sh's parallel run
    (pytest-xdist), whose other workers already keep both cores busy (two more loops
    there slowed every other test by a fifth), unless AUTOSYNC_BURNERS asks for them;
    all `n` when the test runs by itself."""
    if "PYTEST_XDIST_WORKER" in os.environ and "AUTOSYNC_BURNERS" not in os.environ:
        return 0
    return n
