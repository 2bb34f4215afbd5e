"""everyday.py: the committer's pause, resume and describe, without a socket (fakes)."""
import threading
import time

import pytest

from autosync.committer.committer import Committer
from fakes import FakeRepository, FakeServer, config
from fakes import asked


def test_while_paused_nothing_is_committed_pushed_or_pulled_and_resume_catches_up(committer):
    committer.status.state("idle")  # started
    reply = committer.handle({"cmd": "pause"}, None)
    assert reply["ok"] and reply["paused"]["until"] is None
    assert reply["path"] == committer.cfg.path  # the answer names the folder it paused
    assert committer.status["state"] == "paused"
    assert committer.handle({"cmd": "status"}, None)["status"]["paused"] == reply["paused"]
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    assert committer.handle({"cmd": "pull"}, None) == {
        "ok": True, "pulled": False, "deferred": "paused: pulled on resume"}
    assert committer.handle({"cmd": "pushed", "url": "x"}, None)["ok"]
    refused = committer.handle({"cmd": "sync"}, None)
    assert not refused["ok"] and "dvcs-autosync resume" in refused["error"]
    committer.schedule.push_at = 0.0  # even a push that is due waits
    committer.worker.step()  # the worker only learns when to wake next: never
    assert not committer.worker.has_work() and committer.worker.sleep_time() is None
    committer.worker.step()
    assert committer.repo.calls == []
    assert committer.handle({"cmd": "resume"}, None) == {"ok": True, "resumed": True}
    assert committer.worker.has_work()
    committer.worker.step()
    # The pull owed first, then one commit of what the watcher sent while paused (no
    # rescan: it watched all along), then the push.
    assert committer.repo.calls[:3] == ["pull", ("commit", ["a"], False), "push"]
    assert committer.repo.notes == ["changes made while paused"]
    assert [e["event"] for e in committer.server.published if e["event"] in
            ("paused", "resumed")] == ["paused", "resumed"]
    assert committer.status["state"] == "idle" and committer.status["paused"] is None
    assert committer.handle({"cmd": "resume"}, None) == {"ok": True, "resumed": False}


def test_a_pause_runs_out_by_itself(committer):
    committer.handle({"cmd": "pause", "seconds": 0.2}, None)
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()
    assert 0 < committer.worker.sleep_time() <= 0.2 and not committer.worker.has_work()
    time.sleep(0.25)
    assert committer.worker.has_work()
    committer.worker.step()
    assert ("commit", ["a"], False) in committer.repo.calls
    assert committer.server.events("resumed") and committer.status["paused"] is None
    # No news owed and syncmethod none without a timer: no pull on resume.
    assert "pull" not in committer.repo.calls


def test_a_pause_outlives_the_committer_and_so_does_a_pull_owed(tmp_path):
    cfg = config(tmp_path, pushdelay=0.0, pullinterval=0.0, syncmethod="none")
    first = Committer(cfg, server=FakeServer, repository=FakeRepository)
    first.handle({"cmd": "pause", "seconds": 3600}, None)
    first.handle({"cmd": "pushed"}, None)
    since = first.status["paused"]["since"]
    again = Committer(cfg, server=FakeServer, repository=FakeRepository)
    assert again.status["paused"]["since"] == since
    again.worker.startup()  # repairs, and nothing else
    assert again.repo.calls == ["recover"] and again.status["state"] == "paused"
    again.handle({"cmd": "resume"}, None)
    again.worker.step()
    # A rescan: what changed while the suite was stopped was seen by nobody.
    assert again.repo.calls[1:] == ["pull", ("commit", [], True), "push"]
    assert Committer(cfg, server=FakeServer, repository=FakeRepository).status[
        "paused"] is None


@pytest.mark.parametrize("seconds", [-1, 0, "30m", True, float("inf"), 10 ** 9])
def test_a_bad_pause_is_refused(committer, seconds):
    reply = committer.handle({"cmd": "pause", "seconds": seconds}, None)
    assert not reply["ok"] and "seconds" in reply["error"]
    assert committer.status["paused"] is None


def test_a_description_goes_to_the_next_commit_when_the_last_is_pushed(committer):
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    committer.worker.step()
    committer.worker.step()  # pushed
    assert asked(committer, {"cmd": "describe", "text": "Holiday  photos\n"}, "describe") \
        == {"ok": True, "to": "next"}
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "b"}]}, None)
    committer.worker.step()
    assert committer.status["last_commit"]["message"] == \
        "Holiday photos (autosync on testhost: 1 added)"
    assert not any(call[0] == "amend" for call in committer.repo.calls if type(call) is tuple)


def test_a_description_rewords_the_last_commit_while_it_is_not_pushed(tmp_path):
    c = Committer(config(tmp_path, pushdelay=60.0, pullinterval=0.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    c.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    c.worker.step()
    rev = c.descriptions.own_last["rev"]
    assert asked(c, {"cmd": "describe", "text": "Tax forms"}, "describe") == {
        "ok": True, "to": "last", "rev": "amended"}
    assert c.repo.calls[-1] == ("amend", "Tax forms (autosync on testhost: 1 added)", rev)
    assert c.status["last_commit"]["message"].startswith("Tax forms (")
    c.handle({"cmd": "pause"}, None)  # rewording is committing: paused, it waits
    assert c.handle({"cmd": "describe", "text": "later"}, None) == {"ok": True, "to": "next"}
    for bad in ("", "   ", "bell\x07", "x" * 301, 5):
        assert not c.handle({"cmd": "describe", "text": bad}, None)["ok"]


def test_the_running_worker_wakes_when_a_pause_runs_out(committer):
    worker = threading.Thread(target=committer.run, daemon=True)
    worker.start()
    for _ in range(500):
        if committer.status["state"] == "idle":
            break
        time.sleep(0.01)
    committer.handle({"cmd": "pause", "seconds": 0.3}, None)  # while it waits for ever
    committer.handle({"cmd": "batch", "changes": [{"action": "added", "path": "a"}]}, None)
    time.sleep(0.1)
    assert not [c for c in committer.repo.calls if c[0] == "commit" and c[1] == ["a"]]
    for _ in range(300):
        if committer.server.events("resumed") and committer.status["unpushed"] == 0 \
                and len(committer.repo.calls) > 3:
            break
        time.sleep(0.01)
    committer.stop()
    worker.join(5)
    assert ("commit", ["a"], False) in committer.repo.calls
