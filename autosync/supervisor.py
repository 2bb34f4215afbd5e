"""dvcs-autosync: checks the config, takes the pidfile, runs the suite.

Starts the committer, then the watcher (and the XMPP listener or the ssh link, desktop
notifier and tray icon when the config asks for them), restarts any that
exits, and stops them all on SIGINT or SIGTERM. `dvcs-autosync log|restore`
go to tools/history.py, `dvcs-autosync conflicts` to tools/conflicts.py, `dvcs-autosync
status|pause|resume|sync|pull|describe` to tools/notify.py (as autosync-notify),
`dvcs-autosync init` to tools/init/,
`dvcs-autosync expire` to tools/expire.py.
"""
import ctypes
import errno
import logging
import os
import signal
import subprocess
import sys
import time

from autosync.core import cli, config
from autosync.core import daemons, protocol
from autosync.core.protocol import Untrusted
from autosync.core.retry import Backoff
from autosync.tools.commands import COMMANDS  # `dvcs-autosync WORD ...`: its main()

log = logging.getLogger("autosync")

STOP_GRACE = 4.5  # seconds the programs get to finish before SIGKILL
BACKOFF_MIN, BACKOFF_MAX = 0.5, 30.0  # seconds before restarting a program that exited
STABLE_AFTER = 60.0  # a program that ran this long starts its backoff afresh


def process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def take_pidfile(path):
    """Write our PID to `path`; exit if a live dvcs-autosync already holds it."""
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    if pid and pid != os.getpid() and process_alive(pid) and _is_autosync(pid):
        cli.die("dvcs-autosync: already running for this config with PID %d (pidfile %s)"
                % (pid, path), status=1)
    if pid:
        log.info("replacing stale pidfile %s (PID %d)", path, pid)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        # No newline: the original dvcs-autosync tests os.path.exists("/proc/" + the
        # file's whole text), so this is how it sees a running daemon and refuses.
        f.write("%d" % os.getpid())
    os.replace(tmp, path)


def release_pidfile(path):
    """Remove the pidfile only while it names this process (not another daemon's)."""
    try:
        with open(path) as f:
            mine = f.read().strip() == str(os.getpid())
    except OSError:
        return
    if mine:
        remove(path)


def _is_autosync(pid):
    """Whether `pid` runs a dvcs-autosync (ours, by launcher or module, or the original's)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return True  # cannot tell: better refuse than run twice
    # By its arguments, not anywhere in the text: the Python running another program
    # may itself live in a folder named after us (/opt/autosync-test/venv/bin/python3).
    return any(os.path.basename(arg) == b"dvcs-autosync" or arg == b"autosync.supervisor"
               for arg in args)


def other_daemon(cfg):
    """(PID, config file) of another running dvcs-autosync of this user that syncs our
    folder under another config, or None. The socket check sees only our own daemons;
    this also sees the original (a Python script named dvcs-autosync, which makes no
    socket), read from each process's command line, working folder and HOME."""
    mine = os.path.realpath(cfg.path)
    for pid, args, file in daemons.running(COMMANDS):
        if os.path.realpath(file) == os.path.realpath(cfg.file):
            continue  # the same config: the pidfile decides (take_pidfile)
        path = daemons.synced_folder(pid, args, file)
        if path and os.path.realpath(path) == mine:
            return pid, file
    return None


SIGNALS = {signal.SIGCHLD, signal.SIGINT, signal.SIGTERM}


def _child_setup():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # the mask is inherited
    # If the supervisor is killed outright, its programs stop cleanly too.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


# python -m autosync.X runs each program (a folder's __main__.py for the first four)
MODULES = {"committer": "committer", "watcher": "watcher", "xmpp": "xmpp",
           "desktop": "desktop", "sshlink": "ssh.link", "tray": "desktop.tray"}


class Program:
    """One program of the suite, and when to start it again."""

    def __init__(self, module, args):
        self.name = "autosync-" + module
        self.argv = [sys.executable, "-m", "autosync." + MODULES.get(module, module)] + args
        self.proc = None
        self.started = 0.0
        self.backoff = Backoff(BACKOFF_MIN, BACKOFF_MAX)
        self.next_start = 0.0

    def start(self):
        # The programs read the same file: its warnings were said once, by us.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **{config.WARNED: "1"}),
                                     preexec_fn=_child_setup)
        self.started = time.monotonic()
        log.debug("started %s (PID %d)", self.name, self.proc.pid)

    def check(self, now):
        """Notice an exit and schedule a restart with backoff; start it when due."""
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            if code == cli.STOP_ALL:
                return code  # it said why; nothing would be better after a restart
            why = "was killed by signal %d" % -code if code < 0 else "exited with status %d" % code
            if now - self.started > STABLE_AFTER:
                self.backoff.reset()
            delay = self.backoff.next()
            log.warning("%s %s; restarting in %.1f s", self.name, why, delay)
            self.proc = None
            self.next_start = now + delay
        if self.proc is None and now >= self.next_start:
            self.start()

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)


def wait_for_socket(path, committer, timeout=30.0):
    """Wait until the committer answers on its socket (it opens it before any DVCS work).
    False if it exited first, or if what answers is not this user's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and committer.proc.poll() is None:
        try:
            if protocol.answers(path):
                return True
        except Untrusted as e:
            log.error("%s", e)
            return False
        time.sleep(0.05)
    return False


def answers(path):
    try:
        return protocol.answers(path)
    except Untrusted:
        return False


def programs(cfg, args):
    wanted = ["committer", "watcher"]
    if cfg.syncmethod == "ssh":
        wanted.append("sshlink")
    if cfg.syncmethod == "xmpp" or cfg.notifymethod in ("xmpp", "all"):
        wanted.append("xmpp")
    if cfg.notifymethod in ("desktop", "all"):
        wanted.append("desktop")
    if cfg.tray:
        wanted.append("tray")
    return [Program(name, args) for name in wanted]


def stop(running):
    """SIGTERM everyone; the committer last, once the watcher has handed over its batch."""
    deadline = time.monotonic() + STOP_GRACE
    committer, others = running[0], running[1:]
    for program in others:
        program.signal(signal.SIGTERM)
    for program in others:
        if program.proc is not None:
            try:
                program.proc.wait(max(0.0, deadline - 2.0 - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    committer.signal(signal.SIGTERM)
    for program in running:
        if program.proc is None:
            continue
        try:
            program.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in time: killing it", program.name)
            program.proc.kill()
            program.proc.wait()


def command(argv):
    """argv for one of COMMANDS, its word first (a `--config FILE` before it is moved after
    it); None when argv names none, or when the word names a file (a config file that is
    named `log` still wins, as it always did)."""
    words, config = list(argv), []
    while words and (words[0] == "--config" or words[0].startswith("--config=")):
        taken = 1 if "=" in words[0] else 2
        config, words = words[:taken], words[taken:]
    if words and words[0] in COMMANDS and not os.path.isfile(words[0]):
        return words + config
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    routed = command(argv)
    if routed:
        return COMMANDS[routed[0]](routed)
    if argv and argv[0] in COMMANDS:  # and a file of that name is here (command())
        print("dvcs-autosync: %s is a file here: read as the config file, as the original "
              "dvcs-autosync CONFIG did; for the command, run it in another folder"
              % argv[0], file=sys.stderr)
    parser = cli.parser("dvcs-autosync", __doc__)
    parser.epilog = ("Set up a machine: dvcs-autosync init REMOTE FOLDER [--account "
                     "USER@DOMAIN] [--service]; how it runs: dvcs-autosync status; "
                     "pause [DURATION], resume, sync, describe TEXT (as autosync-notify); "
                     "old versions: dvcs-autosync log [PATH], dvcs-autosync restore PATH "
                     "[--at WHEN]; conflict copies: dvcs-autosync conflicts [--keep "
                     "mine|theirs PATH]; old large files off the remote: dvcs-autosync "
                     "expire --older-than AGE [--yes]; --help after any tells more.")
    args = parser.parse_args(argv)
    cli.setup_logging(args.verbose)
    cfg = cli.load(args.config)
    cli.trust("dvcs-autosync", cfg.socket)  # a squatted socket folder: start nothing
    take_pidfile(cfg.pidfile)
    if answers(cfg.socket):  # another config file, the same folder (and socket)
        release_pidfile(cfg.pidfile)
        cli.die("dvcs-autosync: a daemon already runs for %s (its socket %s answers); "
                "not starting a second one" % (cfg.path, cfg.socket), status=1)
    other = other_daemon(cfg)
    if other:  # the original (or ours under another config) runs for this folder
        release_pidfile(cfg.pidfile)
        cli.die("dvcs-autosync: another dvcs-autosync (PID %d, config %s) already syncs %s; "
                "not starting a second one" % (other[0], other[1], cfg.path), status=1)
    child_args = [cfg.file] + (["-v"] if args.verbose else [])
    running = programs(cfg, child_args)
    # Signals are taken synchronously below: no polling, no handler races.
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        committer = running[0]
        committer.start()
        if not wait_for_socket(cfg.socket, committer):
            # Without its socket nothing else may run: the others would talk to
            # whoever holds it. The committer said why (another daemon, a squatter).
            log.error("autosync-committer could not open its socket %s; starting nothing "
                      "else and stopping", cfg.socket)
            stop(running[:1])
            return 1
        code = supervise(running)
        log.info("stopping")
        stop(running)
        if code:
            return code
    finally:
        # Only what this process made: the socket and the excludes file are the
        # committer's, which removes them itself (a killed one's are replaced at start).
        release_pidfile(cfg.pidfile)
    return 0


def supervise(running):
    """Restart what exits, until SIGINT or SIGTERM (-> None), or until a program
    exits with cli.STOP_ALL (-> that status)."""
    while True:
        now = time.monotonic()
        for program in running:
            if program.check(now) == cli.STOP_ALL:
                return cli.STOP_ALL
        waiting = [p.next_start - now for p in running if p.proc is None]
        if waiting:
            info = signal.sigtimedwait(SIGNALS, max(0.01, min(waiting)))
        else:
            info = signal.sigwaitinfo(SIGNALS)
        if info is not None and info.si_signo != signal.SIGCHLD:
            return


def remove(path):
    try:
        os.unlink(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            log.warning("could not remove %s: %s", path, e.strerror)


if __name__ == "__main__":
    sys.exit(main())
