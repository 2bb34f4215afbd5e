"""reports.py: what the repository's reports do to the committer's status and schedule,
on a bare host object (no worker, no socket)."""
import threading
import time

import pytest

from autosync.committer import backoffs
from autosync.reports import BACKOFF_MAX, Reports
from fakes import FakeServer, config


class Host(Reports):
    """The attributes Reports uses from committer.Committer, nothing else."""

    def __init__(self, tmp_path, **settings):
        self.cfg = config(tmp_path, **settings)
        self.cond = threading.Condition()
        self.status_fields = {"state": "idle", "last_error": None, "last_commit": None,
                              "failing": {},
                              "last_pull": None, "unpushed": 0}
        self.backoff = backoffs()
        self.retry_at = {"commit": None, "pull": None}
        self.push_at = self.next_timer_pull = self.own_last = None
        self.server = FakeServer(str(tmp_path / "s"), None)
        self.repo = type("Repo", (), {"head": lambda self: "abc123"})()


def test_a_commit_is_counted_timed_for_its_push_and_published(tmp_path):
    h = Host(tmp_path, pushdelay=0.0)
    before = time.monotonic()
    h.committed("autosync on testhost: 1 added\n\nadded: a", [{"action": "added", "path": "a"}])
    assert h.status_fields["unpushed"] == 1 and before <= h.push_at <= time.monotonic()
    assert h.status_fields["last_commit"]["message"] == "autosync on testhost: 1 added"
    assert h.own_last["rev"] == "abc123"
    (event,) = h.server.events("committed")
    assert event["count"] == 1 and event["host"] == "testhost"


def test_failures_set_the_next_try_with_growing_waits_and_success_resets_them(tmp_path):
    h = Host(tmp_path, pushdelay=0.0)
    h.failed("pull", "remote away", retry="pull")
    first = h.retry_at["pull"] - time.monotonic()
    h.failed("pull", "remote away", retry="pull")
    second = h.retry_at["pull"] - time.monotonic()
    assert 0 < first < second <= BACKOFF_MAX
    assert h.status_fields["last_error"] == "pull: remote away"
    # Said once while it fails in the same words; kept in `failing` until it works.
    assert [e["op"] for e in h.server.events("failed")] == ["pull"]
    assert h.status_fields["failing"] == {"pull": "pull: remote away"}
    h.failed("pull", "refused", retry="pull")  # other words: said
    assert len(h.server.events("failed")) == 2
    h.succeeded("pull")
    assert h.status_fields["failing"] == {}
    assert [e["op"] for e in h.server.events("recovered")] == ["pull"]
    h.succeeded("pull")  # working on: no second word
    assert len(h.server.events("recovered")) == 1
    h.failed("pull", "again", retry="pull", quiet=True)  # said once already: no event
    assert h.retry_at["pull"] - time.monotonic() <= 2.0  # the first wait again (2 s, jittered)
    assert len(h.server.events("failed")) == 2
    h.failed("push", "remote away", retry="push")
    assert h.push_at > time.monotonic()


def test_a_pull_sets_the_timer_and_sends_what_waits(tmp_path):
    h = Host(tmp_path, pullinterval=300.0)
    h.status_fields["unpushed"] = 1
    h.pulled(True)
    assert h.status_fields["last_pull"]["ok"] is True
    assert h.next_timer_pull - time.monotonic() == pytest.approx(300, abs=1)
    assert h.push_at <= time.monotonic()  # a merge waits to go out too
    with pytest.raises(AssertionError):
        h.state("dreaming")  # only protocol.STATES
    with pytest.raises(AssertionError):
        h.event("gossip")  # only protocol.EVENTS
