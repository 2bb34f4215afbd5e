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

    def install(self, signals=(signal.SIGINT, signal.SIGTERM), wake_fd=None):
        """wake_fd: the non-blocking pipe end the loop's select() waits on. Python runs
        `_record` (and so `wake`) only between two bytecodes of the main thread: a signal
        that lands just before select() starts, or that the kernel gives another thread,
        would leave the loop asleep until its timeout (for ever, with none). The C-level
        handler writes to wake_fd at once (signal.set_wakeup_fd); the loop's read of the
        pipe takes that byte with the others. Main thread only."""
        for sig in signals:
            signal.signal(sig, self._record)
        if wake_fd is not None:
            signal.set_wakeup_fd(wake_fd, warn_on_full_buffer=False)
        return self

    def _record(self, signum, frame):
        self.signum = signum
        if self.wake is not None:
            self.wake()

    def __bool__(self):
        return self.signum is not None
