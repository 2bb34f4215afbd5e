"""The committer's status: its fields in one schema (FIELDS), the state's changes checked
against protocol.STATES, and the events published. Uses the committer's lock (`cond`,
re-entrant). committer/reports.py applies the repository's reports to it.
"""
import time

from autosync.core.protocol import EVENTS, STATES

ABSENT = object()  # a field left out of the status until it is first set

# Every field of the status (docs/protocol.md, "Status") and its value at start.
FIELDS = {
    "state": "starting", "path": None, "host": None,
    "last_commit": None, "last_push": None, "last_pull": None,
    "unpushed": 0, "last_error": None, "conflicts": [],
    "failing": {},  # op -> its error, while it fails (core/problems.py)
    "waiting": None,  # why there is nothing to pull yet
    "held_back": [], "nested_repositories": [],
    "writing": [],  # files left out while open for writing (committer/stillwritten.py)
    "watch": None,  # the watcher's report while folders have no watch
    "folder": None,  # the watcher's report while the folder is away
    "paused": None,
    "upstream": None,  # git: the upstream branch's revision
    "syncmethod": None,  # which link (core/problems.py)
    "link": None,
    "link_polled": None,  # seconds between polls, while the link polls instead of watching
    "link_why": None,     # ... and why: how the watch ended on the server
    "link_held": None,  # the ssh link up: whether its ssh connection is held (one login)
    "mass_delete": ABSENT,  # the last commit that removed many files (committer/massdelete.py)
    "history": ABSENT,  # the history's size here and on the remote (vcs/sizes.py)
    "maintenance": ABSENT,  # the last maintenancecmd run (committer/maintenance.py)
    "progress": None,  # a long step under way (core/underway.py)
    "localonly": ABSENT,  # true: the original's syncmethod = none (core/config.py, local_only)
}
# The state's changes: "starting" only at first, nothing after "stopped".
TRANSITIONS = {state: frozenset(STATES) - {"starting"} for state in STATES}
TRANSITIONS["stopped"] = frozenset()


class Status:
    """The status fields and the events, published through `publish(fields)`."""

    def __init__(self, cond, publish, **fields):
        self.cond, self.publish = cond, publish
        self.fields = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list)
                           else v) for k, v in FIELDS.items()}
        self.update(**fields)

    def update(self, **fields):
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise KeyError("not a status field: %s" % ", ".join(sorted(unknown)))
        if "state" in fields:
            self.check(fields["state"])
        with self.cond:
            self.fields.update(fields)

    def check(self, state):
        if state not in STATES:
            raise ValueError("not a state: %r" % (state,))
        with self.cond:
            now = self.fields["state"]
        if state != now and state not in TRANSITIONS[now]:
            raise ValueError("the state cannot go from %s to %s" % (now, state))

    def state(self, name):
        self.update(state=name)

    def __getitem__(self, key):
        with self.cond:
            value = self.fields[key]
        return None if value is ABSENT else value

    def snapshot(self):
        """A copy of every field set (the nested `failing` too)."""
        with self.cond:
            return {k: dict(v) if k == "failing" else v for k, v in self.fields.items()
                    if v is not ABSENT}

    def event(self, name, **fields):
        if name not in EVENTS:
            raise ValueError("not an event: %r" % (name,))
        fields.update(event=name, time=time.time())
        self.publish(fields)
