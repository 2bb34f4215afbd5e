"""autosync-sshlink: `syncmethod = ssh`, pulls when the remote moves, without XMPP.

One long-lived command (`watchcmd`; by default made from the remote's
address: `ssh HOST autosync-remote watch PATH`, or `autosync-remote watch
PATH` run here for a remote on a local path) prints `REF REVISION` for every
branch, then for every movement (autosync/ssh/remote.py). We pull when a line
names a revision this repository does not have: another machine's push. Our
own push names a revision we made, so it costs no pull.

The same guarantees as the XMPP listener (autosync/xmpp/listener.py):
* the link is up once the command printed its first line; then we pull once
  (whatever moved while we were not watching), and tell the committer, which
  then pulls every `safetypull` instead of every `pullinterval`;
* the command ending (a dropped connection, sshd restarted, killed) brings
  the link down and starts it again after a jittered backoff;
* a command that ends before its first line (a refused login, autosync-remote
  missing on the server) is the `link` problem, with the command's own last
  words on stderr (ssh's), until a later start works;
* a server that cannot run the watch (the command ends before its first line
  with its own exit, not ssh's 255: a hosted git without a shell, a server
  without autosync-remote and python3) is polled instead, with `git
  ls-remote` every 10 s (autosync-remote poll, run here), said once;
* the first tries after a drop come about a second apart (`backoff_steady` of
  them), so the link is back within about a second of the server; only a long
  outage waits longer;
* after the machine slept (CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC), the
  watch is started again at once over a new connection: the old one may be
  dead without knowing it for up to the keep-alives' 45 s.
Each folder (config) runs its own link, with its own watch. The ssh connection
under it is held and shared (vcs/remote.py): the same one carries this
machine's pushes and fetches to that server.
"""
import ctypes
import logging
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from autosync.core import client, problems
from autosync.vcs import commands
from autosync.ssh.watch import POLL, REFUSED_BY_KEY, cannot_watch, watch_argv, why_it_ended
from autosync.core.retry import Backoff, Trouble, one_line
from autosync.vcs.remote import BadRemote

log = logging.getLogger("autosync.sshlink")

REVISION = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
ZERO = re.compile(r"0+")
STDERR_KEPT = 8192  # bytes of the command's stderr kept for the reason it stopped
CONNECT_WAIT = 30.0  # seconds the watch waits for the held connection (ConnectTimeout 20)


@dataclass
class LinkTiming:
    """Every delay of the link, in seconds; tests make them small."""
    backoff_min: float = 1.0       # first wait before starting the command again ...
    backoff_max: float = 60.0      # ... doubling up to this
    backoff_steady: int = 20       # ... after this many tries at backoff_min
    stable: float = 30.0           # a link up this long starts the backoff afresh
    committer_retry: float = 1.0   # wait before reconnecting to the committer's socket
    pull_timeout: float = 660.0    # longer than the committer's own 600 s for a pull
    stop_grace: float = 2.0        # the command gets this long to end after SIGTERM
    sleep_check: float = 5.0       # how often the clocks are compared (a sleep seen) ...
    slept: float = 3.0             # ... and how far apart they must drift to count


def asleep():
    """Seconds this machine has been suspended since it booted (Linux: CLOCK_BOOTTIME
    counts them, CLOCK_MONOTONIC does not)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()


# Looked up once, here: the child of a fork in a threaded program should load nothing.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the watch command's process: SIGTERM when the link dies (even by SIGKILL), so
    no ssh is left behind holding a watch on the server."""
    _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGTERM))


def have(path, rev):
    """Whether the repository at `path` holds the commit `rev` (read only). Not `cat-file
    -e`: on a thin machine (a partial clone, vcs/thin.py) it fetches a missing commit by
    itself, and the pull it stands for would never be made; rev-list with --missing
    fetches nothing."""
    return subprocess.run(["git", "rev-list", "--missing=print", "--no-walk",
                           rev + "^{commit}"], cwd=path,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


class Link(client.CommitterLink):
    """The single loop: the watch command's output, its restarts, and the committer."""

    def __init__(self, cfg, timing=None, argv=watch_argv, have=have, asleep=asleep):
        self.cfg = cfg
        t = self.timing = timing or LinkTiming()
        self.argv = argv
        self.have = have
        self.asleep = asleep
        self.slept_until = asleep()  # asleep() when last looked at
        self.release = None       # lets the held ssh connection go (vcs/remote.py's let_go)
        self.poll = None          # -> (argv, shown, env) polling the remote instead
        self.held = None          # the held connection's control socket, or None
        self.polling = False      # the server cannot run the watch: polled instead ...
        self.polled_why = None    # ... for this reason (the watch's end, its words)
        super().__init__(cfg, t, log)
        self.proc = None
        self.out = b""            # a line begun on the command's stdout
        self.err = b""            # the end of its stderr
        self.err_open = False     # its stderr not at its end yet
        self.up_since = None      # when the current command printed its first line
        self.backoff = Backoff(t.backoff_min, t.backoff_max, jitter=0.2, steady=t.backoff_steady)
        self.next_start = 0.0
        self.trouble = Trouble(log, logging.ERROR, repeat=logging.INFO)
        self.shown = ""           # the command, for the log

    # -- the loop

    def ending(self):
        self._end_command()

    def step(self):
        now = time.monotonic()
        if self.proc is None and now >= self.next_start:
            self.start()
        fds = [self.inbox]
        if self.proc is not None:
            fds += [self.proc.stdout] + ([self.proc.stderr] if self.err_open else [])
        timeout = self.timing.sleep_check if self.proc is not None else \
            min(self.timing.sleep_check, max(0.0, self.next_start - now))
        readable, _, _ = select.select(fds, [], [], timeout)
        if self._woke():
            return
        for event in self.inbox.take():
            if event.get("event") == "_subscribed":
                self.link.again()  # the committer may have restarted: it forgot
        if self.proc is not None and self.proc.stderr in readable:
            self._read_stderr()
        if self.proc is not None and self.proc.stdout in readable:
            data = os.read(self.proc.stdout.fileno(), 65536)
            if data:
                self.received(data)
            else:
                self.ended()

    def _woke(self):
        """After a sleep: the watch again at once, over a new connection. -> True if so."""
        now = self.asleep()
        gap, self.slept_until = now - self.slept_until, now
        if gap < self.timing.slept:
            return False
        log.info("this machine slept %.0fs: watching again over a new connection", gap)
        if self.proc is not None:
            self._end_command()
            self._tell_link(False)
        if self.release:
            self.release()  # a connection made before the sleep may be dead: not reused
        self.backoff.reset()
        self.next_start = time.monotonic()
        return True

    # -- the command

    def start(self):
        self.out, self.err, self.up_since = b"", b"", None
        try:
            made = self.argv(self.cfg)  # a WatchCommand (ssh/watch.py)
            argv, self.shown, env = made.argv, made.shown, None
            self.release, self.poll, self.held = made.release, made.poll, made.held
            if made.master is not None and not self._connected(made.master):
                return  # stopping
            if self.polling and self.poll:
                argv, self.shown, env = self.poll()
        except (commands.CommandFailed, BadRemote, ValueError, OSError) as e:
            return self._failed("cannot make the watch command: %s (set watchcmd in [dvcs], or "
                                "use syncmethod = none with pullinterval)" % one_line(e))
        try:
            # Its own process group (stopped as one), ended with us even if we are killed.
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         preexec_fn=_die_with_parent, env=env)
        except OSError as e:
            return self._failed("cannot run the watch command %s: %s" % (self.shown, e.strerror))
        os.set_blocking(self.proc.stderr.fileno(), False)
        self.err_open = True
        log.info("watching the remote: %s", self.shown)

    def _connected(self, master):
        """Wait for the held connection's master to log in (or fail: the watch then
        connects by itself and says why), but not past a stop. -> False when stopping."""
        deadline = time.monotonic() + CONNECT_WAIT
        while master.poll() is None and not self.stopping and time.monotonic() < deadline:
            time.sleep(0.02)
        if master.poll() is None and self.stopping:
            master.end()  # still logging in: the master never comes
        return not self.stopping

    def _read_stderr(self):
        """What the command says on stderr, the end of it kept; never waits."""
        try:
            data = os.read(self.proc.stderr.fileno(), 65536)
        except BlockingIOError:
            return 0
        if not data:
            self.err_open = False  # closed: select() would report it for ever
        self.err = (self.err + data)[-STDERR_KEPT:]
        return len(data)

    def received(self, data):
        lines = (self.out + data).split(b"\n")
        self.out = lines.pop()[-4096:]
        connecting = self.up_since is None
        for line in lines:
            self.moved(line.decode("utf-8", "replace").strip(), check=not connecting)

    def moved(self, line, check=True):
        """One `REF REVISION` line. The first one brings the link up; the lines read with
        it are the state at connecting, which the catch-up pull covers."""
        ref, _, rev = line.rpartition(" ")
        if not ref or not REVISION.fullmatch(rev):
            if line:  # a login banner, say: not yet a sign that the watch runs
                log.warning("ignoring a line of the watch command: %.100r", line)
            return
        if self.up_since is None:
            self._came_up()
        if not check or ZERO.fullmatch(rev):
            return
        if self.have(self.cfg.path, rev):
            log.debug("%s is at %.12s, which we have", ref, rev)
            return
        self._pull("%s moved to %.12s" % (ref, rev))

    def _came_up(self):
        self.up_since = time.monotonic()
        self.trouble.recovered()
        log.info("link up: the remote is watched")
        self._tell_link(True)
        # What was pushed while nobody watched never printed a line: catch up.
        self._pull("catch-up after connecting")

    def ended(self):
        """The command's stdout closed: it ended (or will): start it again later."""
        proc = self.proc
        try:
            proc.wait(self.timing.stop_grace)
        except subprocess.TimeoutExpired:
            self._kill(proc)
        while self.err_open and self._read_stderr():
            pass  # its last words, up to their end (never waits)
        self.proc = None
        proc.stdout.close()
        proc.stderr.close()
        reason = why_it_ended(proc.returncode, self.err)
        if self.up_since is None and self.poll and not self.polling and \
                cannot_watch(proc.returncode):
            if REFUSED_BY_KEY in reason:  # an old line after an upgrade: what to do
                reason += "; " + problems.POLLED_FIX
            self.polling, self.polled_why = True, reason
            self.next_start = time.monotonic()
            log.warning("%s: the server cannot run the watch; polling the remote with git "
                        "ls-remote every %g s instead", reason, POLL)
            return
        if self.up_since is None:
            if self.release:  # the next try logs in anew: the server may have changed
                self.release()  # its mind (a key's forced command edited meanwhile)
            return self._failed(reason)
        if time.monotonic() - self.up_since >= self.timing.stable:
            self.backoff.reset()
        delay = self.backoff.next()
        self.next_start = time.monotonic() + delay
        log.warning("%s; link down, watching again in %.1fs", reason, delay)
        self._tell_link(False)

    def _failed(self, reason):
        delay = self.backoff.next()  # jittered: machines that failed together spread out
        self.next_start = time.monotonic() + delay
        self.trouble.failed("%s; trying again in %.1fs", reason, delay, kind=reason)
        self._tell_link(False, reason)  # the `link` problem, by name, until it works

    def _end_command(self):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # ssh and whatever it started here
            proc.wait(self.timing.stop_grace)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            self._kill(proc)
        proc.stdout.close()
        proc.stderr.close()

    @staticmethod
    def _kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    # -- the committer

    def _tell_link(self, up, error=None):
        # Polled (the server cannot run the watch): up, and said to be polled every POLL s.
        # Held: whether the watch went through the held connection (its master is up),
        # or every command logs in by itself; None where the user's own multiplexing is
        # used, or a watchcmd.
        held = None if not up or self.held is None else \
            self.held is not False and os.path.exists(self.held)
        if up and self.polling:  # (an old forced command on the key, say: its own words)
            error = self.polled_why
        self.link.tell(up, error, POLL if self.polling else None, held)

    def _pull(self, why):
        log.info("asking the committer to pull (%s)", why)
        self.pulls.put("pull", {"cmd": "pull"})


def main(argv=None):
    """autosync-sshlink [CONFIG] [-v]: pull when the remote moves (syncmethod = ssh)."""
    return Link.main("autosync-sshlink", main.__doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
