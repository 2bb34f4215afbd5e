"""Shared fakes for unit tests: what a module talks to, without a socket or a server."""
import dataclasses

from autosync.config import Config


def config(path="/nonexistent", **fields):
    """A Config as load() would give, without a file: defaults plus `fields`."""
    fields.setdefault("socket", str(path) + ".sock")
    fields.setdefault("hostname", "testhost")
    return dataclasses.replace(Config(path=str(path)), **fields)


class FakeServer:
    """protocol.Server's face to the committer: what was published."""

    def __init__(self, path, handler):
        self.path, self.handler = path, handler
        self.published = []

    def start(self):
        pass

    def publish(self, event):
        self.published.append(event)

    def events(self, name):
        return [e for e in self.published if e["event"] == name]

    def close(self):
        pass


class FakeRepository:
    """repository.Repository's face to the committer; records what it was asked to do."""

    def __init__(self, cfg, report):
        self.report = report
        self.calls = []
        self.commit_error = None
        self.push_ok = True
        self.pull_ok = True

    def recover(self):
        self.calls.append("recover")

    def commit(self, changes, rescan=False, note=None):
        self.calls.append(("commit", sorted(c["path"] for c in changes), rescan))
        if changes:
            self.report.committed("autosync on testhost: %d added" % len(changes), changes)
        return bool(changes)

    def push(self):
        self.calls.append("push")
        if not self.push_ok:
            self.report.failed("push", "remote away", retry="push")
        return self.push_ok

    def pull(self, commit_after=True):
        self.calls.append("pull")
        self.report.pulled(self.pull_ok)
        return {"ok": self.pull_ok, "pulled": self.pull_ok}

    def remote_url(self):
        return "/srv/sync.git"


class Reports:
    """The committer's side of repository.py's `report`: records every report."""

    def __init__(self):
        self.calls = []
        self.fields = {}

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "status":
                self.fields.update(kwargs)
        return record

    def named(self, name):
        return [(args, kwargs) for n, args, kwargs in self.calls if n == name]

    def last_error(self):
        failed = self.named("failed")
        return "%s: %s" % failed[-1][0][:2] if failed else None
