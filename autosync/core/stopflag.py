"""Stopping on SIGINT or SIGTERM without surprises.

The signal handler only records the signal and wakes the program's loop;
the loop then stops at a point of its own choosing, never in the middle of a
write or a batch, as an exception raised from the handler would.
"""
import signal


class StopFlag:
    """True once SIGINT or SIGTERM arrived.

    `wake` is called from the handler and must be safe there: os.write to a
    non-blocking pipe or queue.SimpleQueue.put are; anything that takes a
    lock (queue.Queue.put, threading.Event.set) may deadlock.
    """

    def __init__(self, wake=None):
        self.wake = wake
        self.signum = None

    def install(self, signals=(signal.SIGINT, signal.SIGTERM)):
        for sig in signals:
            signal.signal(sig, self._record)
        return self

    def _record(self, signum, frame):
        self.signum = signum
        if self.wake is not None:
            self.wake()

    def __bool__(self):
        return self.signum is not None
