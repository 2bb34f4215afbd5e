"""What the history page changes, each through the product's own way of doing it:
`dvcs-autosync restore` (restore a version, bring a removed file back),
`dvcs-autosync conflicts --keep` (settle a conflict), and the daemon's `pause` and
`resume` requests. The page writes nothing into the folder itself: the commands keep
their promises (never over unsaved work, committed first and after, one change), and
the daemon serialises what two tabs ask at once.

Each returns (ok, words): the command's own words, shown on the page as they are.
"""
import subprocess
import sys

from autosync.core import protocol
from autosync.core.messages import escaped

TIMEOUT = 900  # seconds a restore may take (the daemon's sync waits up to 600)


def command(folder, *words):
    """Run `dvcs-autosync WORDS... --config FILE` -> (ok, what it said). A name is always
    one argument after `--`, never read as an option nor by a shell."""
    argv = [sys.executable, "-m", "autosync.supervisor", words[0], "--config",
            folder.cfg.file] + list(words[1:])
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, cwd="/", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, "dvcs-autosync %s took longer than %d s; see the log" % (words[0], TIMEOUT)
    said = done.stdout.decode("utf-8", "replace").strip()
    return done.returncode == 0, said or ("done" if done.returncode == 0 else
                                          "failed (exit %d)" % done.returncode)


def restore(folder, rel, rev=None):
    """Make rel what it was at rev (None: the version before its last change, which
    brings a removed file back)."""
    return command(folder, "restore", *(["--at", rev] if rev else []), "--", rel)


def keep(folder, copy, which):
    """Settle the conflict copy `copy`: which is mine, theirs or both."""
    if which not in ("mine", "theirs", "both"):
        return False, "keep what? mine, theirs or both"
    return command(folder, "conflicts", "--keep", which, "--", copy)


def pause(folder, resume=False):
    request = {"cmd": "resume"} if resume else {"cmd": "pause"}
    try:
        reply = protocol.ask(folder.cfg.socket, request, timeout=660)
    except (protocol.NoDaemon, protocol.Untrusted, protocol.ProtocolError, OSError,
            ValueError) as e:
        return False, "no answer from the daemon: %s" % escaped(e)
    if not reply.get("ok"):
        return False, str(reply.get("error"))
    if resume:
        return True, "resumed: syncing again" if reply.get("resumed") else "it was not paused"
    return True, "paused: nothing is committed, pushed or pulled until you resume"
