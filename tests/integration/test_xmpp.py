"""autosync-xmpp against a real, private prosody (tests/prosody.py).

The XMPP side is never mocked. The committer is a small fake built on the
real socket protocol (tests/fakes.py): it records the requests it gets and
publishes the events a test tells it to.
"""
import dataclasses
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import types

import pytest
import xmpp as xmpppy


from autosync.xmpp import listener as ax
from autosync.xmpp import session as xmpp_session
from autosync.core import config
from autosync.core.config import Xmpp
from fakes import FakeCommitter  # noqa: E402
from prosody import DOMAIN, prosody_certs, prosody_factory, prosody_server  # noqa: E402,F401

from base import ROOT  # noqa: E402
PASSWORD = "Pa55-w0rd-never-logged"
BAD_PASSWORD = "wr0ng-Pa55-never-logged"

FAST = ax.ListenerTiming(ping_interval=0.5, ping_timeout=1.0, backoff_min=0.1, backoff_max=0.4,
                 login_timeout=3.0, notify_quiet=0.2, notify_interval=1.0,
                 committer_retry=0.1, pull_timeout=10.0)


def wait_until(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))


@pytest.fixture(autouse=True)
def no_password_in_logs(caplog):
    """Every test: capture all log records, and fail if a password shows up in one."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    for record in caplog.records:
        text = record.getMessage() + (str(record.exc_info) if record.exc_info else "")
        assert PASSWORD not in text and BAD_PASSWORD not in text, text


def messages(caplog, contains=""):
    return [r for r in caplog.records if r.name == "autosync.xmpp" and contains in r.getMessage()]


class Machine:
    """One listener in a thread of this process, with its own fake committer."""

    def __init__(self, server, name, user="me", password=PASSWORD, priority=0, tls="required",
                 cafile=None, fingerprint="", notify_to="", pull_seconds=0.0, timing=FAST,
                 file=""):
        self.name = name
        self.committer = FakeCommitter(pull_seconds=pull_seconds)
        self.cfg = types.SimpleNamespace(
            socket=self.committer.path, notifymethod="xmpp" if notify_to else "none", file=file,
            xmpp=Xmpp(username="%s@%s" % (user, DOMAIN), password=password,
                      alsonotify=notify_to, host="127.0.0.1", port=server.port, tls=tls,
                      cafile=server.cafile if cafile is None else cafile,
                      fingerprint=fingerprint, priority=priority, resource="autosync-" + name))
        self.listener = ax.Listener(self.cfg, timing)
        self.thread = threading.Thread(target=self.listener.run, name="listener-" + name,
                                       daemon=True)
        self.thread.start()

    @property
    def jid(self):
        return "%s/%s" % (self.cfg.xmpp.username, self.cfg.xmpp.resource)

    def wait_up(self, sees=()):
        """Until linked up and seeing the given other machines."""
        wait_until(lambda: self.committer.links()[-1:] == [True], what="%s's link up" % self.name)
        for other in sees:
            wait_until(lambda: other.jid in self.listener.peers,
                       what="%s to see %s" % (self.name, other.name))
        wait_until(lambda: self.committer.pulls() >= 1, what="%s's catch-up pull" % self.name)
        # A machine seen coming online is pulled for too (queued before it is listed):
        # a test counts the pulls that come after.
        assert self.listener.pulls.flush(5)
        return self

    def stop(self):
        self.listener.stop()
        self.thread.join(5)
        assert not self.thread.is_alive(), "listener %s did not stop" % self.name
        self.committer.cleanup()


@pytest.fixture
def machines():
    made = []

    def make(server, *names, **options):
        new = [Machine(server, name, **options) for name in names]
        made.extend(new)
        return new

    yield make
    for m in made:
        m.stop()


class RawClient:
    """A few lines of plain xmpppy, as the original dvcs-autosync spoke it.

    Its own thread runs the xmpppy loop; it records the pulls it would have
    made: on a body starting with "pushed" from another resource of its
    account whose presence it has seen.
    """

    def __init__(self, server, user, password, resource, priority=0):
        self.bare = "%s@%s" % (user, DOMAIN)
        self.jid = self.bare + "/" + resource
        self.seen, self.pulls, self.received = set(), [], []
        self.outgoing = queue.SimpleQueue()
        self.client = xmpppy.Client(DOMAIN, debug=[])
        # Plain xmpppy does STARTTLS without verifying, as the original did.
        assert self.client.connect(server=("127.0.0.1", server.port), use_srv=False)
        assert self.client.auth(user, password, resource) == "sasl"
        self.client.RegisterHandler("presence", self._presence)
        self.client.RegisterHandler("message", self._message)
        self.client.send(xmpppy.Presence(priority=priority))
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _presence(self, conn, p):
        if p.getType() != "unavailable":
            self.seen.add(str(p.getFrom()))

    def _message(self, conn, m):
        sender, body = str(m.getFrom()), m.getBody() or ""
        self.received.append((sender, body))
        own = sender.split("/")[0] == self.bare and sender != self.jid
        if own and sender in self.seen and body.startswith("pushed"):
            self.pulls.append(body)

    def send(self, to, body, typ="chat"):
        self.outgoing.put(xmpppy.Message(to=to, body=body, typ=typ))

    def _loop(self):
        while self.running:
            while not self.outgoing.empty():
                self.client.send(self.outgoing.get())
            self.client.Process(0.02)

    def close(self):
        self.running = False
        self.thread.join(2)
        connection = self.client.Connection
        (getattr(connection, "_sslObj", None) or connection._sock).close()


@pytest.fixture
def raw_clients():
    made = []

    def make(*args, **kw):
        made.append(RawClient(*args, **kw))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def server(prosody_server):
    prosody_server.register("me", PASSWORD)
    prosody_server.register("eve", PASSWORD)
    prosody_server.register("watcher", PASSWORD)
    return prosody_server


# ---------------------------------------------------------------- announcements

def test_push_on_one_machine_makes_the_other_pull_once(server, machines, caplog):
    a, b = machines(server, "a", "b")
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    pulls_a, pulls_b = a.committer.pulls(), b.committer.pulls()
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: b.committer.pulls() == pulls_b + 1, what="b's pull")
    time.sleep(0.3)
    assert b.committer.pulls() == pulls_b + 1
    assert a.committer.pulls() == pulls_a, "our own announcement must not make us pull"
    assert messages(caplog, "TLS, certificate verified")


def test_notify_pushed_is_announced_too(server, machines):
    a, b = machines(server, "a", "b")
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    before = a.committer.pulls()
    b.committer.emit("pushed", url="/srv/repo.git", source="notify")
    wait_until(lambda: a.committer.pulls() == before + 1, what="a's pull")


def test_a_burst_of_announcements_becomes_one_or_two_pulls(server, machines):
    a, b = machines(server, "a", "b", pull_seconds=0.3)
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    wait_until(lambda: not b.listener.pulls.busy and not b.listener.pulls.pending, what="idle")
    before = b.committer.pulls()
    for _ in range(20):
        a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: b.committer.pulls() > before, what="b's pull")
    time.sleep(1.0)
    assert 1 <= b.committer.pulls() - before <= 2


def test_all_priorities_hear_every_push(server, machines):
    machines_ = [machines(server, name, priority=p)[0]
                 for name, p in (("hi", 5), ("zero", 0), ("neg", -1))]
    for m in machines_:
        m.wait_up(sees=[o for o in machines_ if o is not m])
    for sender in machines_:
        others = [m for m in machines_ if m is not sender]
        before = [m.committer.pulls() for m in others]
        own = sender.committer.pulls()
        sender.committer.emit("pushed", url="/srv/repo.git", source="committer")
        for m, n in zip(others, before):
            wait_until(lambda: m.committer.pulls() == n + 1,
                       what="%s to pull after %s pushed" % (m.name, sender.name))
        assert sender.committer.pulls() == own


def test_original_client_and_this_tool_make_each_other_pull(server, machines, raw_clients):
    (a,) = machines(server, "a")
    orig = raw_clients(server, "me", PASSWORD, "orighost")
    a.wait_up()
    wait_until(lambda: orig.jid in a.listener.peers, what="a to see the original")
    wait_until(lambda: a.jid in orig.seen, what="the original to see a")
    # The pull for the original coming online answered first: one sent while this one is
    # queued would count twice between two looks at the count
    assert a.listener.pulls.flush(30)
    before = a.committer.pulls()
    # The original announces to the bare JID, formatting the URL from bytes.
    orig.send("me@" + DOMAIN, "pushed b'/srv/repo.git\\n'")
    wait_until(lambda: a.committer.pulls() == before + 1, what="a's pull")
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: orig.pulls == ["pushed /srv/repo.git"], what="the original's pull")
    # The original's "ping" is answered with "pong", to its full JID.
    orig.send(a.jid, "ping")
    wait_until(lambda: (a.jid, "pong") in orig.received, what="pong")


def test_other_accounts_cannot_make_us_pull(server, machines, raw_clients, caplog):
    (a,) = machines(server, "a")
    a.wait_up()
    eve = raw_clients(server, "eve", PASSWORD, "autosync-a")  # even with our resource name
    before = a.committer.pulls()
    for _ in range(3):
        eve.send(a.jid, "pushed /srv/evil.git")
        eve.send("me@" + DOMAIN, "pushed /srv/evil.git")
    eve.send(a.jid, "ping")
    wait_until(lambda: messages(caplog, "ignoring messages from eve@localhost"), what="log")
    time.sleep(0.3)
    assert a.committer.pulls() == before
    assert not any(body == "pong" for _, body in eve.received)
    assert len(messages(caplog, "ignoring messages from eve@localhost")) == 1


def test_announcement_waits_while_the_link_is_down(server, machines, raw_clients):
    """A push reported while the server is away is announced after reconnecting."""
    # A waits a second before reconnecting, so that the other machine is back first.
    slow = dataclasses.replace(FAST, backoff_min=1.0, backoff_max=1.0)
    (a,) = machines(server, "a", timing=slow)
    a.wait_up()
    server.stop()
    wait_until(lambda: a.committer.links()[-1] is False, what="link down")
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    server.start()
    orig = raw_clients(server, "me", PASSWORD, "orighost")
    wait_until(lambda: orig.pulls, timeout=5, what="the queued announcement")
    wait_until(lambda: a.committer.links()[-1] is True, what="link up told")


# ---------------------------------------------------------------- staying connected

@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_reconnects_after_the_server_restarts(server, machines, how):
    a, b = machines(server, "a", "b")
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    pulls = [m.committer.pulls() for m in (a, b)]
    server.stop(kill=(how == "sigkill"))
    for m in (a, b):
        wait_until(lambda: m.committer.links()[-1] is False, what="%s link down" % m.name)
    time.sleep(0.3)
    server.start()
    for m, n in zip((a, b), pulls):
        wait_until(lambda: m.committer.links()[-1] is True, what="%s link up" % m.name)
        wait_until(lambda: m.committer.pulls() >= n + 1, what="%s catch-up pull" % m.name)
    a.wait_up(sees=[b])
    time.sleep(0.2)  # let b's catch-up pull finish, so it cannot absorb the next one
    before = b.committer.pulls()
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: b.committer.pulls() == before + 1, what="b's pull after reconnecting")


def test_a_frozen_server_is_noticed_by_ping(server, machines, caplog):
    (a,) = machines(server, "a")
    a.wait_up()
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: a.committer.links()[-1] is False, timeout=4, what="link down")
        assert messages(caplog, "did not answer a ping")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    wait_until(lambda: a.committer.links()[-1] is True, timeout=5, what="link up again")


def test_link_state_is_told_again_to_a_restarted_committer(server, machines):
    (a,) = machines(server, "a")
    a.wait_up()
    a.committer.close()
    a.committer.requests.clear()
    a.committer.start()
    wait_until(lambda: a.committer.links() == [True], what="link state told again")


def test_two_logins_with_one_resource_back_off(server, machines, caplog):
    """Two machines configured with the same resource replace each other: say so, slowly."""
    machines(server, "same")
    machines(server, "same")
    wait_until(lambda: messages(caplog, "replaced this one"), what="the conflict")
    line = messages(caplog, "replaced this one")[0]
    assert line.levelno == logging.WARNING and "reconnecting in %.1fs" % FAST.backoff_max in line.getMessage()


# ---------------------------------------------------------------- security

def sent_data(monkeypatch):
    """Record what every listener writes to the server before TLS."""
    data = []
    original = xmpp_session.DeadlineSocket.send

    def send(self, raw, *args):  # xmpppy finds its transport's send() by __name__
        data.append(raw if isinstance(raw, str) else str(raw))
        return original(self, raw, *args)

    monkeypatch.setattr(xmpp_session.DeadlineSocket, "send", send)
    return data


@pytest.mark.parametrize("cert,trust,reason", [
    ("untrusted", "trusted", "self-signed certificate"),  # not signed by the CA we trust
    ("wrongname", "wrongname", "Hostname mismatch"),      # trusted, but for another name
])
def test_an_untrusted_certificate_is_refused(prosody_factory, prosody_certs, machines,
                                             monkeypatch, caplog, cert, trust, reason):
    server = prosody_factory(certs=getattr(prosody_certs, cert))
    server.register("me", PASSWORD)
    sent = sent_data(monkeypatch)
    (a,) = machines(server, "a", cafile=getattr(prosody_certs, trust)[0])
    wait_until(lambda: messages(caplog, "no password sent"), what="refusal")
    refusal = messages(caplog, "no password sent")[0]
    assert refusal.levelno == logging.ERROR and reason in refusal.getMessage()
    assert "\n" not in refusal.getMessage() and not refusal.exc_info
    wait_until(a.committer.links, what="the link state")
    assert set(a.committer.links()) == {False}
    assert any("starttls" in s for s in sent)
    assert not any("<auth" in s for s in sent), "credentials were sent"
    assert not messages(caplog, "logged in")


# A certificate nobody vouches for (self-signed, as on many private servers) can be trusted
# by its SHA-256 fingerprint, [xmpp] fingerprint. Facts relied on: `openssl x509 -noout
# -fingerprint -sha256` prints "sha256 Fingerprint=AB:CD:..." (OpenSSL 3.0; "SHA256" in 1.1),
# the SHA-256 of the certificate's DER form; prosody shows the certificate of its `ssl` setting
# on STARTTLS (tests/prosody.py).

def openssl_fingerprint(certfile):
    """The fingerprint as openssl prints it, word for word: `sha256 Fingerprint=AB:...`."""
    return subprocess.run(["openssl", "x509", "-in", certfile, "-noout", "-fingerprint",
                           "-sha256"], check=True, capture_output=True, text=True).stdout.strip()


def pinned(certfile):
    """[xmpp] fingerprint for this certificate, as the config check reads openssl's line."""
    return config.fingerprint(openssl_fingerprint(certfile))


def test_a_self_signed_server_is_refused_with_the_line_that_trusts_it(
        prosody_factory, prosody_certs, machines, monkeypatch, caplog):
    cert = prosody_certs.untrusted[0]
    server = prosody_factory(certs=prosody_certs.untrusted)
    server.register("me", PASSWORD)
    sent = sent_data(monkeypatch)
    machines(server, "a", cafile="", file="/home/me/.autosync")  # the system's CAs only
    wait_until(lambda: messages(caplog, "no password sent"), what="refusal")
    line = messages(caplog, "no password sent")[0].getMessage()
    fingerprint = openssl_fingerprint(cert).split("=", 1)[1]
    assert line.startswith("refusing XMPP server 127.0.0.1:%d: its certificate is not trusted "
                           "(self-signed certificate: no CA trusted here vouches for it); no "
                           "password sent; to trust the CA that signed it, set [xmpp] cafile = "
                           "that CA's certificate; to trust "
                           "exactly this certificate, add to [xmpp] in /home/me/.autosync: "
                           "fingerprint = sha256:%s; retrying in "
                           % (server.port, fingerprint)), line
    assert "\n" not in line
    assert not any("<auth" in s for s in sent), "credentials were sent"
    assert not messages(caplog, "logged in")


@pytest.mark.parametrize("cert", ["untrusted", "wrongname"])
def test_a_pinned_certificate_is_trusted_without_ca_or_name(prosody_factory, prosody_certs,
                                                            machines, caplog, cert):
    """With the pin, a self-signed certificate, even one for another host name, logs in, and
    announcements go through."""
    server = prosody_factory(certs=getattr(prosody_certs, cert))
    server.register("me", PASSWORD)
    pin = pinned(server.cert)
    a, b = machines(server, "a", "b", cafile="", fingerprint=pin)
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    assert messages(caplog, "(TLS, certificate matches the pinned fingerprint)")
    before = b.committer.pulls()
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: b.committer.pulls() == before + 1, what="b's pull")


def test_a_pin_accepts_no_other_certificate(prosody_factory, prosody_certs, machines,
                                            monkeypatch, caplog):
    """Even one the CAs vouch for: the pin names exactly one certificate."""
    server = prosody_factory(certs=prosody_certs.trusted)
    server.register("me", PASSWORD)
    sent = sent_data(monkeypatch)
    other = pinned(prosody_certs.untrusted[0])
    machines(server, "a", cafile=prosody_certs.trusted[0], fingerprint=other)
    wait_until(lambda: messages(caplog, "no password sent"), what="refusal")
    line = messages(caplog, "no password sent")[0].getMessage()
    assert ("refusing XMPP server 127.0.0.1:%d: its certificate's fingerprint is %s, not the "
            "pinned %s ([xmpp] fingerprint); no password sent"
            % (server.port, pinned(server.cert), other)) in line
    assert not any("<auth" in s for s in sent), "credentials were sent"
    assert not messages(caplog, "logged in")


def test_a_changed_certificate_under_a_pin_is_refused(prosody_factory, prosody_certs, machines,
                                                      monkeypatch, caplog):
    """The server restarts with another certificate (or someone else answers): no login."""
    server = prosody_factory(certs=prosody_certs.untrusted)
    server.register("me", PASSWORD)
    (a,) = machines(server, "a", cafile="", fingerprint=pinned(server.cert))
    a.wait_up()
    server.stop()
    wait_until(lambda: a.committer.links()[-1] is False, what="link down")
    sent = sent_data(monkeypatch)
    server.cert, server.key = prosody_certs.wrongname
    server._write_config()
    server.start()
    wait_until(lambda: messages(caplog, "not the pinned"), what="refusal")
    refusal = messages(caplog, "not the pinned")[0].getMessage()
    assert pinned(prosody_certs.wrongname[0]) in refusal
    assert any("starttls" in s for s in sent)
    assert not any("<auth" in s for s in sent), "credentials were sent"
    assert a.committer.links()[-1] is False


def test_a_server_without_starttls_gets_no_password(prosody_factory, machines, monkeypatch,
                                                    caplog):
    server = prosody_factory(tls="off")
    server.register("me", PASSWORD)
    sent = sent_data(monkeypatch)
    machines(server, "a")
    wait_until(lambda: messages(caplog, "does not offer STARTTLS"), what="refusal")
    assert not any("<auth" in s for s in sent)


def test_tls_off_must_be_chosen_and_then_works(prosody_factory, machines, caplog):
    server = prosody_factory(tls="off")
    server.register("me", PASSWORD)
    a, b = machines(server, "a", "b", tls="off")
    a.wait_up(sees=[b])
    b.wait_up(sees=[a])
    assert messages(caplog, "(no TLS)")
    before = b.committer.pulls()
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: b.committer.pulls() == before + 1, what="b's pull")


def test_wrong_password_is_one_line_per_attempt_with_backoff(server, machines, caplog):
    (a,) = machines(server, "a", password=BAD_PASSWORD)
    wait_until(lambda: len(messages(caplog, "wrong user name or password")) >= 4, what="retries")
    tries = messages(caplog, "wrong user name or password")
    assert tries[0].levelno == logging.ERROR
    assert all(t.levelno == logging.INFO for t in tries[1:])  # repeats are quieter
    gaps = [later.created - earlier.created for earlier, later in zip(tries, tries[1:])]
    assert gaps[0] >= 0.05 and gaps[-1] > gaps[0], gaps  # spaced, and growing
    assert all(g <= FAST.backoff_max + 0.3 for g in gaps), gaps  # capped
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.INFO]
    assert set(a.committer.links()) == {False}
    # Told to the committer with the reason (status names the `link` problem), not at
    # every retry: once, and once more if the subscription (which re-tells the state,
    # the committer may have restarted) came up after the first telling.
    errors = [m.get("error") for _, m in a.committer.requests if m.get("cmd") == "link"]
    assert 1 <= len(errors) <= 2, errors
    assert all("wrong user name or password" in e for e in errors), errors
    assert a.thread.is_alive()


def test_unreachable_server_is_one_clear_line(prosody_factory, machines, caplog):
    server = prosody_factory(start=False)  # the port is free: nobody listens
    machines(server, "a")
    wait_until(lambda: len(messages(caplog, "cannot reach XMPP server")) >= 2, what="retries")
    first = messages(caplog, "cannot reach XMPP server")[0].getMessage()
    assert "127.0.0.1:%d" % server.port in first and "refused" in first


# ---------------------------------------------------------------- notifications

def test_notifications_are_summarised_per_burst(server, machines, raw_clients):
    watcher = raw_clients(server, "watcher", PASSWORD, "phone")
    (a,) = machines(server, "a", notify_to="watcher@" + DOMAIN)
    a.wait_up()
    for name in ("a.txt", "b.txt", "c.txt"):
        a.committer.emit("committed", message="m", count=1, host="laptop",
                         changes=[{"action": "added", "path": name}])
    a.committer.emit("pushed", url="/srv/repo.git", source="committer")
    wait_until(lambda: watcher.received, what="summary")
    time.sleep(0.4)
    # One message for the burst, worded by autosync.notifications, as on the desktop.
    assert [body for _, body in watcher.received] == ["3 files saved\na.txt, b.txt and c.txt"]
    a.committer.emit("failed", op="push", error="remote unreachable")
    wait_until(lambda: len(watcher.received) == 2, what="error message")
    assert watcher.received[1][1] == "Push failed\nremote unreachable"


# ---------------------------------------------------------------- the program

def test_command_line_program(server, tmp_path):
    """bin/autosync-xmpp with a real config file: logs in, tells the link state, stops."""
    committer = FakeCommitter()
    folder = tmp_path / "folder"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    config = tmp_path / "autosync.ini"
    config.write_text(
        "[autosync]\npath = %s\nsocket = %s\nnotifymethod = none\n"
        "[xmpp]\nusername = me@%s\npassword = %s\nhost = 127.0.0.1\nport = %d\n"
        "cafile = %s\nresource = cli\n" % (folder, committer.path, DOMAIN, PASSWORD,
                                            server.port, server.cafile))
    config.chmod(0o600)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bin", "autosync-xmpp"), "-v",
                             str(config)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: committer.links() == [True], what="link up")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        log = proc.stderr.read()
        proc.stderr.close()
        assert committer.links() == [True, False]
        assert "logged in to 127.0.0.1:%d as me@localhost/cli" % server.port in log
        assert PASSWORD not in log
    finally:
        if proc.poll() is None:
            proc.kill()
        committer.cleanup()


def test_with_syncmethod_ssh_the_listener_leaves_the_link_to_autosync_sshlink(tmp_path):
    # XMPP only for notifications: telling the committer its link state would contradict
    # autosync-sshlink's.
    cfg = types.SimpleNamespace(socket=str(tmp_path / "c.sock"), notifymethod="xmpp", file="",
                                syncmethod="ssh",
                                xmpp=Xmpp(username="me@" + DOMAIN, password=PASSWORD,
                                          alsonotify="you@" + DOMAIN, host="127.0.0.1"))
    listener = ax.Listener(cfg, FAST)
    listener._tell_link(False, "login refused")
    listener._tell_link(True)
    assert listener.links.pending == {} and listener.link.up is None
    listener.on_event({"event": "_subscribed"})
    assert listener.links.pending == {}
