"""autosync-desktop end to end on a real private D-Bus session bus.

The committer is played by the real protocol.Server publishing made-up
events; the notification service is a Recorder on the test bus.
"""
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from autosync.desktop.describer import Describer
from autosync.desktop.notifier import DBusNotifications, Desktop
from autosync.core.summary import Summariser
from base import ROOT, git, wait_until
from helpers import commits_made, log_of, subject
from dbus_session import Recorder, bus  # noqa: F401 (a fixture)
from fakes import FakeCommitter

SETTLE = 0.3  # quick bursts, so the suite stays fast


@pytest.fixture
def recorder(bus):
    with Recorder(bus.address) as rec:
        yield rec


@pytest.fixture
def committer(tmp_path):
    fake = FakeCommitter(str(tmp_path / "run" / "committer.sock"))
    yield fake
    fake.close()


@pytest.fixture
def desktop(committer):
    """desktop(level) -> a running Desktop subscribed to the fake committer."""
    running = []

    def start(level="normal", describer=None):
        d = Desktop(committer.path, Summariser(level, min_interval=1.0, settle=SETTLE,
                                               folder="notes", describe=bool(describer)),
                    DBusNotifications(), describer)
        thread = threading.Thread(target=d.run, daemon=True)
        thread.start()
        running.append((d, thread))
        committer.wait_subscribed()
        return d

    yield start
    for d, thread in running:
        d.stop()
        thread.join(5)
        assert not thread.is_alive()


def commit_burst(committer, n=12):
    for i in range(n):
        committer.emit("committed", message="m", count=1, host="desk",
                       changes=[{"action": "added", "path": "f%02d.txt" % i}])


def test_a_burst_of_commits_makes_exactly_one_notification(recorder, committer, desktop):
    desktop()
    commit_burst(committer)
    [call] = recorder.wait_for(1)
    assert recorder.settled(3 * SETTLE) == [call]
    assert call.app_name == "dvcs-autosync"
    assert call.summary == "notes: 12 files saved"
    assert call.body == "f00.txt, f01.txt, f02.txt and 9 more"
    assert call.urgency == 0


def test_commits_and_pulls_in_one_burst_make_one_summary(recorder, committer, desktop):
    desktop()
    commit_burst(committer, 8)
    for i in range(4):
        committer.emit("pulled", changed=True, count=3, host="laptop",
                       files=["l%d.txt" % i])
    [call] = recorder.wait_for(1)
    assert recorder.settled(3 * SETTLE) == [call]
    assert call.summary == "notes: 12 files from laptop, 8 saved here"
    assert call.urgency == 1


def test_failures_and_conflicts_are_always_notified(recorder, committer, desktop):
    desktop()
    commit_burst(committer, 3)
    committer.emit("failed", op="push", error="remote unreachable")
    committer.emit("conflict", path="a.txt", copy="a (conflict from laptop).txt",
                   host="laptop")
    calls = recorder.wait_for(3)
    assert [(c.summary, c.urgency) for c in calls] == [
        ("notes: Push failed", 1), ("notes: Conflict in a.txt", 2), ("notes: 3 files saved", 0)]
    assert calls[0].body == "remote unreachable"
    assert "a (conflict from laptop).txt" in calls[1].body


def test_quiet_level_notifies_only_errors(recorder, committer, desktop):
    desktop("quiet")
    commit_burst(committer)
    committer.emit("pulled", changed=True, count=2, host="laptop")
    committer.emit("failed", op="pull", error="no route to host")
    committer.emit("conflict", path="a.txt", copy="a (conflict).txt", host="laptop")
    recorder.wait_for(2)
    assert [c.summary for c in recorder.settled(3 * SETTLE)] == [
        "notes: Pull failed", "notes: Conflict in a.txt"]


def test_events_still_arrive_after_the_committer_restarts(recorder, committer, desktop):
    desktop("verbose")
    committer.close()
    committer.start()  # same socket path, as after a restart by the supervisor
    committer.wait_subscribed()
    committer.emit("failed", op="commit", error="disk full")
    assert recorder.wait_for(1)[0].summary == "notes: Commit failed"


def desktop_warnings(caplog):
    return [r for r in caplog.records
            if r.name == "autosync.desktop" and r.levelno == logging.WARNING]


def test_without_a_session_bus_one_warning_and_messages_go_to_the_log(
        committer, desktop, caplog, monkeypatch):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    caplog.set_level(logging.INFO, logger="autosync.desktop")
    d = desktop()
    committer.emit("failed", op="push", error="remote unreachable")
    committer.emit("conflict", path="a.txt", copy="a (conflict).txt", host="laptop")
    commit_burst(committer)
    wait_until(lambda: "12 files saved" in caplog.text, 10, what="the summary in the log")
    [warning] = desktop_warnings(caplog)
    assert "DBUS_SESSION_BUS_ADDRESS" in warning.getMessage()
    assert "Push failed" in caplog.text and "Conflict in a.txt" in caplog.text
    assert d.conn is not None  # still subscribed and consuming events


def test_a_bus_without_notification_service_gives_one_warning(bus, committer, desktop, caplog):
    caplog.set_level(logging.INFO, logger="autosync.desktop")
    desktop()
    committer.emit("failed", op="push", error="one")
    committer.emit("failed", op="pull", error="two")
    wait_until(lambda: "Pull failed" in caplog.text, 10, what="both failures in the log")
    [warning] = desktop_warnings(caplog)
    assert "org.freedesktop.Notifications" in warning.getMessage()


def test_a_dead_bus_address_gives_one_warning(committer, desktop, caplog, monkeypatch,
                                              tmp_path):
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=%s/nobody" % tmp_path)
    caplog.set_level(logging.INFO, logger="autosync.desktop")
    desktop()
    committer.emit("failed", op="push", error="one")
    committer.emit("failed", op="pull", error="two")
    wait_until(lambda: "Pull failed" in caplog.text, 10, what="both failures in the log")
    assert len(desktop_warnings(caplog)) == 1


# --- "Describe...": the notification action ------------------------------------


def test_describe_action_runs_describecmd_and_sends_its_output(recorder, committer, desktop,
                                                               tmp_path):
    desktop(describer=Describer("echo 'Holiday   photos'", str(tmp_path), committer.path))
    commit_burst(committer, 2)
    [saved] = recorder.wait_for(1)
    assert saved.actions == (("describe", "Describe..."),) and saved.sender
    committer.emit("pulled", changed=True, count=1, host="laptop", files=["l.txt"])
    committer.emit("failed", op="push", error="remote unreachable")
    calls = recorder.wait_for(3)
    assert all(c.actions == () for c in calls[1:])  # only our own changes are described
    recorder.invoke(2, "describe")  # not offered there: nothing runs
    recorder.invoke(1, "default")
    recorder.invoke(1, "describe")
    wait_until(lambda: any(m.get("cmd") == "describe" for _, m in committer.requests), 10,
               what="the describe request")
    time.sleep(0.3)
    assert [m for _, m in committer.requests if m.get("cmd") == "describe"] == [
        {"cmd": "describe", "text": "Holiday photos"}]


def test_without_describecmd_no_action_is_offered(recorder, committer, desktop):
    desktop()
    commit_burst(committer, 2)
    assert recorder.wait_for(1)[0].actions == ()


def test_a_cancelled_dialog_describes_nothing(recorder, committer, desktop, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="autosync.describe")
    desktop(describer=Describer("false", str(tmp_path), committer.path))
    commit_burst(committer, 1)
    recorder.wait_for(1)
    recorder.invoke(1, "describe")
    wait_until(lambda: "no description" in caplog.text, 10, what="the log line")
    assert not [m for _, m in committer.requests if m.get("cmd") == "describe"]


def test_the_describe_action_end_to_end_rewords_the_commit(recorder, machines):
    a = machines("a", notifymethod="desktop", notifylevel="verbose", pushdelay="60",
                 describecmd="echo Holiday photos")
    with open(os.path.join(a.path, "beach.jpg"), "w") as f:
        f.write("sand\n")
    commits_made(a, 1)
    [saved] = recorder.wait_for(1)
    assert saved.summary == "a: 1 file saved" and saved.actions
    recorder.invoke(1, "describe")
    wait_until(lambda: subject(a.path).startswith("Holiday photos (autosync on "), 20,
               what="the commit to be reworded")
    assert git("show", "--name-only", "--format=", "HEAD", cwd=a.path).split() == [b"beach.jpg"]


def test_describe_after_the_push_lands_on_that_commit_on_both_machines(recorder, machines,
                                                                       remote):
    """At the shipped pushdelay = 0 the commit is pushed before the user answers: the
    text goes on that very commit as a note that travels with it (never the next, an
    unrelated one), `dvcs-autosync log` shows it on both machines, and a notification
    says which change got it."""
    a = machines("a", notifymethod="desktop", notifylevel="verbose",
                 describecmd="echo Holiday photos")
    b = machines("b")
    with open(os.path.join(a.path, "beach.jpg"), "w") as f:
        f.write("sand\n")
    [saved] = recorder.wait_for(1)
    assert saved.summary == "a: 1 file saved" and saved.actions
    rev = git("rev-parse", "HEAD", cwd=a.path).strip().decode()
    wait_until(lambda: git("--git-dir", remote.path, "rev-parse", "main").strip().decode()
               == rev, 20, what="the push")
    # Another change is made and pushed before the user answers the first notification.
    with open(os.path.join(a.path, "later.txt"), "w") as f:
        f.write("unrelated\n")
    recorder.wait_for(2)
    a.notify("sync")
    recorder.invoke(1, "describe")
    calls = wait_until(lambda: [c for c in recorder.calls if "Description saved" in c.summary],
                       20, what="the confirmation")
    body = calls[0].body
    assert body.startswith("\u201cHoliday photos\u201d is on the change %s: autosync on "
                           % rev[:12]) and body.endswith(": 1 added."), body
    assert "Holiday photos" not in git("log", "--format=%B", cwd=a.path).decode()  # no rewrite
    b.notify("pull")
    for m in (a, b):
        one = log_of(m, os.path.join(m.path, "beach.jpg"))
        assert "added  -- Holiday photos" in one, one
        assert "Holiday photos" not in log_of(m, os.path.join(m.path, "later.txt"))
    assert git("--git-dir", remote.path, "notes", "--ref=autosync", "show", rev) == \
        b"Holiday photos\n"


# --- the launcher, as the supervisor runs it -----------------------------------


def launch(tmp_path, committer):
    folder = tmp_path / "notes"
    folder.mkdir()
    git("init", "-q", str(folder))
    config = tmp_path / "notes.autosync"
    lines = ["[autosync]", "path = %s" % folder, "socket = %s" % committer.path,
             "syncmethod = none", "notifymethod = desktop"]
    config.write_text("\n".join(lines) + "\n")
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "bin", "autosync-desktop"),
                             str(config)], stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))


def test_the_launcher_notifies_and_stops_cleanly_on_sigterm(recorder, committer, tmp_path):
    proc = launch(tmp_path, committer)
    try:
        committer.wait_subscribed()
        committer.emit("conflict", path="a.txt", copy="a (conflict).txt", host="laptop")
        assert recorder.wait_for(1)[0].summary == "notes: Conflict in a.txt"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        proc.stderr.close()


def test_the_launcher_without_a_bus_warns_once_and_keeps_running(committer, tmp_path):
    proc = launch(tmp_path, committer)
    committer.wait_subscribed()
    committer.emit("failed", op="push", error="remote unreachable")
    committer.emit("conflict", path="a.txt", copy="a (conflict).txt", host="laptop")
    time.sleep(0.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(5) == 0
    err = proc.stderr.read()
    proc.stderr.close()
    warnings = [line for line in err.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, err
    assert "no desktop notifications" in warnings[0]
    assert "Push failed" in err and "Conflict in a.txt" in err
