"""The committer's socket as the other programs use it, each side in a thread
of its own: a subscription to its events that reconnects by itself, and a
queue of requests that waits for the committer when it is away. An Inbox
hands what the threads get to a program's select() loop. LinkState is what
the link programs (XMPP, ssh) tell the committer of their link.

Both retry with a retry.Backoff and say so in the log once (retry.Trouble),
so a program can be started before the committer and outlives its restarts.
"""
import logging
import os
import queue
import socket
import threading
import time

from autosync.core import protocol
from autosync.core.retry import Backoff, Trouble, one_line
from autosync.core.stopflag import StopFlag

log = logging.getLogger("autosync.client")

CONNECT_TIMEOUT = 5.0
# Untrusted too: never a byte to a stranger; the program's start already said so.
FAILURES = (protocol.NoDaemon, protocol.Untrusted, protocol.ProtocolError, OSError)


def hang_up(conn):
    """Wake a thread blocked reading `conn` (closing the fd alone does not)."""
    try:
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Inbox:
    """A queue that a select() loop can wait on (fileno()).

    put() and wake() may be called from any thread and from a signal handler.
    """

    def __init__(self):
        self.items = queue.SimpleQueue()  # put() is reentrant, unlike queue.Queue's
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def put(self, item):
        self.items.put(item)
        self.wake()

    def wake(self):
        """Make the loop's select() return."""
        try:
            os.write(self.wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake already

    def fileno(self):
        return self.wake_r

    def take(self):
        """Everything put so far, oldest first; never waits."""
        while True:
            try:
                if not os.read(self.wake_r, 4096):
                    break
            except BlockingIOError:
                break
        taken = []
        while not self.items.empty():
            taken.append(self.items.get())
        return taken

    def close(self):
        os.close(self.wake_r)
        os.close(self.wake_w)


class Subscription:
    """Reads the committer's events in a thread and hands each to `deliver(event)`.

    Whenever the committer goes away it subscribes again, with backoff (the
    first delay short); after each subscription it calls `on_subscribed()`,
    since a restarted committer has forgotten what it was told, and each time
    a subscription ends or fails, `on_lost(why)` (whoever shows the state must
    not go on showing the last one). `conn` is the live connection, None while
    there is none.
    """

    def __init__(self, path, deliver, on_subscribed=None, backoff=None, logger=None,
                 name="committer-events", on_lost=None):
        self.path = path
        self.deliver = deliver
        self.on_subscribed = on_subscribed
        self.on_lost = on_lost
        self.backoff = backoff or Backoff(0.2, 10.0)
        self.log = logger or log
        self.trouble = Trouble(self.log, logging.WARNING)
        self.conn = None
        self.conn_lock = threading.Lock()  # close() must not hang up a reused fd
        self.ever = False  # subscribed at least once
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def close(self):
        self.closed.set()
        with self.conn_lock:
            if self.conn is not None:
                hang_up(self.conn)

    def _run(self):
        while not self.closed.is_set():
            streamed, reason = self._listen()
            if self.closed.is_set():
                return
            if self.on_lost:
                self.on_lost(reason)
            if streamed:  # it worked until now: the first, short delay comes next
                self.log.info("the committer's events stopped (%s); subscribing again", reason)
            else:  # before the first subscription the committer may just not be up yet
                self.trouble.failed("no events from the committer (%s); retrying", reason,
                                    level=None if self.ever else logging.INFO)
            self.closed.wait(self.backoff.next())

    def _listen(self):
        """Subscribe and deliver until the stream ends: (subscribed?, why it ended)."""
        subscribed = False
        try:
            conn = protocol.connect(self.path, timeout=CONNECT_TIMEOUT)
            with self.conn_lock:  # close() now hangs up on it, or we see it was called
                self.conn = conn
                if self.closed.is_set():
                    return False, "closed"
            reply = conn.request({"cmd": "subscribe"}, timeout=CONNECT_TIMEOUT)
            if not reply.get("ok"):
                raise protocol.ProtocolError("subscribe refused: %s" % reply.get("error"))
            subscribed = True
            self.backoff.reset()
            if self.trouble.recovered() and self.ever:
                self.log.info("receiving the committer's events again")
            elif not self.ever:
                self.log.info("receiving events from %s", self.path)
            self.ever = True
            if self.on_subscribed:
                self.on_subscribed()
            for event in conn.events():
                self.deliver(event)
            return subscribed, "the committer closed the connection"
        except FAILURES as e:
            return subscribed, one_line(e)
        finally:
            with self.conn_lock:
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None


class RequestQueue:
    """Sends requests to the committer from a thread of its own.

    One pending request per kind, the newest wins: while a pull is running,
    any number of put("pull", ...) leave exactly one more pull queued. A
    request the committer could not be reached for is sent again later.
    `on_reply(message, reply)`, if given, is called with each answer (from this
    queue's thread).
    """

    def __init__(self, path, timeout, backoff=None, logger=None, name="committer-requests",
                 on_reply=None):
        self.path = path
        self.on_reply = on_reply
        self.timeout = timeout
        self.backoff = backoff or Backoff(0.2, 10.0)
        self.log = logger or log
        self.trouble = Trouble(self.log, logging.WARNING)
        self.pending = {}   # kind -> message, not yet answered
        self.busy = False   # a request is out
        self.failures = 0   # sends that found no committer
        self.flushing = False  # flush() waits: a committer found gone is no news
        self.closed = False
        self.conn = None
        self.conn_lock = threading.Lock()  # close() must not hang up a reused fd
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def put(self, kind, message):
        with self.cond:
            self.pending[kind] = message
            self.cond.notify_all()

    def flush(self, timeout):
        """Wait until everything put so far has been answered (or `timeout`, or the
        committer is found gone: at a stop it may have ended first)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            failures, self.flushing = self.failures, True
            try:
                while (self.pending or self.busy) and not self.closed:
                    left = deadline - time.monotonic()
                    if left <= 0 or self.failures != failures:
                        return False
                    self.cond.wait(left)
            finally:
                self.flushing = False
        return True

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        with self.conn_lock:
            if self.conn is not None:
                hang_up(self.conn)

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
                    self.failures += 1
                    self.cond.notify_all()
                    self.cond.wait(self.backoff.next())
                self.cond.notify_all()
        self._hang_up()

    def _hang_up(self):
        with self.conn_lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    def _send(self, message):
        """True once the committer has answered (even with an error)."""
        try:
            if self.conn is None:
                conn = protocol.connect(self.path, timeout=CONNECT_TIMEOUT)
                with self.conn_lock:  # close() now hangs up on it, or we see it was called
                    self.conn = conn
                    if self.closed:
                        raise ConnectionError("closed")
            reply = self.conn.request(message, timeout=self.timeout)
        except FAILURES as e:
            self._hang_up()
            if self.flushing:  # at a stop: the committer may have ended first
                self.log.info("the committer is gone (%s): not told", one_line(e))
            elif not self.closed:
                self.trouble.failed("cannot reach the committer (%s); retrying", one_line(e))
            return False
        self.backoff.reset()
        self.trouble.recovered("committer reachable again")
        if reply.get("stopping"):  # not done because the daemon stops: no failure
            self.log.info("committer: no %s: %s", message.get("cmd"), reply.get("error"))
        elif not reply.get("ok"):
            self.log.warning("committer: %s failed: %s", message.get("cmd"), reply.get("error"))
        if self.on_reply:
            self.on_reply(message, reply)
        return True


class LinkState:
    """An announcement link's state (XMPP, ssh watch) as the committer last heard it,
    through `queue` (a RequestQueue): told when it changes, with why it cannot come up
    (a login refused) when that changes; told again by `again()` after a new
    subscription, since a restarted committer has forgotten it."""

    def __init__(self, queue):
        self.queue = queue
        self.up = None     # as last told; None: never told
        self.error = None
        self.polled = None  # seconds between polls of a link that polls instead of watching
        self.held = None    # the ssh link: whether its connection is held (None: no such)

    def tell(self, up, error=None, polled=None, held=None):
        if (up, error, polled, held) != (self.up, self.error, self.polled, self.held):
            self.up, self.error, self.polled, self.held = up, error, polled, held
            self.again()

    def again(self):
        if self.up is None:
            return
        request = {"cmd": "link", "up": self.up}
        if self.error:
            request["error"] = self.error
        if self.polled:
            request["polled"] = self.polled
        if self.held is not None:
            request["held"] = self.held
        self.queue.put("link", request)


class CommitterLink:
    """What an announcement link (autosync-xmpp, autosync-sshlink) keeps toward the
    committer: the inbox its loop reads, pulls and link reports queued, the committer's
    events followed (`on_event`, from that thread; `_subscribed` in the inbox after
    each subscription). A subclass supplies step() (one turn of its loop), ending()
    (its own goodbye) and _tell_link(up)."""

    @classmethod
    def main(cls, program, doc, argv):
        """The program's command line: the config read, the signals recorded, the loop
        run until a stop."""
        from autosync.core import cli
        link = cls(cli.start(program, doc, argv))
        StopFlag(wake=link.stop).install(wake_fd=link.inbox.wake_w)
        link.run()
        return 0

    def __init__(self, cfg, timing, logger, on_event=None, on_link_reply=None):
        self.inbox = Inbox()
        self.stopping = False
        fixed = lambda: Backoff(timing.committer_retry, timing.committer_retry)  # noqa: E731
        self.pulls = RequestQueue(cfg.socket, timing.pull_timeout, fixed(), logger,
                                  "committer-pulls")
        self.links = RequestQueue(cfg.socket, 10.0, fixed(), logger, "committer-link",
                                  on_reply=on_link_reply)
        self.link = LinkState(self.links)  # up/down as the committer last heard
        self.events = Subscription(cfg.socket, on_event or (lambda event: None),
                                   self._resubscribed, fixed(), logger)

    def _resubscribed(self):
        """Called from the events thread."""
        self.inbox.put({"event": "_subscribed"})

    def stop(self):
        """Ask the loop to end (any thread, or a signal handler)."""
        self.stopping = True
        self.inbox.wake()

    def run(self):
        for worker in (self.pulls, self.links, self.events):
            worker.start()
        try:
            while not self.stopping:
                self.step()
        finally:
            self.ending()
            self._tell_link(False)
            self.links.flush(2.0)  # the committer hears that the link is down
            for worker in (self.events, self.pulls, self.links):
                worker.close()
            self.inbox.close()
