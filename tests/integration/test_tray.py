"""autosync-tray on a real private D-Bus session bus.

A WatcherRecorder stands in for the StatusNotifierWatcher (the desktop's
tray); the tests read the item's properties and click its menu as a tray
host would, over the bus. The committer is the FakeCommitter (real socket,
canned answers: pause/resume/describe are not in the committer yet) or, end
to end, a real Machine.
"""
import logging
import os
import signal
import stat
import threading
import time

import pytest

from autosync.core import config
from autosync.desktop import sni, tray
from base import wait_until
from dbus_session import Host, WatcherRecorder, bus  # noqa: F401 (a fixture)
from fakes import FakeCommitter
from fakes import config as fake_config


@pytest.fixture
def watcher(bus):
    with WatcherRecorder(bus.address) as rec:
        yield rec


@pytest.fixture
def committer(tmp_path):
    fake = FakeCommitter(str(tmp_path / "run" / "committer.sock"))
    fake.answers["status"] = {"ok": True, "status": {"state": "idle", "unpushed": 0,
                                                     "paused": None, "conflicts": []}}
    yield fake
    fake.close()


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "notes"
    path.mkdir()
    return str(path)


@pytest.fixture
def run_tray():
    """run_tray(cfg, describecmd) -> a Tray running in a thread; stopped afterwards."""
    running = []

    def start(cfg, describecmd=None):
        t = tray.Tray(cfg, describecmd)
        thread = threading.Thread(target=t.run, daemon=True)
        thread.start()
        running.append((t, thread))
        return t

    yield start
    for t, thread in running:
        t.stop()
        thread.join(10)
        assert not thread.is_alive()


@pytest.fixture
def host(bus, watcher):
    """host() -> a Host for the item that registered with the watcher."""
    made = []

    def connect(count=1):
        service = watcher.wait_for(count)[-1][1]
        made.append(Host(bus.address, service))
        return made[-1]

    yield connect
    for h in made:
        h.close()


def test_item_registers_and_shows_idle(committer, folder, watcher, host, run_tray):
    run_tray(fake_config(folder, socket=committer.path))
    h = host()
    assert h.service.startswith("org.kde.StatusNotifierItem-")
    props = h.props()
    assert props["Id"] == "dvcs-autosync" and props["Category"] == "ApplicationStatus"
    assert props["Title"] == "dvcs-autosync: notes"
    assert props["ItemIsMenu"] is True and props["Menu"] == "/MenuBar"
    wait_until(lambda: h.get("Status") == "Passive", 10, what="idle after the status")
    assert h.get("IconName") == "emblem-default"
    icon, pixmaps, title, text = h.get("ToolTip")
    assert text.startswith("Everything is synced\n") and "Conflict copies: 0" in text
    labels, _ = h.menu()
    for label in ("Sync now", "Pause syncing", "Recent changes", "Open folder", "none yet"):
        assert label in labels
    assert committer.asked("status")  # asked once subscribed, no polling after
    time.sleep(0.5)
    assert len(committer.asked("status")) == 1


def test_pause_and_resume_follow_the_committer(committer, folder, watcher, host, run_tray):
    run_tray(fake_config(folder, socket=committer.path))
    h = host()
    committer.wait_subscribed()
    labels, revision = h.menu()
    h.click(labels["Pause syncing"])
    wait_until(lambda: committer.asked("pause"), 10, what="a pause request")
    assert committer.asked("pause") == [{"cmd": "pause"}]
    # The label follows what the committer says, not the click.
    assert "Pause syncing" in h.menu()[0]
    committer.emit("paused", since=time.time(), until=None)
    wait_until(lambda: "Resume syncing" in h.menu()[0], 10, what="the resume label")
    assert watcher.wait_signal("LayoutUpdated")
    labels, newer = h.menu()
    assert newer > revision
    assert "Paused until resumed" in labels
    assert h.get("IconName") == "media-playback-pause" and h.get("Status") == "Active"
    assert watcher.wait_signal("NewStatus")[-1] == ("Active",)
    assert watcher.wait_signal("NewIcon")
    h.click(labels["Resume syncing"])
    wait_until(lambda: committer.asked("resume"), 10, what="a resume request")
    committer.emit("resumed")
    wait_until(lambda: "Pause syncing" in h.menu()[0], 10, what="the pause label back")
    wait_until(lambda: h.get("Status") == "Passive", 10, what="idle again")


def test_states_follow_the_events(committer, folder, watcher, host, run_tray):
    run_tray(fake_config(folder, socket=committer.path))
    h = host()
    committer.wait_subscribed()

    def shows(icon, status, words):
        wait_until(lambda: h.get("IconName") == icon, 10, what=icon)
        assert h.get("Status") == status
        assert h.get("ToolTip")[3].split("\n")[0].startswith(words)

    committer.emit("committed", message="autosync on desk: 1 added\n\nadded: a.txt",
                   changes=[{"action": "added", "path": "a.txt"}], count=1, host="desk")
    shows("emblem-synchronizing", "Active", "Syncing")
    committer.emit("failed", op="push", error="remote unreachable")
    shows("network-offline", "Active", "Offline: push: remote unreachable")
    committer.emit("pushed", url="/srv/sync.git", source="committer")
    shows("emblem-default", "Passive", "Everything is synced")
    tip = h.get("ToolTip")[3]
    assert "desk: 1 added" in tip and "Last push: none" not in tip
    assert "desk: 1 added" in " ".join(h.menu()[0])  # in Recent changes
    copy = "a (conflict from laptop 2026-12-03 101502).txt"
    open(os.path.join(folder, copy), "w").close()
    committer.emit("conflict", path="a.txt", copy=copy, host="laptop")
    shows("dialog-warning", "NeedsAttention", "1 conflict copy to look at")
    assert "Conflict copies: 1" in h.get("ToolTip")[3]
    committer.emit("failed", op="commit", error="disk full")
    shows("dialog-error", "NeedsAttention", "Error: commit: disk full")
    os.unlink(os.path.join(folder, copy))  # settled; the daemon commits it
    committer.emit("committed", message="autosync on desk: 1 removed",
                   changes=[{"action": "removed", "path": copy}], count=1, host="desk")
    committer.emit("pushed", url="/srv/sync.git", source="committer")
    shows("emblem-default", "Passive", "Everything is synced")
    committer.emit("pull-started")
    shows("emblem-synchronizing", "Active", "Syncing")
    committer.emit("pull-finished", ok=True)
    shows("emblem-default", "Passive", "Everything is synced")


def test_it_follows_a_restarted_committer(committer, folder, watcher, host, run_tray):
    run_tray(fake_config(folder, socket=committer.path))
    h = host()
    committer.wait_subscribed()
    committer.emit("stopping")
    wait_until(lambda: h.get("IconName") == "network-offline", 10, what="offline")
    committer.close()
    again = FakeCommitter(committer.path)
    try:
        again.answers["status"] = {"ok": True, "status": {
            "state": "idle", "paused": {"since": time.time(), "until": None}}}
        again.wait_subscribed()
        wait_until(lambda: h.get("IconName") == "media-playback-pause", 10,
                   what="the paused state from the new committer's status")
    finally:
        again.close()


def test_without_the_daemon_it_says_not_syncing(tmp_path, folder, watcher, host, run_tray):
    """Started before the daemon, and after a daemon that died without a word: never
    "Everything is synced" while nothing syncs."""
    path = str(tmp_path / "run" / "committer.sock")
    run_tray(fake_config(folder, socket=path))
    h = host()
    wait_until(lambda: "no connection to the daemon" in h.get("ToolTip")[3], 10,
               what="the failed connection shown")
    assert h.get("IconName") == "network-offline" and h.get("Status") == "Active"
    assert h.get("ToolTip")[3].startswith("Not syncing: no connection to the daemon (")
    fake = FakeCommitter(path)
    try:
        fake.answers["status"] = {"ok": True, "status": {"state": "idle"}}
        fake.wait_subscribed()
        wait_until(lambda: h.get("IconName") == "emblem-default", 10, what="idle once there")
        fake.close()  # no "stopping": as a crash
        wait_until(lambda: h.get("IconName") == "network-offline", 10, what="offline again")
        assert h.get("ToolTip")[3].startswith("Not syncing: no connection to the daemon (")
    finally:
        fake.close()


def test_a_watcher_that_appears_later_gets_the_item(bus, committer, folder, run_tray, caplog):
    caplog.set_level(logging.INFO, "autosync.tray")
    run_tray(fake_config(folder, socket=committer.path))
    wait_until(lambda: "no StatusNotifierWatcher" in caplog.text, 10, what="the warning")
    with WatcherRecorder(bus.address) as watcher:
        [(sender, service)] = watcher.wait_for(1)
        assert service.startswith("org.kde.StatusNotifierItem-")
        wait_until(lambda: "registered with the StatusNotifierWatcher" in caplog.text, 10)
    assert caplog.text.count("no StatusNotifierWatcher") == 1


def test_without_a_session_bus_it_says_so_once(committer, folder, run_tray, caplog,
                                               monkeypatch):
    monkeypatch.setattr(sni, "BUS_BACKOFF", (0.05, 0.1))
    caplog.set_level(logging.INFO, "autosync.tray")
    t = run_tray(fake_config(folder, socket=committer.path))
    wait_until(lambda: t.bus.backoff.failures >= 4, 10, what="a few tries")
    assert caplog.text.count("no D-Bus session bus") == 1
    committer.wait_subscribed()  # the events still come


def test_describe_and_open_folder(committer, folder, watcher, host, run_tray, tmp_path,
                                  monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opener = bin_dir / "xdg-open"
    opener.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$(dirname "$0")/opened"\n')
    opener.chmod(opener.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    run_tray(fake_config(folder, socket=committer.path), "printf 'the trip\\n photos\\n'")
    h = host()
    labels, _ = h.menu()
    h.click(labels["Describe the last change..."])
    wait_until(lambda: committer.asked("describe"), 10, what="a describe request")
    assert committer.asked("describe") == [{"cmd": "describe", "text": "the trip photos"}]
    h.click(labels["Open folder"])
    wait_until(lambda: (bin_dir / "opened").exists(), 10, what="xdg-open")
    assert (bin_dir / "opened").read_text() == folder + "\n"


def test_describe_names_the_last_change_the_menu_shows(committer, folder, watcher, host,
                                                        run_tray):
    """The text goes on the commit the tray calls the last change, even once it is
    pushed: the request names it (issue 19: it went on the next, unrelated commit)."""
    t = run_tray(fake_config(folder, socket=committer.path), "echo the trip photos")
    committer.wait_subscribed()
    committer.emit("committed", message="autosync on desk: 1 added", count=1, host="desk",
                   changes=[{"action": "added", "path": "a.jpg"}], rev="ab12" * 10)
    wait_until(lambda: (t.view.last_commit or {}).get("rev"), 10, what="the commit seen")
    h = host()
    labels, _ = h.menu()
    h.click(labels["Describe the last change..."])
    wait_until(lambda: committer.asked("describe"), 10, what="a describe request")
    assert committer.asked("describe") == [{"cmd": "describe", "text": "the trip photos",
                                            "rev": "ab12" * 10}]


def test_describe_is_off_without_a_command(committer, folder, watcher, host, run_tray):
    run_tray(fake_config(folder, socket=committer.path))
    _, _, root = host().call(sni.MENU_PATH, sni.MENU, "GetLayout", "iias", (0, -1, []))[1]
    enabled = {c[1]["label"][1]: c[1].get("enabled", ("b", True))[1] for _, c in root}
    assert enabled["Describe the last change..."] is False and enabled["Sync now"] is True


@pytest.mark.e2e
def test_sync_now_syncs_a_real_machines_change(machines, remote, watcher, host, run_tray):
    # The watcher alone would wait 30 s: only Sync now commits within the test's wait.
    m = machines("a", readfrequency="30", maxwait="60")
    run_tray(config.load(m.config))
    h = host()
    wait_until(lambda: h.get("Status") == "Passive", 20, what="idle")
    with open(os.path.join(m.path, "trip.txt"), "w") as f:
        f.write("photos\n")
    count = remote.commit_count()
    h.click(h.menu()[0]["Sync now"])
    wait_until(lambda: remote.commit_count() == count + 1, 15, what="the change pushed")
    assert remote.files()[b"trip.txt"] == b"photos\n"
    wait_until(lambda: h.get("ToolTip")[3].startswith("Everything is synced\nLast change: "),
               10, what="the commit and push shown")
    tip = h.get("ToolTip")[3]
    assert "1 added" in tip and "Last push: " in tip and h.get("Status") == "Passive"
    assert any("1 added" in label for label in h.menu()[0])


@pytest.mark.e2e
def test_the_supervisor_starts_the_tray_when_asked(machines, watcher):
    m = machines("a", tray="yes")
    [(sender, service)] = watcher.wait_for(1, timeout=20)
    assert "tray" in m.children()


def test_open_history_opens_the_page_of_this_folder(committer, folder, watcher, host,
                                                    run_tray, tmp_path, monkeypatch):
    from autosync.core import webpage
    conf = tmp_path / "notes.autosync"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\nsocket = %s\n"
                    % (folder, committer.path))
    opener = tmp_path / "browser.sh"
    opener.write_text('#!/bin/sh\nprintf "%s" "$1" > "$0.url"\n')
    opener.chmod(opener.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("BROWSER", str(opener))
    run_tray(fake_config(folder, socket=committer.path, file=str(conf)))
    h = host()
    labels, _ = h.menu()
    h.click(labels["Open history"])
    url = tmp_path / "browser.sh.url"
    try:
        wait_until(url.exists, 30, what="the browser to be given the page")
        page = webpage.read_address()
        assert url.read_text().startswith("http://127.0.0.1:%d/?ticket=" % page["port"])
    finally:
        page = webpage.read_address()
        if page:
            os.kill(page["pid"], signal.SIGTERM)
