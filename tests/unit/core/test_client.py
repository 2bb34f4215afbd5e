"""client.py against the real socket server (tests/fakes.py FakeCommitter):
the reconnecting subscription and the request queue."""
import logging
import os
import queue
import signal
import threading
import time

import pytest

from autosync.core import client
from autosync.core.retry import Backoff
from autosync.core.stopflag import StopFlag
from base import wait_until
from fakes import FakeCommitter

FAST = Backoff(0.05, 0.2)


@pytest.fixture
def committer(tmp_path):
    fake = FakeCommitter(str(tmp_path / "run" / "c.sock"), start=False)
    yield fake
    if fake.server:
        fake.close()


@pytest.fixture
def subscribe(committer):
    made = []

    def make(on_lost=None):
        got = queue.SimpleQueue()
        subscribed = []
        sub = client.Subscription(committer.path, got.put, lambda: subscribed.append(1),
                                  backoff=Backoff(0.05, 0.2), on_lost=on_lost).start()
        made.append(sub)
        return sub, got, subscribed

    yield make
    for sub in made:
        sub.close()
        sub.thread.join(2)
        assert not sub.thread.is_alive()


def client_log(caplog, level=logging.DEBUG):
    return [r for r in caplog.records if r.name == "autosync.client" and r.levelno >= level]


def test_events_arrive_in_order(committer, subscribe):
    committer.start()
    sub, got, subscribed = subscribe()
    committer.wait_subscribed()
    for i in range(5):
        committer.emit("committed", n=i)
    assert [got.get(timeout=2)["n"] for _ in range(5)] == list(range(5))
    assert subscribed == [1] and sub.conn is not None


def test_started_before_the_committer_it_waits_quietly(committer, subscribe, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.client")
    sub, got, subscribed = subscribe()
    time.sleep(0.3)  # a few tries
    assert sub.conn is None and not subscribed
    committer.start()
    committer.wait_subscribed()
    committer.emit("pushed", url="u")
    assert got.get(timeout=2)["event"] == "pushed"
    assert not client_log(caplog, logging.WARNING)
    waiting = [r for r in client_log(caplog) if "no events from the committer" in r.getMessage()]
    assert len(waiting) == 1 and waiting[0].levelno == logging.INFO


def test_it_subscribes_again_after_the_committer_restarts(committer, subscribe, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.client")
    committer.start()
    sub, got, subscribed = subscribe()
    committer.wait_subscribed()
    committer.close()
    time.sleep(0.3)  # it finds nobody for a while: one warning
    committer.start()
    committer.wait_subscribed()
    wait_until(lambda: len(subscribed) == 2, 5, what="on_subscribed called again")
    committer.emit("failed", op="commit")
    assert got.get(timeout=2)["op"] == "commit"
    warnings = client_log(caplog, logging.WARNING)
    assert len(warnings) == 1 and "no events from the committer" in warnings[0].getMessage()
    assert any("events again" in r.getMessage() for r in client_log(caplog))


def test_on_lost_says_each_time_there_is_no_subscription(committer, subscribe):
    lost = queue.SimpleQueue()
    sub, got, subscribed = subscribe(on_lost=lost.put)
    assert "No such file" in lost.get(timeout=2)  # nobody there yet
    committer.start()
    committer.wait_subscribed()
    while not lost.empty():  # (the tries before the start)
        lost.get()
    committer.close()  # gone without a word, as a crash
    assert lost.get(timeout=2) == "the committer closed the connection"
    sub.close()
    sub.thread.join(2)
    told = lost.qsize()
    time.sleep(0.3)
    assert lost.qsize() == told  # nothing after close()


def test_close_wakes_a_reader_that_waits_for_events(committer, subscribe):
    committer.start()
    sub, _, _ = subscribe()
    committer.wait_subscribed()
    sub.close()
    sub.thread.join(2)
    assert not sub.thread.is_alive()


def requests(committer, timeout=5.0):
    return client.RequestQueue(committer.path, timeout, backoff=Backoff(0.05, 0.2)).start()


def test_requests_are_sent_and_flush_waits_for_the_answers(committer):
    committer.start()
    q = requests(committer)
    q.put("link", {"cmd": "link", "up": True})
    q.put("pull", {"cmd": "pull"})
    assert q.flush(5)
    assert committer.links() == [True] and committer.pulls() == 1
    q.close()


def test_each_answer_is_handed_to_on_reply(committer):
    committer.answers["link"] = {"ok": True, "upstream": "abc123", "url": "/srv/sync.git"}
    committer.start()
    replies = []
    q = client.RequestQueue(committer.path, 5.0, backoff=Backoff(0.05, 0.2),
                            on_reply=lambda message, reply: replies.append((message, reply)))
    q.start()
    q.put("link", {"cmd": "link", "up": True})
    assert q.flush(5)
    assert replies == [({"cmd": "link", "up": True},
                        {"ok": True, "upstream": "abc123", "url": "/srv/sync.git"})]
    q.close()


def test_a_burst_of_one_kind_leaves_one_more_request_queued(committer):
    committer.pull_seconds = 0.3
    committer.start()
    q = requests(committer)
    q.put("pull", {"cmd": "pull"})
    wait_until(lambda: q.busy, 5, what="the first pull to be out")
    for _ in range(20):
        q.put("pull", {"cmd": "pull"})
    assert q.flush(5)
    assert committer.pulls() == 2
    q.close()


def test_requests_wait_for_the_committer_and_warn_once(committer, caplog):
    caplog.set_level(logging.DEBUG, logger="autosync.client")
    q = requests(committer)
    q.put("link", {"cmd": "link", "up": False})
    q.put("link", {"cmd": "link", "up": True})  # the newest wins
    wait_until(lambda: q.failures >= 3, 10, what="three tries")
    assert not q.flush(0.4)
    committer.start()
    assert q.flush(5)
    assert committer.links() == [True]
    warnings = client_log(caplog, logging.WARNING)
    assert len(warnings) == 1 and "cannot reach the committer" in warnings[0].getMessage()
    assert any("reachable again" in r.getMessage() for r in client_log(caplog))
    q.close()


def test_close_ends_the_thread_even_while_the_committer_is_away(committer):
    q = requests(committer)
    q.put("pull", {"cmd": "pull"})
    time.sleep(0.1)
    q.close()
    q.thread.join(2)
    assert not q.thread.is_alive() and q.flush(0.1)


def test_a_stop_flag_only_records_the_signal_and_wakes(monkeypatch):
    woken = []
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        flag = StopFlag(wake=lambda: woken.append(threading.current_thread().name)).install()
        assert not flag
        os.kill(os.getpid(), signal.SIGTERM)
        wait_until(lambda: flag, 2, what="the flag")
        assert flag.signum == signal.SIGTERM and woken == ["MainThread"]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_an_inbox_wakes_a_select_loop_and_hands_over_everything_in_order():
    import select
    inbox = client.Inbox()
    try:
        assert select.select([inbox], [], [], 0)[0] == []
        threading.Thread(target=lambda: [inbox.put(i) for i in range(3)]).start()
        assert select.select([inbox], [], [], 5)[0] == [inbox]
        wait_until(lambda: inbox.items.qsize() == 3, 2, what="all three")
        assert inbox.take() == [0, 1, 2]
        assert select.select([inbox], [], [], 0)[0] == [] and inbox.take() == []
        for _ in range(100000):  # more wake-ups than the pipe holds: never blocks
            inbox.wake()
        assert inbox.take() == []
    finally:
        inbox.close()


def test_link_state_is_told_when_it_changes_and_again_on_request():
    class Queue:
        def __init__(self):
            self.put_ = []

        def put(self, kind, message):
            self.put_.append((kind, message))
    q = Queue()
    link = client.LinkState(q)
    link.again()  # never told: nothing to tell again
    link.tell(False, "refused")
    link.tell(False, "refused")  # no change: not told
    link.tell(True)
    link.again()  # a new subscription: the committer may have forgotten
    assert q.put_ == [("link", {"cmd": "link", "up": False, "error": "refused"}),
                      ("link", {"cmd": "link", "up": True}),
                      ("link", {"cmd": "link", "up": True})]


def test_flush_gives_up_at_once_on_a_committer_that_is_gone(committer, caplog):
    # At a stop the committer may have ended first: nobody is left to tell, and the
    # program's stop must not wait out flush's whole time for it.
    caplog.set_level(logging.INFO, logger="autosync.client")
    # A backoff longer than the test: the program closes the queue once flush gave up,
    # and a second try (logged as "retrying", flush being over) must not come first.
    q = client.RequestQueue(committer.path, 5.0, backoff=Backoff(600, 600))
    try:
        q.put("link", {"cmd": "link", "up": False})
        done = []
        flusher = threading.Thread(target=lambda: done.append(q.flush(600)), daemon=True)
        flusher.start()
        wait_until(lambda: q.flushing, 10, what="flush to wait")
        q.start()  # its first try comes while flush waits, as at a stop
        wait_until(lambda: done, 10, what="flush to give up")
        assert done == [False]
        assert client_log(caplog, logging.WARNING) == []  # the failure was no "retrying"
        assert any(r.getMessage().startswith("the committer is gone (")
                   for r in client_log(caplog))
    finally:
        q.close()


def test_a_request_left_undone_by_a_stop_is_no_failure(committer, caplog):
    caplog.set_level(logging.INFO, logger="autosync.client")
    committer.answers["sync"] = {"ok": False, "stopping": True,
                                 "error": "the daemon is stopping before the sync was made"}
    committer.start()
    q = requests(committer)
    q.put("sync", {"cmd": "sync"})
    assert q.flush(5)
    assert client_log(caplog, logging.WARNING) == []
    assert [r.getMessage() for r in client_log(caplog) if "committer:" in r.getMessage()] == \
        ["committer: no sync: the daemon is stopping before the sync was made"]
    q.close()
