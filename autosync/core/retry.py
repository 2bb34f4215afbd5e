"""Trying again after a failure: one capped, jittered backoff, and a log line
given once when something breaks (and once when it works again), not at every
retry.

Every program that reconnects or restarts something uses these two, so that
"how long until the next try" and "what the log says meanwhile" behave the
same everywhere.
"""
import logging
import random


class Backoff:
    """Delays that grow by `factor` from `first` up to `cap`.

    `jitter` (a fraction, 0 to 1) shortens each delay by up to that part, at
    random, so that machines that failed together do not retry together.
    `steady` first tries all wait `first` (a short outage is noticed over soon),
    then the delays grow.
    """

    def __init__(self, first, cap, factor=2.0, jitter=0.0, steady=0):
        self.first = first
        self.cap = max(first, cap)
        self.factor = factor
        self.jitter = jitter
        self.steady = steady
        self.current = first  # the next delay, before jitter
        self.failures = 0     # in a row, since the last reset()

    def next(self):
        """The delay before the next try; the one after it is longer (up to the cap)."""
        delay = self.current * random.uniform(1.0 - self.jitter, 1.0) if self.jitter else self.current
        self.failures += 1
        if self.failures >= self.steady:
            self.current = min(self.current * self.factor, self.cap)
        return delay

    def reset(self):
        """It worked: the next failure waits `first` again."""
        self.current = self.first
        self.failures = 0

    def longest(self):
        """Wait the cap from now on (until reset)."""
        self.current = self.cap


class Trouble:
    """"Log once until it works again".

    failed() logs at `level` the first time, and again whenever `kind` differs
    from the last failure's; a repeat is logged at `repeat` (None: not at all).
    recovered() logs its message only if something had failed.
    """

    def __init__(self, logger, level=logging.WARNING, repeat=None):
        self.log = logger
        self.level = level
        self.repeat = repeat
        self.kind = None  # of the current failure; None while things work

    @property
    def failing(self):
        return self.kind is not None

    def failed(self, message, *args, kind="", level=None):
        """Log a failure unless it repeats the last one; True when it was logged as new."""
        new = self.kind != kind
        self.kind = kind
        chosen = (self.level if level is None else level) if new else self.repeat
        if chosen is not None:
            self.log.log(chosen, message, *args)
        return new

    def recovered(self, message=None, *args):
        """It works again: log `message` if it had failed; True if it had."""
        was = self.failing
        self.kind = None
        if was and message:
            self.log.info(message, *args)
        return was


def one_line(error):
    """An exception as one short line for the log."""
    text = str(error) or type(error).__name__
    return " ".join(text.split())
