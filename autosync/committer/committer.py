"""autosync-committer: batches -> commits, pushes and pulls.

The only program of the suite that runs DVCS commands (through
committer/repository/). It owns the control socket (docs/protocol.md): the watcher
sends it batches, the XMPP listener asks it to pull, and everyone may
subscribe to what it does. A resume from suspend or the network coming back
(committer/wakeup.py, a thread of this process) asks for a pull and a push at once.

The committer is built here from parts with one job each, every one handed what it
uses at its construction (no part reaches another through the committer):

* Requests (committer/requests.py): the socket's requests, checked and answered, on
  the socket's threads, from one table whose names are protocol.REQUESTS;
* Handover (committer/handover.py): what the requests hand the worker (changes, notes,
  the tickets of pull, sync and describe requests) and the answers it hands back;
* Worker (committer/worker.py): the one thread that does all repository work and
  decides when;
* Status (committer/status.py) and Schedule (committer/schedule.py), with Reports
  (committer/reports.py), what the repository reports to; Pausing
  (committer/pausing.py) and Descriptions (committer/descriptions.py);
* the Repository (committer/repository/).

Committer is their one face to the process: the socket's handle, the worker thread's
run, the signal's stop and the system bus' wake.
"""
import sys
import threading

from autosync.committer import wakeup
from autosync.core import cli
from autosync.committer.descriptions import Descriptions
from autosync.committer.handover import Handover
from autosync.committer.pausing import Pausing
from autosync.committer.reports import Reports
from autosync.committer.requests import Requests
from autosync.committer.schedule import LINKED, Schedule
from autosync.committer.status import Status
from autosync.committer.worker import Worker
from autosync.core.protocol import Server
from autosync.committer.repository import Repository
from autosync.core.stopflag import StopFlag


class Committer:
    """The committer's parts, built in one place; the doors the process uses."""

    def __init__(self, cfg, server=Server, repository=Repository):
        self.cfg = cfg
        # Re-entrant: the signal handler may call stop() while this thread holds it.
        self.cond = threading.Condition(threading.RLock())
        self.handover = Handover(self.cond)
        self.status = Status(self.cond, lambda fields: self.server.publish(fields),
                             path=cfg.path, host=cfg.hostname, syncmethod=cfg.syncmethod,
                             link="down" if cfg.syncmethod in LINKED else None,
                             **({"localonly": True} if cfg.localonly else {}))
        self.schedule = Schedule(cfg, self.cond)
        self.pausing = Pausing(cfg, self.cond, self.status)
        self.descriptions = Descriptions(self.cond, self.status)
        self.reports = Reports(cfg, self.cond, self.status, self.schedule, self.descriptions)
        self.server = server(cfg.socket, self.handle)
        self.repo = repository(cfg, self.reports)
        self.reports.repo = self.descriptions.repo = self.repo
        parts = (self.handover, self.status, self.schedule, self.pausing, self.descriptions,
                 self.reports, self.repo)
        self.requests = Requests(*parts)
        self.worker = Worker(cfg, *parts)

    def handle(self, message, client):
        """The socket's door (the server calls it on its threads)."""
        return self.requests.handle(message, client)

    def run(self):
        """The worker thread's door."""
        # Before anyone can ask: the status never says 0 wrongly.
        self.reports.recount(upstream=True)
        self.server.start()
        self.worker.run()

    def wake(self, reason):
        """The system bus' door (wakeup.SystemBusListener): see Requests.wake."""
        return self.requests.wake(reason)

    def stop(self):
        """The signal's door: the worker finishes the commit in flight and ends."""
        with self.cond:
            self.handover.stopping = self.reports.stopping = True
            self.cond.notify_all()
        self.repo.stop()  # a pull under way ends now, not when its fetch would


def main(argv=None):
    cfg = cli.start("autosync-committer", __doc__, argv, client=False)
    try:
        committer = Committer(cfg)
    except OSError as e:
        cli.die("autosync-committer: %s" % (e.strerror or e))
    worker = threading.Thread(target=committer.run, name="worker", daemon=True)
    # The handler only asks the worker to stop; it finishes the commit in flight
    # (the supervisor's patience bounds that) and the join below returns.
    StopFlag(wake=committer.stop).install()
    worker.start()
    wakeups = wakeup.SystemBusListener(committer.wake).start()
    worker.join()
    wakeups.stop(wait=False)  # a daemon thread: it never holds the exit up
    committer.status.event("stopping")
    committer.server.close()
    committer.repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
