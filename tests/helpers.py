"""The end-to-end tests' shared helpers: writing, waiting, machines apart and
together, Mercurial machines, event logs. (Fixtures are in conftest.py.)"""
import hashlib
import json
import os
import re
import select
import socket
import stat
import subprocess
import sys
import time
from autosync.core import client
from autosync.core.config import load
from autosync.core.retry import Backoff
from base import Machine, ROOT, Remote, git, hg, tree, wait_until


def write(machine, rel, content):
    path = os.path.join(machine.path, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def settle(machine, remote, timeout=60):
    # Let the watcher's open batch close (tens of milliseconds) before judging.
    time.sleep(0.5)
    wait_until(lambda: machine.settled(remote), timeout, 0.1, "%s to settle" % machine.name)


HOST = re.escape(socket.gethostname())


STAMP = r"\d{4}-\d\d-\d\d \d{6}"


def cut_off(machine):
    """This machine alone loses the remote (the others keep it)."""
    url = git("config", "--get", "remote.origin.url", cwd=machine.path).decode().strip()
    git("remote", "set-url", "origin", url + ".unreachable", cwd=machine.path)
    return url


def reconnect(machine, url):
    git("remote", "set-url", "origin", url, cwd=machine.path)


def committed(machine):
    """Wait until everything written on machine is committed (pushed or not)."""
    wait_until(lambda: (lambda s: s.get("state") == "idle" and not s.get("pending"))(
        machine.status()) and not machine.dirty(), 30, 0.1, machine.name + " to commit")


def share(a, b, remote):
    """What a wrote is pushed, then pulled by b: both start from the same tree."""
    settle(a, remote)
    b.notify("pull")
    settle(b, remote)


def sync_both(a, b, remote):
    """b pushes (rejected, merges, pushes again); then a pulls the merge."""
    assert b.notify("sync").returncode == 0
    settle(b, remote)
    a.notify("pull")
    settle(a, remote)


def copies(files, stem, ext):
    pattern = re.compile(r"%s \(conflict from %s %s\)%s$" % (re.escape(stem), HOST, STAMP,
                                                             re.escape(ext)))
    return {p: c for p, c in files.items() if pattern.match(p)}


def every_kind_kept(files):
    """The files after a merge of both sides' changes of every kind (test_keep_both's,
    test_mercurial's and test_hgmerge's set-up: b's older, a's newer): the newer at the
    path, the other beside it, an edit beating a removal."""
    assert files["notes.txt"] == b"a's notes\n"  # a's is newer: it stays at the path
    assert list(copies(files, "notes", ".txt").values()) == [b"b's notes\n"]
    assert files["gone-on-a.txt"] == b"b changed this\n"  # modified beats deleted
    assert files["gone-on-b.txt"] == b"a changed this\n"
    assert files["new.txt"] == b"a made this\n"  # added on both sides
    assert list(copies(files, "new", ".txt").values()) == [b"b made this\n"]
    assert files["pic.bin"] == b"\x89PNG\0from a\xfd"
    assert list(copies(files, "pic", ".bin").values()) == [b"\x89PNG\0from b\xfe"]


def save_versions(a, b, remote, count, size, name="video.bin"):
    """count new random versions of a's file `name`, each waited for on b (and both
    settled) before the next -> the versions."""
    versions = []
    for i in range(count):
        versions.append(os.urandom(size))
        with open(os.path.join(a.path, name), "wb") as f:
            f.write(versions[-1])
        wait_until(lambda: b.read(name) == versions[-1] and a.settled(remote)
                   and b.settled(remote), 60, 0.1, "version %d on b" % i)
    return versions


def never_mid_merge_nor_markers(remote, *machines):
    for m in machines:
        assert not os.path.exists(os.path.join(m.path, ".git", "MERGE_HEAD"))
    history = remote.log("-p", "--all", "--format=")
    assert "<<<<<<<" not in history and ">>>>>>>" not in history


EXAMPLES = os.path.join(ROOT, "docs", "examples")


def dvcs_autosync(*args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor"] + list(args),
                          check=True, stdout=subprocess.PIPE, text=True).stdout


def example_dvcs_section(name="mercurial.autosync"):
    """The [dvcs] section of an example in docs/examples, as written (continuation lines and all)."""
    text = open(os.path.join(EXAMPLES, name)).read()
    return text[text.index("\n[dvcs]"):text.index("\n[xmpp]")]


def use_example(machine, name):
    """Rewrite a Machine's config (base.py): its [autosync] settings, the example's [dvcs]."""
    lines = ["[autosync]"] + ["%s = %s" % kv for kv in machine.settings.items()]
    with open(machine.config, "w") as f:
        f.write("\n".join(lines) + "\n" + example_dvcs_section(name))


class HgMachine(Machine):
    """A Machine whose folder is an hg clone and whose commands are the example's."""

    def __init__(self, base, name, central):
        self.name, self.central = name, central
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        hg("clone", "-q", central, self.path)
        self.settings = dict(path=self.path, syncmethod="none", notifymethod="none",
                             readfrequency="0.2", maxwait="3", pushdelay="0", pullinterval="0",
                             ignorepath=".hg")
        self.proc = None
        self.write_config()

    def write_config(self):
        use_example(self, "mercurial.autosync")

    def dirty(self):
        return hg("status", cwd=self.path).splitlines()

    STORE = ".hg"

    def remote_store(self, central):
        return os.path.join(central, ".hg")

    def caught_up(self, central):
        return hg("id", "-i", "-r", ".", cwd=self.path) == hg("id", "-i", "-r", "tip", cwd=central)

    def files(self):
        return tree(self)

    def cut_off(self):
        """This machine alone loses the central repository (the others keep it)."""
        hgrc = os.path.join(self.path, ".hg", "hgrc")
        text = open(hgrc).read()
        with open(hgrc, "w") as f:
            f.write(text.replace("default = " + self.central,
                                 "default = " + self.central + ".unreachable"))
        return self.central

    def reconnect(self, url=None):
        hgrc = os.path.join(self.path, ".hg", "hgrc")
        text = open(hgrc).read()
        with open(hgrc, "w") as f:
            f.write(text.replace(".unreachable", ""))

    def head(self):
        return hg("id", "-i", "-r", ".", cwd=self.path)

    def never_mid_merge(self):
        """No merge in progress, nothing unresolved, one head."""
        assert hg("log", "-r", "p2()", "-T", "x", cwd=self.path) == ""
        assert hg("resolve", "-l", cwd=self.path) == ""
        assert hg("heads", "-T", "x", cwd=self.path) == "x"


def notify_hook(central, machines):
    """What a user puts in the central repository's .hg/hgrc (like hooks/post-receive)."""
    notify = "PYTHONPATH=%s %s -m autosync.tools.notify" % (ROOT, sys.executable)
    calls = "; ".join("%s --config %s pushed >/dev/null 2>&1" % (notify, m.config)
                      for m in machines)
    with open(os.path.join(central, ".hg", "hgrc"), "a") as f:
        f.write("[hooks]\nchangegroup.autosync = %s; true\n" % calls)


SUBSCRIBE = """
import sys
from autosync.core.protocol import connect
conn = connect(sys.argv[1])
assert conn.request({"cmd": "subscribe"}, timeout=10)["ok"]
conn.sock.settimeout(None)  # events come when they come: the test's wait_for times them
print("subscribed", flush=True)
while True:
    line = conn.reader.readline()
    if line is None:
        break
    print(line.decode(), flush=True)
"""


def machine_socket(machine):
    from autosync.core.config import load
    return machine.settings.get("socket") or load(machine.config).socket


class Events:
    """A subscriber on a machine's socket, as the daemon's own user: what the committer
    publishes (a client of another user is refused, so it runs as one)."""

    def __init__(self, machine):
        argv = [sys.executable, "-c", SUBSCRIBE, machine_socket(machine)]
        if machine.user is not None:
            argv = machine.user.command(argv[1:])
        # Unbuffered: wait_for selects on the pipe, and a buffered reader would hold a
        # second event that came with the first where select cannot see it.
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, PYTHONPATH=ROOT), bufsize=0)
        assert self.proc.stdout.readline() == b"subscribed\n"
        self.seen = []

    def wait_for(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = self.proc.stdout.readline()
            assert line, "the committer went away"
            event = json.loads(line)
            self.seen.append(event)
            if predicate(event):
                return event
        raise AssertionError("no such event; seen: %s" % self.seen)

    def close(self):
        """After the daemon stopped: every event it published is in `seen`."""
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for line in self.proc.stdout.read().splitlines():
            if line.strip():
                self.seen.append(json.loads(line))


def subject(where, rev="HEAD"):
    return git("log", "-1", "--format=%s", rev, cwd=where).decode().strip()


def commits_made(machine, count):
    """Wait until the machine made `count` commits of its own since it started."""
    wait_until(lambda: len(git("log", "--format=%h", "origin/main..HEAD",
                               cwd=machine.path).split()) >= count or None, 20,
               what="%d commits on %s" % (count, machine.name))


def log_of(machine, *args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor", "log", "--config",
                           machine.config] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=True).stdout


class EmptyRemote:
    """A bare repository with no commit at all, as `git init --bare` leaves it."""

    def __init__(self, path):
        self.path = str(path)
        git("init", "-q", "--bare", "-b", "main", self.path)

    def head(self):
        return git("--git-dir", self.path, "rev-parse", "-q", "--verify", "main",
                   check=False).strip()


HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hooks",
                    "post-receive")


def remote_main(remote):
    """The remote's main, read from its ref file (cheap enough to poll every few ms); for
    a Mercurial central (a path), its changelog's size and time, which a push changes."""
    if isinstance(remote, str):
        try:
            st = os.stat(os.path.join(remote, ".hg", "store", "00changelog.i"))
            return (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            return None
    try:
        with open(os.path.join(remote.path, "refs", "heads", "main")) as f:
            return f.read().strip()
    except FileNotFoundError:  # packed: ask
        return None


class Pulls:
    """Each machine's pulls (pull-started to pull-finished), from its committer's events,
    so a run can say how many race writes landed during the writer's own pull."""

    def __init__(self, machines):
        self.events = {m.name: [] for m in machines}
        self.subs = [client.Subscription(load(m.config).socket,
                                         lambda e, seen=self.events[m.name]: seen.append(e),
                                         backoff=Backoff(0.05, 0.5)).start()
                     for m in machines]

    def count(self, name):
        """How many pulls this machine has started so far."""
        return sum(e.get("event") == "pull-started" for e in list(self.events[name]))

    def durations(self):
        found = []
        for seen in self.events.values():
            started = None
            for e in list(seen):
                if e.get("event") == "pull-started":
                    started = e.get("time")
                elif e.get("event") == "pull-finished" and started is not None:
                    found.append(e.get("time", 0) - started)
                    started = None
        return found

    def during(self, name, when):
        started = None
        for e in list(self.events[name]):
            if e.get("event") == "pull-started":
                started = e.get("time")
            elif e.get("event") == "pull-finished" and started is not None:
                if started <= when <= e.get("time", 0):
                    return True
                started = None
        return started is not None and started <= when  # still pulling at the end

    def close(self):
        for sub in self.subs:
            sub.close()


def git_head(machine):
    return git("rev-parse", "HEAD", cwd=machine.path)


def quiet(machines, remote, timeout=120, head=git_head):
    """Sync until every machine has the remote's head and nothing left to do."""
    def converged():
        for m in machines:
            m.notify("sync", check=False)
        for m in machines:
            m.notify("pull", check=False)
        heads = {head(m) for m in machines}
        return len(heads) == 1 and all(m.settled(remote) for m in machines)
    wait_until(converged, timeout, 0.5, "the machines to converge")


def history_blobs(remote):
    """Every file content reachable from the remote's main, concatenated."""
    objects = git("--git-dir", remote.path, "rev-list", "--objects", "main")
    ids = b"\n".join(line.split()[0] for line in objects.splitlines())
    out = subprocess.run(["git", "--git-dir", remote.path, "cat-file", "--batch"], input=ids + b"\n",
                         stdout=subprocess.PIPE, check=True).stdout
    return out.decode("utf-8", "replace")


def watches_of(pid):
    """The inotify watches a process holds, as the kernel counts them."""
    count = 0
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                count += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            pass  # closed meanwhile
    return count


def make_files(root, files):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)


def annex(path, *args):
    return git("-C", path, "annex", *args)


def annexed_pair(machines, remote, rule=None, only_a=None, **settings):
    """Machines a and b of an annexed remote (docs/beyond-git.md's set-up), started with
    the git-annex example's commands and told of pushes by the remote's hook. `rule`: an
    annex.largefiles rule shared through the git-annex branch; `settings`: both machines'
    (largefiles=...), `only_a`: a's alone."""
    import shutil
    annex(remote.path, "init", "-q", "remote")
    a = machines("a", start=False, **dict(settings, **(only_a or {})))
    annex(a.path, "init", "-q", "a")
    if rule:
        annex(a.path, "config", "--set", "annex.largefiles", rule)
    annex(a.path, "sync", "-q", "--no-content")
    b = machines("b", start=False, **settings)
    annex(b.path, "init", "-q", "b")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"),
                os.path.join(remote.path, "hooks", "post-receive"))
    for m in (a, b):
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
        use_example(m, "git-annex.autosync")
        m.start()
    return a, b


def annex_bytes(repo):
    return folder_bytes(os.path.join(repo, "annex", "objects"))


def folder_bytes(folder):
    total = 0
    for root, _, names in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return total


class ThinRemote(Remote):
    """A bare remote that serves partial clones (uploadpack.allowFilter), with a history:
    notes.txt in three versions, and a folder of five files changed twice."""

    def __init__(self, path):
        super().__init__(path)
        git("config", "uploadpack.allowFilter", "true", cwd=self.path)
        seed = self.path + ".seed"
        self.revs = []
        for n in (1, 2, 3):
            with open(os.path.join(seed, "notes.txt"), "w") as f:
                f.write("notes, version %d\n" % n)
            os.makedirs(os.path.join(seed, "photos"), exist_ok=True)
            for i in range(5):
                with open(os.path.join(seed, "photos", "p%d.txt" % i), "w") as f:
                    f.write("photo %d, version %d\n" % (i, n))
            git("add", "-A", cwd=seed)
            git("commit", "-q", "-m", "version %d" % n, cwd=seed)
            self.revs.append(git("rev-parse", "HEAD", cwd=seed).decode().strip())
        git("push", "-q", "origin", "HEAD:main", cwd=seed)

    def away(self):
        os.rename(self.path, self.path + ".away")

    def back(self):
        os.rename(self.path + ".away", self.path)


def thin_machine(tmp_path, remote, name="thin"):
    machine = Joined(tmp_path, name)
    out = ok(machine.init(remote, "--thin"))
    assert "thin: the current files only" in out
    assert "--thin" in out.split("On the next machine run:")[1]  # the next one is thin too
    return machine


def init(*args, env=None, stdin=subprocess.DEVNULL):
    argv = [sys.executable, "-m", "autosync.supervisor", "init"] + [str(a) for a in args]
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, stdin=stdin, timeout=120)


class Joined(Machine):
    """A machine whose folder and config `init` made: the suite runs on them as written."""

    def __init__(self, base, name):
        self.name = name
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        self.proc = None

    def init(self, remote, *more, **options):
        result = init(getattr(remote, "path", remote), self.path, "--config", self.config,
                      *more, **options)
        return result


def ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def listing(folder):
    """Every path below folder (.git included) with a hash of its content and its mode."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            found[os.path.relpath(full, folder)] = (st.st_mode, digest)
    return found


class Writer:
    """Another process that holds a file open for writing, one step at a time: write()
    appends and returns once the bytes are in the file; close() closes it and ends the
    process. No timing: the test says when each step happens."""

    CODE = ("import sys\n"
            "f = open(sys.argv[1], 'ab')\n"
            "print('open', flush=True)\n"
            "for line in sys.stdin:\n"
            "    if line == 'close\\n':\n"
            "        break\n"
            "    f.write(bytes.fromhex(line.strip()))\n"
            "    f.flush()\n"
            "    print('written', flush=True)\n"
            "f.close()\n"
            "print('closed', flush=True)\n")

    def __init__(self, path):
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.said("open")

    def said(self, word):
        line = self.proc.stdout.readline().strip()
        assert line == word, "the writer said %r, not %r" % (line, word)

    def write(self, data):
        self.proc.stdin.write(data.hex() + "\n")
        self.proc.stdin.flush()
        self.said("written")

    def close(self):
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.said("closed")
        self.proc.wait(10)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


CUT_PULL = """#!/bin/bash
# A pull command as a user writes one (git-annex's sync behaves alike): fetch, write the
# remote's files, merge. While %(full)s exists the disk is full: every file it writes
# is cut at 4 bytes (an empty one stays empty) and it fails.
git fetch -q origin || exit 1
if [ -e %(full)s ]; then
    git diff --name-only -z HEAD...origin/main | while IFS= read -r -d '' f; do
        git show "origin/main:$f" | head -c 4 > "$f"
    done
    echo "write error: No space left on device" >&2
    exit 1
fi
exec git pull -q --no-rebase --no-edit
"""
