"""Wake-ups: after a resume from suspend, or when the network comes back, sync at once.

A laptop that slept for hours missed its other machines' announcements and
holds commits that could not be pushed; the timer pull (`pullinterval`) may
be minutes away, and with `syncmethod = none` and `pullinterval = 0` there is
none. So the committer listens on the D-Bus SYSTEM bus (through jeepney, as
desktop/notifier.py and desktop/sni.py do on the session bus) for:

* logind's `org.freedesktop.login1.Manager.PrepareForSleep(false)`: the
  machine woke up (`true`, going to sleep, does nothing);
* NetworkManager's `org.freedesktop.NetworkManager.StateChanged(u)`
  reaching NM_STATE_CONNECTED_GLOBAL (70) from a lower state.

Either asks the committer for a pull followed by a push of whatever waits
(`Committer.wake`), whatever the sync method. The listener is a thread in the
committer's process: that process always runs (with or without XMPP, a tray or
a desktop session: a laptop without any still sleeps), and it already decides
what the repository does, so a wake is one more input of its worker, with no
new request on the socket.

Wakeups, the pure logic (callers pass `now`), coalesces: a burst of signals
(NetworkManager flapping, a resume followed by the network coming up) makes
one sync, `SETTLE` seconds after the last of them, at most one every
`SPACING` seconds. A resume while NetworkManager says the network is not up
yet waits for it, up to `HOLD` seconds (then syncs anyway: a LAN-only network
that NetworkManager calls "site" may still reach the remote), so a resume
does not make a pull fail (and a notification say so) just before the
network comes.

Without a system bus, logind or NetworkManager (containers, CI) nothing
changes: one DEBUG line, and the bus is tried again with backoff, quietly.
"""
import logging
import os
import threading
import time

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

from autosync.core.retry import Backoff, Trouble, one_line

log = logging.getLogger("autosync.wakeup")

DEFAULT_SYSTEM_BUS = "unix:path=/run/dbus/system_bus_socket"
LOGIND, LOGIND_PATH = "org.freedesktop.login1", "/org/freedesktop/login1"
LOGIND_MANAGER = "org.freedesktop.login1.Manager"
NM, NM_PATH = "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager"
CONNECTED_GLOBAL = 70  # NM_STATE_CONNECTED_GLOBAL: full network access

WOKE, NETWORK = "woke from sleep", "network back"  # the reasons, as logged

SETTLE = 1.0  # quiet seconds after the last signal of a burst before syncing
SPACING = 10.0  # seconds at least between two wake-up syncs (a network that flaps)
HOLD = 30.0  # the longest a resume waits for NetworkManager to say the network is up
CALL_TIMEOUT = 5.0  # for the bus's own answers while connecting
BUS_BACKOFF = (2.0, 60.0)  # seconds between tries to reach the system bus

# Sender: the bus delivers these only when they come from the name's owner.
RULES = (
    MatchRule(type="signal", sender=LOGIND, interface=LOGIND_MANAGER, member="PrepareForSleep",
              path=LOGIND_PATH),
    MatchRule(type="signal", sender=NM, interface=NM, member="StateChanged", path=NM_PATH),
)
NM_OWNER = MatchRule(type="signal", sender="org.freedesktop.DBus", interface="org.freedesktop.DBus",
                     member="NameOwnerChanged")
NM_OWNER.add_arg_condition(0, NM)


def system_bus_address():
    return os.environ.get("DBUS_SYSTEM_BUS_ADDRESS") or DEFAULT_SYSTEM_BUS


class Wakeups:
    """When a wake-up sync is due, and why. Feed it sleep() and network(); ask due(now)."""

    def __init__(self, settle=SETTLE, spacing=SPACING, hold=HOLD):
        self.settle, self.spacing, self.hold = settle, spacing, hold
        self.state = None  # NetworkManager's last state; None: not known (none there)
        self.reason = None  # why a sync is owed; None: none is
        self.at = None  # the earliest it goes: settled, and spaced from the last one
        self.limit = None  # the latest it goes, even while the network is not up
        self.last_sync = None

    def sleep(self, going, now):
        """logind's PrepareForSleep(going): only the wake (False) asks for a sync."""
        if not going:
            self._trigger(WOKE, now)

    def network(self, state, now, known=False):
        """NetworkManager's state (None: it went away). `known`: its state when we
        started listening, which is no change."""
        before, self.state = self.state, state
        if not known and state == CONNECTED_GLOBAL and (before is None
                                                        or before < CONNECTED_GLOBAL):
            self._trigger(NETWORK, now)

    def online(self):
        """Whether a sync may reach the remote, as far as we know."""
        return self.state is None or self.state >= CONNECTED_GLOBAL

    def next_due(self):
        """When due() will give a reason; None while no sync is owed."""
        if self.reason is None:
            return None
        return min(self.at, self.limit) if self.online() else self.limit

    def due(self, now):
        """The reason for a sync now (and it is no longer owed), or None."""
        at = self.next_due()
        if at is None or now < at:
            return None
        reason, self.reason = self.reason, None
        self.at = self.limit = None
        self.last_sync = now
        return reason

    def _trigger(self, reason, now):
        if self.reason is None:  # a wake followed by the network coming up: one "woke"
            self.reason, self.limit = reason, now + self.hold
        self.at = now + self.settle
        if self.last_sync is not None:
            self.at = max(self.at, self.last_sync + self.spacing)


class SystemBusListener:
    """A thread listening on the system bus; on_wake(reason) when a sync is due.

    on_wake runs on this thread: it must only ask (Committer.wake queues); it
    returns False when the sync waits (paused)."""

    def __init__(self, on_wake, wakeups=None, clock=time.monotonic):
        self.on_wake = on_wake
        self.wakeups = wakeups or Wakeups()
        self.clock = clock
        self.conn = None
        self.stopped = threading.Event()
        self.thread = None
        self.trouble = Trouble(log, logging.DEBUG)  # quiet: most machines without one are fine
        self.backoff = Backoff(*BUS_BACKOFF, jitter=0.2)
        self.state_serial = None  # our question for NetworkManager's state
        self.told_odd = False  # a malformed signal is said once

    def start(self):
        self.thread = threading.Thread(target=self.run, name="wakeup", daemon=True)
        self.thread.start()
        return self

    def stop(self, wait=True):
        """End run(); safe from any thread. wait=False: do not wait for the thread (a
        system bus that hangs while we connect must not hold up the committer's exit)."""
        self.stopped.set()
        conn = self.conn
        if conn is not None:
            try:  # wakes the receive() that waits for the next signal
                conn.sock.shutdown(2)
            except OSError:
                pass
        if wait and self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(5)

    def run(self):
        while not self.stopped.is_set():
            if self.conn is None and not self._connect():
                self.stopped.wait(self.backoff.next())
                continue
            if self.stopped.is_set():  # stop() came while connecting
                break
            due = self.wakeups.next_due()
            try:
                msg = self.conn.receive(timeout=None if due is None
                                        else max(0.0, due - self.clock()))
            except TimeoutError:
                msg = None
            except (OSError, ValueError, RuntimeError) as e:
                self._lost(e)
                continue
            if msg is not None:
                self.take(msg)
            reason = self.wakeups.due(self.clock())
            if reason is not None and self.on_wake(reason) is False:
                log.info("%s while paused: pulled on resume", reason)
            elif reason is not None:
                log.info("%s: syncing", reason)
        self._close()

    def _connect(self):
        """Connect and subscribe; False (said once, at DEBUG) if the bus is not there."""
        address = system_bus_address()
        try:
            self.conn = open_dbus_connection(address)
            for rule in RULES + (NM_OWNER,):
                reply = self.conn.send_and_get_reply(message_bus.AddMatch(rule),
                                                     timeout=CALL_TIMEOUT)
                if reply.header.message_type == MessageType.error:
                    raise RuntimeError("the bus refused a match rule: %s"
                                       % reply.header.fields.get(HeaderFields.error_name))
        except (OSError, RuntimeError, ValueError, KeyError, TimeoutError, StopIteration) as e:
            self._close()
            self.trouble.failed("no D-Bus system bus at %s (%s): no syncing on resume or when "
                                "the network is back", address, one_line(e), kind="bus")
            return False
        self.backoff.reset()
        if not self.trouble.recovered():
            log.debug("listening on the D-Bus system bus for resume and network")
        else:
            log.info("the D-Bus system bus is there (again): syncing on resume and when the "
                     "network is back")
        self._ask_state()
        return True

    def _ask_state(self):
        """NetworkManager's state now (the answer comes in take()); none there: None."""
        self.wakeups.network(None, self.clock(), known=True)
        call = new_method_call(DBusAddress(NM_PATH, bus_name=NM,
                                           interface="org.freedesktop.DBus.Properties"),
                               "Get", "ss", (NM, "State"))
        self.state_serial = next(self.conn.outgoing_serial)
        self.conn.send(call, serial=self.state_serial)

    def _lost(self, error):
        self._close()
        if not self.stopped.is_set():
            self.trouble.failed("the D-Bus system bus went away (%s); trying again",
                                one_line(error), kind="lost")

    def _close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def take(self, msg):
        """One message from the bus: an answer about NetworkManager, or a signal."""
        now = self.clock()
        kind, fields = msg.header.message_type, msg.header.fields
        if kind in (MessageType.method_return, MessageType.error):
            if fields.get(HeaderFields.reply_serial) == self.state_serial:
                self.state_serial = None
                if kind == MessageType.method_return and self._shaped(msg, "v") \
                        and isinstance(msg.body[0], tuple) and msg.body[0][0] == "u":
                    self.wakeups.network(msg.body[0][1], now, known=True)
                    log.debug("NetworkManager's state: %d", msg.body[0][1])
            return
        # A signal sent to us alone passed no match rule (anyone may send one): only
        # broadcasts, which the bus checked came from logind or NetworkManager.
        if kind != MessageType.signal or HeaderFields.destination in fields:
            return
        member, interface = fields.get(HeaderFields.member), fields.get(HeaderFields.interface)
        if interface == LOGIND_MANAGER and member == "PrepareForSleep":
            if self._shaped(msg, "b"):
                self.wakeups.sleep(msg.body[0], now)
                log.debug("logind: %s", "going to sleep" if msg.body[0] else "woke up")
        elif interface == NM and member == "StateChanged":
            if self._shaped(msg, "u"):
                self.wakeups.network(msg.body[0], now)
                log.debug("NetworkManager's state: %d", msg.body[0])
        elif member == "NameOwnerChanged" and self._shaped(msg, "sss") and msg.body[0] == NM:
            if msg.body[2]:
                self._ask_state()  # a new NetworkManager: what does it say?
            else:
                self.wakeups.network(None, now, known=True)  # gone: nothing to wait for

    def _shaped(self, msg, signature):
        """Whether msg carries `signature`; a malformed one is said once, then ignored."""
        if msg.header.fields.get(HeaderFields.signature, "") == signature:
            return True
        if not self.told_odd:
            self.told_odd = True
            log.info("ignoring a malformed %s from the system bus (signature %r, expected %r)",
                     msg.header.fields.get(HeaderFields.member),
                     msg.header.fields.get(HeaderFields.signature, ""), signature)
        return False
