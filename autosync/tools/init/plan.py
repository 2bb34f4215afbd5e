"""What init sets up (a Setup: folder, remote, method, account), as each step learns it:
the small value every step takes."""
import dataclasses
import functools
import os
import socket
import sys
import shutil
from typing import Optional

from autosync.core import config
from autosync.core.messages import escaped
from autosync.tools import progress


class Refused(Exception):
    """init cannot go on; str() is the one line that says why."""


def say(text):
    print(escaped(text), flush=True)


def local_path(remote):
    """An existing local path as an absolute one (the config and the clone's origin then
    work from anywhere); a URL or `host:path` as it is."""
    expanded = os.path.expanduser(remote)
    if "://" not in remote and os.path.exists(expanded):
        return os.path.abspath(expanded)
    return remote


def installed_program():
    """The absolute path of the dvcs-autosync that is running now (its launcher, the
    venv's, or the one on PATH), for the unit and the start command."""
    here = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    candidates = [here if os.path.basename(here) == "dvcs-autosync" else "",
                  os.path.join(os.path.dirname(sys.executable), "dvcs-autosync"),
                  shutil.which("dvcs-autosync") or ""]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


@dataclasses.dataclass
class Setup:
    args: object  # the parsed command line (parser() in __init__.py)
    config: str  # the config file to write, absolute
    folder: str  # the synced folder, absolute
    remote: str  # as the clone's origin will name it
    host: str
    program: Optional[str]  # the installed dvcs-autosync, for the unit and start command
    # Learnt by the checks:
    mode: str = ""  # "clone", "join" or "take" (checks.folder)
    empty: bool = False  # the remote has no branch yet (checks.remote)
    # The method: an XMPP account (config.Xmpp once its login worked), else the remote's
    # own watch: watch_why None once it worked; watch_how None (autosync-remote), "sent"
    # (the server's python3), or why the server cannot run it (then it is polled).
    xmpp: Optional[config.Xmpp] = None
    watch_why: Optional[str] = "not tried"
    watch_how: Optional[str] = None
    password_kept: Optional[str] = None  # the config's [xmpp] password, or `keyring`
    unit: Optional[str] = None  # the systemd unit's path, with --service (unit.check)
    started: bool = False  # the unit was enabled and started

    @classmethod
    def of(cls, args):
        return cls(args=args,
                   config=os.path.abspath(os.path.expanduser(args.config or
                                                             config.default_path())),
                   folder=os.path.abspath(os.path.expanduser(args.folder)),
                   remote=local_path(args.remote), host=socket.gethostname(),
                   program=installed_program())

    @functools.cached_property
    def progress(self):
        """What init is doing and how far, on the terminal (nothing elsewhere)."""
        return progress.Progress()
