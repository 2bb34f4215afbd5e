"""reports.py: what the repository's reports do to the committer's status and schedule,
on a bare host object (no worker, no socket)."""
import threading
import time

import pytest

from autosync.committer.descriptions import Descriptions
from autosync.committer.reports import Reports
from autosync.committer.schedule import BACKOFF_MAX, Schedule
from autosync.committer.status import Status
from fakes import FakeServer, config


class Host:
    """The committer's parts that reports.Reports speaks to, and nothing else."""

    def __init__(self, tmp_path, **settings):
        cfg = config(tmp_path, **settings)
        cond = threading.Condition(threading.RLock())
        self.server = FakeServer(str(tmp_path / "s"), None)
        self.status = Status(cond, self.server.publish, state="idle")
        self.schedule = Schedule(cfg, cond)
        self.descriptions = Descriptions(cond, self.status)
        self.reports = Reports(cfg, cond, self.status, self.schedule, self.descriptions)
        self.reports.repo = type("Repo", (), {"head": lambda self: "abc123",
                                              "unpushed": lambda self: None,
                                              "upstream": lambda self: None})()


def test_a_commit_is_counted_timed_for_its_push_and_published(tmp_path):
    h = Host(tmp_path, pushdelay=0.0)
    before = time.monotonic()
    h.reports.committed("autosync on testhost: 1 added\n\nadded: a", [{"action": "added", "path": "a"}])
    assert h.status["unpushed"] == 1 and before <= h.schedule.push_at <= time.monotonic()
    assert h.status["last_commit"]["message"] == "autosync on testhost: 1 added"
    assert h.descriptions.own_last["rev"] == "abc123"
    (event,) = h.server.events("committed")
    assert event["count"] == 1 and event["host"] == "testhost"


def test_failures_set_the_next_try_with_growing_waits_and_success_resets_them(tmp_path):
    h = Host(tmp_path, pushdelay=0.0)
    h.reports.failed("pull", "remote away", retry="pull")
    first = h.schedule.retry_at["pull"] - time.monotonic()
    h.reports.failed("pull", "remote away", retry="pull")
    second = h.schedule.retry_at["pull"] - time.monotonic()
    assert 0 < first < second <= BACKOFF_MAX
    assert h.status["last_error"] == "pull: remote away"
    # Said once while it fails in the same words; kept in `failing` until it works.
    assert [e["op"] for e in h.server.events("failed")] == ["pull"]
    assert h.status["failing"] == {"pull": "pull: remote away"}
    h.reports.failed("pull", "refused", retry="pull")  # other words: said
    assert len(h.server.events("failed")) == 2
    h.reports.succeeded("pull")
    assert h.status["failing"] == {}
    assert [e["op"] for e in h.server.events("recovered")] == ["pull"]
    h.reports.succeeded("pull")  # working on: no second word
    assert len(h.server.events("recovered")) == 1
    h.reports.failed("pull", "again", retry="pull", quiet=True)  # said once already: no event
    assert h.schedule.retry_at["pull"] - time.monotonic() <= 2.0  # the first wait again (2 s, jittered)
    assert len(h.server.events("failed")) == 2
    h.reports.failed("push", "remote away", retry="push")
    assert h.schedule.push_at > time.monotonic()


def test_a_pull_sets_the_timer_and_sends_what_waits(tmp_path):
    h = Host(tmp_path, pullinterval=300.0)
    h.status.update(unpushed=1)
    h.reports.pulled(True)
    assert h.status["last_pull"]["ok"] is True
    assert h.schedule.next_timer_pull - time.monotonic() == pytest.approx(300, abs=1)
    assert h.schedule.push_at <= time.monotonic()  # a merge waits to go out too
    with pytest.raises(ValueError):
        h.reports.state("dreaming")  # only protocol.STATES
    with pytest.raises(ValueError):
        h.reports.event("gossip")  # only protocol.EVENTS


def test_every_status_field_the_code_sets_is_in_the_schema():
    """The status' schema (status.FIELDS) holds every field that the repository and
    the committer's parts set, read from their source; a field set nowhere else is
    refused at once (Status.update)."""
    import glob
    import os
    import re
    from autosync.committer.status import ABSENT, FIELDS
    from base import ROOT
    set_here = set()
    for path in glob.glob(os.path.join(ROOT, "autosync", "**", "*.py"), recursive=True):
        with open(path) as f:
            text = f.read()
        for call in re.findall(r"(?:report|status|reports)\.(?:status|update)\(([^()]*)\)",
                               text):
            set_here.update(re.findall(r"(?:^|[\s,(])([a-z_]+)=", call))
    assert set_here and set_here <= set(FIELDS), set_here - set(FIELDS)
    assert "mass_delete" in set_here and FIELDS["mass_delete"] is ABSENT
    status = Status(threading.RLock(), lambda fields: None)
    assert "mass_delete" not in status.snapshot()  # absent until one happens
    status.update(mass_delete={"count": 30})
    assert status.snapshot()["mass_delete"] == {"count": 30}


def test_a_blocked_repository_puts_off_a_due_timer_pull(tmp_path):
    """The folder away (or a rebase half done): the repository says look again later.
    A timer pull that was due is put off as long, or the worker, which asks the schedule
    whether anything is due, would find it due at once, again and again."""
    h = Host(tmp_path, pullinterval=1, safetypull=1)
    now = time.monotonic()
    h.schedule.next_timer_pull = h.schedule.next_safety_pull = now - 1  # due
    assert h.schedule.due(now)
    h.reports.look_again(5.0)
    later = time.monotonic()
    assert not h.schedule.due(later)
    assert later + 4 < h.schedule.next_timer_pull <= later + 5
    assert later + 4 < h.schedule.next_safety_pull <= later + 5
    assert h.schedule.sleep_time() > 4
    # One not due yet keeps its time.
    h.schedule.next_timer_pull = later + 100
    h.reports.look_again(5.0)
    assert h.schedule.next_timer_pull == later + 100
