"""autosync-xmpp: committer events <-> XMPP messages.

After every push the committer reports (`pushed` event), we send `pushed URL`
as a chat message to each other online resource of the account, addressed to
its full JID. Prosody delivers a message to the bare JID only to the
resources with the highest priority, so full JIDs, learnt from presence, are
the only reliable addressing (docs/internals.md, FACTS). An announcement from
another resource of our own account becomes a `pull` request to the committer.

Threads: xmpppy and its OpenSSL objects are used from ONE thread, the loop in
`Listener.run`. Requests to the committer block until the work is done, so
they go through small worker threads (`Requests`); committer events are read
by another (`Events`); both wake the loop through a pipe.

A message is only counted as sent once the server has answered an XEP-0199
ping sent after it: xmpppy's send() drops data silently when the server has
just gone away, so until that answer the message stays queued and is sent
again after reconnecting.
"""
import logging
import os
import queue
import random
import select
import signal
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass

import xmpp
from xmpp import transports

from autosync import protocol
from autosync.notifications import Summariser

log = logging.getLogger("autosync.xmpp")

NS_PING = "urn:xmpp:ping"


@dataclass
class Timing:
    """Every delay of the listener, in seconds; tests make them small."""
    ping_interval: float = 60.0    # ping the server after this long without traffic
    ping_timeout: float = 20.0     # a ping unanswered this long means the link is dead
    backoff_min: float = 1.0       # first wait before reconnecting ...
    backoff_max: float = 60.0      # ... doubling up to this
    login_timeout: float = 20.0    # connect + TLS + login must finish within this
    notify_quiet: float = 2.0      # a burst of work has ended after this long without events
    notify_interval: float = 60.0  # at most one summary message per this long
    committer_retry: float = 1.0   # wait before reconnecting to the committer's socket
    pull_timeout: float = 660.0    # longer than the committer's own 600 s for a pull


class LoginError(Exception):
    """Connecting or logging in failed; str() is one line and never holds the password."""


def one_line(error):
    if isinstance(error, xmpp.protocol.StreamError):
        # xmpppy raises these with a (condition, text) tuple, sometimes wrapped once more.
        while error.args and isinstance(error.args[0], BaseException):
            error = error.args[0]
        if error.args and isinstance(error.args[0], tuple) and len(error.args[0]) == 2:
            name, text = error.args[0]
            error = "server sent stream error %s%s" % (name, ": %s" % text if text else "")
    text = str(error) or type(error).__name__
    return " ".join(text.split())


# ---------------------------------------------------------------- committer side

def _hang_up(conn):
    """Wake a thread blocked reading `conn` (closing the fd alone does not)."""
    try:
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Requests:
    """Sends requests to the committer from a thread of its own.

    One pending request per kind, the newest wins: while a pull is running,
    any number of announcements leave exactly one more pull queued.
    """

    def __init__(self, name, path, timing, timeout):
        self.path = path
        self.retry = timing.committer_retry
        self.timeout = timeout
        self.pending = {}
        self.busy = False
        self.closed = False
        self.failing = False
        self.conn = None
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self.thread.start()

    def put(self, kind, message):
        with self.cond:
            self.pending[kind] = message
            self.cond.notify_all()

    def flush(self, timeout):
        """Wait until everything put so far has been answered (or `timeout`)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while (self.pending or self.busy) and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if self.conn:
            _hang_up(self.conn)

    def _run(self):
        while True:
            with self.cond:
                while not self.pending and not self.closed:
                    self.cond.wait()
                if self.closed:
                    break
                kind = next(iter(self.pending))
                message = self.pending.pop(kind)
                self.busy = True
            sent = self._send(message)
            with self.cond:
                self.busy = False
                if not sent:
                    self.pending.setdefault(kind, message)  # the committer is away: later
                    self.cond.wait(self.retry)
                self.cond.notify_all()
        if self.conn:
            self.conn.close()

    def _send(self, message):
        """True once the committer has answered (even with an error)."""
        try:
            if self.conn is None:
                self.conn = protocol.connect(self.path, timeout=5.0)
            reply = self.conn.request(message, timeout=self.timeout)
        except (protocol.NoDaemon, protocol.ProtocolError, OSError) as e:
            if self.conn:
                self.conn.close()
                self.conn = None
            if not self.failing and not self.closed:
                log.warning("cannot reach the committer (%s); retrying", one_line(e))
            self.failing = True
            return False
        if self.failing:
            log.info("committer reachable again")
            self.failing = False
        if not reply.get("ok"):
            log.warning("committer: %s failed: %s", message.get("cmd"), reply.get("error"))
        return True


class Events:
    """Reads the committer's events in a thread and hands each to `deliver`.

    After each (re)subscription it delivers {"event": "_subscribed"}, since a
    restarted committer has forgotten what we told it.
    """

    def __init__(self, path, timing, deliver):
        self.path = path
        self.retry = timing.committer_retry
        self.deliver = deliver
        self.conn = None
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name="committer-events", daemon=True)

    def start(self):
        self.thread.start()

    def close(self):
        self.closed.set()
        if self.conn:
            _hang_up(self.conn)

    def _run(self):
        failing = False
        while not self.closed.is_set():
            try:
                self.conn = protocol.connect(self.path, timeout=5.0)
                reply = self.conn.request({"cmd": "subscribe"}, timeout=5.0)
                if not reply.get("ok"):
                    raise protocol.ProtocolError(reply.get("error", "subscribe refused"))
                if failing:
                    log.info("subscribed to the committer's events again")
                    failing = False
                self.deliver({"event": "_subscribed"})
                for event in self.conn.events():
                    self.deliver(event)
                reason = "the committer closed the connection"
            except (protocol.NoDaemon, protocol.ProtocolError, OSError) as e:
                reason = one_line(e)
            finally:
                if self.conn:
                    self.conn.close()
            if self.closed.is_set():
                return
            if not failing:
                log.warning("no events from the committer (%s); retrying every %gs", reason, self.retry)
                failing = True
            self.closed.wait(self.retry)


# ---------------------------------------------------------------- XMPP session

class _Socket(transports.TCPsocket):
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


class _VerifiedTLS(transports.TLS):
    """xmpppy's STARTTLS step, but verifying the certificate and sending SNI.

    xmpppy's own step accepts any certificate. A failure raises LoginError
    before any credentials can be sent.
    """

    def __init__(self, context, hostname):
        transports.TLS.__init__(self)
        self.context = context
        self.hostname = hostname

    def pending_data(self, timeout=0):
        self._tcpsock.check_deadline()
        return transports.TLS.pending_data(self, timeout)

    def _startSSL(self):
        tcp = self._owner.Connection
        try:
            tls = self.context.wrap_socket(tcp._sock, server_hostname=self.hostname)
        except ssl.SSLCertVerificationError as e:
            raise LoginError("refusing XMPP server %s:%s: its certificate is not valid for %s (%s); "
                             "no password sent" % (tcp._server[0], tcp._server[1], self.hostname,
                                                   e.verify_message or one_line(e)))
        except (ssl.SSLError, OSError) as e:
            raise LoginError("TLS with XMPP server %s:%s failed: %s" % (tcp._server[0], tcp._server[1], one_line(e)))
        tcp._sslObj = tls
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


def open_session(xcfg, timeout):
    """Connect, secure and log in; returns (client, transport). Raises LoginError."""
    node, _, domain = xcfg.username.partition("@")
    host, port = xcfg.host or domain, int(xcfg.port or 5222)
    where = "%s:%s" % (host, port)
    client = xmpp.Client(domain, debug=[])
    transport = _Socket((host, port), timeout)
    try:
        if not client.connect(server=(host, port), secure=0, use_srv=False, transport=transport):
            raise LoginError("XMPP server %s did not open a stream" % where)
        stream = client.Dispatcher.Stream
        if xcfg.tls != "off":
            if not stream.features or not stream.features.getTag("starttls", namespace=xmpp.NS_TLS):
                raise LoginError("XMPP server %s does not offer STARTTLS; not sending the password "
                                 "in clear (tls = off allows it)" % where)
            try:
                context = ssl.create_default_context(cafile=xcfg.cafile or None)
            except OSError as e:
                raise LoginError("cannot read cafile %s: %s" % (xcfg.cafile, e.strerror or one_line(e)))
            tls = _VerifiedTLS(context, domain)
            tls.PlugIn(client)
            _wait(client, lambda: tls.starttls, "starting TLS")
            if tls.starttls != "success":
                raise LoginError("XMPP server %s refused STARTTLS" % where)
        # Wait for the (new) stream's features, to check the SASL mechanisms first.
        _wait(client, lambda: client.Dispatcher.Stream.features, "opening the stream")
        mechanisms = client.Dispatcher.Stream.features.getTag("mechanisms", namespace=xmpp.NS_SASL)
        offered = [m.getData() for m in mechanisms.getTags("mechanism")] if mechanisms else []
        if not {"PLAIN", "DIGEST-MD5"} & set(offered):
            raise LoginError("XMPP server %s offers no login that xmpppy can use (only %s)"
                             % (where, ", ".join(offered) or "none"))
        if not client.auth(node, xcfg.password, xcfg.resource):
            if "SASL" not in client.__dict__:  # xmpppy unplugs it after a refusal
                raise LoginError("XMPP server %s refused the login of %s: wrong user name or password"
                                 % (where, xcfg.username))
            raise LoginError("XMPP server %s: binding resource %r failed" % (where, xcfg.resource))
    except BaseException:
        transport.close()
        raise
    transport.deadline = None
    return client, transport


# ---------------------------------------------------------------- the listener

def _split(jid):
    """(bare JID in lower case, resource) of a JID or a string."""
    bare, _, resource = str(jid or "").partition("/")
    return bare.lower(), resource


class Listener:
    """The single I/O loop: XMPP session, timers, and the committer's events."""

    def __init__(self, cfg, timing=None):
        self.cfg = cfg
        self.x = cfg.xmpp
        self.timing = timing or Timing()
        self.bare = self.x.username.lower()
        self.domain = self.bare.partition("@")[2]
        self.server = "%s:%s" % (self.x.host or self.domain, self.x.port or 5222)
        notify = getattr(cfg, "notifymethod", "none") in ("xmpp", "all")
        self.notify_to = self.x.alsonotify if notify and self.x.alsonotify else None
        # The same summaries as on the desktop: one per burst, failures at once.
        self.summariser = Summariser(getattr(cfg, "notifylevel", "normal"),
                                     min_interval=self.timing.notify_interval,
                                     settle=self.timing.notify_quiet,
                                     folder=os.path.basename(getattr(cfg, "path", "") or ""))

        self.inbox = queue.SimpleQueue()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.stopping = False
        self.pulls = Requests("committer-pulls", cfg.socket, self.timing, self.timing.pull_timeout)
        self.links = Requests("committer-link", cfg.socket, self.timing, 10.0)
        self.events = Events(cfg.socket, self.timing, self._deliver)

        self.client = self.transport = None
        self.resource = None      # as bound by the server
        self.ready = False        # logged in, presence sent and answered
        self.peers = set()        # full JIDs of the account's other online resources
        self.outbox = []          # ("announce", url) / ("notify", text), not yet sent
        self.pings = {}           # ping id -> (sent at, items its answer confirms, ready?)
        self.ping_count = 0
        self.last_rx = 0.0
        self.backoff = self.timing.backoff_min
        self.next_login = 0.0
        self.last_failure = None
        self.link_up = None       # as last told to the committer
        self.strangers = {}       # bare JID -> when we last logged it
        self._dropped = False

    # -- threads and waking up

    def _deliver(self, event):
        """Called from the events thread."""
        self.inbox.put(event)
        self._wake()

    def _wake(self):
        try:
            os.write(self.wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake already

    def stop(self):
        """Ask the loop to end (any thread, or a signal handler)."""
        self.stopping = True
        self._wake()

    def run(self):
        for worker in (self.pulls, self.links, self.events):
            worker.start()
        try:
            while not self.stopping:
                self._step()
        finally:
            self._close_session(goodbye=True)
            self._tell_link(False)
            self.links.flush(2.0)
            for worker in (self.events, self.pulls, self.links):
                worker.close()
            os.close(self.wake_r)
            os.close(self.wake_w)

    def _step(self):
        if self.client is None and time.monotonic() >= self.next_login:
            self._login()
        fds = [self.wake_r] + ([self.transport.fileno()] if self.client else [])
        readable = select.select(fds, [], [], self._timeout())[0]
        if self.wake_r in readable:
            while True:
                try:
                    if not os.read(self.wake_r, 4096):
                        break
                except BlockingIOError:
                    break
        while not self.inbox.empty():
            self._on_event(self.inbox.get())
        if self.client:
            self._process()
        self._timers()

    def _timeout(self):
        """Seconds until the next timer is due."""
        now, t = time.monotonic(), self.timing
        due = [now + 5.0]
        if self.client is None:
            due.append(self.next_login)
        elif self.pings:
            due.append(min(p[0] for p in self.pings.values()) + t.ping_timeout)
        else:
            due.append(self.last_rx + t.ping_interval)
        if self.notify_to and self.summariser.next_due() is not None:
            due.append(self.summariser.next_due())
        return max(0.0, min(due) - now)

    def _timers(self):
        now, t = time.monotonic(), self.timing
        if self.client:
            if self.pings and now - min(p[0] for p in self.pings.values()) >= t.ping_timeout:
                self._lost("XMPP server %s did not answer a ping within %gs" % (self.server, t.ping_timeout))
            elif not self.pings and now - self.last_rx >= t.ping_interval:
                self._ping()
        if self.notify_to:
            self._notify(self.summariser.due(now))

    # -- connecting

    def _login(self):
        try:
            self.client, self.transport = open_session(self.x, self.timing.login_timeout)
        except LoginError as e:
            return self._login_failed(str(e))
        except Exception as e:  # an xmpppy surprise: still one line, and a retry later
            log.debug("login failed", exc_info=True)
            return self._login_failed("login to %s failed: %s" % (self.server, one_line(e)))
        c = self.client
        self.resource = c.Resource
        # Our own handler instead of xmpppy's, which raises out of send().
        c.UnregisterDisconnectHandler(c.DisconnectHandler)
        c.RegisterDisconnectHandler(self._on_dropped)
        c.RegisterHandler("presence", self._on_presence)
        c.RegisterHandler("message", self._on_message)
        c.RegisterHandler("iq", self._on_iq)
        log.info("logged in to %s as %s/%s (%s)", self.server, self.bare, self.resource,
                 "TLS, certificate verified" if self.x.tls != "off" else "no TLS")
        self.last_rx = time.monotonic()
        c.send(xmpp.Presence(priority=self.x.priority))
        # The server answers this ping after it has sent us the presence of
        # the other resources: then we know whom to announce to.
        self._ping(ready=True)

    def _login_failed(self, reason):
        delay = self.backoff * random.uniform(0.8, 1.0)  # spread out machines that failed together
        self.backoff = min(self.backoff * 2, self.timing.backoff_max)
        self.next_login = time.monotonic() + delay
        level = logging.INFO if reason == self.last_failure else logging.ERROR
        log.log(level, "%s; retrying in %.1fs", reason, delay)
        self.last_failure = reason
        self._tell_link(False)

    def _on_ready(self):
        self.ready = True
        self.backoff = self.timing.backoff_min
        self.last_failure = None
        others = sorted(_split(p)[1] for p in self.peers)
        log.info("link up; other machines online: %s", ", ".join(others) or "none")
        self._tell_link(True)
        # Announcements sent while we were away are lost: catch up.
        self._pull("catch-up after connecting")
        self._flush()

    def _on_dropped(self):
        """xmpppy's disconnect callback; the loop notices `self.client` is gone."""
        self._dropped = True

    def _process(self):
        self._dropped = False
        try:
            got = self.client.Process(0)
        except xmpp.protocol.Conflict:
            # Another login took our resource. Two clients that both reconnect at
            # once would take it from each other forever: wait the longest.
            self.backoff = self.timing.backoff_max
            return self._lost("another client logged in to %s as %s/%s and replaced this one "
                              "(two machines with the same resource?)" % (self.server, self.bare, self.resource))
        except Exception as e:
            return self._lost("connection to XMPP server %s lost: %s" % (self.server, one_line(e)))
        if not got or self._dropped:
            return self._lost("connection to XMPP server %s lost" % self.server)
        if got != "0":
            self.last_rx = time.monotonic()

    def _lost(self, reason):
        log.warning("%s; reconnecting in %.1fs", reason, self.backoff)
        self._close_session()
        self.next_login = time.monotonic() + self.backoff
        self._tell_link(False)

    def _close_session(self, goodbye=False):
        if self.client is None:
            return
        if goodbye:
            try:
                self.client.send(xmpp.Presence(typ="unavailable"))
            except Exception:
                pass
        self.transport.close()
        self.client = self.transport = None
        self.ready = False
        self.peers.clear()
        # What the server did not confirm goes out again after reconnecting.
        unconfirmed = [item for _, items, _ in self.pings.values() for item in items]
        self.outbox[:0] = [i for i in unconfirmed if i not in self.outbox]
        self.pings.clear()

    # -- sending

    def _send(self, to, body):
        self.client.send(xmpp.Message(to=to, body=body, typ="chat"))

    def _ping(self, items=(), ready=False):
        self.ping_count += 1
        ping_id = "autosync-ping-%d" % self.ping_count
        iq = xmpp.Iq(typ="get", to=self.domain)
        iq.setID(ping_id)
        iq.setTag("ping", namespace=NS_PING)
        self.pings[ping_id] = (time.monotonic(), list(items), ready)
        self.client.send(iq)

    def _queue(self, item):
        if item not in self.outbox:
            self.outbox.append(item)
            del self.outbox[:-100]  # bounded while the link is down
        self._flush()

    def _flush(self):
        """Send the outbox, then a ping whose answer confirms it."""
        if not self.ready or not self.outbox:
            return
        items, self.outbox = self.outbox, []
        for kind, text in items:
            if kind == "announce":
                for peer in sorted(self.peers):
                    self._send(peer, "pushed " + text)
                log.info("announced push of %s to %d other machine(s)", text, len(self.peers))
            else:
                self._send(self.notify_to, text)
        self._ping(items)

    def _tell_link(self, up):
        if up != self.link_up:
            self.link_up = up
            self.links.put("link", {"cmd": "link", "up": up})

    def _pull(self, why):
        log.info("asking the committer to pull (%s)", why)
        self.pulls.put("pull", {"cmd": "pull"})

    # -- committer events

    def _on_event(self, event):
        kind = event.get("event")
        if kind == "_subscribed":
            if self.link_up is not None:  # the committer may have restarted
                self.links.put("link", {"cmd": "link", "up": self.link_up})
        elif kind == "pushed":
            self._queue(("announce", str(event.get("url") or "")))
        if self.notify_to:
            self._notify(self.summariser.feed(event, time.monotonic()))

    def _notify(self, messages):
        for message in messages:
            self._queue(("notify", message.text()))

    # -- XMPP stanzas (called inside Process)

    def _own_peer(self, jid):
        """True for another resource of our own account."""
        bare, resource = _split(jid)
        return bare == self.bare and bool(resource) and resource != self.resource

    def _on_presence(self, conn, presence):
        jid = presence.getFrom()
        if not self._own_peer(jid):
            return
        full = str(jid)
        if presence.getType() in (None, "", "available"):
            if full not in self.peers:
                log.info("machine online: %s", _split(full)[1])
            self.peers.add(full)
        elif presence.getType() in ("unavailable", "error") and full in self.peers:
            log.info("machine offline: %s", _split(full)[1])
            self.peers.discard(full)

    def _on_message(self, conn, message):
        if message.getType() in ("error", "groupchat"):
            return  # an error bounce carries our own "pushed" body back to us
        body = (message.getBody() or "").strip()
        sender = message.getFrom()
        if not self._own_peer(sender):
            if _split(sender) != (self.bare, self.resource):
                self._stranger(sender, body)
            return
        if body.startswith("pushed"):
            self._pull("announcement from %s" % _split(sender)[1])
        elif body.lower() == "ping":
            self._send(str(sender), "pong")

    def _stranger(self, sender, body):
        """Log, at most hourly per sender, a message that we ignore."""
        bare, now = _split(sender)[0], time.monotonic()
        if now - self.strangers.get(bare, float("-inf")) < 3600:
            return
        if len(self.strangers) > 1000:
            self.strangers.clear()
        self.strangers[bare] = now
        log.info("ignoring messages from %s (not another machine of this account): %.60r", bare or "the server", body)

    def _on_iq(self, conn, iq):
        ping_id = iq.getID()
        if iq.getType() in ("result", "error") and ping_id in self.pings:
            _, items, ready = self.pings.pop(ping_id)
            if ready:
                self._on_ready()
            raise xmpp.NodeProcessed
        if iq.getType() == "get" and iq.getTag("ping", namespace=NS_PING):
            conn.send(iq.buildReply("result"))
            raise xmpp.NodeProcessed


# ---------------------------------------------------------------- command line

def main(argv=None):
    """autosync-xmpp [CONFIG] [-v]: announce pushes over XMPP, pull on announcements."""
    from autosync import cli
    listener = Listener(cli.start("autosync-xmpp", main.__doc__, argv))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: listener.stop())
    listener.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
