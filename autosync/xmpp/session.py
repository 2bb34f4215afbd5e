"""The xmpppy adapter: one logged-in XMPP session, with a login deadline,
verified STARTTLS and errors that are one line and never hold the password.

xmpppy is used here and nowhere else; this module reaches into its private
fields where it must (docs/internals.md, "Facts relied on": xmpppy verifies
no certificate, sends no SNI and can wait forever during login). The Listener sees a Session: a file
descriptor to wait on, process(), and a few send methods; what the server
sends comes back as calls on a handler object:

    handler.on_presence(jid, type)        jid: str, type: None, "unavailable", ...
    handler.on_message(jid, type, body)
    handler.on_pong(ping_id) -> bool      True if it was a ping of ours

OpenSSL objects are not thread-safe: a Session is used from one thread only.
"""
import hashlib
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Optional

import xmpp
from xmpp import transports

from autosync.core import keyring, retry
from autosync.core.config import format_fingerprint

NS_PING = "urn:xmpp:ping"


class LoginError(Exception):
    """Connecting or logging in failed; str() is one line and never holds the password.

    `fingerprint`: when the server's certificate was not trusted, its SHA-256
    fingerprint (`sha256:AB:...`), which the user may pin; else "".
    """

    def __init__(self, message, fingerprint=""):
        Exception.__init__(self, message)
        self.fingerprint = fingerprint


class UntrustedServer(LoginError):
    """The server's certificate is not valid for it, or not trusted (and no fingerprint is
    pinned)."""


HOSTNAME_MISMATCH = 62  # OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH: the name, not the chain


class _Probed(Exception):
    """A probe has read the certificate: args[0] is its fingerprint."""


def certificate_fingerprint(der):
    """`sha256:AB:CD:...` of a certificate (DER bytes), as [xmpp] fingerprint holds it."""
    return format_fingerprint(hashlib.sha256(der).digest())


class SessionLost(Exception):
    """The connection to the server ended; str() says why, in one line."""


class Replaced(SessionLost):
    """Another login took our resource (two machines with the same resource?)."""


def one_line(error):
    if isinstance(error, xmpp.protocol.StreamError):
        # xmpppy raises these with a (condition, text) tuple, sometimes wrapped once more.
        while error.args and isinstance(error.args[0], BaseException):
            error = error.args[0]
        if error.args and isinstance(error.args[0], tuple) and len(error.args[0]) == 2:
            name, text = error.args[0]
            error = "server sent stream error %s%s" % (name, ": %s" % text if text else "")
    return retry.one_line(error)


class DeadlineSocket(transports.TCPsocket):
    """xmpppy's TCP transport with a connect timeout and a login deadline.

    xmpppy's login loops call Process(1) until an answer comes, forever if
    the server never answers; checking the deadline in pending_data() (which
    every Process() calls) ends them.
    """

    def __init__(self, server, timeout):
        transports.TCPsocket.__init__(self, server, use_srv=False)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._sock = self._sslObj = None

    def plugin(self, owner):
        # xmpppy's PlugIn only calls a `plugin` defined on the class itself.
        return transports.TCPsocket.plugin(self, owner)

    def connect(self, server=None):
        host, port = server or self._server
        try:
            self._sock = socket.create_connection((host, port), timeout=self.timeout)
        except OSError as e:
            raise LoginError("cannot reach XMPP server %s:%s: %s" % (host, port, e.strerror or one_line(e)))
        self._send, self._recv = self._sock.sendall, self._sock.recv
        return "ok"

    def check_deadline(self):
        if self.deadline and time.monotonic() > self.deadline:
            raise LoginError("XMPP server %s:%s did not answer within %gs" % (
                self._server[0], self._server[1], self.timeout))

    def pending_data(self, timeout=0):
        self.check_deadline()
        return transports.TCPsocket.pending_data(self, timeout)

    def fileno(self):
        return (self._sslObj or self._sock).fileno()

    def close(self):
        for s in (self._sslObj, self._sock):
            if s is not None:
                s.close()


class VerifiedTLS(transports.TLS):
    """xmpppy's STARTTLS step, but verifying the certificate and sending SNI.

    xmpppy's own step accepts any certificate. Verified is: the CA chain and
    host name (`pin` empty), or else exactly the pinned certificate (its
    SHA-256 fingerprint; chain and name do not matter then: the user chose
    that certificate). A failure raises LoginError before any credentials can
    be sent. With `probe`, the certificate is only read (never trusted): _Probed
    ends the login with its fingerprint.
    """

    def __init__(self, context, hostname, pin="", probe=False):
        transports.TLS.__init__(self)
        self.context = context
        self.hostname = hostname
        self.pin = pin
        self.probe = probe
        self.fingerprint = ""

    def pending_data(self, timeout=0):
        self._tcpsock.check_deadline()
        return transports.TLS.pending_data(self, timeout)

    def _startSSL(self):
        tcp = self._owner.Connection
        where = "%s:%s" % tuple(tcp._server)
        try:
            tls = self.context.wrap_socket(tcp._sock, server_hostname=self.hostname)
        except ssl.SSLCertVerificationError as e:
            why = e.verify_message or one_line(e)
            if e.verify_code == HOSTNAME_MISMATCH:
                raise UntrustedServer("refusing XMPP server %s: its certificate is not valid for "
                                      "%s (%s); no password sent" % (where, self.hostname, why))
            # A chain no CA here vouches for (self-signed, a private CA, expired...): not
            # trusted, whatever name it carries; the listener adds the fingerprint's line.
            raise UntrustedServer("refusing XMPP server %s: its certificate is not trusted (%s: "
                                  "no CA trusted here vouches for it); no password sent; to "
                                  "trust the CA that signed it, set [xmpp] cafile = that CA's "
                                  "certificate" % (where, why))
        except (ssl.SSLError, OSError) as e:
            raise LoginError("TLS with XMPP server %s failed: %s" % (where, one_line(e)))
        tcp._sslObj = tls
        if self.pin or self.probe:
            self.fingerprint = certificate_fingerprint(tls.getpeercert(binary_form=True) or b"")
            if self.probe:  # ends the login: xmpppy would now restart the stream
                raise _Probed(self.fingerprint)
            if self.fingerprint != self.pin:
                raise LoginError("refusing XMPP server %s: its certificate's fingerprint is %s, "
                                 "not the pinned %s ([xmpp] fingerprint); no password sent"
                                 % (where, self.fingerprint, self.pin))
        # write(), not sendall(): xmpppy retries a whole buffer after SSLWantWrite,
        # which is only safe with a single SSL_write.
        tcp._recv, tcp._send = tls.read, tls.write
        # xmpppy reads until the TLS buffer is empty, which needs non-blocking reads.
        tcp._seen_data = 1
        self._tcpsock = tcp
        tcp.pending_data = self.pending_data
        tls.setblocking(False)
        self.starttls = "success"


def _wait(client, done, what):
    """Process the stream until done() (the login deadline bounds it)."""
    while not done():
        if not client.Process(1):
            raise LoginError("XMPP server closed the connection while %s" % what)


def _unverified_context():
    """TLS that checks nothing: for a pinned certificate (checked by hand) or a probe."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _secure(client, xcfg, domain, where, probe=False):
    """STARTTLS with the certificate checked against `domain` or the pin, or LoginError
    (with `probe`: _Probed, once the certificate is read)."""
    stream = client.Dispatcher.Stream
    if not stream.features or not stream.features.getTag("starttls", namespace=xmpp.NS_TLS):
        raise LoginError("XMPP server %s does not offer STARTTLS; not sending the password "
                         "in clear (tls = off allows it)" % where)
    if probe or xcfg.fingerprint:
        context = _unverified_context()
    else:
        try:
            context = ssl.create_default_context(cafile=xcfg.cafile or None)
        except OSError as e:
            raise LoginError("cannot read cafile %s: %s" % (xcfg.cafile, e.strerror or one_line(e)))
    tls = VerifiedTLS(context, domain, pin=xcfg.fingerprint, probe=probe)
    tls.PlugIn(client)
    _wait(client, lambda: tls.starttls, "starting TLS")
    if tls.starttls != "success":
        raise LoginError("XMPP server %s refused STARTTLS" % where)


def probe_fingerprint(xcfg, timeout):
    """The fingerprint of the certificate the server shows, read on a connection of its
    own that ends right after the TLS handshake (nothing but STARTTLS is sent); or ""."""
    domain = xcfg.username.partition("@")[2]
    host, port = xcfg.host or domain, int(xcfg.port)
    client = xmpp.Client(domain, debug=[])
    transport = DeadlineSocket((host, port), timeout)
    try:
        if not client.connect(server=(host, port), secure=0, use_srv=False, transport=transport):
            return ""
        _secure(client, xcfg, domain, "%s:%s" % (host, port), probe=True)
    except _Probed as probed:
        found = probed.args[0]
        while isinstance(found, BaseException) and found.args:  # xmpppy may wrap it again
            found = found.args[0]
        return str(found)
    except Exception:
        pass
    finally:
        transport.close()
    return ""


def open_session(xcfg, timeout, handler):
    """Connect, secure and log in as `xcfg` says; returns a Session. Raises LoginError."""
    secret = xcfg.password
    if secret == keyring.KEYRING:  # [xmpp] password = keyring: read at each login
        try:
            secret = keyring.password(xcfg.username)
        except keyring.KeyringError as e:
            raise LoginError(str(e)) from None
    node, _, domain = xcfg.username.partition("@")
    host, port = xcfg.host or domain, int(xcfg.port)
    where = "%s:%s" % (host, port)
    client = xmpp.Client(domain, debug=[])
    transport = DeadlineSocket((host, port), timeout)
    try:
        if not client.connect(server=(host, port), secure=0, use_srv=False, transport=transport):
            raise LoginError("XMPP server %s did not open a stream" % where)
        if xcfg.tls != "off":
            try:
                _secure(client, xcfg, domain, where)
            except UntrustedServer as e:
                # Name the certificate, so that the user can choose to trust exactly it.
                raise UntrustedServer(str(e), probe_fingerprint(xcfg, timeout)) from None
        # Wait for the (new) stream's features, to check the SASL mechanisms first.
        _wait(client, lambda: client.Dispatcher.Stream.features, "opening the stream")
        mechanisms = client.Dispatcher.Stream.features.getTag("mechanisms", namespace=xmpp.NS_SASL)
        offered = [m.getData() for m in mechanisms.getTags("mechanism")] if mechanisms else []
        if not {"PLAIN", "DIGEST-MD5"} & set(offered):
            raise LoginError("XMPP server %s offers no login that xmpppy can use (only %s)"
                             % (where, ", ".join(offered) or "none"))
        if not client.auth(node, secret, xcfg.resource):
            if "SASL" not in client.__dict__:  # xmpppy unplugs it after a refusal
                raise LoginError("XMPP server %s refused the login of %s: wrong user name or password"
                                 % (where, xcfg.username))
            raise LoginError("XMPP server %s: binding resource %r failed" % (where, xcfg.resource))
    except BaseException:
        transport.close()
        raise
    transport.deadline = None
    return Session(client, transport, handler, xcfg.username.lower(), where)


LOGIN_TIMEOUT = 20.0  # seconds probe() may take


@dataclass
class LoginVerdict:
    """Would the XMPP link work for an account (probe())? `why`: None when it logged in,
    else why not (one line); `untrusted`: the server's certificate is not trusted by this
    machine, `fingerprint` its SHA-256 (None when it could not be read), for the user to
    pin exactly it."""
    why: Optional[str] = None
    untrusted: bool = False
    fingerprint: Optional[str] = None


def probe(xcfg, timeout=LOGIN_TIMEOUT):
    """Log in once as `xcfg` (config.Xmpp) says, and out again, nothing processed: the
    one function a tool may ask of this program (init, before it chooses syncmethod).
    -> LoginVerdict."""
    try:
        session = open_session(xcfg, timeout, _Quiet())
    except UntrustedServer as e:
        return LoginVerdict(str(e), True, e.fingerprint)
    except LoginError as e:
        return LoginVerdict(str(e))
    session.close(goodbye=True)
    return LoginVerdict()


class _Quiet:
    """The session's handler for the one probe login: nothing is processed."""

    def on_presence(self, jid, type):
        pass

    def on_message(self, jid, type, body):
        pass

    def on_pong(self, ping_id):
        return False


class Session:
    """A logged-in xmpppy client, as the Listener needs it."""

    def __init__(self, client, transport, handler, bare, where):
        self.client = client
        self.transport = transport
        self.handler = handler
        self.resource = client.Resource  # as bound by the server
        self.bare = bare
        self.domain = bare.partition("@")[2]
        self.where = where
        self._dropped = False
        # Our own disconnect handler instead of xmpppy's, which raises out of send().
        client.UnregisterDisconnectHandler(client.DisconnectHandler)
        client.RegisterDisconnectHandler(self._on_dropped)
        client.RegisterHandler("presence", self._on_presence)
        client.RegisterHandler("message", self._on_message)
        client.RegisterHandler("iq", self._on_iq)

    def fileno(self):
        return self.transport.fileno()

    def process(self):
        """Handle what the server sent (calling the handler); True if anything came.

        Raises Replaced or SessionLost when the session is over.
        """
        self._dropped = False
        try:
            got = self.client.Process(0)
        except xmpp.protocol.Conflict:
            raise Replaced("another client logged in to %s as %s/%s and replaced this one "
                           "(two machines with the same resource?)" % (self.where, self.bare, self.resource))
        except Exception as e:
            raise SessionLost("connection to XMPP server %s lost: %s" % (self.where, one_line(e)))
        if not got or self._dropped:
            raise SessionLost("connection to XMPP server %s lost" % self.where)
        return got != "0"

    def send_presence(self, priority, to=None):
        """Our presence: to the server (everyone subscribed), or directed to one JID."""
        self.client.send(xmpp.Presence(to=to, priority=priority))

    def chat(self, to, body):
        self.client.send(xmpp.Message(to=to, body=body, typ="chat"))

    def ping(self, ping_id):
        """An XEP-0199 ping to the server; its answer comes as handler.on_pong(ping_id)."""
        iq = xmpp.Iq(typ="get", to=self.domain)
        iq.setID(ping_id)
        iq.setTag("ping", namespace=NS_PING)
        self.client.send(iq)

    def close(self, goodbye=False):
        """End the session; with `goodbye`, tell the server we leave first."""
        if goodbye:
            try:
                self.client.send(xmpp.Presence(typ="unavailable"))
            except Exception:
                pass
        self.transport.close()

    # -- xmpppy's callbacks, inside process()

    def _on_dropped(self):
        self._dropped = True

    def _on_presence(self, conn, presence):
        self.handler.on_presence(str(presence.getFrom() or ""), presence.getType())

    def _on_message(self, conn, message):
        self.handler.on_message(str(message.getFrom() or ""), message.getType(), message.getBody() or "")

    def _on_iq(self, conn, iq):
        if iq.getType() in ("result", "error") and self.handler.on_pong(iq.getID()):
            raise xmpp.NodeProcessed
        if iq.getType() == "get" and iq.getTag("ping", namespace=NS_PING):
            conn.send(iq.buildReply("result"))
            raise xmpp.NodeProcessed
