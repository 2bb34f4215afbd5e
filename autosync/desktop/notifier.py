"""autosync-desktop: the committer's events as desktop notifications.

Subscribes to the committer's socket, lets a Summariser pick the few events
worth telling, and sends those to org.freedesktop.Notifications on the D-Bus
session bus (through jeepney: pure Python, no GTK). Without a session bus or
a notification service it logs the messages instead, after one warning.

The subscription (client.Subscription) reconnects with backoff when the
committer goes away, so it can be started before the committer and outlives
a committer restart. SIGTERM and SIGINT only queue a stop for the loop.

With `describecmd`, a notification about changes made here offers
"Describe...": when the user picks it (the server's ActionInvoked signal,
on the connection that sent the notification) the command runs, in a thread
of its own, and its output goes to the committer as a `describe` request.
"""
import logging
import os
import select
import sys
import time

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.common import RouterClosed
from jeepney.io.threading import DBusRouter, open_dbus_connection

from autosync.core import cli, client
from autosync.desktop.describer import Describer
from autosync.core.summary import CRITICAL, DESCRIBE, Summariser
from autosync.core.retry import Backoff, Trouble
from autosync.core.stopflag import StopFlag

log = logging.getLogger("autosync.desktop")

APP_NAME = "dvcs-autosync"
NOTIFICATIONS = DBusAddress("/org/freedesktop/Notifications",
                            bus_name="org.freedesktop.Notifications",
                            interface="org.freedesktop.Notifications")
CALL_TIMEOUT = 5.0  # a notification service that hangs must not stall the events
BACKOFF_MIN, BACKOFF_MAX = 0.2, 10.0  # seconds between tries to reach the committer
ACTIONS_KEPT = 50  # notifications whose action is still answered
ACTION_INVOKED = MatchRule(type="signal", interface=NOTIFICATIONS.interface,
                           member="ActionInvoked", path=NOTIFICATIONS.object_path)

_STOP = object()  # stop() was called


class NotifyFailed(Exception):
    """The message could not be shown on the desktop (one-line reason)."""


class DBusNotifications:
    """A client of org.freedesktop.Notifications: shows messages as desktop
    notifications, or logs them while that cannot be done."""

    def __init__(self, on_action=None):
        """on_action(id, key): the user picked an action of notification `id` (called on
        the D-Bus receiving thread: it must not block)."""
        self.conn = self.router = None
        self.on_action = on_action
        self.trouble = Trouble(log, logging.WARNING)  # warn once, until it works again

    def start(self):
        """Connect now, so that a missing bus is reported at start-up, not at the first event."""
        try:
            self._connect()
        except NotifyFailed as e:
            self._warn(e)

    def send(self, message):
        """Show one Message; its id (true) if the desktop took it, else False."""
        try:
            number = self._notify(message)
        except NotifyFailed as e:
            self._warn(e)
            log.info("notification: %s", message.text().replace("\n", " -- "))
            return False
        self.trouble.recovered("desktop notifications work again")
        log.debug("notified: %s", message.title)
        return number

    def close(self):
        if self.conn is not None:
            self.router.close()
            self.conn.close()
            self.conn = self.router = None

    def put_nowait(self, signal):
        """The router hands matching signals here (as to a queue), on its own thread."""
        if signal.header.fields.get(HeaderFields.signature) == "us" and self.on_action:
            self.on_action(*signal.body)

    def _warn(self, reason):
        self.trouble.failed("no desktop notifications, logging them instead: %s", reason)

    def _connect(self):
        if self.conn is not None:
            return
        if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            raise NotifyFailed("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set)")
        try:
            self.conn = open_dbus_connection("SESSION")
        except (OSError, RuntimeError, ValueError) as e:
            raise NotifyFailed("cannot connect to the D-Bus session bus: %s" % e) from None
        # A router: replies and signals on one connection, which is where a server
        # sends ActionInvoked (some only to the notification's sender).
        self.router = DBusRouter(self.conn)
        if self.on_action is not None:
            self.router.filter(ACTION_INVOKED, queue=self)
            try:
                self._call(message_bus.AddMatch(ACTION_INVOKED))
            except NotifyFailed:
                self.close()
                raise

    def _notify(self, message):
        self._connect()
        icon = "dialog-warning" if message.urgency == CRITICAL else ""
        hints = {"urgency": ("y", message.urgency)}
        actions = [word for action in message.actions for word in action]
        # replaces_id 0 (a new bubble), the server's default timeout (-1).
        call = new_method_call(NOTIFICATIONS, "Notify", "susssasa{sv}i",
                               (APP_NAME, 0, icon, message.title, message.body, actions,
                                hints, -1))
        return self._call(call).body[0]

    def _call(self, call):
        """The reply to a method call; NotifyFailed if there is none or it is an error."""
        try:
            reply = self.router.send_and_get_reply(call, timeout=CALL_TIMEOUT)
        except (OSError, ValueError, TimeoutError, RouterClosed) as e:
            self.close()  # the bus went away or hung: connect afresh next time
            raise NotifyFailed("the D-Bus session bus failed: %s" % e) from None
        if reply.header.message_type == MessageType.error:
            name = reply.header.fields.get(HeaderFields.error_name, "error")
            detail = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise NotifyFailed("no notification service on the session bus (%s%s)"
                               % (name, ": " + detail if detail else ""))
        return reply


class Desktop:
    """The event loop: committer events in, summarised notifications out."""

    def __init__(self, socket_path, summariser, notifications, describer=None):
        """describer: what "Describe..." runs, or None."""
        self.summariser = summariser
        self.notifications = notifications
        self.describer = describer
        if describer is not None:
            notifications.on_action = self.action
        # The notifications that offer "Describe...", oldest first: id -> the commit it
        # describes (its newest one made here), so the text lands on that very commit.
        self.offered = {}
        # client.Inbox: put() is safe from a signal handler (stop()), and its pipe lets
        # the signal's C-level handler wake the wait (core/stopflag.py)
        self.inbox = client.Inbox()
        self.events = client.Subscription(socket_path, self.inbox.put, logger=log,
                                          backoff=Backoff(BACKOFF_MIN, BACKOFF_MAX))

    @property
    def conn(self):
        """The connection the committer's events come on; None while there is none."""
        return self.events.conn

    def run(self):
        """Until stop(): forward events (the subscription reconnects by itself)."""
        self.notifications.start()
        self.events.start()
        try:
            while True:
                for item in self._next():
                    if item is _STOP:
                        return
                    if isinstance(item, tuple):
                        self._picked(*item[1:])
                    else:
                        self._show(self.summariser.feed(item, time.monotonic()))
                self._show(self.summariser.due(time.monotonic()))
        finally:
            self._show(self.summariser.flush(time.monotonic()))
            self.events.close()
            self.notifications.close()

    def stop(self):
        """Make run() return; safe from another thread and from a signal handler."""
        self.inbox.put(_STOP)

    def action(self, number, key):
        """The user picked action `key` of notification `number` (any program's)."""
        self.inbox.put(("action", number, key))

    def _next(self):
        """The events come so far, oldest first (none when a summary is due first)."""
        due = self.summariser.next_due()
        select.select([self.inbox], [], [],
                      None if due is None else max(0.0, due - time.monotonic()))
        return self.inbox.take()

    def _show(self, messages):
        for message in messages:
            number = self.notifications.send(message)
            if number and DESCRIBE in message.actions:
                self.offered[number] = message.rev
                while len(self.offered) > ACTIONS_KEPT:
                    del self.offered[next(iter(self.offered))]

    def _picked(self, number, key):
        if key == DESCRIBE[0] and number in self.offered and self.describer is not None:
            self.describer.start(self.offered[number] or None)


def main(argv=None):
    cfg = cli.start("autosync-desktop", __doc__, argv)
    if cfg.notifymethod not in ("desktop", "all"):
        log.info("notifymethod is %s: no desktop notifications to send", cfg.notifymethod)
        return 0
    level = cfg.notifylevel
    describer = Describer(cfg.describecmd, cfg.path, cfg.socket) if cfg.describecmd else None
    try:
        summariser = Summariser(level, folder=os.path.basename(cfg.path),
                                describe=describer is not None)
    except ValueError as e:
        cli.die("%s: [autosync] notifylevel: %s" % (cfg.file, e))
    desktop = Desktop(cfg.socket, summariser, DBusNotifications(), describer)
    StopFlag(wake=desktop.stop).install(wake_fd=desktop.inbox.wake_w)
    desktop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
