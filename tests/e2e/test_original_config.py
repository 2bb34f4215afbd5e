"""The original dvcs-autosync's example config, run by the real suite in every notifymethod.

tests/data/original-autosync-example is the original's `.autosync-example`, word for
word. Facts about the original relied on here (read in its autosync.py):

* It read the file with Python's RawConfigParser (`config.read([...])`): `key = value`,
  an indented line continues the value (joined with a newline), `#` lines are comments,
  `%s` is kept. test_config.py holds our reader to RawConfigParser on this very text;
  here the text is only edited line by line, with str.replace on whole lines.
* It had no `notifymethod` line in its example (the key came later, default desktop);
  the test adds one, as a user choosing a method would.
* `alsonotify` holds a sentence, "if set, another XMPP id that will get notified when
  something happens"; the original started with it and sent its messages there
  (`bot.send(alsonotify, ...)`), where they were lost. So it must start here too: a
  warning naming the key and value, and no notifications over XMPP.
* `readfrequency = 5` is an int there (`int(config.get(...))`); here seconds, 5.0.
* `[autosync-server]` was never implemented: accepted and ignored.
* The pidfile holds the PID as digits without a newline (docs/commands.md, `dvcs-autosync`).

What the test changes, and why (nothing else):

* `path`, `pidfile`: the test's folders (two machines share one HOME here).
* `username`, `password`: an account on the private prosody (tests/prosody.py).
* added to [xmpp]: `host = 127.0.0.1` and `port = N`: the private server listens on
  127.0.0.1 at a free port, not at the account domain's port 5222; `fingerprint = ...`
  as openssl prints it: the server's certificate is self-signed, as on many private
  servers, and the pin is what the refusal tells such a user to add (test_xmpp.py
  shows the refusal). No `cafile`.
* added to [autosync]: `notifymethod = ...`, the method under test.
"""
import os
import subprocess

import pytest

from base import Machine, Remote, git, wait_until
from dbus_session import Recorder, SessionBus
from prosody import DOMAIN, prosody_certs, prosody_factory  # noqa: F401 (fixtures)


from base import HERE  # tests/, where data/ is
ORIGINAL = os.path.join(HERE, "data", "original-autosync-example")
PASSWORD = "0riginal-Pa55-never-logged"
ALSONOTIFY = "if set, another XMPP id that will get notified when something happens"


def original_text():
    with open(ORIGINAL, encoding="utf-8") as f:
        return f.read()


def edit(text, old, new):
    """Replace exactly one whole line of the original's text."""
    lines = text.split("\n")
    assert lines.count(old) == 1, old
    lines[lines.index(old)] = new
    return "\n".join(lines)


def openssl_fingerprint(certfile):
    return subprocess.run(["openssl", "x509", "-in", certfile, "-noout", "-fingerprint",
                           "-sha256"], check=True, capture_output=True, text=True).stdout.strip()


class OriginalMachine(Machine):
    """A clone run by dvcs-autosync with the original's example text as its config."""

    def __init__(self, home, name, remote, text):
        self.name = name
        self.path = os.path.join(home, name)
        self.config = os.path.join(home, "." + name + ".autosync")
        self.log = os.path.join(home, name + ".log")
        self.proc = None
        git("clone", "-q", remote.path, self.path)
        with open(self.config, "w") as f:
            f.write(text)
        os.chmod(self.config, 0o600)  # it holds a password

    def write_config(self):
        raise AssertionError("the original's text is written once, as edited")


def config_for(name, notifymethod, server):
    text = original_text()
    text = edit(text, "path = ~/amw", "path = ~/%s" % name)
    text = edit(text, "pidfile = ~/.autosync.pid", "pidfile = ~/.%s.pid" % name)
    text = edit(text, "syncmethod = xmpp", "syncmethod = xmpp\nnotifymethod = %s" % notifymethod)
    text = edit(text, "username = your XMPP id here", "username = me@%s" % DOMAIN)
    text = edit(text, "password = your XMPP password here",
                "password = %s\nhost = 127.0.0.1\nport = %d\nfingerprint = %s"
                % (PASSWORD, server.port, openssl_fingerprint(server.cert)))
    assert "alsonotify = " + ALSONOTIFY in text.split("\n")  # kept as the original has it
    return text


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    """A private D-Bus session with a notification server that records what it is shown."""
    with SessionBus(tmp_path / "dbus") as bus:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
        with Recorder(bus.address) as rec:
            yield rec


@pytest.mark.parametrize("notifymethod", ["desktop", "xmpp", "all", "none"])
def test_the_original_example_runs_in_every_notifymethod(tmp_path, private_home, prosody_factory,
                                                         prosody_certs, recorder, notifymethod):
    server = prosody_factory(certs=prosody_certs.untrusted)  # self-signed, trusted by nobody
    server.register("me", PASSWORD)
    remote = Remote(tmp_path / "remote.git")
    home = str(private_home)
    a = OriginalMachine(home, "amw", remote, config_for("amw", notifymethod, server))
    b = OriginalMachine(home, "amw-b", remote, config_for("amw-b", notifymethod, server))
    try:
        a.start()
        b.start()
        for m in (a, b):
            wait_until(lambda: "link up" in m.logtext(), 20, what="%s's XMPP link" % m.name)
        wait_until(lambda: "machine online" in a.logtext(), 20, what="a to see b")
        with open(os.path.join(a.path, "notes.txt"), "w") as f:
            f.write("written on a\n")
        # readfrequency = 5 (the original's): committed 5 s after the write, then pushed
        # and announced; b pulls on the announcement.
        wait_until(lambda: remote.files().get(b"notes.txt") == b"written on a\n", 30,
                   what="the commit on the remote")
        wait_until(lambda: b.read("notes.txt") == b"written on a\n", 20, what="b to pull it")
        assert "added: notes.txt" in remote.log("-1", "--format=%B")

        for m in (a, b):
            log = m.logtext()
            # The placeholder: one warning naming key and value; that part is off.
            assert ("[xmpp] alsonotify: %r is not an XMPP address; ignored, so nobody gets "
                    "notifications over XMPP (notifymethod = %s)" % (ALSONOTIFY, notifymethod)
                    in log)
            assert ("as me@localhost/autosync-" in log
                    and "(TLS, certificate matches the pinned fingerprint)" in log)
            assert PASSWORD not in log
            assert "Traceback" not in log
            with open(os.path.join(home, "." + m.name + ".pid"), "rb") as f:
                assert f.read() == str(m.proc.pid).encode()  # digits, no newline

        if notifymethod in ("desktop", "all"):
            shown = recorder.wait_for(1)
            assert any("notes.txt" in n.summary + n.body for n in shown), shown
        else:
            assert recorder.settled(0.5) == []  # nothing on the desktop
    finally:
        for m in (a, b):
            m.stop()
    assert (a.proc.returncode, b.proc.returncode) == (0, 0)


def test_the_original_example_with_its_own_account_placeholders_syncs_without_xmpp(
        tmp_path, private_home, recorder):
    """Only path and pidfile changed: `username = your XMPP id here` cannot log in anywhere.
    The original then printed "Will not announce pushes to other running autosync
    instances" and synced on; here: a warning naming it, XMPP off, committed and pushed."""
    remote = Remote(tmp_path / "remote.git")
    home = str(private_home)
    text = edit(original_text(), "pidfile = ~/.autosync.pid", "pidfile = ~/.amw.pid")
    a = OriginalMachine(home, "amw", remote, text)  # path = ~/amw, as the original's
    try:
        a.start()
        assert "xmpp" not in a.children() and "desktop" in a.children()
        with open(os.path.join(a.path, "notes.txt"), "w") as f:
            f.write("written on a\n")
        wait_until(lambda: remote.files().get(b"notes.txt") == b"written on a\n", 30,
                   what="the commit on the remote")
        log = a.logtext()
        assert ("[xmpp] username: 'your XMPP id here' is not an XMPP address; XMPP is off: "
                "pushes are not announced, other machines' pushes are pulled every 300 s "
                "(pullinterval)" in log)
        shown = recorder.wait_for(1)
        assert any("notes.txt" in n.summary + n.body for n in shown), shown
    finally:
        a.stop()
    assert a.proc.returncode == 0


def test_the_original_s_syncmethod_none_keeps_history_here_only(tmp_path, private_home):
    """The original with `syncmethod = none` (its example's commented choice) committed
    and never pushed nor pulled (its dvcs-autosync: no start-up pull, no push timer when
    syncmethod is none). An original configuration keeps that meaning here: committed,
    nothing pushed, another machine's push not pulled, and the status says so."""
    remote = Remote(tmp_path / "remote.git")
    home = str(private_home)
    text = edit(original_text(), "pidfile = ~/.autosync.pid", "pidfile = ~/.amw.pid")
    text = edit(text, "syncmethod = xmpp", "syncmethod = none\nnotifymethod = none")
    a = OriginalMachine(home, "amw", remote, text)
    elsewhere = str(tmp_path / "elsewhere")
    git("clone", "-q", remote.path, elsewhere)
    with open(os.path.join(elsewhere, "theirs.txt"), "w") as f:
        f.write("pushed by another machine\n")
    git("add", "theirs.txt", cwd=elsewhere)
    git("commit", "-q", "-m", "theirs", cwd=elsewhere)
    git("push", "-q", cwd=elsewhere)
    on_remote = git("--git-dir", remote.path, "rev-parse", "main")
    try:
        a.start()
        with open(os.path.join(a.path, "notes.txt"), "w") as f:
            f.write("written on a\n")
        synced = a.notify("--json", "sync")
        assert '"pushed": false' in synced.stdout, synced.stdout
        assert b"notes.txt" in git("log", "-1", "--name-only", "--format=", cwd=a.path)
        assert git("--git-dir", remote.path, "rev-parse", "main") == on_remote  # not pushed
        assert not os.path.exists(os.path.join(a.path, "theirs.txt"))  # nor pulled
        status = a.status()
        assert status["localonly"] is True and status["headline"].startswith(
            "history kept here only (syncmethod = none in an original configuration"), status
        assert "local history only, as for the original" in a.logtext()
    finally:
        a.stop()
    assert a.proc.returncode == 0
