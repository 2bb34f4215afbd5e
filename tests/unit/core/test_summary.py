"""The Summariser: events in, few messages out. A fake clock: `now` is passed in."""
import pytest

from autosync.core.summary import CRITICAL, LOW, NORMAL, Message, Summariser


def committed(*paths, count=None, host="desk"):
    changes = [{"action": "modified", "path": p} for p in paths]
    return {"event": "committed", "changes": changes,
            "count": len(paths) if count is None else count, "host": host}


def pulled(*paths, count=None, host="laptop", **more):
    event = {"event": "pulled", "changed": True, "files": list(paths),
             "count": len(paths) if count is None else count, "host": host}
    event.update(more)
    return event


FAILED = {"event": "failed", "op": "push", "error": "remote unreachable"}
CONFLICT = {"event": "conflict", "path": "notes.txt",
            "copy": "notes (conflict from laptop 2024-05-01 10.00).txt", "host": "laptop"}


def feed_all(s, events, start=0.0, step=0.1):
    """Feed events `step` seconds apart; every message returned on the way."""
    out = []
    for i, event in enumerate(events):
        out += s.feed(event, start + i * step)
    return out


def test_a_burst_of_commits_is_one_summary_after_it_settles():
    s = Summariser("normal", min_interval=60, settle=2)
    names = ["%s.txt" % c for c in "abcdefghijkl"]
    assert feed_all(s, [committed(n) for n in names]) == []  # nothing while the burst goes on
    assert s.due(2.0) == []  # the last event came at 1.1 s: not settled yet
    assert s.next_due() == pytest.approx(3.1)
    [m] = s.due(3.1)
    assert m.title == "12 files saved"
    assert m.body == "a.txt, b.txt, c.txt and 9 more"
    assert m.urgency == LOW
    assert s.due(100) == []  # told once


def test_pulled_changes_name_the_machine_they_came_from():
    s = Summariser("normal", settle=1, folder="notes")
    feed_all(s, [pulled("a.txt", "b.txt", count=7), pulled("c.txt", count=5)])
    [m] = s.due(5)
    assert m.title == "notes: 12 files from laptop"
    assert m.body == "a.txt, b.txt, c.txt and 9 more"
    assert m.urgency == NORMAL


def test_local_and_pulled_changes_in_one_burst_make_one_message():
    s = Summariser("normal", settle=1)
    feed_all(s, [committed("mine.txt"), pulled("theirs.txt", host="laptop"),
                 pulled("other.txt", host="tower")])
    [m] = s.due(5)
    assert m.title == "2 files from laptop and tower, 1 saved here"
    assert m.body == "From laptop and tower: theirs.txt and other.txt\nSaved here: mine.txt"


def test_a_file_saved_twice_counts_once():
    s = Summariser("normal", settle=1)
    feed_all(s, [committed("a.txt"), committed("a.txt"), committed("b.txt")])
    assert s.due(5)[0].title == "2 files saved"


def test_a_cut_change_list_still_counts_every_change():
    s = Summariser("normal", settle=1)
    s.feed(committed("a.txt", "b.txt", count=10000), 0)
    [m] = s.due(5)
    assert m.title == "10000 files saved"
    assert m.body == "a.txt, b.txt and 9998 more"


def test_one_file_and_two_files_read_naturally():
    s = Summariser("normal", settle=1)
    s.feed(committed("a.txt"), 0)
    assert s.due(5) == [Message("1 file saved", "a.txt", LOW)]
    s = Summariser("normal", settle=1)
    s.feed(committed("a.txt", "b.txt"), 0)
    assert s.due(5)[0].body == "a.txt and b.txt"


def test_a_pull_that_changed_nothing_is_no_news():
    s = Summariser("verbose")
    assert s.feed({"event": "pulled", "changed": False, "count": 0}, 0) == []
    assert s.feed({"event": "pulled"}, 1) == []  # says nothing about changes: stay quiet
    assert s.next_due() is None


def test_a_pull_that_changed_something_unknown_is_still_told():
    s = Summariser("verbose")
    [m] = s.feed({"event": "pulled", "changed": True}, 0)
    assert m.title == "Changes pulled"
    [m] = s.feed({"event": "pulled", "changed": True, "host": "laptop"}, 1)
    assert m.title == "Changes from laptop"


def test_failures_and_conflicts_are_told_at_once_even_mid_burst():
    s = Summariser("normal", settle=2)
    s.feed(committed("a.txt"), 0)
    [f] = s.feed(FAILED, 0.5)
    assert (f.title, f.body, f.urgency) == ("Push failed", "remote unreachable", NORMAL)
    [c] = s.feed(CONFLICT, 0.6)
    assert c.title == "Conflict in notes.txt"
    assert "notes (conflict from laptop 2024-05-01 10.00).txt" in c.body
    assert "laptop" in c.body
    assert c.urgency == CRITICAL
    assert s.due(2.5)[0].title == "1 file saved"  # the burst is still told, once


def test_quiet_tells_only_failures_and_conflicts():
    s = Summariser("quiet", min_interval=0, settle=0)
    out = feed_all(s, [committed("a.txt"), pulled("b.txt"), FAILED, CONFLICT])
    assert [m.title for m in out] == ["Push failed", "Conflict in notes.txt"]
    assert s.due(100) == [] and s.flush(100) == []


def test_verbose_tells_every_commit_and_pull_at_once():
    s = Summariser("verbose")
    out = feed_all(s, [committed("a.txt"), committed("b.txt", "c.txt"), pulled("d.txt")])
    assert [m.title for m in out] == ["1 file saved", "2 files saved", "1 file from laptop"]
    assert s.due(100) == []


def test_summaries_come_at_most_once_per_min_interval():
    s = Summariser("normal", min_interval=30, settle=1)
    s.feed(committed("a.txt"), 0)
    assert len(s.due(1)) == 1  # first one: as soon as the burst settles
    s.feed(committed("b.txt"), 5)
    s.feed(committed("c.txt"), 20)
    assert s.due(25) == []  # settled, but only 24 s since the last summary
    assert s.next_due() == pytest.approx(31)
    [m] = s.due(31)
    assert m.title == "2 files saved"  # the rest merged into the next one


def test_non_stop_activity_is_still_summarised_every_min_interval():
    s = Summariser("normal", min_interval=10, settle=2)
    told = []
    for tick in range(0, 310):  # a save every 0.1 s for 31 s: never settles
        now = tick / 10
        s.feed(committed("f%d" % tick), now)
        told += s.due(now)
    assert len(told) == 3  # at 10, 20.1 and 30.2 s


def test_the_same_failure_again_is_not_repeated_until_it_recovers():
    s = Summariser("normal", repeat_after=600)
    assert len(s.feed(FAILED, 0)) == 1
    assert s.feed(FAILED, 10) == []  # every retry fails the same way
    assert len(s.feed(dict(FAILED, error="auth failed"), 20)) == 1  # a new reason is news
    s.feed({"event": "pushed", "url": "x", "source": "committer"}, 30)  # it works again
    assert len(s.feed(dict(FAILED, error="auth failed"), 40)) == 1
    assert len(s.feed(dict(FAILED, error="auth failed"), 700)) == 1  # a reminder, much later


def test_stopping_tells_what_waits_at_once():
    s = Summariser("normal", min_interval=60, settle=5)
    s.feed(committed("a.txt"), 0)
    [m] = s.feed({"event": "stopping"}, 0.1)
    assert m.title == "1 file saved"


def test_unknown_and_malformed_events_are_ignored():
    s = Summariser("verbose")
    assert s.feed({"event": "pull-started"}, 0) == []
    assert s.feed({"event": "something-new", "x": 1}, 0) == []
    assert s.feed({}, 0) == []
    [m] = s.feed({"event": "committed", "changes": [None, 3, {"path": "ok.txt"}], "count": "x"}, 0)
    assert m.title == "1 file saved"
    [m] = s.feed({"event": "failed"}, 0)
    assert m.title == "Sync failed"


def test_the_folder_name_tells_several_folders_apart():
    work = Summariser("quiet", folder="work")
    [m] = work.feed(FAILED, 0)
    assert m.title == "work: Push failed"
    assert m.text() == "work: Push failed\nremote unreachable"


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="quiet, normal, verbose"):
        Summariser("chatty")


@pytest.mark.parametrize("level", ["quiet", "normal", "verbose"])
def test_a_mass_delete_is_told_at_every_level_with_its_undo(level):
    s = Summariser(level)
    restore = "dvcs-autosync restore photos --at @1764800000"
    messages = s.feed({"event": "mass-delete", "count": 24, "total": 41, "restore": restore}, 0)
    assert len(messages) == 1
    assert messages[0].urgency == CRITICAL
    assert "24 files removed" in messages[0].title and restore in messages[0].body


def test_a_pause_and_its_end_are_told_once_each_but_not_when_quiet():
    s = Summariser("normal", folder="notes")
    [paused] = s.feed({"event": "paused", "since": 1.0, "until": None}, 0.0)
    assert paused.title == "notes: Paused" and "dvcs-autosync resume" in paused.body
    [until] = s.feed({"event": "paused", "since": 1.0, "until": 1700000000}, 0.0)
    assert "starts again at 20" in until.body
    [resumed] = s.feed({"event": "resumed"}, 0.0)
    assert resumed.title == "notes: Syncing again" and resumed.urgency == LOW
    quiet = Summariser("quiet")
    assert quiet.feed({"event": "paused", "since": 1.0, "until": None}, 0.0) == []
    assert quiet.feed({"event": "resumed"}, 0.0) == []


def test_describe_is_offered_for_changes_made_here_only():
    s = Summariser("verbose", describe=True)
    [here] = s.feed(committed("a.txt"), 0.0)
    assert here.actions == (("describe", "Describe..."),)
    [there] = s.feed(pulled("b.txt"), 1.0)
    assert there.actions == ()
    assert s.feed(FAILED, 2.0)[0].actions == ()
    assert Summariser("verbose").feed(committed("a.txt"), 0.0)[0].actions == ()


def test_a_failure_and_its_end_are_each_told_once():
    s = Summariser("normal", repeat_after=600)
    assert len(s.feed(FAILED, 0)) == 1
    assert s.feed(FAILED, 10) == []
    [m] = s.feed({"event": "recovered", "op": FAILED["op"]}, 20)
    assert "works again" in m.title
    assert s.feed({"event": "recovered", "op": FAILED["op"]}, 30) == []  # nothing was told
    assert len(s.feed(FAILED, 40)) == 1  # failing again is news again


HOSTILE = "\033]0;owned\007\u009b2J.txt"
QUOTED = '"\\033]0;owned\\a\\302\\2332J.txt"'


def test_names_and_other_machines_words_reach_no_notification_raw():
    s = Summariser("verbose")
    [changed] = s.feed(pulled(HOSTILE, host="lap\033[31mtop"), 0)
    [conflict] = s.feed(dict(CONFLICT, path=HOSTILE, copy=HOSTILE), 1)
    [failed] = s.feed({"event": "failed", "op": "pull", "error": "hg: %s: abort" % HOSTILE}, 2)
    for m in (changed, conflict, failed):
        assert m.title.isprintable() and all(line.isprintable() for line in m.body.split("\n"))
    assert changed.body == QUOTED and changed.title == "1 file from lap\\033[31mtop"
    assert conflict.title == "Conflict in " + QUOTED and QUOTED + " (from" in conflict.body
    assert failed.body == "hg: \\033]0;owned\\a\\302\\2332J.txt: abort"
