"""autosync-desktop: the committer's events as desktop notifications.

Subscribes to the committer's socket, lets a Summariser pick the few events
worth telling, and sends those to org.freedesktop.Notifications on the D-Bus
session bus (through jeepney: pure Python, no GTK). Without a session bus or
a notification service it logs the messages instead, after one warning.

When the committer goes away it reconnects with backoff, so it can be started
before the committer and outlives a committer restart.
"""
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time

from jeepney import DBusAddress, HeaderFields, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

from autosync import cli, protocol
from autosync.notifications import CRITICAL, Summariser

log = logging.getLogger("autosync.desktop")

APP_NAME = "dvcs-autosync"
NOTIFICATIONS = DBusAddress("/org/freedesktop/Notifications",
                            bus_name="org.freedesktop.Notifications",
                            interface="org.freedesktop.Notifications")
CALL_TIMEOUT = 5.0  # a notification service that hangs must not stall the events
BACKOFF_MIN, BACKOFF_MAX = 0.2, 10.0  # seconds between tries to reach the committer

_GONE = object()  # the committer closed the connection
_STOP = object()  # stop() was called


class NotifyFailed(Exception):
    """The message could not be shown on the desktop (one-line reason)."""


class Notifier:
    """Shows messages as desktop notifications, or logs them while that cannot be done."""

    def __init__(self):
        self.conn = None
        self.failing = False  # the warning was given; quiet until it works again

    def start(self):
        """Connect now, so that a missing bus is reported at start-up, not at the first event."""
        try:
            self._connect()
        except NotifyFailed as e:
            self._warn(e)

    def send(self, message):
        """Show one Message; True if the desktop took it."""
        try:
            self._notify(message)
        except NotifyFailed as e:
            self._warn(e)
            log.info("notification: %s", message.text().replace("\n", " -- "))
            return False
        if self.failing:
            log.info("desktop notifications work again")
            self.failing = False
        log.debug("notified: %s", message.title)
        return True

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _warn(self, reason):
        if not self.failing:
            log.warning("no desktop notifications, logging them instead: %s", reason)
        self.failing = True

    def _connect(self):
        if self.conn is not None:
            return
        if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            raise NotifyFailed("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
        try:
            self.conn = open_dbus_connection("SESSION")
        except (OSError, RuntimeError, ValueError) as e:
            raise NotifyFailed("cannot connect to the D-Bus session bus: %s" % e) from None

    def _notify(self, message):
        self._connect()
        icon = "dialog-warning" if message.urgency == CRITICAL else ""
        hints = {"urgency": ("y", message.urgency)}
        # replaces_id 0 (a new bubble), no actions, the server's default timeout (-1).
        call = new_method_call(NOTIFICATIONS, "Notify", "susssasa{sv}i",
                               (APP_NAME, 0, icon, message.title, message.body, [], hints, -1))
        try:
            reply = self.conn.send_and_get_reply(call, timeout=CALL_TIMEOUT)
        except (OSError, ValueError) as e:
            self.close()  # the bus went away or hung: connect afresh next time
            raise NotifyFailed("the D-Bus session bus failed: %s" % e) from None
        if reply.header.message_type == MessageType.error:
            name = reply.header.fields.get(HeaderFields.error_name, "error")
            detail = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise NotifyFailed("no notification service on the session bus (%s%s)"
                               % (name, ": " + detail if detail else ""))


class Desktop:
    """The event loop: committer events in, summarised notifications out."""

    def __init__(self, socket_path, summariser, notifier):
        self.socket_path = socket_path
        self.summariser = summariser
        self.notifier = notifier
        self.inbox = queue.Queue()  # events from the reader thread, and _GONE / _STOP
        self.conn = None
        self.waiting = False  # told the log we wait for the committer

    def run(self):
        """Until stop() (or SIGTERM in main()): connect, forward events, reconnect."""
        self.notifier.start()
        retry_at, delay = 0.0, BACKOFF_MIN
        try:
            while True:
                if self.conn is None and time.monotonic() >= retry_at:
                    if self._subscribe():
                        delay = BACKOFF_MIN
                    else:
                        retry_at = time.monotonic() + delay
                        delay = min(2 * delay, BACKOFF_MAX)
                item = self._next(None if self.conn else retry_at)
                if item is _STOP:
                    return
                if item is _GONE:
                    log.info("the committer went away; reconnecting")
                    self._hang_up()
                    retry_at = time.monotonic()
                elif item is not None:
                    self._show(self.summariser.feed(item, time.monotonic()))
                self._show(self.summariser.due(time.monotonic()))
        finally:
            self._show(self.summariser.flush(time.monotonic()))
            self._hang_up()
            self.notifier.close()

    def stop(self):
        """Make run() return; safe from another thread (not from a signal handler)."""
        self.inbox.put(_STOP)

    def _next(self, retry_at):
        """The next event, or None when a summary or a reconnect is due first."""
        wake = [t for t in (self.summariser.next_due(), retry_at) if t is not None]
        timeout = max(0.0, min(wake) - time.monotonic()) if wake else None
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def _subscribe(self):
        try:
            conn = protocol.connect(self.socket_path, timeout=2.0)
        except protocol.NoDaemon as e:
            if not self.waiting:
                log.info("waiting for the committer: %s", e)
                self.waiting = True
            return False
        try:
            reply = conn.request({"cmd": "subscribe"}, timeout=5.0)
        except (OSError, protocol.ProtocolError) as e:
            reply = {"ok": False, "error": str(e)}
        if not reply.get("ok"):
            log.warning("the committer refused to send events: %s", reply.get("error"))
            conn.close()
            return False
        log.info("receiving events from %s", self.socket_path)
        self.waiting = False
        self.conn = conn
        threading.Thread(target=self._read, args=(conn,), name="events", daemon=True).start()
        return True

    def _read(self, conn):
        """Reader thread: the socket blocks, so it feeds the main loop through the inbox."""
        try:
            for event in conn.events():
                self.inbox.put(event)
        except (OSError, protocol.ProtocolError) as e:
            log.debug("event stream ended: %s", e)
        self.inbox.put(_GONE)

    def _hang_up(self):
        if self.conn is None:
            return
        try:
            # shutdown(), unlike close(), wakes the reader thread blocked in recv().
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
        self.conn.close()
        self.conn = None

    def _show(self, messages):
        for message in messages:
            self.notifier.send(message)


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM stops us like Ctrl-C: run() cleans up on the way out


def main(argv=None):
    cfg = cli.start("autosync-desktop", __doc__, argv)
    if cfg.notifymethod not in ("desktop", "all"):
        log.info("notifymethod is %s: no desktop notifications to send", cfg.notifymethod)
        return 0
    level = cfg.notifylevel
    try:
        summariser = Summariser(level, folder=os.path.basename(cfg.path))
    except ValueError as e:
        cli.die("%s: [autosync] notifylevel: %s" % (cfg.file, e))
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        Desktop(cfg.socket, summariser, Notifier()).run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
