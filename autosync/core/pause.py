"""A folder's pause: whether syncing is paused, since and until when, kept across restarts.

The committer holds one Pause. It lives in a small JSON file of its own under
$XDG_STATE_HOME/autosync (default ~/.local/state/autosync), named after the
folder as its socket is (paths.folder_id): state there survives a restart of
the suite and a reboot (the runtime folder of the socket does not), it works
the same for every DVCS, and nothing in the synced folder or its repository
is written for it. The file also remembers that another machine announced a
push while paused, so that a pull is made on resume even after a restart.
"""
import json
import logging
import math
import os
import re
import time

from autosync.core.paths import folder_id, private_folder

log = logging.getLogger("autosync.pause")

LONGEST = 366 * 86400  # seconds: a pause longer than a year is a typo
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd]?)")


def parse_duration(text):
    """'90s', '30m', '2h', '1d' or plain seconds -> seconds; ValueError (one line) if not."""
    found = DURATION.fullmatch(text.strip().lower())
    seconds = float(found.group("n")) * UNITS[found.group("unit") or "s"] if found else 0
    if not found or not 0 < seconds <= LONGEST:
        raise ValueError("expected a duration such as 90s, 30m, 2h or 1d (at most 366d), "
                         "got %r" % text)
    return seconds


def check_seconds(seconds):
    """A pause request's `seconds`: None (until resumed) or a number in (0, LONGEST]."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds) or not 0 < seconds <= LONGEST:
        raise ValueError("seconds must be null (until resumed) or a number of seconds "
                         "from 0 to %d" % LONGEST)
    return float(seconds)


def state_file(folder):
    """Where the pause of `folder` is kept."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "autosync", folder_id(folder) + ".pause")


class Pause:
    """since/until (unix seconds; until None: until resumed) and a pull owed, or not paused."""

    def __init__(self, path):
        self.path = path
        self.since = self.until = None
        self.pull_owed = False
        self._load()

    def active(self):
        """Paused? A pause that has run out stays until lifted: the committer lifts it,
        so that resuming happens in one place."""
        return self.since is not None

    def expired(self, now=None):
        return self.until is not None and (now or time.time()) >= self.until

    def fields(self):
        """The status's `paused`: None or {"since", "until"}."""
        return {"since": self.since, "until": self.until} if self.active() else None

    def start(self, seconds):
        """Pause now (again: a new pause replaces the old one's end, keeps its start)."""
        now = time.time()
        self.since = self.since or now
        self.until = now + seconds if seconds is not None else None
        self._store()

    def owe_pull(self):
        if not self.pull_owed:
            self.pull_owed = True
            self._store()

    def lift(self):
        """Not paused any more; -> whether a pull was owed."""
        owed = self.pull_owed
        self.since = self.until = None
        self.pull_owed = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.error("cannot remove %s: %s; the pause may come back at the next start",
                      self.path, e.strerror or e)
        return owed

    def _store(self):
        data = json.dumps({"since": self.since, "until": self.until,
                           "pull_owed": self.pull_owed})
        temporary = self.path + ".new"
        try:
            private_folder(os.path.dirname(self.path), others=0o022)  # ours, checked
            with open(temporary, "w") as f:
                f.write(data + "\n")
            os.replace(temporary, self.path)  # never half a file after a crash
        except OSError as e:
            log.error("cannot keep the pause in %s: %s; it ends if the suite restarts",
                      self.path, e.strerror or e)

    def _load(self):
        try:
            st = os.stat(self.path)
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            log.warning("ignoring the pause file %s: %s", self.path, e)
            return
        if st.st_uid != os.getuid():
            log.warning("ignoring the pause file %s: it belongs to uid %d, not to you",
                        self.path, st.st_uid)
            return
        data = data if isinstance(data, dict) else {}
        since, until = data.get("since"), data.get("until")
        if not isinstance(since, (int, float)) or not (until is None
                                                       or isinstance(until, (int, float))):
            log.warning("ignoring the pause file %s: it does not hold a pause", self.path)
            return
        self.since, self.until = float(since), until
        self.pull_owed = bool(data.get("pull_owed"))
