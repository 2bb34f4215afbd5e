"""The repository's upkeep, run by the committer's worker between its own commands.

git packs loose objects, drops what nothing refers to and writes the commit-graph
when `git maintenance run --auto` (or `gc --auto`) decides it is worth it. git
starts that by itself after a commit or a fetch, in the background (a detached
gc), where it would run beside the daemon's next commit or pull. So the daemon's
commands run with `maintenance.auto=false` (vcs/git_environment.py) and the daemon
runs `maintenancecmd` itself:

  * in the committer's worker thread, the one thread that runs repository
    commands: never while a commit, a push or a pull runs, by construction;
    changes made meanwhile wait in the queue and are committed right after;
  * at most once per `maintenanceinterval` (an hour by default), and only after
    the repository has been quiet for a while (the interval, at most 30 s), so
    that a burst of work is not held up by it;
  * not while paused, nor while stopping.

`maintenancecmd` is a command string like the others: a Mercurial user or anyone
with their own upkeep sets theirs; empty (or maintenanceinterval = 0) turns it off.
A failure is logged once until it works again, and said in `status`; it stops
nothing. The history's size shown in `status` (vcs/sizes.py) is measured here too:
in idle time, at most once a minute after work, and after each maintenance.

`largefileskeep` (an age) is applied here as well: each run ends with `dvcs-autosync
expire --yes` at that age (vcs/largefiles.py), each drop logged; it runs even with
an empty `maintenancecmd`, never with maintenanceinterval = 0.
"""
import logging
import time

from autosync.vcs import commands, largefiles, sizes
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.maintenance")

QUIET = 30.0  # seconds without repository work before the upkeep may start
TIMEOUT = 4 * 3600.0  # seconds a run may take at most (a first gc of a big history)


class Upkeep:
    """The schedule of one committer's maintenance. The committer calls timeout() for
    how long its worker may sleep and tick() after each of its steps, in its worker."""

    def __init__(self, committer, clock=time.monotonic, gitenv=PLAIN):
        self.committer, self.gitenv = committer, gitenv  # gitenv: the repository's
        cfg = committer.cfg
        self.template = commands.Template("maintenancecmd",
                                          getattr(cfg, "commands", {}).get("maintenancecmd")
                                          or "", gitenv)
        self.interval = getattr(cfg, "maintenanceinterval", 0.0)
        self.quiet = min(QUIET, self.interval)
        self.clock = clock
        self.keep = getattr(cfg, "largefileskeep", "")  # annexed versions' age: expire
        self.on = bool(self.interval) and (not self.template.empty or bool(self.keep))
        self.last_work = clock()
        self.next_at = clock() + self.interval if self.on else None
        self.failing = False
        self.runs = 0
        # The history's size (vcs/sizes.py): measured at the first idle moment, then after
        # work at most every MEASURE_EVERY seconds, and after each maintenance.
        self.measure_sizes = bool(getattr(cfg, "path", None))
        self.stale = True
        self.measured_at = None

    def due_at(self):
        """When the next run may start (monotonic), None when never."""
        if not self.on:
            return None
        return max(self.next_at, self.last_work + self.quiet)

    def measure_at(self):
        """When the history's size is to be measured again (monotonic), None if not."""
        if not self.measure_sizes or not self.stale:
            return None
        # (never measured: due since always; not clock(), which the next call passes)
        return float("-inf") if self.measured_at is None else \
            self.measured_at + sizes.MEASURE_EVERY

    def timeout(self, sleep):
        """The worker's wait: `sleep` (its own, None for ever), shortened to the upkeep's."""
        dues = [d for d in (self.due_at(), self.measure_at()) if d is not None]
        if not dues:
            return sleep
        left = max(0.0, min(dues) - self.clock())
        return left if sleep is None else min(sleep, left)

    def measure(self):
        """The history's size into the committer's status (field `history`)."""
        c = self.committer
        self.measured_at, self.stale = self.clock(), False
        found = sizes.measure(c.cfg.path, gitenv=self.gitenv)
        if found is None:
            self.measure_sizes = False  # no git: nothing to show, never again
            return
        c.status.update(history=found)

    def tick(self, worked):
        """After a step of the worker: `worked` whether it had anything to do. Runs the
        maintenance when it is due and nothing else waits."""
        now = self.clock()
        if worked:
            self.last_work = now
            self.stale = True
            return False
        measure = self.measure_at()
        if measure is not None and now >= measure:
            self.measure()
        due = self.due_at()
        c = self.committer
        if due is None or now < due:
            return False
        with c.cond:
            blocked = c.stopping or c.pausing.active() or c.has_work()
        if blocked:  # looked at again a little later, not at every wake of the worker
            self.next_at = now + max(self.quiet, 1.0)
            return False
        self.run()
        return True

    def expire(self):
        """largefileskeep: the drops of `dvcs-autosync expire --yes`, each line logged ->
        an error's line, or None."""
        said = []  # (level, line): what it dropped; what it keeps, hourly, only in the debug log
        try:
            found = largefiles.expiring(self.committer.cfg, self.keep, gitenv=self.gitenv)
            remote = found.remote
            for version, size, where in found.drops:
                said.append((logging.INFO, "dropping from %s: %s" % (
                    largefiles.placed(where, remote), largefiles.describe(version, size))))
            for version, why in found.kept:
                said.append((logging.DEBUG, "keeping: %s: %s" % (
                    largefiles.describe(version, largefiles.key_size(version.key)), why)))
            if not found.drops:
                said.append((logging.DEBUG, "nothing to expire: no annexed version replaced "
                             "more than %s ago is on %s or here and got by every machine"
                             % (found.age, remote)))
            failed = []
            for version, size, place, why in largefiles.dropping(found, gitenv=self.gitenv):
                failed.append(version)
                said.append((logging.WARNING, "not dropped from %s: %s: %s" % (
                    largefiles.placed((place,), remote), largefiles.describe(version, size),
                    why or "git-annex refused")))
            if found.drops:
                done = [d for d in found.drops if d[0] not in failed]
                said.append((logging.INFO, "dropped %d versions (%s)%s" % (
                    len(done), largefiles.freed(done, remote) or "nothing freed",
                    "; %d refused by git-annex (above)" % len(set(failed)) if failed else "")))
        except (OSError, largefiles.ExpireError) as e:
            return "expire (largefileskeep = %s): %s" % (self.keep, e)
        for level, line in said:
            log.log(level, "expire (largefileskeep = %s): %s", self.keep, line)
        return None

    def run(self):
        c = self.committer
        started = time.time()
        c.status.update(maintenance=dict(c.status["maintenance"] or {}, running=started))
        error = None
        try:
            if not self.template.empty:
                self.template.run(cwd=c.cfg.path, timeout=TIMEOUT)
        except commands.CommandFailed as e:
            error = str(e)
        if self.keep:
            error = self.expire() or error
        self.runs += 1
        ended = time.time()
        self.last_work = self.clock()
        self.next_at = self.clock() + self.interval
        if error:
            if not self.failing:
                log.warning("maintenance (maintenancecmd) failed: %s; syncing goes on, it is "
                            "tried again in %g s", error, self.interval)
            self.failing = True
        else:
            if self.failing:
                log.info("maintenance works again")
            self.failing = False
            log.info("maintenance done in %.1f s", ended - started)
        c.status.update(maintenance={"last": ended, "took": round(ended - started, 3),
                                     "error": error})
        if self.measure_sizes:
            self.measure()  # what the upkeep freed
