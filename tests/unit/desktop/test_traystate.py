"""traystate.View: the committer's status and events -> what the tray shows."""
import time

import pytest

from autosync.vcs.history import Version
from autosync.desktop import traystate
from autosync.desktop.traystate import LOOKS, View, summary

NOW = time.time()


@pytest.fixture
def view(tmp_path):
    v = View(str(tmp_path / "notes"))
    (tmp_path / "notes").mkdir()
    v.status({"state": "idle", "unpushed": 0, "paused": None, "conflicts": []})
    return v


def test_every_state_has_an_icon_and_a_status():
    assert set(LOOKS) == {"idle", "syncing", "paused", "offline", "conflict", "error"}
    assert {status for _, status in LOOKS.values()} == {"Active", "Passive", "NeedsAttention"}


def test_before_the_first_status_and_after_a_lost_connection_it_does_not_say_synced(tmp_path):
    fresh = View(str(tmp_path))
    assert fresh.name() == "offline" and fresh.headline() == "Not syncing: waiting for the daemon"
    fresh.status({"state": "idle"})
    assert fresh.name() == "idle" and fresh.headline() == "Everything is synced"
    fresh.lost("the committer closed the connection")  # a crash: no "stopping" came
    assert fresh.name() == "offline"
    assert fresh.headline() == ("Not syncing: no connection to the daemon "
                                "(the committer closed the connection)")
    fresh.status({"state": "idle"})  # subscribed again
    assert fresh.name() == "idle"


def test_summary_reads_the_daemons_subject_and_keeps_others():
    assert summary("autosync on laptop: 2 added, 1 moved\n\nadded: a") == "laptop: 2 added, 1 moved"
    assert summary("fixed the index by hand") == "fixed the index by hand"
    # A described commit (messages.split_subject): its summary, not the raw subject.
    assert summary("Holiday photos (autosync on laptop: 1 added)\n\nadded: a") == \
        "laptop: 1 added"


STATES = [
    ({"state": "idle"}, "idle", "Everything is synced"),
    ({"state": "pulling"}, "syncing", "Syncing"),
    ({"state": "committing"}, "idle", "Everything is synced"),  # no event ends it: not shown
    ({"unpushed": 2}, "syncing", "Syncing"),
    ({"last_pull": {"time": NOW, "ok": False}}, "offline", "Offline: the last pull failed"),
    ({"last_error": "push: remote away"}, "offline", "Offline: push: remote away"),
    ({"last_error": "commit: disk full"}, "error", "Error: commit: disk full"),
    ({"link": "down"}, "offline", "Offline: no XMPP link"),
    ({"link": "up"}, "idle", "Everything is synced"),
    ({"link": None}, "idle", "Everything is synced"),  # syncmethod none: no link to miss
    # the original's syncmethod = none: its commits stay here, never "syncing" for them
    ({"link": None, "localonly": True, "unpushed": 3}, "idle", "History kept here only"),
    ({"paused": {"since": NOW, "until": None}}, "paused", "Paused until resumed"),
    ({"paused": {"since": NOW, "until": NOW + 3600}, "last_error": "pull: x"}, "paused",
     # (the date too when the hour crosses midnight: traystate.clock, tested below; so
     # the words are made when the test runs, not when it was collected before midnight)
     lambda: "Paused until %s" % traystate.clock(NOW + 3600)),
]


# ids without the words: one holds the time, and every pytest-xdist worker must collect
# the same names (a worker importing this a minute later would not)
@pytest.mark.parametrize("status, state, words", STATES,
                         ids=["%d-%s" % (i, case[1]) for i, case in enumerate(STATES)])
def test_a_status_says_the_state(view, status, state, words):
    view.status(status)
    if callable(words):  # said as of now: the words before and after, one of them
        before, headline, after = words(), view.headline(), words()
        assert view.name() == state
        assert headline.startswith(before) or headline.startswith(after), (headline, before)
        return
    assert (view.name(), view.headline()[:len(words)]) == (state, words)


def test_conflict_copies_count_while_they_are_in_the_folder(view):
    copy = "a (conflict from laptop 2026-12-03 101502).txt"
    view.event({"event": "conflict", "path": "a.txt", "copy": copy, "time": NOW})
    assert view.name() == "idle"  # not in the folder: nothing to look at
    open(view.folder + "/" + copy, "w").close()
    view.event({"event": "conflict", "path": "a.txt", "copy": copy, "time": NOW})
    pulled = "b (conflict from desk 2026-12-03 101502).md"
    open(view.folder + "/" + pulled, "w").close()
    view.event({"event": "pulled", "changed": True, "files": [pulled, "b.md"], "count": 2,
                "hosts": ["desk"], "time": NOW})
    assert (view.name(), view.headline()) == ("conflict", "2 conflict copies to look at")
    assert view.tooltip()[1].endswith("Conflict copies: 2")


def test_recent_changes_newest_first_log_then_events(view):
    view.history([Version("r2", NOW - 60, "t", "desk", "1 modified"),
                  Version("r1", NOW - 120, "t", "laptop", "3 added")])
    view.event({"event": "committed", "message": "autosync on vm: 1 removed", "changes": [],
                "count": 1, "host": "vm", "time": NOW - 30})
    view.event({"event": "pulled", "changed": True, "files": ["x"], "count": 1,
                "hosts": ["desk"], "time": NOW})
    view.event({"event": "pulled", "changed": False, "files": [], "count": 0, "time": NOW})
    assert [label.split("  ", 1)[1] for label in view.changes()] == [
        "desk: 1 file pulled", "vm: 1 removed", "desk: 1 modified", "laptop: 3 added"]
    for i in range(10):
        view.event({"event": "committed", "message": "autosync on vm: %d added" % i,
                    "changes": [], "count": i, "host": "vm", "time": NOW + i})
    assert len(view.changes()) == 5 and view.changes()[0].endswith("vm: 9 added")


def test_events_move_the_state(view):
    def after(name, **fields):
        view.event(dict(fields, event=name, time=NOW))
        return view.name()

    assert after("committed", message="autosync on vm: 1 added", changes=[], count=1) == "syncing"
    assert after("failed", op="push", error="no route") == "offline"
    assert after("pushed", url="u", source="notify") == "offline"  # someone else's push
    assert after("pushed", url="u", source="committer") == "idle"
    assert after("pull-started") == "syncing"
    assert after("pull-finished", ok=False) == "idle"
    assert after("failed", op="pull", error="no route") == "offline"
    assert after("pull-finished", ok=True) == "idle"
    assert after("paused", since=NOW, until=None) == "paused"
    assert after("failed", op="merge", error="x") == "error"
    assert after("committed", message="m", changes=[], count=1) == "paused"
    assert after("resumed") == "syncing"
    assert after("stopping") == "offline" and view.headline() == "Not syncing: the daemon stopped"
    view.lost("the committer closed the connection")  # (what follows a stop)
    assert view.headline() == "Not syncing: the daemon stopped"
    view.status({"state": "idle", "link": "up"})
    assert after("link", up=False) == "offline" and "no XMPP link" in view.headline()
    assert after("link", up=True) == "idle"
    view.status({"state": "idle"})
    assert view.name() == "idle"


def test_what_fails_now_decides_over_the_last_error(view):
    """A commit that failed once and works again is no error any more (last_error is
    kept until the next push); what fails now, by name, is shown."""
    view.status({"state": "idle", "last_error": "commit: no identity", "failing": {}})
    assert view.name() == "idle"
    view.status({"state": "idle", "failing": {"commit": "commit: Please tell me who you are"}})
    assert view.name() == "error" and "who you are" in view.headline()
    view.status({"state": "idle", "link": "down",
                 "failing": {"link": "link: login refused: not-authorized"}})
    assert view.name() == "offline" and "not-authorized" in view.headline()
    view.event({"event": "recovered", "op": "link"})
    view.event({"event": "link", "up": True})
    assert view.name() == "idle"


def test_a_failure_that_ends_clears_the_error(view):
    view.event({"event": "failed", "op": "commit", "error": "disk full"})
    assert view.name() == "error"
    view.event({"event": "recovered", "op": "commit"})
    assert view.name() == "idle"


def test_a_time_today_is_said_as_the_hour_and_another_day_with_its_date():
    noon = time.mktime(time.localtime()[:3] + (12, 0, 0, 0, 0, -1))
    tomorrow = noon + 86400
    assert traystate.clock(noon) == "12:00"
    assert traystate.clock(tomorrow) == time.strftime("%Y-%m-%d 12:00", time.localtime(tomorrow))


def test_a_long_step_is_said_in_the_tooltip_and_menu_while_it_runs(view):
    # a first sync of many files: the status' progress, then its events, until it ends
    since = time.mktime((2026, 1, 2, 10, 42, 5, 0, 0, -1))
    view.status({"state": "committing", "unpushed": 0, "progress": {
        "doing": "adding", "files": None, "done": None, "since": since}})
    assert view.name() == "syncing"
    title, text = view.tooltip()
    assert text.splitlines()[0] == view.headline() == \
        "Syncing: adding the folder's files to the history, since %s" % traystate.clock(since)
    view.event({"event": "progress", "time": NOW, "progress": {
        "doing": "writing", "files": 3000, "done": 1200, "since": since}})
    assert view.headline() == "Syncing: writing the pulled files: 1,200 of 3,000 (40%%), " \
                              "since %s" % traystate.clock(since)
    view.event({"event": "progress", "time": NOW, "progress": None})
    assert view.name() == "idle" and view.headline() == "Everything is synced"


def test_another_machines_words_reach_the_tray_quoted(view):
    hostile = "\033]0;owned\007\u009b2J"
    view.history([Version("r1", NOW - 120, "t", "lap" + hostile, "moved from " + hostile)])
    view.event({"event": "failed", "op": "commit", "error": "hg: %s: abort" % hostile})
    shown = view.changes() + [view.headline()] + list(view.tooltip())
    assert all(line.isprintable() for text in shown for line in text.split("\n"))
    assert view.headline() == "Error: commit: hg: \\033]0;owned\\a\\302\\2332J: abort"
    assert view.changes()[0].endswith("moved from \\033]0;owned\\a\\302\\2332J")
