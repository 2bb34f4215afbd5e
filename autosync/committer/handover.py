"""The hand-over between the committer's socket threads and its worker.

A part that committer.Committer owns (it uses the committer's lock, `cond`). The
requests (committer/requests.py) hand the worker (committer/worker.py) the changes the
watcher sent (Pending), the notes for the top of a commit message (Note), and the pull,
sync and describe requests as tickets, which a socket thread waits on (wait_for) and
the worker serves (finish). The worker hands back the answers, and the remote's address
the link and pushed answers name; a stop is handed to both.
"""


class Pending:
    """Changes received from the watcher and not committed yet, one entry per path."""

    def __init__(self):
        self.changes = {}
        self.rescan = False

    def add(self, changes, rescan=False):
        for change in changes:
            old = self.changes.pop(change["path"], None)
            if old and old["action"] == "added" and change["action"] == "modified":
                change = old  # still new to the repository
            self.changes[change["path"]] = change
        self.rescan = self.rescan or rescan

    def take(self):
        changes, rescan = list(self.changes.values()), self.rescan
        self.changes, self.rescan = {}, False
        return changes, rescan

    def __bool__(self):
        return bool(self.changes) or self.rescan


class Note:
    """A line for the top of a commit message; `paths`: the change it belongs to (a path
    and what is below it, "." the whole folder), or None: the next sync's commit."""

    def __init__(self, text, paths):
        self.text, self.paths = text, paths

    def touched_by(self, changes):
        if self.paths is None:
            return False
        if "." in self.paths:
            return bool(changes)
        touched = {c.get(k) for c in changes for k in ("path", "src") if c.get(k)}
        return any(t == p or t.startswith(p + "/") or p.startswith(t + "/")
                   for t in touched for p in self.paths)


def joined(notes):
    return "; ".join(n.text for n in notes) or None


class Handover:
    """What the two sides hand each other, under the committer's lock."""

    def __init__(self, cond):
        self.cond = cond
        self.pending = Pending()
        self.stopping = False
        self.wanted = {"pull": 0, "sync": 0, "describe": 0}  # requests made, by kind
        self.done = {"pull": 0, "sync": 0, "describe": 0}  # requests served
        self.results = {}
        # What a commit message says first (a restore's, a settle's): Note()s, placed on
        # the next commit touching their paths, else on the next sync's commit.
        self.notes = []
        self.noted = []  # notes placed since the last sync answered (its reply says so)
        self.url = ""  # the remote's address, for announcements (remoteurlcmd)

    def wait_for(self, kind, timeout):
        """Ask the worker for a pull or a sync and wait until one that began after now ends."""
        with self.cond:
            self.wanted[kind] += 1
            ticket = self.wanted[kind]
            self.cond.notify_all()
            ok = self.cond.wait_for(lambda: self.done[kind] >= ticket or self.stopping,
                                    timeout=float(timeout))
            if self.done[kind] < ticket and self.stopping:
                return {"ok": False, "stopping": True,
                        "error": "the daemon is stopping before the %s was made" % kind}
            if not ok or self.done[kind] < ticket:
                return {"ok": False, "error": "%s did not finish in time" % kind}
            return dict(self.results[kind])

    def finish(self, kind, ticket, result):
        with self.cond:
            self.done[kind] = max(self.done[kind], ticket)
            self.results[kind] = result
            self.cond.notify_all()
