"""autosync-sshlink: the remote's address -> the watch command; the link's decisions
against a fake committer (tests/fakes.py) with scripted watch commands; and the real
suite on two machines through a private sshd (tests/sshd.py)."""
import os
import pathlib
import shlex
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from base import HERE, ROOT, git, wait_until
from fakes import FakeCommitter, config

from autosync.core import paths, problems
from autosync.ssh import watch as sshwatch
from autosync.vcs import remote as sshremote
from autosync.ssh import link as sshlink

OPTIONS = sshremote.SSH_OPTIONS
FAST = sshlink.LinkTiming(backoff_min=0.1, backoff_max=0.4, backoff_steady=0, stable=60.0,
                      committer_retry=0.1, pull_timeout=10.0, stop_grace=2.0,
                      sleep_check=0.2)
REV_A, REV_B = "a" * 40, "b" * 40


# --- the remote's address -> the default watch command --------------------------------

@pytest.mark.parametrize("url, argv, path", [
    ("host:repo.git", ["--", "host"], "repo.git"),
    ("me@host:/srv/my repo.git", ["--", "me@host"], "/srv/my repo.git"),
    ("ssh://me@host:2222/srv/r.git", ["-p", "2222", "--", "me@host"], "/srv/r.git"),
    ("ssh://host/~/r.git", ["--", "host"], "~/r.git"),
    ("git+ssh://host/r.git", ["--", "host"], "/r.git"),
    ("[::1]:r.git", ["--", "::1"], "r.git"),
    ("ssh://me@[::1]:22/r.git", ["-p", "22", "--", "me@::1"], "/r.git"),
])
def test_an_ssh_remote_is_watched_over_ssh(url, argv, path):
    assert sshwatch.default_watch(url, "/work", ("ssh", "-F", "cfg")) == \
        ["ssh", "-F", "cfg"] + OPTIONS + argv + [sshwatch.remote_command(path)]
    # The server's login shell gets the path as one word, never parsed.
    words = shlex.split(sshwatch.remote_command(path))
    assert words[:5] == ["sh", "-c", sshwatch.REMOTE_SCRIPT, "autosync-remote", path]
    assert words[5] == sshwatch.watch_program() and words[6] == sshwatch.BOOT


@pytest.mark.parametrize("url, path", [
    ("/srv/r.git", "/srv/r.git"), ("file:///srv/r.git", "/srv/r.git"),
    ("../r.git", "/home/me/r.git"), ("./sub:dir/r.git", "/home/me/Sync/sub:dir/r.git"),
])
def test_a_local_remote_is_watched_here_without_ssh(url, path):
    assert sshwatch.default_watch(url, "/home/me/Sync") == \
        [sys.executable, "-m", "autosync.ssh.remote", "watch", path]


@pytest.mark.parametrize("url, error", [
    ("", "the remote has no address (remoteurlcmd printed nothing)"),
    ("https://example.org/r.git", "https://example.org/r.git: a https:// remote cannot be "
                                  "watched over ssh"),
    ("-oProxyCommand=evil:r.git", "-oProxyCommand=evil:r.git: bad host name "
                                  "'-oProxyCommand=evil'"),
    ("ssh://host:99999/r", "ssh://host:99999/r: bad port '99999'"),
    ("host:", "host:: no repository path in the address"),
])
def test_a_remote_that_cannot_be_watched_is_one_line(url, error):
    with pytest.raises(sshremote.BadRemote) as raised:
        sshwatch.default_watch(url, "/work")
    assert str(raised.value) == error


def test_the_ssh_git_uses_is_the_one_used(tmp_path):
    git("init", "-q", str(tmp_path))
    assert sshremote.ssh_program({"GIT_SSH_COMMAND": "ssh -i 'my key'"}, str(tmp_path)) == \
        ["ssh", "-i", "my key"]
    assert sshremote.ssh_program({}, str(tmp_path)) == ["ssh"]
    git("config", "core.sshCommand", "ssh -F /etc/x", cwd=str(tmp_path))
    assert sshremote.ssh_program({}, str(tmp_path)) == ["ssh", "-F", "/etc/x"]


def test_watchcmd_gets_the_remote_path_as_one_argument(tmp_path):
    git("init", "-q", str(tmp_path))
    odd = "/srv/a b;$(touch x)'.git"
    git("remote", "add", "origin", "host:" + odd, cwd=str(tmp_path))
    cfg = config(str(tmp_path))
    cfg.commands = dict(cfg.commands, watchcmd="ssh -J jump host autosync-remote watch %s")
    argv = sshwatch.watch_argv(cfg).argv
    assert argv == ["ssh", "-J", "jump", "host", "autosync-remote", "watch", odd]
    cfg.commands["watchcmd"] = "my-watch | cat"  # no %s, shell syntax: through /bin/sh
    assert sshwatch.watch_argv(cfg).argv[:2] == ["/bin/sh", "-c"]


def test_why_it_ended_keeps_ssh_s_words_and_not_its_notices():
    said = b"Warning: Permanently added '[h]:22' (ED25519) to the list of known hosts.\r\n" \
           b"me@h: Permission denied (publickey).\r\n"
    assert sshwatch.why_it_ended(255, said) == \
        "the watch command ended (exit 255): me@h: Permission denied (publickey)."
    assert sshwatch.why_it_ended(-9, b"") == "the watch command ended (killed by signal 9)"


# --- the link's decisions, against a fake committer ------------------------------------

class Scripted:
    """A Link in a thread whose watch commands are shell scripts, one per start (the last
    is repeated); `have` answers from a set of revisions."""

    def __init__(self, tmp_path, *scripts, timing=FAST, argv=None, asleep=None):
        self.committer = FakeCommitter()
        self.scripts = list(scripts)
        self.starts = 0
        self.haves = {REV_A}
        self.fifo = str(tmp_path / "lines")
        os.mkfifo(self.fifo)
        cfg = config(str(tmp_path), socket=self.committer.path)
        self.link = sshlink.Link(cfg, timing, argv=argv or self.argv,
                                 have=lambda path, rev: rev in self.haves,
                                 asleep=asleep or sshlink.asleep)
        self.thread = threading.Thread(target=self.link.run, daemon=True)
        self.thread.start()

    def argv(self, cfg):
        script = self.scripts[min(self.starts, len(self.scripts) - 1)]
        self.starts += 1
        return sshwatch.WatchCommand(["sh", "-c", script.replace("FIFO", shlex.quote(self.fifo))],
                                     "script")

    def say(self, text):
        """Lines for a script that runs `cat FIFO` (the writer's close ends it)."""
        with open(self.fifo, "w") as f:
            f.write(text)

    def requests(self, cmd):
        return self.committer.asked(cmd)

    def told(self):
        """The link requests, a repetition left out: the link is told once more when the
        subscription to the committer comes up (it may have restarted)."""
        told = []
        for m in self.requests("link"):
            if not told or told[-1] != m:
                told.append(m)
        return told

    def up(self):
        return [m["up"] for m in self.told()]

    def close(self):
        if self.thread.is_alive():
            self.link.stop()
            self.thread.join(10)
        self.committer.cleanup()
        assert not self.thread.is_alive()


@pytest.fixture
def scripted(tmp_path):
    made = []

    def make(*scripts, **options):
        made.append(Scripted(tmp_path, *scripts, **options))
        return made[-1]
    yield make
    for s in made:
        s.close()


def test_up_at_the_first_line_then_a_pull_only_for_a_revision_we_lack(scripted):
    s = scripted("echo 'refs/heads/main %s'; exec cat FIFO" % REV_A)
    wait_until(lambda: s.up() == [True], what="link up")
    wait_until(lambda: len(s.requests("pull")) == 1, what="the catch-up pull")
    with open(s.fifo, "w") as f:
        f.write("refs/heads/main %s\n" % REV_A)  # our own push: we have it
        f.flush()
        time.sleep(0.3)
        assert len(s.requests("pull")) == 1
        f.write("refs/heads/main %s\n" % REV_B)  # another machine's push
        f.flush()
        wait_until(lambda: len(s.requests("pull")) == 2, what="a pull for the new revision")
        f.write("refs/heads/gone %s\nnot a line\n" % ("0" * 40))  # a removal, and noise
        f.flush()
        time.sleep(0.3)
        # asked while the watch still runs: closing the fifo ends it (link down)
        assert len(s.requests("pull")) == 2
        assert s.told() == [{"cmd": "link", "up": True}]


def test_a_refused_login_is_told_with_its_words_then_cleared(scripted):
    s = scripted("echo 'me@h: Permission denied (publickey).' >&2; exit 255",
                 "echo 'me@h: Permission denied (publickey).' >&2; exit 255",
                 "echo 'refs/heads/main %s'; exec sleep 60" % REV_A)
    wait_until(lambda: s.up()[-1:] == [True], what="link up at the third start")
    assert s.requests("link")[0] == {
        "cmd": "link", "up": False,
        "error": "the watch command ended (exit 255): me@h: Permission denied (publickey)."}
    # The same refusal again is not told again; the link coming up is.
    assert s.up() == [False, True]
    assert s.starts == 3
    # The catch-up, once up (asked by the listener's thread just after it tells "up").
    wait_until(lambda: s.requests("pull"), what="the catch-up pull")
    time.sleep(0.3)
    assert len(s.requests("pull")) == 1


def test_a_banner_is_no_sign_of_a_running_watch(scripted):
    s = scripted("echo 'Welcome to the server'; echo 'autosync-remote: not found' >&2; exit 127")
    wait_until(lambda: s.up() == [False], what="link down")
    assert s.told() == [{"cmd": "link", "up": False, "error": "the watch command ended "
                         "(exit 127): autosync-remote: not found"}]
    assert s.requests("pull") == []


def test_a_watch_that_ends_is_started_again_with_a_growing_wait(scripted):
    s = scripted("echo 'refs/heads/main %s'; exec cat FIFO" % REV_A)
    for n in range(1, 4):
        wait_until(lambda: s.up()[-1:] == [True] and s.starts == n,
                   what="link up, start %d" % n)
        s.say("")  # the writer's close ends cat: the connection dropped
        wait_until(lambda: s.up()[-1:] == [False], what="link down")
    # Down without an error (a drop is no refusal), a catch-up pull at every connect,
    # and each wait longer than the one before (jitter takes at most a fifth).
    assert all("error" not in m for m in s.requests("link"))
    wait_until(lambda: len(s.requests("pull")) == 4, what="the fourth catch-up pull")
    assert s.link.backoff.failures >= 3
    assert s.link.backoff.current == FAST.backoff_max


def test_the_link_is_told_again_to_a_committer_that_restarted(scripted):
    s = scripted("echo 'refs/heads/main %s'; exec sleep 60" % REV_A)
    wait_until(lambda: s.up() == [True], what="link up")
    s.committer.close()
    s.committer.requests.clear()
    s.committer.start()
    wait_until(lambda: s.committer.asked("link") == [{"cmd": "link", "up": True}],
               what="link up told again")


def test_stopping_ends_the_watch_command_and_says_down(scripted, tmp_path):
    pidfile = tmp_path / "pid"
    s = scripted("echo $$ > %s; echo 'refs/heads/main %s'; exec sleep 60"
                 % (shlex.quote(str(pidfile)), REV_A))
    wait_until(lambda: s.up() == [True], what="link up: %s" % s.requests("link"))
    pid = int(pidfile.read_text())
    s.link.stop()
    s.thread.join(10)
    assert s.up() == [True, False]
    assert not os.path.exists("/proc/%d" % pid) or \
        open("/proc/%d/stat" % pid).read().split()[2] == "Z"


def test_a_remote_without_a_watch_is_the_link_problem(scripted, tmp_path):
    s = scripted(argv=lambda cfg: sshwatch.default_watch("https://example.org/r.git", "/"))
    wait_until(lambda: any("error" in m for m in s.requests("link")), what="the problem")
    error = [m for m in s.requests("link") if "error" in m][0]["error"]
    assert error.startswith("cannot make the watch command: https://example.org/r.git: a "
                            "https:// remote cannot be watched over ssh (set watchcmd")


# --- the real suite through a private sshd ----------------------------------------------

from base import Machine, Remote, tree  # noqa: E402
from sshd import Sshd, descendants, missing  # noqa: E402


@pytest.fixture
def sshd(tmp_path, monkeypatch):
    """A started private sshd; git and the daemons reach it with its own client files."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    server = Sshd(tmp_path / "sshd").start()
    monkeypatch.setenv("GIT_SSH_COMMAND", server.ssh_command)
    yield server
    server.stop()


@pytest.fixture
def ssh_machines(tmp_path, remote):
    """ssh_machines(sshd_or_None, "a", "b", ...) -> started Machines with syncmethod = ssh,
    their origin the remote over ssh (or its local path without sshd); stopped afterwards."""
    made = []

    def make(server, *names, start=True, **settings):
        new = []
        for name in names:
            m = Machine(tmp_path, name, remote, syncmethod="ssh", **settings)
            if server is not None:
                git("remote", "set-url", "origin", server.url(remote.path), cwd=m.path)
            made.append(m)
            new.append(m.start() if start else m)
        return new
    yield make
    for m in made:
        m.stop()


def link_pid(machine):
    """The PID of the watch command (ssh, or autosync.remote) that machine's link runs."""
    link = machine.children()["sshlink"]
    kids = descendants(link)
    return kids[0] if kids else None


def server_watches(sshd):
    """PIDs of the autosync-remote watches the server runs (below its listener)."""
    found = []
    for pid in descendants(sshd.proc.pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"autosync.ssh.remote" in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def link_problem(machine):
    return [p for p in machine.status().get("problems", []) if p["name"] == "link"]


@pytest.mark.e2e
def test_two_machines_sync_through_sshd(sshd, ssh_machines, remote):
    a, b = ssh_machines(sshd, "a", "b")
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    assert "link:        up over ssh" in a.notify("status").stdout
    assert "watching the remote: ssh -F %s -o BatchMode=yes" % sshd.client_config in b.logtext()
    # As for a `pip install --user` on the server: not on the session's PATH, yet found.
    plain = subprocess.run(shlex.split(sshd.ssh_command) + ["127.0.0.1", "command -v "
                           "autosync-remote"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert plain.returncode != 0 and plain.stdout == b""
    steps = [("write", lambda: open(os.path.join(a.path, "notes.txt"), "w").write("one\n")),
             ("edit", lambda: open(os.path.join(a.path, "notes.txt"), "a").write("two\n")),
             ("move", lambda: os.rename(os.path.join(a.path, "notes.txt"),
                                        os.path.join(a.path, "moved.txt"))),
             ("delete", lambda: os.unlink(os.path.join(a.path, "moved.txt")))]
    for what, step in steps:
        step()
        wait_until(lambda: tree(b) == tree(a) and a.settled(remote), 30,
                   what="%s to reach b" % what)
    # b pulled because the remote said so (pullinterval is 0 here), and a's own pushes
    # named revisions a had: a never pulled for them.
    assert "asking the committer to pull (refs/heads/main moved to" in b.logtext()
    assert "asking the committer to pull (refs/heads/main moved to" not in a.logtext()



@pytest.mark.e2e
def test_sshd_restarted_the_link_reconnects_and_catches_up(sshd, ssh_machines, remote):
    # a pushes to the remote's local path and is not watched; b watches over ssh.
    a = Machine(pathlib.Path(os.path.dirname(remote.path)), "a", remote).start()
    try:
        (b,) = ssh_machines(sshd, "b")
        wait_until(lambda: b.status().get("link") == "up", what="b's link up")
        sshd.stop()
        wait_until(lambda: b.status().get("link") == "down", what="b's link down")
        # Pushed while b cannot hear of it: no line will ever name it.
        with open(os.path.join(a.path, "while-away.txt"), "w") as f:
            f.write("pushed while sshd was down\n")
        wait_until(lambda: a.settled(remote), what="a's push")
        sshd.start()
        wait_until(lambda: b.read("while-away.txt") == b"pushed while sshd was down\n", 60,
                   what="the catch-up pull at reconnecting")
        assert b.status().get("link") == "up"
        assert "asking the committer to pull (catch-up after connecting)" in b.logtext()
        assert "link down, watching again in" in b.logtext()
        # And the link works again: a later push is pulled when it happens.
        with open(os.path.join(a.path, "after.txt"), "w") as f:
            f.write("after\n")
        wait_until(lambda: b.read("after.txt") == b"after\n", 30, what="a push after it")
        # The held connection was made again: b's later fetches make no new login.
        before = logins(sshd)
        with open(os.path.join(a.path, "later.txt"), "w") as f:
            f.write("later\n")
        wait_until(lambda: b.read("later.txt") == b"later\n", 30, what="a later push")
        assert logins(sshd) == before
    finally:
        a.stop()


@pytest.mark.e2e
def test_a_killed_watch_command_is_started_again(sshd, ssh_machines, remote):
    a, b = ssh_machines(sshd, "a", "b")
    wait_until(lambda: b.status().get("link") == "up", what="b's link up")
    first = wait_until(lambda: link_pid(b), what="b's ssh")
    before = wait_until(lambda: len(server_watches(sshd)) == 2 and server_watches(sshd),
                        what="a watch per machine on the server")
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: link_pid(b) not in (None, first) and b.status().get("link") == "up",
               what="a new watch, link up again")
    # On the server, the killed connection's watch ended (its output hung up): one per
    # machine, as before, one of them new.
    wait_until(lambda: len(server_watches(sshd)) == 2 and server_watches(sshd) != before,
               what="the server's old watch to end")
    assert "the watch command ended (killed by signal 9); link down, watching again in" \
        in b.logtext()
    with open(os.path.join(a.path, "later.txt"), "w") as f:
        f.write("later\n")
    wait_until(lambda: b.read("later.txt") == b"later\n", 30, what="a push after the restart")


@pytest.mark.e2e
def test_a_refused_login_is_the_link_problem_until_the_key_is_authorized(sshd, ssh_machines):
    sshd.authorize(False)
    (b,) = ssh_machines(sshd, "b", start=False)
    b.start(wait=False)
    problem = wait_until(lambda: link_problem(b), 60, what="the link problem")[0]
    assert problem["error"] == "link: the watch command ended (exit 255): %s@127.0.0.1: " \
                               "Permission denied (publickey)." % sshd.user
    assert problem["fix"] == problems.link_fix("ssh", "Permission denied (publickey).")
    assert problem["fix"].startswith("check that this machine can log in to the server")
    assert "Permission denied (publickey)." in b.notify("status").stdout
    sshd.authorize(True)
    wait_until(lambda: b.status().get("link") == "up" and not link_problem(b), 60,
               what="the problem cleared")
    wait_until(lambda: b.status().get("headline") == "in sync", 60, what="in sync")


@pytest.mark.e2e
def test_a_remote_on_a_local_path_is_watched_without_ssh(ssh_machines, remote, monkeypatch):
    monkeypatch.setenv("GIT_SSH_COMMAND", "false")  # any ssh would fail
    a, b = ssh_machines(None, "a", "b")
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    assert "watching the remote: %s -m autosync.ssh.remote watch %s" % (sys.executable, remote.path) \
        in b.logtext()
    with open(os.path.join(a.path, "local.txt"), "w") as f:
        f.write("no ssh\n")
    wait_until(lambda: b.read("local.txt") == b"no ssh\n", 30, what="the file on b")
    assert "asking the committer to pull (refs/heads/main moved to" in b.logtext()


@pytest.mark.e2e
def test_folders_on_one_server_share_nothing(sshd, tmp_path):
    # Two folders, each with its remote on the same server: a push to one pulls only there.
    made = []
    try:
        for name in ("x", "y"):
            remote = Remote(tmp_path / (name + ".git"))
            m = Machine(tmp_path, name, remote, syncmethod="ssh")
            git("remote", "set-url", "origin", sshd.url(remote.path), cwd=m.path)
            made.append((remote, m.start()))
        (x_remote, x), (_, y) = made
        for m in (x, y):
            wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
        other = str(tmp_path / "elsewhere")
        git("clone", "-q", x_remote.path, other)
        with open(os.path.join(other, "only-x.txt"), "w") as f:
            f.write("x\n")
        git("add", "only-x.txt", cwd=other)
        git("commit", "-q", "-m", "x only", cwd=other)
        git("push", "-q", "origin", "HEAD:main", cwd=other)
        wait_until(lambda: x.read("only-x.txt") == b"x\n", 30, what="the file in x")
        assert y.read("only-x.txt") is None
        assert "moved to" in x.logtext() and "moved to" not in y.logtext()
    finally:
        for _, m in made:
            m.stop()


def test_the_watch_command_ends_with_a_killed_link(tmp_path):
    # A link killed outright (SIGKILL) must not leave its ssh running on the server.
    pidfile = tmp_path / "pid"
    code = ("import sys; from autosync.ssh import link as sshlink; from fakes import config\n"
            "from autosync.ssh.watch import WatchCommand\n"
            "link = sshlink.Link(config(%r), argv=lambda cfg: WatchCommand(['sh', '-c', "
            "'echo $$ > %s; exec sleep 60'], 'x'))\nlink.start()\nimport time; time.sleep(60)\n"
            % (str(tmp_path), pidfile))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT, HERE]))
    link = subprocess.Popen([sys.executable, "-c", code], env=env)
    pid = None
    try:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(),
                             what="the watch command"))
        link.kill()
        link.wait()
        wait_until(lambda: not os.path.exists("/proc/%d" % pid) or
                   open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()[0] == "Z",
                   what="the watch command to end")
    finally:
        if link.poll() is None:
            link.kill()
            link.wait()
        if pid:  # left behind only if the test failed
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# --- the held connection (one ssh login per remote) ------------------------------------

def logins(sshd):
    """How many times the server let a key in (one per ssh connection made)."""
    return sshd.logtext().count("Accepted publickey for")


def control_socket(sshd, machine=None):
    """The control socket of the held connection to the test server (`machine`'s own)."""
    return sshremote.held(shlex.split(sshd.ssh_command), "127.0.0.1", sshd.port,
                          owner=getattr(machine, "path", machine))[1]


def ours(sshd):
    """PIDs of the ssh processes on this machine that reach the test server."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.fsencode(sshd.client_config) in argv and b"-G" not in argv:
            found.append(int(pid))
    return found


def edit_and_wait(a, b, remote, name, text):
    with open(os.path.join(a.path, name), "w") as f:
        f.write(text)
    wait_until(lambda: b.read(name) == text.encode() and a.settled(remote), 30,
               what="%s to reach %s" % (name, b.name))


@pytest.mark.e2e
def test_pushes_fetches_and_the_watch_share_one_held_connection(sshd, ssh_machines, remote):
    a, b = ssh_machines(sshd, "a", "b")
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    edit_and_wait(a, b, remote, "first.txt", "first\n")
    for m in (a, b):  # each daemon its own
        path = control_socket(sshd, m)
        assert path.startswith(os.path.join(paths.runtime_dir(), paths.folder_id(m.path)[:8]))
        check = subprocess.run(shlex.split(sshd.ssh_command) + ["-o", "ControlPath=" + path,
                               "-O", "check", "127.0.0.1"], stderr=subprocess.PIPE)
        assert check.returncode == 0, check.stderr
        assert "-o ControlPath=%s" % os.path.join(paths.runtime_dir(), paths.folder_id(
            m.path)[:8] + "-%C") in m.logtext()
    before = logins(sshd)
    for n in range(3):  # each: a push from a, a watch line, a fetch (and notes) on b
        edit_and_wait(a, b, remote, "more%d.txt" % n, "change %d\n" % n)
    edit_and_wait(b, a, remote, "back.txt", "the other way\n")
    assert logins(sshd) == before
    # One master per daemon (the committer's and the link's made at once: one of them
    # lost the race to bind the socket and stayed logged in, for ever).
    masters = [pid for pid in ours(sshd) if b"ControlMaster=yes" in
               open("/proc/%d/cmdline" % pid, "rb").read()]
    assert len(masters) == 2, masters
    # Stopped, they leave nothing behind: no ssh here, no session on the server.
    for m in (a, b):
        assert m.stop() == 0
    assert ours(sshd) == []
    wait_until(lambda: descendants(sshd.proc.pid) == [], 10, what="the server's sessions to end")


@pytest.mark.e2e
def test_a_deep_runtime_folder_still_holds_the_connection(sshd, ssh_machines, remote, tmp_path,
                                                          monkeypatch):
    """A runtime folder so deep that ssh-%C in it is too long for a socket (108 bytes):
    the held connection's socket goes to a short private folder instead, and status says
    the connection is held (it was silently not, a login per command)."""
    deep = tmp_path / ("r" * 50) / ("u" * 30)
    deep.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    # (the daemons' own sockets elsewhere: they would not fit there either)
    a, b = [ssh_machines(sshd, name, socket=str(tmp_path / (name + ".sock")))[0]
            for name in ("a", "b")]
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
        assert m.status().get("link_held") is True
        assert "up over ssh, one connection held" in m.notify("status").stdout
    before = logins(sshd)
    edit_and_wait(a, b, remote, "deep.txt", "through the held connections\n")
    assert logins(sshd) == before


def test_the_user_s_own_multiplexing_is_left_alone(tmp_path):
    config_file = tmp_path / "ssh_config"
    config_file.write_text("Host own\n  ControlMaster auto\n  ControlPath %s/%%C\n"
                           "Host plain\n  User me\n" % tmp_path)
    ssh = ["ssh", "-F", str(config_file)]
    assert sshremote.held(ssh, "own") == ([], None)
    options, path = sshremote.held(ssh, "plain", 2222)
    pattern = os.path.join(paths.runtime_dir(), "ssh-%C")
    assert options == ["-o", "ControlMaster=no", "-o", "ControlPath=" + pattern]
    assert os.path.dirname(path) == paths.runtime_dir() and "%" not in path
    # ssh's own expansion for this destination; another one's differs
    assert path == sshremote.effective(ssh + options[2:], "plain", 2222)["controlpath"]
    assert path != sshremote.effective(ssh + options[2:], "plain", 2223)["controlpath"]
    assert path != sshremote.effective(ssh + options[2:], "other", 2222)["controlpath"]
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    for own in (["-S", "/x"], ["-oControlPath=/x"], ["-o", "controlmaster=no"], ["-M"]):
        assert sshremote.held(ssh + own, "plain") == ([], None)
    assert sshremote.held(["plink"], "plain") == ([], None)  # not OpenSSH's options


def test_the_held_connection_carries_nothing_meant_for_another_server(sshd, tmp_path):
    """The held options given to a command for another server (git's push to a second
    remote, as `git annex sync` makes): it logs in there itself, not into the held
    connection's server (a fixed ControlPath sent every destination to the master's)."""
    ssh = shlex.split(sshd.ssh_command)
    options, path = sshremote.held(ssh, "127.0.0.1", sshd.port)
    master = sshremote.connect(ssh, "127.0.0.1", sshd.port, path)
    if master is not None:
        wait_until(lambda: master.poll() is not None, 30, what="the master to log in")
    assert subprocess.run(ssh + ["-o", "ControlPath=" + path, "-O", "check", "127.0.0.1"],
                          stderr=subprocess.DEVNULL).returncode == 0  # the master is up
    other = Sshd(tmp_path / "other").start()
    try:
        def home_of(port):
            return subprocess.run(
                ssh + options + ["-i", other.client_key, "-o",
                                 "UserKnownHostsFile=%s %s" % (sshd.known_hosts, other.known_hosts),
                                 "-p", str(port), "127.0.0.1", "echo $HOME"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        assert home_of(sshd.port).stdout.strip() == sshd.home
        reached = home_of(other.port)
        assert reached.returncode == 0, reached.stderr
        assert reached.stdout.strip() == other.home  # the other server, not the held one's
    finally:
        other.stop()
        sshremote.let_go(ssh, "127.0.0.1", path)


def test_git_gets_the_user_s_ssh_line_with_the_held_connection(tmp_path, monkeypatch):
    git("init", "-q", str(tmp_path / "w"))
    config_file = tmp_path / "my config"
    config_file.write_text("Host *\n  User me\n")
    monkeypatch.setenv("CONFIG_DIR", str(tmp_path))  # the shell git runs it with expands it
    env = {"GIT_SSH_COMMAND": "ssh -F \"$CONFIG_DIR/my config\""}
    text = sshremote.git_ssh_command("ssh://host:2222/r.git", str(tmp_path / "w"), env)
    pattern = os.path.join(paths.runtime_dir(), paths.folder_id(str(tmp_path / "w"))[:8] + "-%C")
    assert text == env["GIT_SSH_COMMAND"] + " -o ControlMaster=no -o ControlPath=%s " % pattern \
        + " ".join(OPTIONS[2:])
    assert sshremote.git_ssh_command("/srv/r.git", str(tmp_path / "w"), env) is None
    assert sshremote.git_ssh_command("host:r.git", str(tmp_path / "w"),
                                     dict(env, GIT_SSH_COMMAND="ssh -S none")) is None


def test_the_held_connection_asks_ssh_for_its_configuration_once_per_question(tmp_path,
                                                                           monkeypatch):
    """`ssh -G` (a process and the user's ssh config read each time) runs once for the
    configuration held() and connect() both read, once for the socket's expanded path:
    not again in connect(); never for an ssh that is not OpenSSH's."""
    git("init", "-q", str(tmp_path / "w"))
    config_file = tmp_path / "ssh_config"
    config_file.write_text("Host *\n  User me\n")
    asked, masters = [], []
    quietly, popen = sshremote._quietly, subprocess.Popen

    def counted(argv, timeout):
        asked.extend(["-G"] if "-G" in argv else [])
        return quietly(argv, timeout)

    def no_master(argv, **kwargs):  # the master's ssh is not started: no server here
        if "ControlMaster=yes" in argv:
            masters.append(argv)
            return popen(["true"], **kwargs)
        return popen(argv, **kwargs)
    monkeypatch.setattr(sshremote, "_quietly", counted)
    monkeypatch.setattr(sshremote.subprocess, "Popen", no_master)
    env = {"GIT_SSH_COMMAND": "ssh -F %s" % shlex.quote(str(config_file))}
    assert sshremote.git_ssh_command("ssh://host:2222/r.git", str(tmp_path / "w"), env)
    assert asked == ["-G", "-G"] and len(masters) == 1
    del asked[:]
    assert sshremote.git_ssh_command("host:r.git", str(tmp_path / "w"),
                                     {"GIT_SSH_COMMAND": "plink -batch"}) is None
    assert asked == []


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["frozen", "left behind"])
def test_a_stale_control_socket_does_not_block(sshd, ssh_machines, remote, kind):
    a, b = ssh_machines(sshd, "a", "b", start=False)
    path = control_socket(sshd, a)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)  # never accepts, never answers: a master that hangs
    if kind == "left behind":
        listener.close()  # the file stays, nobody listens: a master killed outright
    try:
        for m in (a, b):
            m.start()
        for m in (a, b):
            wait_until(lambda: m.status().get("link") == "up", 60, what="%s's link up" % m.name)
        edit_and_wait(a, b, remote, "through.txt", "through a new connection\n")
        check = subprocess.run(shlex.split(sshd.ssh_command) + ["-o", "ControlPath=" + path,
                               "-O", "check", "127.0.0.1"], stderr=subprocess.PIPE)
        assert check.returncode == 0, check.stderr  # a working master has the path now
    finally:
        listener.close()


def test_after_a_sleep_the_watch_is_made_again_over_a_new_connection(scripted):
    # The clock given to the link before its thread starts: replaced afterwards, the
    # thread could read the machine's own (a VM restored from a snapshot has slept for
    # hours) and store it over the test's.
    slept = [0.0]
    released = []
    s = scripted(argv=lambda cfg: sshwatch.WatchCommand(
        ["sh", "-c", "echo 'refs/heads/main %s'; exec sleep 60" % REV_A], "script",
        lambda: released.append(True)), asleep=lambda: slept[0])
    wait_until(lambda: s.up() == [True], what="link up")
    wait_until(lambda: len(s.requests("pull")) == 1, what="the catch-up pull")
    first = s.link.proc.pid
    slept[0] = 120.0  # the machine was suspended for two minutes
    # Link reports are newest-wins (client.RequestQueue): the moment the link was down
    # may be overtaken by the new watch's first line before it is sent, so it is not
    # waited for; the new watch, the released connection and a new catch-up pull are.
    wait_until(lambda: s.link.proc is not None and s.link.proc.pid != first,
               what="a new watch after the sleep")
    wait_until(lambda: len(s.requests("pull")) == 2, what="a catch-up pull after the sleep")
    assert released == [True]
    wait_until(lambda: s.up() in ([True], [True, False, True]), what="the link told up again")


# --- a key that may do nothing else (autosync-remote serve) ---------------------------

@pytest.mark.e2e
def test_a_restricted_key_syncs_and_can_do_nothing_else(sshd, ssh_machines, remote, tmp_path):
    # The line init prints, with the program's full path (not on the sessions' PATH).
    from autosync.tools.init import key_line
    line = key_line(sshd.url(remote.path))
    assert line == 'command="autosync-remote serve %s",restrict' % remote.path
    sshd.authorize(True, line.replace("autosync-remote", sshd.remote_program, 1))
    ssh = shlex.split(sshd.ssh_command) + ["-o", "ControlPath=none", "127.0.0.1"]
    # A shell, a command, another repository, a path outside: all refused.
    shell = subprocess.run(ssh, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    assert shell.returncode == 1 and shell.stdout == b""
    assert b"autosync-remote: this key may only sync %s: no shell" % remote.path.encode() \
        in shell.stderr
    told = subprocess.run(ssh + ["touch %s" % (tmp_path / "pwned")], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    assert told.returncode == 1 and b"touch is not a command of git's" in told.stderr
    assert not (tmp_path / "pwned").exists()
    other = Remote(tmp_path / "other.git")
    read = subprocess.run(["git", "ls-remote", sshd.url(other.path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    assert read.returncode != 0 and read.stdout == b""
    assert b"this key may only sync %s, not %s" % (remote.path.encode(), other.path.encode()) \
        in read.stderr
    outside = str(tmp_path / "outside.git")
    git("init", "-q", "--bare", outside)
    before = sorted(os.listdir(outside))
    seed = os.path.join(remote.path + ".seed")
    pushed = subprocess.run(["git", "push", sshd.url(outside), "HEAD:refs/heads/x"], cwd=seed,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert pushed.returncode != 0 and b"this key may only sync" in pushed.stderr
    assert sorted(os.listdir(outside)) == before and git("--git-dir", outside, "for-each-ref") \
        == b""
    # Syncing goes through it: the watch, pushes and fetches.
    a, b = ssh_machines(sshd, "a", "b")
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    edit_and_wait(a, b, remote, "through-the-key.txt", "restricted\n")
    edit_and_wait(b, a, remote, "and-back.txt", "still restricted\n")
    assert "asking the committer to pull (refs/heads/main moved to" in b.logtext()


# --- nothing to install on the server ---------------------------------------------------

def started_server(tmp_path, monkeypatch, server):
    reason = missing()
    if reason:
        pytest.skip(reason)
    sshd = Sshd(tmp_path / ("sshd-" + server), server=server).start()
    monkeypatch.setenv("GIT_SSH_COMMAND", sshd.ssh_command)
    return sshd


@pytest.mark.e2e
def test_a_server_with_python3_only_gets_the_watch_sent(tmp_path, monkeypatch, ssh_machines,
                                                         remote):
    sshd = started_server(tmp_path, monkeypatch, "python3")
    try:
        a, b = ssh_machines(sshd, "a", "b")
        for m in (a, b):
            wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
        sent = [pid for pid in descendants(sshd.proc.pid)
                if open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")[1:3] ==
                [b"-c", sshwatch.BOOT.encode()]]
        assert len(sent) == 2  # a watch per machine, run by the server's python3
        assert "watching the remote: " in b.logtext() and sshwatch.SENT in b.logtext()
        assert sshwatch.watch_program() not in b.logtext()  # not 7 kB of base64 in the log
        edit_and_wait(a, b, remote, "sent.txt", "watched by the sent program\n")
        assert "asking the committer to pull (refs/heads/main moved to" in b.logtext()
        assert "polling the remote" not in b.logtext()
    finally:
        sshd.stop()


@pytest.mark.e2e
def test_a_restricted_key_needs_nothing_of_ours_on_the_server(tmp_path, monkeypatch,
                                                              ssh_machines, remote):
    """The line init prints where the server has no autosync-remote works there: plain sh
    runs this repository's fetch and push and this version's watch, nothing else. A
    second folder on that server under the same key is refused by name (the forced
    command, not "the remote and the network"), and an edit of authorized_keys that
    allows it applies with no restart: a refused watch logs in anew."""
    from autosync.tools.init import key_line
    sshd = started_server(tmp_path, monkeypatch, "python3")
    c = None
    try:
        line = key_line(sshd.url(remote.path), installed=False)
        assert line.startswith('command="sh -c ') and "autosync-remote serve" not in line
        sshd.authorize(True, line)
        ssh = shlex.split(sshd.ssh_command) + ["-o", "ControlPath=none", "127.0.0.1"]
        for asked in ([], ["touch %s" % (tmp_path / "pwned")],
                      ["git-upload-pack '%s'" % tmp_path]):
            refused = subprocess.run(ssh + asked, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert refused.returncode == 1 and refused.stdout == b""
            assert b"autosync: this key may only sync one repository" in refused.stderr
        assert not (tmp_path / "pwned").exists()
        a, b = ssh_machines(sshd, "a", "b")
        for m in (a, b):
            wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
            assert m.status().get("link_polled") is None  # watched, not polled
        edit_and_wait(a, b, remote, "restricted.txt", "through the key, nothing installed\n")
        edit_and_wait(b, a, remote, "back.txt", "and back\n")
        # A second folder on the same server, the same key.
        other = Remote(tmp_path / "other.git")
        c = Machine(tmp_path, "c", other, syncmethod="ssh")
        git("remote", "set-url", "origin", sshd.url(other.path), cwd=c.path)
        c.start()
        said = wait_until(lambda: "forced command" in c.notify("status").stdout and
                          c.notify("status").stdout, 60, what="c's refusal, by name")
        assert "refused by the forced command of this key's line" in said.splitlines()[0]
        assert "the remote and the network" not in said
        # The line now allows c's repository (the user's edit): c syncs, nothing restarted.
        sshd.authorize(True, key_line(sshd.url(other.path), installed=False))
        wait_until(lambda: c.status().get("link") == "up", 60, what="c's link, after the edit")
        with open(os.path.join(c.path, "c.txt"), "w") as f:
            f.write("c's own\n")
        wait_until(lambda: c.settled(other), 60, what="c's push")
    finally:
        if c is not None:
            c.stop()
        sshd.stop()


@pytest.mark.e2e
def test_a_server_with_git_only_is_polled(tmp_path, monkeypatch, ssh_machines, remote):
    sshd = started_server(tmp_path, monkeypatch, "git")
    try:
        a, b = ssh_machines(sshd, "a", "b")
        for m in (a, b):
            wait_until(lambda: m.status().get("link") == "up", 60, what="%s's link up" % m.name)
        assert "autosync-remote: not found on the server, nor python3: the server cannot run " \
            "the watch; polling the remote with git ls-remote every 10 s instead" in b.logtext()
        assert "watching the remote: %s -m autosync.ssh.remote poll %s" % (
            sys.executable, sshd.url(remote.path)) in b.logtext()
        assert link_problem(b) == []
        assert b.status().get("link_polled") == 10
        # status names the server's own words, as the log does
        assert "link:        polled every 10 s over ssh (git ls-remote: the watch command " \
            "ended (exit 127): autosync-remote: not found on the server, nor python3)" \
            in b.notify("status").stdout
        edit_and_wait(a, b, remote, "polled.txt", "seen by ls-remote\n")
        assert "asking the committer to pull (refs/heads/main moved to" in b.logtext()
    finally:
        sshd.stop()


@pytest.mark.e2e
def test_an_old_version_s_key_line_is_named_in_status_with_what_to_do(tmp_path, monkeypatch,
                                                                        ssh_machines, remote):
    """After an upgrade that changed the watch, the key's old line refuses the new one:
    the link polls (the line allows git ls-remote), and status says why in the line's
    own words, with the fix, where it said only that the server cannot run the watch."""
    from autosync.tools.init import key_line
    sshd = started_server(tmp_path, monkeypatch, "python3")
    try:
        with monkeypatch.context() as old:  # the line as an older version printed it
            old.setattr(sshwatch, "remote_command", lambda path: "sh -c 'an older watch'")
            sshd.authorize(True, key_line(sshd.url(remote.path), installed=False))
        a, = ssh_machines(sshd, "a")
        wait_until(lambda: a.status().get("link_polled"), 60, what="a polled")
        said = a.notify("status").stdout
        assert "link:        polled every 10 s over ssh (git ls-remote: the watch command " \
            "ended (exit 1): error: autosync: this key may only sync one repository" in said
        assert "refused by the forced command of its line in authorized_keys); replace the " \
            "key's line in the server's authorized_keys with the one dvcs-autosync init " \
            "prints for this folder (it allows another version's watch))" in said
        assert link_problem(a) == []  # polled, it syncs: no problem, but said
    finally:
        sshd.stop()


@pytest.mark.e2e
@pytest.mark.parametrize("server, said", [
    ("autosync-remote", "Other machines' pushes arrive at once: the remote is watched "
                        "(syncmethod = ssh, autosync-remote)."),
    ("python3", "Other machines' pushes arrive at once: the remote is watched (syncmethod = "
                "ssh, the server has no autosync-remote: its python3 runs the watch sent over "
                "ssh)."),
    ("git", "Other machines' pushes arrive within 10 s: the server cannot run the watch (the "
            "watch command ended (exit 127): autosync-remote: not found on the server, nor "
            "python3), so the remote is polled with git ls-remote (syncmethod = ssh)."),
])
def test_init_picks_the_best_watch_the_server_can_run_and_says_which(
        tmp_path, monkeypatch, remote, server, said):
    from helpers import init
    sshd = started_server(tmp_path, monkeypatch, server)
    try:
        folder, config_file = tmp_path / "Sync", tmp_path / "sync.autosync"
        result = init(sshd.url(remote.path), folder, "--config", config_file)
        assert result.returncode == 0, result.stderr
        assert said in result.stdout
        assert "syncmethod = ssh" in config_file.read_text()
        # The server's repository set for big files, over ssh, whatever the server runs.
        assert "Big files: the remote's repository stores and sends them as they came " \
            "(core.bigFileThreshold 16m, receive.unpackLimit 1)." in result.stdout
        assert git("--git-dir", remote.path, "config", "--local", "receive.unpackLimit") \
            == b"1\n"
        # The restricted key's line: one that runs on that server (nothing of ours there:
        # plain sh; it was autosync-remote serve, which init had just found missing).
        from autosync.tools.init import key_line
        line = key_line(sshd.url(remote.path), installed=server == "autosync-remote")
        assert line in result.stdout
        assert ("autosync-remote serve" in line) == (server == "autosync-remote")
    finally:
        sshd.stop()


@pytest.mark.e2e
def test_a_command_killed_mid_session_is_not_held_open_by_the_connection(sshd, remote,
                                                                       tmp_path):
    # The server's side of a fetch waits (its pack-objects hook reads a fifo): the fetch
    # is killed meanwhile, as a stop or a timeout does. Its output must end with it, even
    # when it was the first to use the held connection: no master keeps its pipes.
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    with open(os.path.join(sshd.home, ".gitconfig"), "w") as f:
        f.write('[uploadpack]\n\tpackObjectsHook = "cat %s >/dev/null; exec"\n' % fifo)
    clone, other = str(tmp_path / "clone"), str(tmp_path / "other")
    git("clone", "-q", remote.path, clone)
    git("clone", "-q", remote.path, other)
    with open(os.path.join(other, "new.txt"), "w") as f:
        f.write("something to fetch\n")
    git("add", "new.txt", cwd=other)
    git("commit", "-q", "-m", "new", cwd=other)
    git("push", "-q", "origin", "HEAD:main", cwd=other)
    env = dict(os.environ, GIT_SSH_COMMAND=sshremote.git_ssh_command(sshd.url(remote.path),
                                                                     clone))
    path = control_socket(sshd, clone)
    wait_until(lambda: os.path.exists(path), what="the held connection")
    fetch = subprocess.Popen(["git", "fetch", "-q", sshd.url(remote.path), "main"], cwd=clone,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        wait_until(lambda: any(b"pack-objects" in open("/proc/%d/cmdline" % p, "rb").read()
                               for p in descendants(sshd.proc.pid)
                               if os.path.exists("/proc/%d" % p)),
                   what="the server's side to wait")
        os.killpg(fetch.pid, signal.SIGTERM)
        fetch.communicate(timeout=20)  # (a master holding its pipes: until the server ends)
        assert fetch.returncode == -signal.SIGTERM
    finally:
        try:  # the server's side goes on, and ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # (it never began)
        if fetch.poll() is None:
            os.killpg(fetch.pid, signal.SIGKILL)
            fetch.wait()
        sshremote.end_masters()  # this process made it


def server_packing(sshd):
    """True while the server's side of a fetch waits in its pack-objects hook."""
    for pid in descendants(sshd.proc.pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"pack-objects" in f.read():
                    return True
        except OSError:
            pass
    return False


@pytest.mark.e2e
def test_a_stop_during_a_pull_ends_it_at_once_and_the_next_start_pulls(sshd, ssh_machines,
                                                                       remote, tmp_path):
    a, b = ssh_machines(sshd, "a", "b")
    for m in (a, b):
        wait_until(lambda: m.status().get("link") == "up", what="%s's link up" % m.name)
    # From now on the server's side of every fetch waits until the fifo is opened: b's
    # pull, asked by its link for a's push, hangs in its fetch.
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    gitconfig = os.path.join(sshd.home, ".gitconfig")
    with open(gitconfig, "w") as f:
        f.write('[uploadpack]\n\tpackObjectsHook = "cat %s >/dev/null; exec"\n' % fifo)
    try:
        with open(os.path.join(a.path, "while-stopping.txt"), "w") as f:
            f.write("pushed while b pulls\n")
        wait_until(lambda: server_packing(sshd) and b.status().get("state") == "pulling", 30,
                   what="b's fetch to wait on the server")
        b.proc.send_signal(signal.SIGTERM)
        # The server would hold the pack until the fifo is opened, below: the stop did
        # not wait for it (the supervisor's SIGKILL after its grace would say so). (The
        # server's side ends with b's held connection, which ends with b.)
        assert b.proc.wait(10) == 0
        log = b.logtext()
        assert "did not stop in time" not in log
        assert "pull failed" not in log
        assert "pull not done: the daemon is stopping" in log
        assert b.read("while-stopping.txt") is None
    finally:
        os.unlink(gitconfig)
        try:  # the server's side goes on, and ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    b.start()
    wait_until(lambda: b.read("while-stopping.txt") == b"pushed while b pulls\n", 30,
               what="the next start's pull")
    assert "pull failed" not in b.logtext()
