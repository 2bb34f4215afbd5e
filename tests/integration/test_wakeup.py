"""Wake-ups: a resume from suspend or the network coming back makes the committer sync.

Wakeups (the coalescing) with a clock of the test's own; the SystemBusListener on a
real private bus standing for the system bus, with a fake logind and
NetworkManager owning their names; and the real suite on real git, woken by
them. The committer's side (Committer.wake) is in test_committer.py.
"""
import json
import logging
import os
import queue
import subprocess
import threading
import time

import pytest

from jeepney import DBusAddress, HeaderFields, new_signal
from jeepney.io.blocking import open_dbus_connection

from autosync.core import client
from autosync.core.config import load
from autosync.core.pause import state_file
from autosync.core.retry import Backoff
from autosync.committer.wakeup import CONNECTED_GLOBAL, NETWORK, WOKE, SystemBusListener, Wakeups
from base import git, wait_until
from dbus_session import FakeLogind, FakeNetworkManager, SessionBus, system_bus  # noqa: F401

# --- Wakeups: when a sync is due, and why -------------------------------------------


def test_a_resume_syncs_once_after_the_settle_and_going_to_sleep_does_nothing():
    w = Wakeups(settle=1.0, spacing=10.0, hold=30.0)
    w.sleep(True, 0.0)
    assert w.next_due() is None and w.due(100.0) is None
    w.sleep(False, 200.0)
    assert w.next_due() == 201.0
    assert w.due(200.5) is None
    assert w.due(201.0) == WOKE
    assert w.due(500.0) is None  # said once


def test_only_reaching_connected_global_from_below_is_the_network_coming_back():
    w = Wakeups(settle=1.0)
    w.network(CONNECTED_GLOBAL, 0.0, known=True)  # as it was when we started listening
    assert w.next_due() is None
    w.network(CONNECTED_GLOBAL, 1.0)  # no change
    assert w.next_due() is None
    w.network(60, 2.0)  # CONNECTED_SITE: not back yet
    assert w.next_due() is None
    w.network(CONNECTED_GLOBAL, 3.0)
    assert w.due(4.0) == NETWORK


def test_a_flapping_network_makes_one_sync_and_the_next_waits_the_spacing():
    w = Wakeups(settle=1.0, spacing=10.0, hold=30.0)
    w.network(20, 0.0, known=True)
    for i, state in enumerate((70, 20, 70, 40, 70, 20, 70)):
        w.network(state, 0.1 * i)
        assert w.due(0.1 * i) is None
    assert w.due(1.6) == NETWORK  # a second after the last signal
    assert w.due(2.0) is None
    w.network(20, 3.0)
    w.network(70, 3.1)
    assert w.due(4.1) is None and w.next_due() == 11.6  # spaced from the last sync
    assert w.due(11.6) == NETWORK


def test_a_resume_while_the_network_is_down_waits_for_it_and_syncs_once():
    w = Wakeups(settle=1.0, spacing=10.0, hold=30.0)
    w.network(10, 0.0)  # NM_STATE_ASLEEP, as NetworkManager says before the suspend
    w.sleep(True, 0.0)
    w.sleep(False, 100.0)
    assert w.due(101.0) is None and w.next_due() == 130.0  # waits for the network
    w.network(20, 102.0)
    w.network(CONNECTED_GLOBAL, 105.0)
    assert w.due(105.5) is None
    assert w.due(106.0) == WOKE  # one sync, for the resume
    assert w.next_due() is None


def test_a_resume_syncs_after_the_hold_even_if_the_network_never_says_it_is_up():
    w = Wakeups(settle=1.0, hold=30.0)
    w.network(60, 0.0, known=True)  # a LAN without internet may still reach the remote
    w.sleep(False, 10.0)
    assert w.due(39.9) is None
    assert w.due(40.0) == WOKE


def test_without_networkmanager_a_resume_is_not_held():
    w = Wakeups(settle=1.0, hold=30.0)
    w.network(10, 0.0, known=True)
    w.network(None, 1.0, known=True)  # NetworkManager went away: nothing to wait for
    w.sleep(False, 2.0)
    assert w.due(3.0) == WOKE


# --- the SystemBusListener on a private bus ---------------------------------------------------


class Woken:
    """on_wake for a SystemBusListener: records the reasons, lets a test wait for them."""

    def __init__(self, answer=True):
        self.reasons = queue.SimpleQueue()
        self.seen = []
        self.answer = answer  # False: as the committer while paused

    def __call__(self, reason):
        self.reasons.put(reason)
        return self.answer

    def next(self, timeout=10.0):
        self.seen.append(self.reasons.get(timeout=timeout))
        return self.seen[-1]

    def more(self):
        return not self.reasons.empty()


@pytest.fixture
def listen(system_bus):
    started = []

    def start(settle=0.2, answer=True):
        woken = Woken(answer)
        listener = SystemBusListener(woken, Wakeups(settle=settle, spacing=0.0, hold=30.0))
        listener.backoff = Backoff(0.05, 0.2)
        started.append(listener.start())
        return listener, woken

    yield start
    for listener in started:
        listener.stop()
        assert not listener.thread.is_alive()


@pytest.fixture
def logind(system_bus):
    with FakeLogind(system_bus.address) as fake:
        yield fake


@pytest.fixture
def nm(system_bus):
    with FakeNetworkManager(system_bus.address, state=20) as fake:
        yield fake


def said(caplog, text):
    return [r for r in caplog.records if r.name == "autosync.wakeup" and text in r.getMessage()]


def test_the_listener_wakes_on_resume_and_not_when_going_to_sleep(listen, logind, nm, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.wakeup")
    listener, woken = listen()
    nm.wait_for(1)  # it asked NetworkManager's state: it listens
    wait_until(lambda: listener.wakeups.state == 20, 10, what="the state known")
    nm.states(CONNECTED_GLOBAL)
    assert woken.next() == NETWORK
    logind.sleep(True)
    wait_until(lambda: said(caplog, "going to sleep"), 10, what="the signal taken")
    assert listener.wakeups.next_due() is None and not woken.more()
    logind.sleep(False)
    assert woken.next() == WOKE
    # The line follows the wake (which the test saw first): waited for, not raced.
    wait_until(lambda: len(said(caplog, ": syncing")) >= 2, 10, what="the second line")
    assert [r.levelno for r in said(caplog, ": syncing")] == [logging.INFO, logging.INFO]


def test_a_wake_while_paused_says_the_pull_waits(listen, logind, caplog):
    caplog.set_level(logging.INFO, logger="autosync.wakeup")
    listener, woken = listen(answer=False)
    wait_until(lambda: listener.conn is not None and listener.state_serial is None, 10,
               what="the listener connected")
    logind.sleep(False)
    assert woken.next() == WOKE
    wait_until(lambda: said(caplog, "woke from sleep"), 10, what="the log line")
    assert [r.getMessage() for r in said(caplog, "woke")] == [
        "woke from sleep while paused: pulled on resume"]


def test_a_flapping_network_wakes_once(listen, nm):
    listener, woken = listen(settle=0.5)
    nm.wait_for(1)
    wait_until(lambda: listener.wakeups.state == 20, 10, what="the state known")
    nm.states(70, 20, 70, 20, 40, 70)
    assert woken.next() == NETWORK
    assert listener.wakeups.next_due() is None  # nothing more owed: one sync
    assert not woken.more()


def test_a_resume_while_offline_waits_for_the_network(listen, logind, nm):
    listener, woken = listen()
    nm.wait_for(1)
    nm.states(10)  # NM_STATE_ASLEEP
    logind.sleep(True)
    logind.sleep(False)
    wait_until(lambda: listener.wakeups.reason == WOKE, 10, what="the resume heard")
    assert not woken.more()  # held: the network is not up
    nm.states(20, CONNECTED_GLOBAL)
    assert woken.next() == WOKE
    assert listener.wakeups.next_due() is None


def test_a_networkmanager_that_starts_later_is_asked_its_state(listen, system_bus):
    listener, woken = listen()
    wait_until(lambda: listener.conn is not None and listener.state_serial is None, 10,
               what="the listener connected (no NetworkManager: no state)")
    assert listener.wakeups.state is None
    with FakeNetworkManager(system_bus.address, state=20) as nm:
        nm.wait_for(1)  # asked when the name got its owner
        wait_until(lambda: listener.wakeups.state == 20, 10, what="the state known")
        assert listener.wakeups.next_due() is None  # its arrival is no network back
        nm.states(CONNECTED_GLOBAL)
        assert woken.next() == NETWORK


def test_malformed_signals_are_ignored_with_one_line(listen, logind, nm, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.wakeup")
    listener, woken = listen()
    nm.wait_for(1)
    logind.sleep("false", signature="s")
    logind.sleep(7, signature="u")
    wait_until(lambda: said(caplog, "malformed"), 10, what="the malformed signal")
    logind.sleep(True)  # a well-formed one after them: they were all taken
    wait_until(lambda: said(caplog, "going to sleep"), 10, what="the signals taken")
    assert len(said(caplog, "malformed")) == 1
    assert listener.wakeups.next_due() is None and not woken.more()
    assert listener.thread.is_alive()


def test_a_signal_sent_to_the_listener_alone_by_anyone_is_ignored(listen, logind, nm, caplog,
                                                                  system_bus):
    caplog.set_level(logging.DEBUG, logger="autosync.wakeup")
    listener, woken = listen()
    nm.wait_for(1)
    impostor = open_dbus_connection(system_bus.address)
    try:
        signal = new_signal(DBusAddress("/org/freedesktop/login1",
                                        interface="org.freedesktop.login1.Manager"),
                            "PrepareForSleep", "b", (False,))
        signal.header.fields[HeaderFields.destination] = listener.conn.unique_name
        impostor.send(signal)
        # Broadcast by someone else than logind: the bus does not deliver it to us.
        impostor.send(new_signal(DBusAddress("/org/freedesktop/login1",
                                             interface="org.freedesktop.login1.Manager"),
                                 "PrepareForSleep", "b", (False,)))
    finally:
        impostor.close()
    logind.sleep(True)  # after them: they were taken (or never delivered)
    wait_until(lambda: said(caplog, "going to sleep"), 10, what="logind's signal")
    assert not said(caplog, "woke up")
    assert listener.wakeups.next_due() is None and not woken.more()


def test_without_a_system_bus_one_debug_line_and_tries_again_quietly(listen, caplog,
                                                                     monkeypatch, tmp_path):
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=%s/none" % tmp_path)
    caplog.set_level(logging.DEBUG, logger="autosync.wakeup")
    listener, woken = listen()
    wait_until(lambda: listener.backoff.failures >= 3, 10, what="three tries")
    records = [r for r in caplog.records if r.name == "autosync.wakeup"]
    assert [r.levelno for r in records] == [logging.DEBUG]
    assert "no D-Bus system bus" in records[0].getMessage()


def test_the_listener_comes_back_when_the_system_bus_does(system_bus, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.wakeup")
    woken = Woken()
    listener = SystemBusListener(woken, Wakeups(settle=0.2, spacing=0.0))
    listener.backoff = Backoff(0.05, 0.2)
    listener.start()
    try:
        with FakeNetworkManager(system_bus.address) as nm:
            nm.wait_for(1)
        system_bus.__exit__()  # the system bus goes (a restart of dbus)
        wait_until(lambda: said(caplog, "went away"), 10, what="the loss noticed")
        with SessionBus(tmp_path / "system-dbus") as again:  # the same socket path
            with FakeLogind(again.address) as logind, \
                    FakeNetworkManager(again.address, state=CONNECTED_GLOBAL) as nm:
                nm.wait_for(1)  # connected again: it asked the new NetworkManager
                logind.sleep(False)
                assert woken.next() == WOKE
    finally:
        listener.stop()
    assert not listener.thread.is_alive()
    assert all(r.levelno <= logging.INFO for r in caplog.records if r.name == "autosync.wakeup")


# --- the real suite, woken ------------------------------------------------------------


def other_machine_pushes(remote, tmp_path, name, text):
    """A change pushed by another machine (a plain clone)."""
    other = str(tmp_path / "other")
    if not os.path.isdir(other):
        git("clone", "-q", remote.path, other)
    git("pull", "-q", "--no-rebase", cwd=other)
    with open(os.path.join(other, name), "w") as f:
        f.write(text)
    git("add", name, cwd=other)
    git("commit", "-q", "-m", "from the other machine", cwd=other)
    git("push", "-q", "origin", "HEAD:main", cwd=other)


def listening(machine):
    wait_until(lambda: "listening on the D-Bus system bus" in machine.logtext(), 30,
               what="%s's wake-up listener" % machine.name)


def is_ancestor(remote, rev):
    return subprocess.run(["git", "--git-dir", remote.path, "merge-base", "--is-ancestor",
                           rev, "main"], stderr=subprocess.DEVNULL).returncode == 0


def unpushed_commit(machine):
    """A commit made by hand (no hook): the daemon does not push it until something
    makes it look. -> its revision."""
    git("commit", "-q", "--allow-empty", "-m", "made by hand", cwd=machine.path)
    return git("rev-parse", "HEAD", cwd=machine.path).decode().strip()


def events(machine):
    """The machine's committer events, as they come: -> (queue, subscription)."""
    got, subscribed = queue.SimpleQueue(), threading.Event()
    sub = client.Subscription(load(machine.config).socket, got.put, subscribed.set).start()
    assert subscribed.wait(30), "no subscription to %s's events" % machine.name
    return got, sub


def drain(got):
    seen = []
    while not got.empty():
        seen.append(got.get())
    return seen


@pytest.mark.e2e
def test_a_resume_pulls_and_pushes_at_once(system_bus, logind, remote, machines, tmp_path):
    a = machines("a")  # pullinterval 0, syncmethod none: nothing else would pull
    listening(a)
    other_machine_pushes(remote, tmp_path, "from-b.txt", "written while a slept\n")
    rev = unpushed_commit(a)
    logind.sleep(True)
    wait_until(lambda: "logind: going to sleep" in a.logtext(), 30, what="the signal taken")
    time.sleep(2.5)  # more than the settle: a sync, if any, would have begun
    assert a.read("from-b.txt") is None and not is_ancestor(remote, rev)
    logind.sleep(False)
    wait_until(lambda: a.read("from-b.txt") == b"written while a slept\n", 30,
               what="the other machine's change pulled")
    wait_until(lambda: is_ancestor(remote, rev), 30, what="the unpushed commit pushed")
    assert a.logtext().count("woke from sleep: syncing") == 1


@pytest.mark.e2e
def test_the_network_coming_back_syncs_once_however_it_flaps(system_bus, nm, remote, machines,
                                                            tmp_path):
    a = machines("a")
    listening(a)
    nm.wait_for(1)  # a asked its state (20: disconnected)
    got, sub = events(a)
    try:
        other_machine_pushes(remote, tmp_path, "news.txt", "while offline\n")
        rev = unpushed_commit(a)
        nm.states(70, 20, 70, 20, 40, 70)
        wait_until(lambda: a.read("news.txt") == b"while offline\n", 30, what="the pull")
        wait_until(lambda: is_ancestor(remote, rev), 30, what="the push")
        time.sleep(2.5)  # more than the settle: a second sync, if any, would have begun
        pulls = [e for e in drain(got) if e.get("event") == "pull-started"]
    finally:
        sub.close()
    assert len(pulls) == 1
    assert a.logtext().count("network back: syncing") == 1


@pytest.mark.e2e
def test_a_resume_while_paused_pulls_on_resume(system_bus, logind, remote, machines, tmp_path):
    a = machines("a")
    listening(a)
    a.notify("pause")
    other_machine_pushes(remote, tmp_path, "later.txt", "after the pause\n")
    logind.sleep(False)
    wait_until(lambda: "woke from sleep while paused: pulled on resume" in a.logtext(), 30,
               what="the wake heard while paused")
    assert a.read("later.txt") is None  # paused: nothing is pulled
    with open(state_file(a.path)) as f:  # remembered, across a restart too
        assert json.load(f)["pull_owed"] is True
    a.notify("resume")
    wait_until(lambda: a.read("later.txt") == b"after the pause\n", 30, what="the pull")


@pytest.mark.e2e
def test_without_a_system_bus_nothing_changes_and_nothing_is_said(remote, machines):
    a = machines("a")  # conftest points DBUS_SYSTEM_BUS_ADDRESS at nothing
    with open(os.path.join(a.path, "note.txt"), "w") as f:
        f.write("still synced\n")
    wait_until(lambda: remote.files().get(b"note.txt") == b"still synced\n", 30,
               what="the change pushed")
    a.stop()
    lines = [line for line in a.logtext().splitlines() if "autosync.wakeup[" in line]
    assert len(lines) <= 1 and all(" DEBUG " in line for line in lines), lines
