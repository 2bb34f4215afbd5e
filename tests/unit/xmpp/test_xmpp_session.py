"""xmpp_session without an XMPP server: one-line errors, the login deadline, STARTTLS
that verifies, and a password that never leaves unless it may; against a scripted peer
on a local TCP port."""
import base64
import socket
import ssl
import subprocess
import threading
import time

import pytest
import xmpp

from autosync.xmpp import session as xmpp_session
from autosync.core.config import Xmpp
from autosync.xmpp.session import DeadlineSocket, LoginError, one_line, open_session

PASSWORD = "s3cret-Pa55word"


def holds_password(received):
    """The password in clear, or inside a SASL <auth> (base64)."""
    if PASSWORD.encode() in received:
        return True
    for part in received.split(b"<auth")[1:]:
        payload = part.partition(b">")[2].partition(b"<")[0]
        if PASSWORD.encode() in base64.b64decode(payload + b"==="):  # padding may be left off
            return True
    return False

HEADER = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
          b"xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='example.org' "
          b"version='1.0'>")
STARTTLS = b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"


def features(*mechanisms, starttls=False):
    mechs = b"".join(b"<mechanism>%s</mechanism>" % m for m in mechanisms)
    return (HEADER + b"<stream:features>" + (STARTTLS if starttls else b"")
            + (b"<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>%s</mechanisms>" % mechs
               if mechanisms else b"") + b"</stream:features>")


class Peer:
    """A TCP listener that plays `script` to each connection: (what to wait for, what
    to answer) steps; the answer "TLS" turns the connection into a TLS server with
    `cert`."""

    def __init__(self, script, cert=None):
        self.script = list(script)
        self.cert = cert
        self.received = b""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        # Every connection plays the script: the product opens a second one of its own
        # to read a refused certificate's fingerprint (xmpp_session.probe_fingerprint).
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.play(conn)

    def play(self, conn):
        """One connection; `received` collects what every connection sent."""
        conn.settimeout(20)
        self.conn = conn
        seen = b""
        try:
            for expect, answer in self.script:
                while expect not in seen:
                    data = conn.recv(65536)
                    if not data:
                        return
                    seen += data
                    self.received += data
                if answer == "TLS":
                    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    context.load_cert_chain(*self.cert)
                    conn = context.wrap_socket(conn, server_side=True)
                    seen = b""
                elif answer == "CLOSE":
                    return
                elif answer is not None:
                    conn.sendall(answer)
            while True:  # keep reading until the client hangs up
                data = conn.recv(65536)
                if not data:
                    return
                self.received += data
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def close(self):
        try:  # wakes the accept() waiting for another connection (close alone does not)
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        try:  # a connection the client left open (one it retried, say) ends too
            self.conn.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self.thread.join(30)


@pytest.fixture
def peer():
    peers = []

    def start(script, cert=None):
        peers.append(Peer(script, cert))
        return peers[-1]

    yield start
    for p in peers:
        p.close()


def account(port, **fields):
    fields.setdefault("tls", "required")
    return Xmpp(username="user@example.org", password=PASSWORD, host="127.0.0.1", port=port,
                resource="autosync", **fields)


def login_error(xcfg, timeout=10.0):
    with pytest.raises(LoginError) as caught:
        open_session(xcfg, timeout, handler=None)
    message = str(caught.value)
    assert "\n" not in message and PASSWORD not in message
    return message


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    """A self-signed certificate for another name than the account's domain."""
    folder = tmp_path_factory.mktemp("cert")
    key, crt = str(folder / "key.pem"), str(folder / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "2", "-subj", "/CN=other.example",
                    "-addext", "subjectAltName=DNS:other.example"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return crt, key


# --- one_line -----------------------------------------------------------------------

def test_a_stream_error_becomes_one_line_naming_the_condition():
    error = xmpp.protocol.Conflict(("conflict", "Replaced by\nnew connection"))
    assert one_line(error) == "server sent stream error conflict: Replaced by new connection"
    wrapped = xmpp.protocol.StreamError(error)
    assert one_line(wrapped) == "server sent stream error conflict: Replaced by new connection"
    assert one_line(xmpp.protocol.SystemShutdown(("system-shutdown", ""))) == (
        "server sent stream error system-shutdown")


def test_other_errors_are_one_line_too():
    assert one_line(OSError("broken\n  pipe")) == "broken pipe"
    assert one_line(TimeoutError()) == "TimeoutError"


def test_the_session_errors_are_one_family():
    assert issubclass(xmpp_session.Replaced, xmpp_session.SessionLost)
    assert not issubclass(LoginError, xmpp_session.SessionLost)


# --- the deadline socket ------------------------------------------------------------

def test_the_deadline_ends_a_login_wait_and_can_be_lifted():
    transport = DeadlineSocket(("127.0.0.1", 5222), 0.05)
    transport.check_deadline()  # not yet
    transport.deadline = time.monotonic() - 1
    with pytest.raises(LoginError, match=r"127\.0\.0\.1:5222 did not answer within 0\.05s"):
        transport.check_deadline()
    transport.deadline = None  # logged in: no deadline any more
    transport.check_deadline()


def test_nobody_listening_is_one_line_without_the_password():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    message = login_error(account(port))
    assert message.startswith("cannot reach XMPP server 127.0.0.1:%d: " % port)


def test_a_server_that_never_answers_is_given_up_at_the_deadline(peer):
    silent = peer([(b"never sent", None)])
    started = time.monotonic()
    message = login_error(account(silent.port), timeout=0.5)
    assert time.monotonic() - started < 10
    assert message == "XMPP server 127.0.0.1:%d did not answer within 0.5s" % silent.port


def test_a_server_that_hangs_up_is_one_line(peer):
    rude = peer([(b"<stream:stream", "CLOSE")])
    started = time.monotonic()
    message = login_error(account(rude.port), timeout=30)
    assert time.monotonic() - started < 10  # told at once, not at the deadline
    assert "127.0.0.1:%d" % rude.port in message


# --- no password without verified TLS -----------------------------------------------

def test_no_starttls_means_no_password_sent(peer):
    plain = peer([(b"<stream:stream", features(b"PLAIN"))])
    message = login_error(account(plain.port))
    assert message == ("XMPP server 127.0.0.1:%d does not offer STARTTLS; not sending the "
                       "password in clear (tls = off allows it)" % plain.port)
    plain.close()
    assert b"<stream:stream" in plain.received
    assert not holds_password(plain.received)
    assert b"<auth" not in plain.received


def test_a_certificate_that_does_not_verify_gets_no_password(peer, cert):
    server = peer([(b"<stream:stream", features(b"PLAIN", starttls=True)),
                   (b"<starttls", b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                   (b"", "TLS")], cert=cert)
    message = login_error(account(server.port))
    assert message.startswith("refusing XMPP server 127.0.0.1:%d: its certificate is not "
                              "trusted (self-signed certificate" % server.port)
    assert "no password sent" in message and "not valid for" not in message
    server.close()
    assert not holds_password(server.received)


def test_a_trusted_certificate_for_another_name_is_refused_too(peer, cert):
    """The cafile trusts it; only the name is wrong: the check is against the domain."""
    server = peer([(b"<stream:stream", features(b"PLAIN", starttls=True)),
                   (b"<starttls", b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                   (b"", "TLS")], cert=cert)
    message = login_error(account(server.port, cafile=cert[0]))
    assert "certificate is not valid for example.org" in message
    assert "other.example" in message or "mismatch" in message
    server.close()
    assert not holds_password(server.received)


def test_a_private_ca_not_trusted_here_is_named_as_untrusted_not_as_a_name(peer, tmp_path):
    """A certificate for the right name, signed by the user's own CA, which this machine
    does not trust: the words say "not trusted" and how to trust it (cafile), not a
    name mismatch."""
    ca_key, ca, key, csr, crt = (str(tmp_path / n) for n in
                                 ("ca.key", "ca.pem", "key.pem", "req.pem", "cert.pem"))
    quiet = dict(check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    ca_key, "-out", ca, "-days", "2", "-subj", "/CN=My Home CA"], **quiet)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
                    csr, "-subj", "/CN=example.org"], **quiet)
    names = tmp_path / "names.ext"
    names.write_text("subjectAltName=DNS:example.org\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", str(names)], **quiet)
    server = peer([(b"<stream:stream", features(b"PLAIN", starttls=True)),
                   (b"<starttls", b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
                   (b"", "TLS")], cert=(crt, key))
    message = login_error(account(server.port))
    assert message.startswith("refusing XMPP server 127.0.0.1:%d: its certificate is not "
                              "trusted (unable to get local issuer certificate" % server.port)
    assert "set [xmpp] cafile = that CA's certificate" in message
    assert "not valid for" not in message
    server.close()
    assert not holds_password(server.received)


def test_an_unreadable_cafile_is_one_line(peer, tmp_path):
    server = peer([(b"<stream:stream", features(b"PLAIN", starttls=True))])
    missing = str(tmp_path / "no-such-ca.pem")
    message = login_error(account(server.port, cafile=missing))
    assert message.startswith("cannot read cafile %s: " % missing)


def test_a_refused_starttls_is_one_line(peer):
    server = peer([(b"<stream:stream", features(b"PLAIN", starttls=True)),
                   (b"<starttls", b"<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")])
    message = login_error(account(server.port))
    assert message == "XMPP server 127.0.0.1:%d refused STARTTLS" % server.port
    server.close()
    assert not holds_password(server.received)


# --- tls = off: the login itself -------------------------------------------------------

def test_no_usable_mechanism_is_said_before_any_login(peer):
    server = peer([(b"<stream:stream", features(b"SCRAM-SHA-1", b"SCRAM-SHA-256"))])
    message = login_error(account(server.port, tls="off"))
    assert message == ("XMPP server 127.0.0.1:%d offers no login that xmpppy can use "
                       "(only SCRAM-SHA-1, SCRAM-SHA-256)" % server.port)
    server.close()
    assert b"<auth" not in server.received


def test_a_wrong_password_is_one_line_without_it(peer):
    server = peer([(b"<stream:stream", features(b"PLAIN")),
                   (b"</auth>", b"<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
                                b"<not-authorized/></failure>")])
    message = login_error(account(server.port, tls="off"))
    assert message == ("XMPP server 127.0.0.1:%d refused the login of user@example.org: "
                       "wrong user name or password" % server.port)
    server.close()
    assert holds_password(server.received)  # tls = off: it was sent, as the user allowed
