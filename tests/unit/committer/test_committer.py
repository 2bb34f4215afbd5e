"""The committer's decisions, without a socket: requests, tickets, scheduling, status."""
import threading
import time

import pytest

from autosync.committer.committer import Committer
from autosync.committer.handover import Pending
from autosync.committer.requests import check_change
from base import wait_until
from fakes import FakeMonitor, FakeRepository, FakeServer, asked, config


def test_pending_keeps_one_entry_per_path_and_added_stays_added():
    p = Pending()
    p.add([{"action": "added", "path": "x"}])
    p.add([{"action": "modified", "path": "x"}, {"action": "removed", "path": "y"}])
    changes, rescan = p.take()
    assert changes == [{"action": "added", "path": "x"}, {"action": "removed", "path": "y"}]
    assert not rescan and not p
    p.add([], rescan=True)
    assert p and p.take() == ([], True)


@pytest.mark.parametrize("change", [
    "text", {"action": "burn", "path": "x"}, {"action": "added"}, {"action": "added", "path": ""},
    {"action": "added", "path": "/etc/passwd"}, {"action": "added", "path": "a/../../b"},
    {"action": "moved", "path": "x"}, {"action": "added", "path": "nul\0byte"},
])
def test_bad_changes_are_refused(change):
    with pytest.raises(ValueError):
        check_change(change)


def test_a_batch_is_queued_and_shown_pending(committer):
    reply = committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    assert reply == {"ok": True, "queued": 1}
    assert committer.handle({"cmd": "status"}, None)["status"]["pending"] == ["a"]
    assert not committer.handle({"cmd": "batch", "changes": "a"}, None)["ok"]
    assert not committer.handle({"cmd": "nonsense"}, None)["ok"]


def test_a_rescan_asked_for_is_in_the_status_until_the_commit_begins(committer):
    """Never "idle, nothing pending" between the watcher's request and the commit that
    answers it: a client that waits for that (a test before its burst, a script) would
    take a rescan not yet made for one made."""
    def ask():
        return committer.handle({"cmd": "status"}, None)["status"]
    assert ask()["rescan"] is False
    committer.handle({"cmd": "batch", "changes": [], "rescan": True, "reason": "start"}, None)
    status = ask()
    assert status["rescan"] is True and status["pending"] == []
    assert status["headline"] == "syncing"
    seen = []
    commit = committer.repo.commit
    committer.repo.commit = lambda *a, **k: (seen.append(ask()), commit(*a, **k))[1]
    committer.worker.step()
    assert [(s["state"], s["rescan"]) for s in seen] == [("committing", False)]
    assert committer.repo.calls[0] == ("commit", [], True)
    assert ask()["rescan"] is False and ask()["state"] == "idle"


def test_a_commit_is_pushed_when_due_and_announced(committer):
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()  # commits; the push is due at once (pushdelay 0)...
    assert committer.status["unpushed"] == 1
    committer.worker.step()  # ... and goes at the next step
    assert committer.status["unpushed"] == 0
    assert committer.repo.calls == [("commit", ["a"], False), "push"]
    pushed = committer.server.events("pushed")
    assert pushed and pushed[0]["url"] == "/srv/sync.git" and pushed[0]["source"] == "committer"
    assert committer.status["state"] == "idle"


def test_the_index_is_settled_after_the_push_not_before_it(committer):
    """quickcommit.py's lazy index step: the worker's next step after the push, never
    between a commit and its push that is due at once."""
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()  # commits; the push is due at once
    assert getattr(committer.repo, "settled", []) == []
    committer.worker.step()  # pushes, then settles
    assert committer.repo.calls == [("commit", ["a"], False), "push"]
    assert committer.repo.settled == [2]


def test_a_long_pushdelay_does_not_leave_the_index_unsettled(tmp_path):
    c = Committer(config(tmp_path, pushdelay=60.0, pullinterval=0.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    c.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    c.worker.step()
    assert c.repo.calls == [("commit", ["a"], False)] and c.repo.settled == [1]


def test_a_failed_push_waits_a_backoff_then_tries_again(committer):
    committer.repo.push_ok = False
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()
    before = time.monotonic()
    committer.worker.step()
    assert committer.status["unpushed"] == 1
    assert committer.status["last_error"] == "push: remote away"
    assert committer.schedule.push_at - before >= 2.0 * 0.8 - 0.1  # the first backoff, jittered
    assert committer.server.events("failed")[0]["op"] == "push"


SYNC = {"cmd": "sync", "timeout": 10}


def test_sync_waits_for_its_own_ticket_and_says_a_commit_left_something_out(committer):
    committer.repo.commit_error = "commit: left out of the commit, the rest is committed: x"
    assert asked(committer, SYNC, "sync") == {
        "ok": False, "committed": False, "pushed": True,
        "error": "commit: left out of the commit, the rest is committed: x"}


def test_timer_pulls_only_while_no_xmpp_link_says_when(tmp_path):
    c = Committer(config(tmp_path, pullinterval=0.01, syncmethod="xmpp"),
                  server=FakeServer, repository=FakeRepository)
    time.sleep(0.02)
    c.handle({"cmd": "link", "up": True}, None)
    assert not c.worker.has_work()
    c.handle({"cmd": "link", "up": False}, None)
    assert c.worker.has_work()
    c.worker.step()
    assert "pull" in c.repo.calls


def test_the_ssh_link_stands_for_pulls_as_xmpp_s_does(tmp_path):
    c = Committer(config(tmp_path, pullinterval=0.01, syncmethod="ssh"),
                  server=FakeServer, repository=FakeRepository)
    status = c.handle({"cmd": "status"}, None)["status"]
    assert (status["link"], status["syncmethod"]) == ("down", "ssh")
    time.sleep(0.02)
    c.handle({"cmd": "link", "up": True}, None)
    assert not c.worker.has_work()  # the remote says when: no pullinterval pulls
    c.handle({"cmd": "link", "up": False, "error": "Permission denied (publickey)."}, None)
    assert c.worker.has_work()
    status = c.handle({"cmd": "status"}, None)["status"]
    assert status["problems"][0]["name"] == "link"
    assert "log in to the server with ssh" in status["problems"][0]["fix"]


def test_while_the_xmpp_link_is_up_a_slow_safety_net_pull_runs(tmp_path):
    c = Committer(config(tmp_path, pullinterval=0.01, safetypull=0.2, syncmethod="xmpp"),
                  server=FakeServer, repository=FakeRepository)
    c.handle({"cmd": "link", "up": True}, None)
    time.sleep(0.05)
    assert not c.worker.has_work() and 0.0 < c.worker.sleep_time() <= 0.2  # pullinterval waits
    time.sleep(0.2)
    assert c.worker.has_work()
    c.worker.step()
    assert c.repo.calls == ["pull"] and not c.worker.has_work()  # the next one in safetypull
    off = Committer(config(tmp_path, pullinterval=0.0, safetypull=0.0, syncmethod="xmpp"),
                    server=FakeServer, repository=FakeRepository)
    off.handle({"cmd": "link", "up": True}, None)
    assert off.worker.sleep_time() is None


def test_a_failure_said_once_is_retried_quietly(committer):
    committer.reports.failed("commit", "x held back", retry="commit")
    committer.reports.failed("commit", "x held back", retry="commit", quiet=True)
    assert len(committer.server.events("failed")) == 1
    assert committer.schedule.backoff["commit"].failures == 2
    assert committer.schedule.retry_at["commit"] is not None
    with pytest.raises(ValueError):
        committer.status.state("confused")  # only the states the status documents


def test_a_sync_note_reaches_the_commit_and_bad_notes_are_refused(committer):
    reply = asked(committer, dict(SYNC, note="restored photos as it was at 2026-12-01 10:00"),
                  "sync")
    assert reply["ok"]
    assert committer.repo.notes == ["restored photos as it was at 2026-12-01 10:00"]
    for bad in ("two\nlines", "", 7, "x" * 301):
        assert not committer.handle({"cmd": "sync", "note": bad}, None)["ok"]


def test_a_sync_note_goes_on_the_batch_committed_in_the_same_step(committer):
    """A restore's writes (the watcher's batch) and its sync with the note arrive
    together: the one commit that holds them carries the note, and the sync says so."""
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a.txt"}]}, None)
    reply = asked(committer, dict(SYNC, note="restore of a.txt as it was"), "sync")
    assert committer.repo.notes == ["restore of a.txt as it was"]
    assert [c for c in committer.repo.calls if c[0] == "commit"][0] == ("commit", ["a.txt"], False)
    assert reply["ok"] and reply["committed"] is True


def test_only_a_push_of_something_new_is_announced(committer):
    committer.repo.pushed_new = False
    assert committer.worker.push(force=True) is True  # it worked, but took nothing new
    assert not committer.server.events("pushed")
    assert committer.status["last_push"]["url"] == "/srv/sync.git"


def test_every_request_event_and_state_is_described_in_the_protocol_document():
    import os
    from autosync.core.protocol import EVENTS, REQUESTS, RESCANS, STATES
    from base import ROOT
    with open(os.path.join(ROOT, "docs", "protocol.md")) as f:
        doc = f.read()
    for request in REQUESTS:
        assert '{"cmd": "%s"' % request in doc, request
    for event in EVENTS:
        assert "| `%s` |" % event in doc, event
    for reason in RESCANS:
        assert "`%s`" % reason in doc.split('says why in')[1], reason
    for state in STATES:
        assert "`%s`" % state in doc.split("### Status")[1].split("##")[0], state


def test_every_status_key_and_event_field_is_described_in_the_protocol_document(committer):
    """The document names every key a status answer has (the schema's fields, then
    what the committer adds) and, in each event's row, every field the code sends
    by name (fields passed on as a dict, `**notice`, are the rows' own business)."""
    import ast
    import glob
    import os
    from autosync.committer.status import FIELDS
    from base import ROOT
    with open(os.path.join(ROOT, "docs", "protocol.md")) as f:
        doc = f.read()
    status_text = doc.split("### Status")[1].split("\n## ")[0]
    keys = set(FIELDS) | set(committer.handle({"cmd": "status"}, None)["status"])
    missing = sorted(k for k in keys if "`%s`" % k not in status_text)
    assert not missing, "status keys not in docs/protocol.md: %s" % missing
    rows = {line.split("`")[1]: line for line in doc.splitlines() if line.startswith("| `")}
    sent = {}
    for path in glob.glob(os.path.join(ROOT, "autosync", "**", "*.py"), recursive=True):
        with open(path) as f:
            tree = ast.parse(f.read())
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                    and call.func.attr == "event" and call.args \
                    and isinstance(call.args[0], ast.Constant):
                sent.setdefault(call.args[0].value, set()).update(
                    k.arg for k in call.keywords if k.arg)
    assert {"committed", "pushed", "pull-finished", "described"} <= set(sent)
    missing = sorted((event, field) for event, fields in sent.items() for field in fields
                     if "`%s`" % field not in rows.get(event, ""))
    assert not missing, "event fields not in docs/protocol.md's table: %s" % missing


def test_the_request_table_is_the_protocol_s_list(committer):
    """Every request of protocol.REQUESTS has its handler, and no handler is unnamed
    there (subscribe is the server's own)."""
    from autosync.core.protocol import REQUESTS
    assert set(committer.requests.table) | {"subscribe"} == set(REQUESTS)


def test_the_status_has_one_schema_and_checks_the_state_s_changes(committer):
    with pytest.raises(KeyError, match="not a status field: unpushd"):
        committer.reports.status(unpushd=3)
    committer.status.state("committing")
    committer.status.state("idle")
    with pytest.raises(ValueError, match="from idle to starting"):
        committer.status.state("starting")  # only at first
    committer.status.state("stopped")
    with pytest.raises(ValueError, match="from stopped to idle"):
        committer.status.state("idle")  # nothing after the end
    assert committer.status["state"] == "stopped"


def test_a_rescan_s_reason_is_logged(committer, caplog):
    import logging
    from autosync.committer.requests import RESCAN_WHY
    from autosync.core.protocol import RESCANS
    assert set(RESCAN_WHY) == set(RESCANS)
    with caplog.at_level(logging.INFO, logger="autosync.committer"):
        committer.handle({"cmd": "batch", "changes": [], "rescan": True, "reason": "drained"},
                         None)
    assert "the watcher asks for a rescan: a pull ended" in caplog.text
    assert committer.handover.pending.rescan


def test_the_committer_answers_every_request_it_names(committer):
    from autosync.core.protocol import REQUESTS
    for request in REQUESTS:
        if request in ("subscribe", "sync", "pull"):
            continue  # the server's own; and two that wait for the worker
        reply = committer.handle({"cmd": request, "changes": []}, None)
        assert "unknown cmd" not in str(reply.get("error")), request


def test_a_batch_that_arrives_during_a_push_is_committed_and_pushed_right_after(tmp_path):
    """The shipped defaults (pushdelay not set): no timer between a push and the next one."""
    c = Committer(config(tmp_path, pullinterval=0.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    assert c.cfg.pushdelay == 0
    c.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    c.worker.step()  # commits a
    push = c.repo.push

    def slow_push(expect_new=True):  # a batch arrives while the push runs
        c.handle({"cmd": "batch", "changes": [{"action": "added", "path": "b"}]}, None)
        return push(expect_new)
    c.repo.push = slow_push
    c.worker.step()  # pushes a
    c.repo.push = push
    assert c.worker.has_work()  # b is waiting: no sleep before the next step
    c.worker.step()  # commits b
    assert c.worker.has_work() and c.worker.sleep_time() == 0.0  # its push is due now
    c.worker.step()  # pushes b
    assert c.repo.calls == [("commit", ["a"], False), "push", ("commit", ["b"], False), "push"]
    assert c.status["unpushed"] == 0


# --- pause and resume, describe --------------------------------------------------------


def test_the_xmpp_link_is_in_the_status_and_told_when_it_changes(tmp_path):
    c = Committer(config(tmp_path, pullinterval=0.0, syncmethod="xmpp"),
                  server=FakeServer, repository=FakeRepository)
    assert c.handle({"cmd": "status"}, None)["status"]["link"] == "down"
    c.handle({"cmd": "link", "up": True}, None)
    c.handle({"cmd": "link", "up": True}, None)  # no change: not told again
    assert c.handle({"cmd": "status"}, None)["status"]["link"] == "up"
    c.handle({"cmd": "link", "up": False}, None)
    assert [e["up"] for e in c.server.events("link")] == [True, False]
    quiet = Committer(config(tmp_path, pullinterval=0.0, syncmethod="none"),
                      server=FakeServer, repository=FakeRepository)
    assert quiet.handle({"cmd": "status"}, None)["status"]["link"] is None


# --- unpushed commits and the upstream, read from the repository ---------------------


def test_a_restart_counts_the_unpushed_commits_in_the_repository_and_retries_them(tmp_path):
    c = Committer(config(tmp_path, pushdelay=0.0, pullinterval=0.0, syncmethod="xmpp"),
                  server=FakeServer, repository=FakeRepository)
    c.repo.count, c.repo.rev = 2, "abc"  # left by the run before: the remote refused them
    c.repo.push_ok = False
    c.worker.startup()
    status = c.handle({"cmd": "status"}, None)["status"]
    assert status["unpushed"] == 2 and status["upstream"] == "abc"
    assert c.repo.calls.count("push") == 1 and c.schedule.push_at is not None
    c.repo.push_ok = True
    c.schedule.push_at = time.monotonic()  # the backoff's wait is over; no new change
    assert c.worker.has_work()
    c.worker.step()
    assert c.repo.calls.count("push") == 2 and c.status["unpushed"] == 0
    c.repo.rev = "def"
    c.worker.push(force=True)
    # The listener is told the upstream with the link: it announces what it has not yet.
    assert c.handle({"cmd": "link", "up": True}, None) == {"ok": True, "upstream": "def",
                                                           "url": "/srv/sync.git"}


def test_another_dvcs_retries_a_failed_start_push_though_it_counted_nothing(committer):
    committer.repo.push_ok = False
    committer.worker.startup()
    assert committer.status["unpushed"] == 0 and committer.repo.calls.count("push") == 1
    committer.repo.push_ok = True
    committer.schedule.push_at = time.monotonic()
    committer.worker.step()
    assert committer.repo.calls.count("push") == 2
    committer.schedule.push_at = time.monotonic()
    committer.worker.step()  # pushed: nothing owed any more
    assert committer.repo.calls.count("push") == 2


# --- wake-ups: a resume or the network back (committer/wakeup.py asks) --------------------------


def test_a_wake_pulls_then_pushes_what_waits_at_once_and_several_are_one(tmp_path):
    c = Committer(config(tmp_path, pullinterval=0.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    c.repo.count = 1  # a commit the remote refused while offline
    c.reports.recount()
    c.schedule.push_at = time.monotonic() + 3600  # its retry, after a backoff grown while offline
    assert not c.worker.has_work()
    c.wake("woke from sleep")
    c.wake("network back")
    assert c.worker.has_work()
    c.worker.step()
    assert c.repo.calls == ["pull", "push"]  # pull first, then push
    assert not c.worker.has_work() and c.status["unpushed"] == 0


def test_a_wake_with_nothing_to_push_only_pulls_and_replaces_a_pull_retry(committer):
    committer.schedule.retry_at["pull"] = time.monotonic() + 3600
    committer.wake("network back")
    committer.worker.step()
    assert committer.repo.calls == ["pull"]
    assert committer.schedule.retry_at["pull"] is None


def test_a_wake_while_paused_is_a_pull_owed_on_resume(committer):
    committer.handle({"cmd": "pause"}, None)
    committer.worker.step()  # the worker takes the pause in
    assert committer.wake("woke from sleep") is False  # the listener says so
    assert not committer.worker.has_work() and committer.pausing.paused.pull_owed
    assert committer.repo.calls == []
    committer.handle({"cmd": "resume"}, None)
    committer.worker.step()
    assert committer.repo.calls[0] == "pull"


def test_a_resume_commits_what_the_watcher_saw_and_rescans_only_after_missed_events(
        committer):
    """The watcher runs while paused: its batches wait in `pending`, and the resume
    commits them (at 1,000,000 files a rescan costs seconds, these paths milliseconds);
    a batch that asked for a rescan meanwhile (an overflow) makes it a rescan."""
    committer.handle({"cmd": "pause"}, None)
    committer.worker.step()
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "new.txt"}]},
                     None)
    committer.handle({"cmd": "resume"}, None)
    committer.worker.step()
    assert [c for c in committer.repo.calls if c[0] == "commit"] == [
        ("commit", ["new.txt"], False)]
    committer.handle({"cmd": "pause"}, None)
    committer.worker.step()
    committer.handle({"cmd": "batch", "changes": [], "rescan": True, "reason": "overflow"},
                     None)
    committer.handle({"cmd": "resume"}, None)
    committer.worker.step()
    assert [c for c in committer.repo.calls if c[0] == "commit"][1:] == [("commit", [], True)]


def test_a_restore_s_note_goes_on_the_watcher_s_batch_when_it_comes_first(committer):
    """The note is handed over before the files are written; the watcher's batch of
    them is committed before the sync arrives (the order made here, not hoped for):
    the note is on that commit, and the sync says so."""
    note = "restore of a.txt as it was at 10:00 (abc)"
    assert committer.handle({"cmd": "note", "note": note, "paths": ["a.txt"]}, None)["ok"]
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "b.txt"}]}, None)
    committer.worker.step()  # an unrelated change: not its commit
    assert committer.repo.notes == []
    committer.handle({"cmd": "batch", "changes": [{"action": "modified", "path": "a.txt"}]},
                     None)
    committer.worker.step()  # the restore's writes, batched by the watcher, first
    assert committer.repo.notes == [note]
    reply = asked(committer, SYNC, "sync")
    assert reply["ok"] and reply["noted"] and committer.repo.notes == [note]


def test_a_restore_s_note_goes_on_the_sync_s_commit_when_it_comes_first(committer):
    note = "restore of the whole folder as it was at 10:00 (abc)"
    committer.handle({"cmd": "note", "note": note, "paths": ["."]}, None)
    reply = asked(committer, SYNC, "sync")  # before the watcher's batch: the sync's rescan takes all
    assert committer.repo.notes == [note] and reply["ok"]
    committer.handle({"cmd": "batch", "changes": [{"action": "modified", "path": "a"}]}, None)
    committer.worker.step()  # the watcher's batch, late: the note is not said twice
    assert committer.repo.notes == [note]


def test_a_note_needs_paths_inside_the_folder(committer):
    for bad in ({"note": "x"}, {"note": "x", "paths": []}, {"note": "x", "paths": ["/etc"]},
                {"note": "two\nlines", "paths": ["a"]}):
        assert not committer.handle(dict(bad, cmd="note"), None)["ok"]


def test_a_batch_is_numbered_for_git_s_fsmonitor_before_the_worker_can_take_it(committer,
                                                                                tmp_path):
    """Were the worker to commit a batch the hook's state does not have yet, git would
    take its files for unchanged and leave them out (committer/fsmonitor.py)."""
    monitor = committer.repo.fsmonitor = FakeMonitor(str(tmp_path / "state"), committer)
    seen = []
    received = monitor.journal.received
    monitor.journal.received = lambda changes, rescan=False: (
        seen.append(sorted(committer.handover.pending.changes)), received(changes, rescan))
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    assert seen == [[]]  # numbered before it was queued
    assert monitor.published == [(1, ["a"])]  # and the state file written at once
    assert monitor.journal.paths == {"a": 1}
    committer.handle({"cmd": "batch", "changes": [], "rescan": True, "reason": "overflow"},
                     None)
    assert monitor.journal.floor == 2 and monitor.journal.paths == {}
    committer.handle({"cmd": "watch", "unwatched": 3, "problem": "no watch"}, None)
    assert monitor.journal.blind and monitor.published[-1][0] == 2
    committer.handle({"cmd": "watch", "unwatched": 0, "problem": None}, None)
    assert not monitor.journal.blind



def test_a_pull_asked_for_while_the_daemon_stops_is_not_a_failure(committer):
    replies = []
    asker = threading.Thread(target=lambda: replies.append(
        committer.handle({"cmd": "pull", "timeout": 600}, None)), daemon=True)
    asker.start()
    wait_until(lambda: committer.handover.wanted["pull"] == 1, what="the pull asked for")
    committer.stop()  # before the worker got to it
    asker.join(10)
    assert replies == [{"ok": False, "stopping": True,
                        "error": "the daemon is stopping before the pull was made"}]


def test_what_a_stop_cut_short_is_not_reported_as_failed(committer, caplog):
    import logging
    caplog.set_level(logging.INFO, logger="autosync.committer")
    committer.repo.push_ok = False
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()  # commits
    push = committer.repo.push

    def stopped_push(expect_new=True):  # SIGTERM: the push under way is killed, and fails
        committer.stop()
        return push(expect_new)
    committer.repo.push = stopped_push
    committer.schedule.push_at = time.monotonic()
    committer.worker.step()
    assert committer.repo.calls[-2:] == ["stop", "push"]
    assert committer.server.events("failed") == [] and "push" not in committer.status["failing"]
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert "push not finished: the daemon is stopping (remote away)" in said
    assert not any(r.levelno >= logging.WARNING for r in caplog.records)


def test_a_polled_link_is_in_the_status_while_it_is_up(tmp_path):
    c = Committer(config(tmp_path, syncmethod="ssh"), server=FakeServer,
                  repository=FakeRepository)
    why = "the watch command ended (exit 1): this key may only run git"
    c.handle({"cmd": "link", "up": True, "polled": 10, "error": why}, None)
    status = c.handle({"cmd": "status"}, None)["status"]
    assert status["link_polled"] == 10 and status["link_why"] == why
    assert "failing" not in status or "link" not in (status["failing"] or {})  # no problem
    c.handle({"cmd": "link", "up": False}, None)
    status = c.handle({"cmd": "status"}, None)["status"]
    assert status["link_polled"] is None and status["link_why"] is None
    c.handle({"cmd": "link", "up": True}, None)  # watched again
    assert c.handle({"cmd": "status"}, None)["status"]["link_polled"] is None


@pytest.mark.parametrize("syncmethod, pullinterval, pulls_first", [
    ("none", 300.0, True),   # it pulls every pullinterval: at start, first
    ("none", 0.0, False),    # it never pulls by itself
    ("ssh", 0.0, True),
])
def test_the_start_pulls_before_it_commits_whenever_the_machine_pulls(tmp_path, syncmethod,
                                                                     pullinterval, pulls_first):
    c = Committer(config(tmp_path, pushdelay=0.0, pullinterval=pullinterval,
                         syncmethod=syncmethod), server=FakeServer, repository=FakeRepository)
    c.worker.startup()
    calls = [call if isinstance(call, str) else call[0] for call in c.repo.calls]
    assert calls[:3] == (["recover", "pull", "commit"] if pulls_first
                         else ["recover", "commit", "push"]), calls


# --- a pause or a stop in the middle of a step (issue 41): nothing begins after it --------


class Held:
    """A repository operation of the fake held until the test lets it go: `entered` is set
    once it runs; `order` records its end and anything else a test appends."""

    def __init__(self, committer, name):
        self.entered, self.go, self.order = threading.Event(), threading.Event(), []
        inner = getattr(committer.repo, name)

        def held(*args, **kwargs):
            self.entered.set()
            assert self.go.wait(30)
            self.order.append(name + " ended")
            return inner(*args, **kwargs)
        setattr(committer.repo, name, held)


def pause_in_thread(committer, order):
    """A pause request from a socket thread; its reply is recorded in `order`."""
    def ask():
        reply = committer.handle({"cmd": "pause"}, None)
        order.append("pause answered" if reply["ok"] else reply)
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    wait_until(lambda: committer.pausing.active(), what="the pause taken")
    return asker


def test_a_pause_during_the_start_s_pull_holds_back_its_commit_and_push(tmp_path):
    """The start pulls, commits (a rescan) and pushes; a pause that comes while the pull
    runs is answered once the pull has ended, and nothing after it begins: the rescan
    waits for the resume."""
    c = Committer(config(tmp_path, pushdelay=0.0, pullinterval=300.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    pull = Held(c, "pull")
    starting = threading.Thread(target=c.worker.startup, daemon=True)
    starting.start()
    assert pull.entered.wait(30)
    asker = pause_in_thread(c, pull.order)
    c.handle({"cmd": "batch", "changes": [{"action": "added", "path": "late.txt"}]}, None)
    pull.go.set()
    asker.join(30)
    starting.join(30)
    assert pull.order == ["pull ended", "pause answered"]  # it waited for the pull
    assert c.repo.calls == ["recover", "pull"]  # no commit, no push after the pause
    status = c.handle({"cmd": "status"}, None)["status"]
    assert status["state"] == "paused" and status["paused"] is not None
    assert status["pending"] == ["late.txt"] and status["rescan"]
    c.handle({"cmd": "resume"}, None)
    c.worker.step()
    assert c.repo.calls[2:] == ["pull", ("commit", ["late.txt"], True), "push"]


def test_a_pause_during_a_commit_holds_back_the_pull_and_answers_the_requests(committer):
    """A batch, a pull asked for and a push due in one step; the pause comes while the
    commit runs: no pull, no push; the pull request is answered as while paused."""
    commit = Held(committer, "commit")
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    replies = []
    asker = threading.Thread(target=lambda: replies.append(
        committer.handle({"cmd": "pull", "timeout": 30}, None)), daemon=True)
    asker.start()
    wait_until(lambda: committer.handover.wanted["pull"] == 1, what="the pull asked for")
    stepping = threading.Thread(target=committer.worker.step, daemon=True)
    stepping.start()
    assert commit.entered.wait(30)
    pauser = pause_in_thread(committer, commit.order)
    commit.go.set()
    for thread in (pauser, stepping, asker):
        thread.join(30)
    assert commit.order == ["commit ended", "pause answered"]
    assert committer.repo.calls == [("commit", ["a"], False)]
    assert replies == [{"ok": True, "pulled": False, "deferred": "paused: pulled on resume"}]
    assert committer.pausing.paused.pull_owed and committer.status["state"] == "paused"


def test_a_stop_during_the_start_s_pull_begins_nothing_after_it(tmp_path):
    """The stop comes while the start's pull runs: the pull ends, and neither the rescan
    nor a push begins (the next start makes them); the worker ends."""
    c = Committer(config(tmp_path, pushdelay=0.0, pullinterval=300.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    pull = Held(c, "pull")
    worker = threading.Thread(target=c.run, daemon=True)
    worker.start()
    assert pull.entered.wait(30)
    c.stop()
    pull.go.set()
    worker.join(30)
    assert not worker.is_alive() and c.status["state"] == "stopped"
    assert c.repo.calls == ["recover", "stop", "pull"]


def test_a_catch_up_cut_short_by_a_pause_owes_its_pull(committer):
    """Paused again between a resume and its catch-up: the pull it was to make is owed
    (a pull owed before the resume is not forgotten), and nothing runs."""
    committer.handle({"cmd": "pause"}, None)
    committer.worker.catch_up("changes made while paused", True)
    assert committer.repo.calls == [] and committer.pausing.paused.pull_owed
