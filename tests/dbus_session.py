"""A real, private D-Bus session bus for tests, and recorders on it.

SessionBus starts `dbus-daemon --nofork --print-address` (Debian package
`dbus`) with its own config in a temporary folder: no service activation, so
nothing of the machine's desktop can answer. Recorder owns
org.freedesktop.Notifications on that bus and records every Notify call; its
invoke() plays the user clicking one of a notification's actions.
WatcherRecorder owns org.kde.StatusNotifierWatcher and records the items
that register and the signals they send; Host reads a registered item and
clicks its menu as a tray would. FakeLogind and FakeNetworkManager
own logind's and NetworkManager's names on a private bus standing for the
system bus (the `system_bus` fixture) and send their signals.
"""
import os
import queue
import subprocess
import threading
import time
from dataclasses import dataclass

import pytest

from jeepney import (DBusAddress, HeaderFields, MatchRule, MessageType, new_error,
                     new_method_call, new_method_return, new_signal)
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

from autosync.desktop import sni

CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""

NAME = "org.freedesktop.Notifications"
PRIMARY_OWNER = 1  # RequestName's reply when the name is ours
DO_NOT_QUEUE = 4


class SessionBus:
    """`with SessionBus(tmpdir) as bus:` -> bus.address, for DBUS_SESSION_BUS_ADDRESS."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.proc = None
        self.address = None

    def __enter__(self):
        os.makedirs(self.directory, exist_ok=True)
        config = os.path.join(self.directory, "session.conf")
        with open(config, "w") as f:
            f.write(CONFIG.format(socket=os.path.join(self.directory, "bus")))
        # Its complaints (e.g. about the fd limit in a container) go to a file.
        with open(os.path.join(self.directory, "dbus-daemon.log"), "w") as log:
            self.proc = subprocess.Popen(
                ["dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=1"],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        # The daemon prints its address once it listens.
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            self.__exit__()
            raise RuntimeError("dbus-daemon did not start")
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
        if self.proc:
            self.proc.stdout.close()


@dataclass
class Notification:
    app_name: str
    replaces_id: int
    icon: str
    summary: str
    body: str
    urgency: int  # None when the hint is missing
    actions: tuple = ()  # (key, label) pairs
    sender: str = ""  # the unique bus name of the program that sent it


class Owner:
    """Owns the bus name NAME on `address` and answers its calls (_answer) in a thread;
    `calls` is what a subclass records."""

    NAME = None
    MATCHES = ()  # match rules for the signals it records

    def __init__(self, address):
        self.address = address
        self.calls = []
        self.cond = threading.Condition()
        self.stopped = threading.Event()
        self.outbox = queue.SimpleQueue()  # signals to send, from the serving thread
        self.conn = None
        self.thread = None

    def __enter__(self):
        self.conn = open_dbus_connection(self.address)
        # Matches first: once the name is ours, calls come in, and a send_and_get_reply
        # in between would drop them.
        for rule in self.MATCHES:
            self.conn.send_and_get_reply(message_bus.AddMatch(rule))
        reply = self.conn.send_and_get_reply(message_bus.RequestName(self.NAME, DO_NOT_QUEUE))
        if reply.body[0] != PRIMARY_OWNER:
            raise RuntimeError("could not own %s on the test bus" % self.NAME)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(5)
        self.conn.close()

    def wait_for(self, count, timeout=10.0):
        """The calls, once there are at least `count`; fails after `timeout` seconds."""
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.calls) >= count, timeout):
                raise AssertionError("expected %d calls, got %d: %r"
                                     % (count, len(self.calls), self.calls))
            return list(self.calls)

    def settled(self, quiet=0.5):
        """The calls once none has come for `quiet` seconds."""
        while True:
            seen = len(self.calls)
            time.sleep(quiet)
            with self.cond:
                if len(self.calls) == seen:
                    return list(self.calls)

    def _serve(self):
        while not self.stopped.is_set():
            while not self.outbox.empty():
                self.conn.send(self.outbox.get())
            try:
                msg = self.conn.receive(timeout=0.1)
            except TimeoutError:
                continue
            if msg.header.message_type == MessageType.method_call:
                self.conn.send(self._answer(msg))
            elif msg.header.message_type == MessageType.signal:
                self._heard(msg)

    def _heard(self, msg):
        pass

    def _record(self, call):
        with self.cond:
            self.calls.append(call)
            self.cond.notify_all()
            return len(self.calls)


class Recorder(Owner):
    """Owns org.freedesktop.Notifications on `address` and records each Notify call."""

    NAME = NAME

    def invoke(self, number, key):
        """The user picks action `key` of notification `number`: ActionInvoked is sent to
        the notification's sender only (as GNOME Shell does), not broadcast."""
        sender = self.calls[number - 1].sender
        signal = new_signal(DBusAddress("/org/freedesktop/Notifications",
                                        interface="org.freedesktop.Notifications"),
                            "ActionInvoked", "us", (number, key))
        signal.header.fields[HeaderFields.destination] = sender
        self.outbox.put(signal)

    def _answer(self, msg):
        member = msg.header.fields.get(HeaderFields.member)
        if member == "Notify":
            app, replaces, icon, summary, body, actions, hints, _timeout = msg.body
            urgency = hints.get("urgency", (None, None))[1]
            pairs = tuple(zip(actions[::2], actions[1::2]))
            sender = msg.header.fields.get(HeaderFields.sender, "")
            number = self._record(Notification(app, replaces, icon, summary, body, urgency,
                                               pairs, sender))
            return new_method_return(msg, "u", (number,))
        if member == "GetCapabilities":
            return new_method_return(msg, "as", (["body"],))
        if member == "GetServerInformation":
            return new_method_return(msg, "ssss", ("recorder", "tests", "0", "1.2"))
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")


class WatcherRecorder(Owner):
    """Owns org.kde.StatusNotifierWatcher: `calls` are the (sender, service) of each
    RegisterStatusNotifierItem; `signals` the (member, body) of the items' signals."""

    NAME = "org.kde.StatusNotifierWatcher"
    MATCHES = (MatchRule(type="signal", interface="org.kde.StatusNotifierItem"),
               MatchRule(type="signal", interface="com.canonical.dbusmenu"))

    def __init__(self, address):
        super().__init__(address)
        self.signals = []

    def _answer(self, msg):
        if msg.header.fields.get(HeaderFields.member) == "RegisterStatusNotifierItem":
            self._record((msg.header.fields.get(HeaderFields.sender), msg.body[0]))
            return new_method_return(msg)
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")

    def _heard(self, msg):
        with self.cond:
            self.signals.append((msg.header.fields.get(HeaderFields.member), msg.body))
            self.cond.notify_all()

    def wait_signal(self, member, timeout=10.0):
        """The bodies of the `member` signals heard, once there is one."""
        with self.cond:
            if not self.cond.wait_for(lambda: any(m == member for m, _ in self.signals),
                                      timeout):
                raise AssertionError("no %s signal; heard %r" % (member, self.signals))
            return [body for m, body in self.signals if m == member]


class Host:
    """What a tray host does with a registered item: reads it and clicks its menu."""

    def __init__(self, address, service):
        self.conn = open_dbus_connection(address)
        self.service = service

    def call(self, path, iface, member, signature=None, body=()):
        reply = self.conn.send_and_get_reply(new_method_call(
            DBusAddress(path, bus_name=self.service, interface=iface), member, signature, body),
            timeout=5)
        assert reply.header.message_type == MessageType.method_return, reply.body
        return reply.body

    def props(self):
        return {k: v for k, (_, v) in self.call(sni.ITEM_PATH, sni.PROPERTIES, "GetAll", "s",
                                                (sni.ITEM,))[0].items()}

    def get(self, name):
        return self.call(sni.ITEM_PATH, sni.PROPERTIES, "Get", "ss", (sni.ITEM, name))[0][1]

    def menu(self):
        """{label: id} of the whole menu, submenus included, and the layout's revision."""
        revision, root = self.call(sni.MENU_PATH, sni.MENU, "GetLayout", "iias", (0, -1, []))
        labels = {}

        def walk(node):
            ident, props, children = node
            if "label" in props:
                labels[props["label"][1]] = ident
            for _, child in children:
                walk(child)
        walk(root)
        return labels, revision

    def click(self, ident):
        self.call(sni.MENU_PATH, sni.MENU, "Event", "isvu", (ident, "clicked", ("s", ""), 0))

    def close(self):
        self.conn.close()


@pytest.fixture
def bus(tmp_path, monkeypatch):
    """A private session bus, and the programs under test pointed at it."""
    with SessionBus(tmp_path / "dbus") as session:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session.address)
        yield session


class FakeLogind(Owner):
    """Owns org.freedesktop.login1; sleep(going) sends PrepareForSleep(going)."""

    NAME = "org.freedesktop.login1"

    def sleep(self, going, signature="b"):
        """PrepareForSleep as logind broadcasts it (another signature: a malformed one)."""
        self.outbox.put(new_signal(DBusAddress("/org/freedesktop/login1",
                                               interface="org.freedesktop.login1.Manager"),
                                   "PrepareForSleep", signature, (going,)))

    def _answer(self, msg):
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")


class FakeNetworkManager(Owner):
    """Owns org.freedesktop.NetworkManager: answers its State property (`state`), and
    states(a, b, ...) sends StateChanged for each, in one go (a flapping network)."""

    NAME = "org.freedesktop.NetworkManager"

    def __init__(self, address, state=20):
        super().__init__(address)
        self.state = state  # NM_STATE_DISCONNECTED

    def states(self, *states):
        for state in states:
            self.state = state
            self.outbox.put(new_signal(DBusAddress("/org/freedesktop/NetworkManager",
                                                   interface="org.freedesktop.NetworkManager"),
                                       "StateChanged", "u", (state,)))

    def _answer(self, msg):
        fields = msg.header.fields
        if fields.get(HeaderFields.member) == "Get" and tuple(msg.body) == (self.NAME, "State"):
            self._record("Get State")
            return new_method_return(msg, "v", (("u", self.state),))
        return new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")


@pytest.fixture
def system_bus(tmp_path, monkeypatch):
    """A private bus standing for the system bus, and the programs under test pointed at it."""
    with SessionBus(tmp_path / "system-dbus") as system:
        monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", system.address)
        yield system
