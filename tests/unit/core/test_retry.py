"""retry.py: the backoff and the log-once helper, without any I/O."""
import logging

from autosync.core.retry import Backoff, Trouble, one_line

log = logging.getLogger("autosync.test_retry")


def test_backoff_doubles_up_to_its_cap_and_starts_afresh_after_reset():
    b = Backoff(0.5, 30.0)
    assert [b.next() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert b.failures == 9
    b.reset()
    assert b.next() == 0.5 and b.failures == 1


def test_jitter_only_shortens_and_stays_within_its_fraction():
    b = Backoff(1.0, 1.0, jitter=0.2)
    delays = [b.next() for _ in range(200)]
    assert all(0.8 <= d <= 1.0 for d in delays)
    assert len(set(delays)) > 100  # spread out, not one value


def test_longest_waits_the_cap_until_reset():
    b = Backoff(0.1, 0.4)
    b.longest()
    assert b.current == 0.4 and b.next() == 0.4
    b.reset()
    assert b.current == 0.1


def test_a_cap_below_the_first_delay_is_the_first_delay():
    assert Backoff(2.0, 1.0).next() == Backoff(2.0, 1.0).next() == 2.0


def records(caplog):
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == log.name]


def test_trouble_logs_a_failure_once_and_the_recovery_once(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    t = Trouble(log)
    assert not t.recovered("fine")  # nothing had failed: nothing to say
    assert t.failed("down (%s)", "refused")
    assert not t.failed("down (%s)", "refused again")
    assert t.failing
    assert t.recovered("up again")
    assert not t.failing
    t.failed("down (%s)", "timeout")
    assert records(caplog) == [(logging.WARNING, "down (refused)"), (logging.INFO, "up again"),
                               (logging.WARNING, "down (timeout)")]


def test_trouble_with_kinds_logs_a_new_kind_loudly_and_repeats_quietly(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    t = Trouble(log, logging.ERROR, repeat=logging.INFO)
    for reason in ("wrong password", "wrong password", "unreachable", "unreachable"):
        t.failed("%s; retrying", reason, kind=reason)
    assert [level for level, _ in records(caplog)] == [
        logging.ERROR, logging.INFO, logging.ERROR, logging.INFO]


def test_a_level_given_to_failed_wins_for_a_new_failure(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    t = Trouble(log)
    t.failed("not up yet", level=logging.INFO)
    t.failed("not up yet", level=logging.INFO)
    assert records(caplog) == [(logging.INFO, "not up yet")]


def test_one_line():
    assert one_line(OSError("a\n  b")) == "a b"
    assert one_line(TimeoutError()) == "TimeoutError"


def test_steady_tries_wait_the_first_delay_then_it_grows():
    b = Backoff(1.0, 60.0, steady=3)
    assert [b.next() for _ in range(6)] == [1, 1, 1, 2, 4, 8]
    b.reset()
    assert [b.next() for _ in range(4)] == [1, 1, 1, 2]


def test_the_ssh_link_retries_about_every_second_through_a_short_outage():
    from autosync.ssh.link import LinkTiming
    t = LinkTiming()
    b = Backoff(t.backoff_min, t.backoff_max, jitter=0.2, steady=t.backoff_steady)
    delays = [b.next() for _ in range(t.backoff_steady)]
    assert max(delays) <= 1.0 and sum(delays) >= 0.8 * 15  # 15 s of outage and more
    assert max(b.next() for _ in range(10)) > 1.0  # a long one: waits grow
