"""Fakes shared by the tests: what a module talks to, without a real peer.

config(): a Config as load() gives it, without a file. FakeServer,
FakeRepository and Reports: the committer's socket, its repository and the
repository's reporter, so the committer's and the repository's decisions are
tested without a socket. FakeCommitter: the committer's socket (the real
autosync.protocol.Server) with canned answers; it records the requests and
publishes what a test hands it. FakeXmpp: an `open_session` for the Listener
that hands out FakeSessions, so the Listener's decisions are tested without
a server. STATUS and paused_reply: a daemon's answers, for a fake daemon the tools
ask. asked(): a request answered while a Committer's worker takes one step.
"""
import contextlib
import dataclasses
import os
import shutil
import socket
import tempfile
import threading
import time

from autosync.committer.repository import Repository
from autosync.core import protocol
from autosync.core.config import Config
from autosync.vcs.git_environment import PLAIN
from autosync.xmpp.session import LoginError, Replaced, SessionLost


class FakeCommitter:
    """The committer's socket with canned answers; `requests` lists what came in.

    Without a path it makes (and cleanup() removes) a folder of its own.
    """

    def __init__(self, path=None, pull_seconds=0.0, start=True):
        self.folder = None
        if path is None:
            self.folder = tempfile.mkdtemp(prefix="axt")
            path = os.path.join(self.folder, "run", "c.sock")
        self.path = path
        self.pull_seconds = pull_seconds
        self.requests = []
        self.answers = {}  # cmd -> the reply to give instead of {"ok": true}
        self.server = None
        if start:
            self.start()

    def start(self):
        self.server = protocol.Server(self.path, self._handle)
        # Our own accept thread, so that close() can wait for it to end: one
        # still in accept() after the close could take the connections of
        # the next server that gets the same descriptor number.
        self.accepting = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.accepting.start()
        return self

    def _handle(self, message, client):
        self.requests.append((time.monotonic(), message))
        if message.get("cmd") == "pull":
            time.sleep(self.pull_seconds)
            return {"ok": True, "pulled": True}
        return self.answers.get(message.get("cmd"), {"ok": True})

    def emit(self, name, **fields):
        self.server.publish(dict(fields, event=name, time=time.time()))

    def subscribed(self):
        return bool(self.server.subscribers)

    def wait_subscribed(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not self.subscribed():
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %gs waiting for a subscriber" % timeout)
            time.sleep(0.01)

    def asked(self, cmd):
        """The requests with this cmd, oldest first."""
        return [m for _, m in self.requests if m.get("cmd") == cmd]

    def pulls(self):
        return sum(1 for _, m in self.requests if m.get("cmd") == "pull")

    def links(self):
        return [m["up"] for _, m in self.requests if m.get("cmd") == "link"]

    def close(self):
        """Like a committer that exits: the listening socket and every connection go."""
        try:
            self.server.sock.shutdown(socket.SHUT_RDWR)  # wakes accept() (Linux)
        except OSError:
            pass
        self.accepting.join(5)
        self.server.close()
        for sock in list(self.server.subscribers):
            try:
                sock.shutdown(2)
            except OSError:
                pass  # its server thread closed it just now

    def cleanup(self):
        self.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


class FakeSession:
    """What xmpp_session.Session offers the Listener, recording what it sends.

    The server's side: presence(), message() and answer_pings() call the
    Listener as a real session would inside process(); lose() makes the next
    process() end the session.
    """

    def __init__(self, handler, resource):
        self.handler = handler
        self.resource = resource
        self.priority = None   # as sent with the initial presence
        self.directed = []     # (to, priority) of every directed presence
        self.sent = []         # (to, body) of every chat message
        self.pings = []        # ids of pings not answered yet
        self.closed = None     # None, or the goodbye flag close() got
        self.ending = None     # exception the next process() raises

    def fileno(self):
        return -1

    def process(self):
        if self.ending:
            raise self.ending
        return False

    def send_presence(self, priority, to=None):
        if to is None:
            self.priority = priority
        else:
            self.directed.append((to, priority))

    def chat(self, to, body):
        self.sent.append((to, body))

    def ping(self, ping_id):
        self.pings.append(ping_id)

    def close(self, goodbye=False):
        self.closed = goodbye

    # -- the server's side

    def presence(self, jid, typ=None):
        self.handler.on_presence(jid, typ)

    def message(self, jid, body, typ="chat"):
        self.handler.on_message(jid, typ, body)

    def answer_pings(self):
        pings, self.pings = self.pings, []
        return [self.handler.on_pong(p) for p in pings]

    def lose(self, error=None):
        self.ending = error or SessionLost("connection to XMPP server lost")

    def take_sent(self):
        sent, self.sent = self.sent, []
        return sent


class FakeXmpp:
    """An open_session for the Listener: a FakeSession per login, or LoginError(refuse)."""

    def __init__(self):
        self.sessions = []
        self.refuse = None
        self.logins = 0

    def __call__(self, xcfg, timeout, handler):
        self.logins += 1
        if self.refuse:
            raise LoginError(self.refuse)
        session = FakeSession(handler, xcfg.resource)
        self.sessions.append(session)
        return session

    @property
    def session(self):
        """The newest session."""
        return self.sessions[-1]


def config_with_a_shared_socket_folder(tmp_path):
    """A valid config file whose socket sits in a folder others may enter (mode 0755):
    -> (the synced folder, the config file's path)."""
    folder = tmp_path / "Sync"
    (folder / ".git").mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    conf = tmp_path / "autosync.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\nsocket = %s\n"
                    % (folder, shared / "d.sock"))
    conf.chmod(0o600)
    return folder, conf


@contextlib.contextmanager
def serving(path, handler):
    """A protocol.Server on `path` with its accept thread, both gone on exit."""
    server = protocol.Server(path, handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()  # shuts the listening socket down: accept() returns
        thread.join(10)


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

    gitenv = PLAIN  # what the committer hands on (its upkeep, the Trimmer)
    # The watcher's batches reach git's fsmonitor as in the real one: through the
    # repository's own methods, to None or a FakeMonitor a test gives.
    fsmonitor = None
    received = Repository.received
    publish_received = Repository.publish_received
    unwatched = Repository.unwatched
    # and its files held open for writing, as the real one (self.still, below)
    still_written_wait = Repository.still_written_wait
    still_written_due = Repository.still_written_due
    still_written_ready = Repository.still_written_ready

    def __init__(self, cfg, report):
        self.report = report
        self.calls = []
        self.commit_error = None
        self.blocked = None
        self.push_ok = True
        self.pushed_new = True
        self.pull_ok = True
        self.notes = []
        self.count = None  # unpushed(): None like another DVCS; a number like git
        self.rev = None  # upstream()
        # Files left out while open for writing: none in this fake's folder, unless a test
        # gives held_open.
        from autosync.committer.stillwritten import StillWritten
        self.still = StillWritten(cfg.path, report, held_open=lambda folder, paths: set())

    def recover(self):
        self.calls.append("recover")

    def commit(self, changes, rescan=False, note=None, text=None):
        self.calls.append(("commit", sorted(c["path"] for c in changes), rescan))
        if note:
            self.notes.append(note)
        if changes:
            message = "autosync on testhost: %d added" % len(changes)
            self.report.committed("%s (%s)" % (text, message) if text else message, changes)
        return bool(changes)

    def head(self):
        return "rev%d" % len(self.calls)

    def settle_index(self):
        # Not in `calls` (the committer settles after every step): how many calls before.
        self.settled = getattr(self, "settled", []) + [len(self.calls)]

    def amend(self, message, rev):
        self.calls.append(("amend", message, rev))
        return "amended"

    def push(self, expect_new=True):
        self.calls.append("push")
        if not self.push_ok:
            self.report.failed("push", "remote away", retry="push")
        elif self.count is not None:
            self.count = 0  # as git counts: the upstream has it all now
        return self.push_ok

    def stop(self):
        self.calls.append("stop")

    def pull(self):
        self.calls.append("pull")
        self.report.pulled(self.pull_ok)
        return {"ok": self.pull_ok, "pulled": self.pull_ok}

    def remote_url(self):
        return "/srv/sync.git"

    def unpushed(self):
        return self.count

    def upstream(self):
        return self.rev

    @property
    def pushed_rev(self):
        return self.rev


class FakeMonitor:
    """fsmonitor.Monitor's face to the committer: a real BatchJournal, and what was published
    (with the journal's number then, and whether the batch was queued already)."""

    def __init__(self, where, committer=None):
        from autosync.committer.fsmonitor import BatchJournal
        self.journal = BatchJournal(where, run="fake")
        self.committer = committer
        self.published = []

    def publish(self):
        queued = sorted(self.committer.handover.pending.changes) if self.committer else None
        self.published.append((self.journal.seq, queued))
        return True


NOT_GIVEN = object()


class Reports:
    """repository.Report, recorded: every report as (name, args, kwargs). Only the
    Report's methods exist (a misspelt report fails); test_repository checks that
    they are the Protocol's, with its signatures."""

    def __init__(self):
        self.calls = []
        self.fields = {}

    def record(self, name, *args, **kwargs):
        self.calls.append((name, args, kwargs))

    def state(self, name):
        self.record("state", name)

    def status(self, **fields):
        self.record("status", **fields)
        self.fields.update(fields)

    def failed(self, op, error, retry=NOT_GIVEN, quiet=NOT_GIVEN):  # recorded as called
        options = {"retry": retry, "quiet": quiet}
        self.record("failed", op, error,
                    **{k: v for k, v in options.items() if v is not NOT_GIVEN})

    def succeeded(self, op):
        self.record("succeeded", op)

    def look_again(self, seconds):
        self.record("look_again", seconds)

    def committed(self, message, listed):
        self.record("committed", message, listed)

    def pulled(self, ok):
        self.record("pulled", ok)

    def event(self, name, **fields):
        self.record("event", name, **fields)

    def named(self, name):
        return [(args, kwargs) for n, args, kwargs in self.calls if n == name]

    def last_error(self):
        failed = self.named("failed")
        return "%s: %s" % failed[-1][0][:2] if failed else None


# --- a daemon's answers, for the tools that ask one -------------------------------------

# A status as the committer answers it, with something in every part a tool prints.
STATUS = {
    "path": "/home/u/Sync", "host": "laptop", "state": "idle",
    "pending": ["a.txt", "b.txt"],
    "last_commit": {"time": 1700000000, "message": "autosync on laptop: 1 added"},
    "last_push": {"time": 1700000060, "url": "ssh://server/sync.git"},
    "unpushed": 2, "last_error": "push: connection refused",
    "conflicts": ["notes.txt"], "held_back": [], "nested_repositories": [],
}


def paused_reply(message, folder=STATUS["path"]):
    """A daemon's answer to pause (the folder it paused) and to status."""
    return {"ok": True, "paused": {"since": 1700000000, "until": None}, "path": folder} \
        if message["cmd"] == "pause" else {"ok": True, "status": dict(STATUS, path=folder)}


# --- the committer's worker, stepped by hand ---------------------------------------------

def asked(committer, message, kind):
    """handle(message) in a thread while the worker takes one step; -> its reply."""
    replies = []
    asker = threading.Thread(target=lambda: replies.append(committer.handle(message, None)))
    asker.start()
    for _ in range(500):
        if committer.handover.wanted[kind] > committer.handover.done[kind]:
            break
        time.sleep(0.01)
    committer.worker.step()
    asker.join(5)
    return replies[0]
