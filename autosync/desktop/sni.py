"""The tray icon on the D-Bus session bus: a StatusNotifierItem and its menu.

Item answers the bus's calls (KDE's org.kde.StatusNotifierItem, which GNOME's
AppIndicator extension, waybar and most panels show, with Properties Get/GetAll,
and a com.canonical.dbusmenu menu) from a traystate.View, and says what
changed with the New* and LayoutUpdated signals. Bus holds the connection
(through jeepney, as desktop/notifier.py's notifications): it connects with backoff,
registers the item with the StatusNotifierWatcher, and again whenever a
watcher appears. One thread does all of it: autosync-tray's loop (desktop/tray.py).
"""
import logging
import os
import time

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageFlag, MessageType, \
    new_error, new_method_call, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

from autosync.desktop import traystate
from autosync.core.retry import Backoff, Trouble, one_line

log = logging.getLogger("autosync.tray")

WATCHER = "org.kde.StatusNotifierWatcher"
ITEM, ITEM_PATH = "org.kde.StatusNotifierItem", "/StatusNotifierItem"
MENU, MENU_PATH = "com.canonical.dbusmenu", "/MenuBar"
PROPERTIES = "org.freedesktop.DBus.Properties"
CALL_TIMEOUT = 5.0  # for the bus's own answers while connecting
BUS_BACKOFF = (1.0, 60.0)  # seconds between tries to reach the session bus
# Menu item ids; recent changes are RECENT_BASE and up.
HEADLINE, SYNC, PAUSE, DESCRIBE, RECENT, OPEN, HISTORY, RECENT_BASE = 1, 2, 3, 4, 5, 6, 7, 100
ACTIONS = {SYNC: "sync", PAUSE: "pause", DESCRIBE: "describe", OPEN: "open",
           HISTORY: "history"}


def variants(props, names=()):
    """{name: python value} -> a{sv}, only `names` when given."""
    return {k: ("b" if isinstance(v, bool) else "s", v) for k, v in props.items()
            if not names or k in names}


class Item:
    """The StatusNotifierItem and its menu: answers the bus's method calls from a View."""

    def __init__(self, view, describe_on, act):
        self.view = view
        self.describe_on = describe_on
        self.act = act  # act(name): a menu item was clicked
        self.revision = 1
        self.menu = self.items()

    def looks(self):
        icon, status = traystate.LOOKS[self.view.name()]
        title, text = self.view.tooltip()
        return {"Category": "ApplicationStatus", "Id": "dvcs-autosync", "Title": title,
                "Status": status, "WindowId": 0, "IconName": icon, "IconPixmap": [],
                "OverlayIconName": "", "AttentionIconName": icon, "AttentionIconPixmap": [],
                "ToolTip": (icon, [], title, text), "ItemIsMenu": True, "Menu": MENU_PATH}

    SIGNATURES = {"WindowId": "i", "IconPixmap": "a(iiay)", "AttentionIconPixmap": "a(iiay)",
                  "ToolTip": "(sa(iiay)ss)", "ItemIsMenu": "b", "Menu": "o"}
    MENU_PROPS = {"Version": ("u", 3), "TextDirection": ("s", "ltr"), "Status": ("s", "normal"),
                  "IconThemePath": ("as", [])}

    def items(self):
        """{id: (properties, child ids)} of the menu as the view says now."""
        view, recent = self.view, self.view.changes()
        items = {
            0: ({"children-display": "submenu"}, [HEADLINE, SYNC, PAUSE, DESCRIBE, RECENT, OPEN,
                                                HISTORY]),
            HEADLINE: ({"label": view.headline(), "enabled": False}, []),
            SYNC: ({"label": "Sync now"}, []),
            PAUSE: ({"label": "Resume syncing" if view.paused else "Pause syncing"}, []),
            DESCRIBE: ({"label": "Describe the last change...", "enabled": self.describe_on}, []),
            RECENT: ({"label": "Recent changes", "children-display": "submenu"},
                     [RECENT_BASE + i for i in range(len(recent) or 1)]),
            OPEN: ({"label": "Open folder"}, []),
            HISTORY: ({"label": "Open history"}, []),
        }
        for i, label in enumerate(recent or ["none yet"]):
            items[RECENT_BASE + i] = ({"label": label, "enabled": False}, [])
        return items

    def refresh(self):
        """Rebuild the menu; True if it changed (the revision goes up)."""
        items = self.items()
        if items == self.menu:
            return False
        self.menu, self.revision = items, self.revision + 1
        return True

    def node(self, ident, depth, names):
        props, children = self.menu[ident]
        kids = [] if depth == 0 else [("(ia{sv}av)", self.node(c, depth - 1, names))
                                      for c in children]
        return ident, variants(props, names), kids

    def answer(self, msg):
        """The reply to one method call."""
        path = msg.header.fields.get(HeaderFields.path)
        iface = msg.header.fields.get(HeaderFields.interface)
        member = msg.header.fields.get(HeaderFields.member)
        body = msg.body
        if iface == PROPERTIES and member in ("Get", "GetAll"):
            props = self._properties(path)
            if props is None or (member == "Get" and body[1] not in props):
                return new_error(msg, "org.freedesktop.DBus.Error.UnknownProperty")
            if member == "Get":
                return new_method_return(msg, "v", (props[body[1]],))
            return new_method_return(msg, "a{sv}", (props,))
        if path == ITEM_PATH and member in ("Activate", "SecondaryActivate", "ContextMenu",
                                            "Scroll"):
            return new_method_return(msg)  # the menu is the item (ItemIsMenu)
        if path == MENU_PATH:
            return self._menu_call(msg, member, body)
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")

    def _properties(self, path):
        if path == ITEM_PATH:
            return {k: (self.SIGNATURES.get(k, "s"), v) for k, v in self.looks().items()}
        return dict(self.MENU_PROPS) if path == MENU_PATH else None

    def _menu_call(self, msg, member, body):
        if member == "GetLayout":
            parent, depth, names = body
            if parent not in self.menu:
                return new_error(msg, "com.canonical.dbusmenu.Error.UnknownId")
            return new_method_return(msg, "u(ia{sv}av)",
                                     (self.revision, self.node(parent, depth, names)))
        if member == "GetGroupProperties":
            ids, names = body
            found = [(i, variants(self.menu[i][0], names)) for i in (ids or self.menu)
                     if i in self.menu]
            return new_method_return(msg, "a(ia{sv})", (found,))
        if member == "GetProperty":
            ident, name = body
            props = variants(self.menu.get(ident, ({}, []))[0])
            if name not in props:
                return new_error(msg, "com.canonical.dbusmenu.Error.UnknownProperty")
            return new_method_return(msg, "v", (props[name],))
        if member in ("Event", "EventGroup"):
            events = [body] if member == "Event" else body[0]
            for ident, kind, _data, _stamp in events:
                if kind == "clicked" and ident in ACTIONS:
                    self.act(ACTIONS[ident])
            return new_method_return(msg) if member == "Event" else \
                new_method_return(msg, "ai", ([],))
        if member == "AboutToShow":
            return new_method_return(msg, "b", (False,))
        if member == "AboutToShowGroup":
            return new_method_return(msg, "aiai", ([], []))
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")

    def signals(self, before, after, menu_changed):
        """The signals that tell the tray what changed."""
        out = [new_signal(DBusAddress(ITEM_PATH, interface=ITEM), name, *args)
               for name, keys, args in (
                   ("NewIcon", ("IconName",), ()),
                   ("NewTitle", ("Title",), ()),
                   ("NewToolTip", ("ToolTip",), ()),
                   ("NewStatus", ("Status",), ("s", (after["Status"],))))
               if any(before.get(k) != after[k] for k in keys)]
        if menu_changed:
            out.append(new_signal(DBusAddress(MENU_PATH, interface=MENU), "LayoutUpdated",
                                  "ui", (self.revision, 0)))
        return out


class Bus:
    """The session bus connection: connects (with backoff), registers with the watcher."""

    def __init__(self, item):
        self.item = item
        self.conn = None
        self.name = "org.kde.StatusNotifierItem-%d-1" % os.getpid()
        self.trouble = Trouble(log)  # the bus
        self.watcher = Trouble(log)  # the StatusNotifierWatcher
        self.backoff = Backoff(*BUS_BACKOFF, jitter=0.2)
        self.retry_at = 0.0
        self.register_serial = None
        self.registered = False

    def connect_if_due(self):
        """Connect when it is time to try; -> seconds until the next try (None: connected)."""
        now = time.monotonic()
        if self.conn is not None:
            return None
        if now < self.retry_at:
            return self.retry_at - now
        try:
            if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
                raise OSError("DBUS_SESSION_BUS_ADDRESS is not set")
            self.conn = open_dbus_connection("SESSION")
            self.conn.send_and_get_reply(message_bus.RequestName(self.name), timeout=CALL_TIMEOUT)
            rule = MatchRule(type="signal", interface="org.freedesktop.DBus",
                             member="NameOwnerChanged")
            rule.add_arg_condition(0, WATCHER)
            self.conn.send_and_get_reply(message_bus.AddMatch(rule), timeout=CALL_TIMEOUT)
        except (OSError, RuntimeError, ValueError, KeyError, TimeoutError) as e:
            self.lost("no D-Bus session bus, no tray icon; trying again: %s" % one_line(e))
            return self.retry_at - now
        self.backoff.reset()
        self.trouble.recovered("connected to the D-Bus session bus")
        self.register()
        return None

    def lost(self, why):
        self.close()
        self.trouble.failed("%s", why)
        self.retry_at = time.monotonic() + self.backoff.next()

    def register(self):
        call = new_method_call(DBusAddress("/StatusNotifierWatcher", bus_name=WATCHER,
                                           interface=WATCHER),
                               "RegisterStatusNotifierItem", "s", (self.name,))
        self.register_serial = next(self.conn.outgoing_serial)
        self.conn.send(call, serial=self.register_serial)  # the answer comes in drain()

    def send(self, messages):
        try:
            for msg in messages:
                self.conn.send(msg)
        except OSError as e:
            self.lost("the D-Bus session bus went away: %s" % one_line(e))

    def drain(self):
        """Answer everything the bus has sent so far."""
        while self.conn is not None:
            try:
                msg = self.conn.receive(timeout=0)
            except TimeoutError:
                return
            except (OSError, ValueError) as e:
                self.lost("the D-Bus session bus went away: %s" % one_line(e))
                return
            self._take(msg)

    def _take(self, msg):
        kind, fields = msg.header.message_type, msg.header.fields
        if kind == MessageType.method_call:
            reply = self.item.answer(msg)
            if not msg.header.flags & MessageFlag.no_reply_expected:
                self.send([reply])
        elif kind == MessageType.signal:
            if fields.get(HeaderFields.member) == "NameOwnerChanged" and msg.body[0] == WATCHER \
                    and msg.body[2]:
                log.info("a StatusNotifierWatcher appeared on the session bus")
                self.register()
        elif fields.get(HeaderFields.reply_serial) == self.register_serial:
            self.registered = kind == MessageType.method_return
            if self.registered:
                self.watcher.recovered("registered with the StatusNotifierWatcher")
                log.info("the tray icon is registered as %s", self.name)
            else:
                self.watcher.failed("no StatusNotifierWatcher on the session bus (no tray to "
                                    "show the icon in): %s; waiting for one",
                                    fields.get(HeaderFields.error_name))

    def fileno(self):
        return self.conn.sock.fileno()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None
            self.registered = False
