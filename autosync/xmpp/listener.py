"""autosync-xmpp: committer events <-> XMPP messages.

The Listener decides: who is a peer, which message becomes a pull, whom an
announcement goes to, when to reconnect. The XMPP session itself (xmpppy,
TLS, login) is autosync.xmpp.session; the committer's socket is
autosync.client.

After every push the committer reports (`pushed` event), we send `pushed URL`
as a chat message to each other online resource of the account, addressed to
its full JID. Prosody delivers a message to the bare JID only to the
resources with the highest priority, so full JIDs, learnt from presence, are
the only reliable addressing (docs/internals.md, "Facts relied on"). An announcement from
another resource of our own account becomes a `pull` request to the committer.

No announcement is missed: the committer answers every link-up with the
upstream revision, read from the repository, and we announce it unless we
already have (a push made before we logged in, or while we were not
subscribed, lost its event). We pull when we log in and when another machine
comes online: what it announced while one of us was away never came.

Threads: the XMPP session is used from ONE thread, the loop in
`Listener.run`. Requests to the committer block until the work is done, so
they go through client.RequestQueue threads; committer events are read by a
client.Subscription thread into a client.Inbox, which wakes the loop.

A message is only counted as sent once the server has answered an XEP-0199
ping sent after it: xmpppy's send() drops data silently when the server has
just gone away, so until that answer the message stays queued (Outbox) and is
sent again after reconnecting.
"""
import logging
import os
import select
import sys
import time
from dataclasses import dataclass

from autosync.core import client
from autosync.xmpp import session as xmpp_session
from autosync.core.summary import Summariser
from autosync.core.retry import Backoff, Trouble

log = logging.getLogger("autosync.xmpp")

STRANGER_LOG_INTERVAL = 3600.0  # log messages from one stranger at most this often
ANNOUNCED_KEPT = 20  # upstream revisions remembered as announced


@dataclass
class ListenerTiming:
    """Every delay of the listener, in seconds; tests make them small."""
    ping_interval: float = 60.0    # ping the server after this long without traffic
    ping_timeout: float = 20.0     # a ping unanswered this long means the link is dead
    backoff_min: float = 1.0       # first wait before reconnecting ...
    backoff_max: float = 60.0      # ... doubling up to this
    login_timeout: float = 20.0    # connect + TLS + login must finish within this
    notify_quiet: float = 2.0      # a burst of work has ended after this long without events
    notify_interval: float = 60.0  # at most one summary message per this long
    committer_retry: float = 1.0   # wait before reconnecting to the committer's socket
    pull_timeout: float = 660.0    # longer than the committer's own 600 s for a pull


def split_jid(jid):
    """(bare JID in lower case, resource) of a JID string."""
    bare, _, resource = str(jid or "").partition("/")
    return bare.lower(), resource


class Outbox:
    """Messages to send, kept until the server has confirmed them.

    Items are ("announce", url) or ("notify", text). sent() hands out a ping
    id; the answer to that ping confirms every item sent before it. At most
    `limit` items wait while the link is down.
    """

    def __init__(self, limit=100):
        self.limit = limit
        self.queued = []
        self.pings = {}  # ping id -> (sent at, items its answer confirms, marks the login ready?)
        self.count = 0

    def add(self, item):
        if item not in self.queued:
            self.queued.append(item)
            del self.queued[:-self.limit]

    def take(self):
        items, self.queued = self.queued, []
        return items

    def sent(self, items, now, ready=False):
        """Register a ping that confirms `items`; returns its id."""
        self.count += 1
        ping_id = "autosync-ping-%d" % self.count
        self.pings[ping_id] = (now, list(items), ready)
        return ping_id

    def answered(self, ping_id):
        """(ours?, ready?) for a ping's answer; its items are confirmed."""
        if ping_id not in self.pings:
            return False, False
        return True, self.pings.pop(ping_id)[2]

    def oldest(self):
        """When the oldest unanswered ping went out, or None."""
        return min(p[0] for p in self.pings.values()) if self.pings else None

    def requeue(self):
        """The session is gone: what the server did not confirm goes out again."""
        unconfirmed = [item for _, items, _ in self.pings.values() for item in items]
        self.queued[:0] = [i for i in unconfirmed if i not in self.queued]
        self.pings.clear()


class Listener(client.CommitterLink):
    """The single I/O loop: XMPP session, timers, and the committer's events."""

    def __init__(self, cfg, timing=None, open_session=xmpp_session.open_session):
        self.x = cfg.xmpp
        self.config_file = getattr(cfg, "file", "") or "~/.autosync"
        t = self.timing = timing or ListenerTiming()
        self.open_session = open_session
        self.bare = self.x.username.lower()
        self.server = "%s:%s" % (self.x.host or self.bare.partition("@")[2], self.x.port)
        notify = getattr(cfg, "notifymethod", "none") in ("xmpp", "all")
        self.notify_to = self.x.alsonotify if notify and self.x.alsonotify else None
        # A shared folder's other person (docs/sharing.md): told of our pushes, and heard.
        self.partners = sorted(set((getattr(self.x, "sharedwith", "") or "").lower().split()))
        # The same summaries as on the desktop: one per burst, failures at once.
        self.summariser = Summariser(getattr(cfg, "notifylevel", "normal"),
                                     min_interval=t.notify_interval, settle=t.notify_quiet,
                                     folder=os.path.basename(getattr(cfg, "path", "") or ""))

        super().__init__(cfg, t, log, on_event=self.inbox_put, on_link_reply=self._linked)

        self.session = None
        self.ready = False        # logged in, presence sent and answered
        self.peers = set()        # full JIDs of the account's other online resources
        self.outbox = Outbox()
        self.last_rx = 0.0
        self.backoff = Backoff(t.backoff_min, t.backoff_max, jitter=0.2)
        self.next_login = 0.0
        self.login_trouble = Trouble(log, logging.ERROR, repeat=logging.INFO)
        self.strangers = {}       # bare JID -> when we last logged it
        self.announced = []       # the upstream revisions announced lately, newest last
        self.url = ""             # the remote's address, as the committer last said it
        self.unknown_url_told = False  # said once that a push waits for the address
        # With syncmethod = ssh (XMPP only for notifications) the link is autosync-sshlink's.
        self.speaks_for_link = getattr(cfg, "syncmethod", "xmpp") != "ssh"

    @property
    def resource(self):
        return self.session.resource if self.session else None

    # -- the loop

    def inbox_put(self, event):
        """The committer's events into the loop's inbox (from the events thread)."""
        self.inbox.put(event)

    def _linked(self, message, reply):
        """The committer's answer to `link` (called from the links thread): the upstream
        revision, which the loop announces unless it already has."""
        if message.get("up"):
            self.inbox.put({"event": "_upstream", "rev": reply.get("upstream"),
                            "url": reply.get("url")})

    def ending(self):
        self._close_session(goodbye=True)

    def step(self):
        if self.session is None and time.monotonic() >= self.next_login:
            self.login()
        fds = [self.inbox] + ([self.session.fileno()] if self.session else [])
        select.select(fds, [], [], self._timeout())
        for event in self.inbox.take():
            self.on_event(event)
        if self.session:
            self._process()
        self.tick(time.monotonic())

    def _timeout(self):
        """Seconds until the next timer is due."""
        now, t = time.monotonic(), self.timing
        due = [now + 5.0]
        if self.session is None:
            due.append(self.next_login)
        elif self.outbox.pings:
            due.append(self.outbox.oldest() + t.ping_timeout)
        else:
            due.append(self.last_rx + t.ping_interval)
        if self.notify_to and self.summariser.next_due() is not None:
            due.append(self.summariser.next_due())
        return max(0.0, min(due) - now)

    def tick(self, now):
        """Act on the timers that are due: ping timeout, keep-alive ping, summaries."""
        t = self.timing
        if self.session:
            if self.outbox.pings and now - self.outbox.oldest() >= t.ping_timeout:
                self._lost("XMPP server %s did not answer a ping within %gs" % (self.server, t.ping_timeout))
            elif not self.outbox.pings and now - self.last_rx >= t.ping_interval:
                self._ping()
        if self.notify_to:
            self._notify(self.summariser.due(now))

    # -- connecting

    def login(self):
        try:
            self.session = self.open_session(self.x, self.timing.login_timeout, self)
        except xmpp_session.UntrustedServer as e:
            if not e.fingerprint:
                return self._login_failed("%s (its certificate could not be read again to "
                                          "name its fingerprint)" % e)
            # One line that says how to trust exactly this certificate, and no other.
            return self._login_failed("%s; to trust exactly this certificate, add to [xmpp] in "
                                      "%s: fingerprint = %s" % (e, self.config_file, e.fingerprint))
        except xmpp_session.LoginError as e:
            return self._login_failed(str(e))
        except Exception as e:  # an xmpppy surprise: still one line, and a retry later
            log.debug("login failed", exc_info=True)
            return self._login_failed("login to %s failed: %s" % (self.server, xmpp_session.one_line(e)))
        log.info("logged in to %s as %s/%s (%s)", self.server, self.bare, self.resource,
                 "no TLS" if self.x.tls == "off" else
                 "TLS, certificate matches the pinned fingerprint" if self.x.fingerprint else
                 "TLS, certificate verified")
        self.last_rx = time.monotonic()
        self.session.send_presence(self.x.priority)
        # The server answers this ping after it has sent us the presence of
        # the other resources: then we know whom to announce to.
        self._ping(ready=True)

    def _login_failed(self, reason):
        delay = self.backoff.next()  # jittered: spreads out machines that failed together
        self.next_login = time.monotonic() + delay
        self.login_trouble.failed("%s; retrying in %.1fs", reason, delay, kind=reason)
        self._tell_link(False, reason)  # a problem by name in the status, until it works

    def _on_ready(self):
        self.ready = True
        self.backoff.reset()
        self.login_trouble.recovered()
        others = sorted(split_jid(p)[1] for p in self.peers)
        log.info("link up; other machines online: %s", ", ".join(others) or "none")
        self._tell_link(True)
        # Announcements sent while we were away are lost: catch up.
        self._pull("catch-up after connecting")
        self._flush()

    def _process(self):
        try:
            if self.session.process():
                self.last_rx = time.monotonic()
        except xmpp_session.Replaced as e:
            # Two clients that both reconnect at once would take the resource
            # from each other forever: wait the longest.
            self.backoff.longest()
            self._lost(str(e))
        except xmpp_session.SessionLost as e:
            self._lost(str(e))

    def _lost(self, reason):
        log.warning("%s; reconnecting in %.1fs", reason, self.backoff.current)
        self._close_session()
        self.next_login = time.monotonic() + self.backoff.current
        self._tell_link(False)

    def _close_session(self, goodbye=False):
        if self.session is None:
            return
        self.session.close(goodbye)
        self.session = None
        self.ready = False
        self.peers.clear()
        self.outbox.requeue()

    # -- sending

    def _ping(self, items=(), ready=False):
        self.session.ping(self.outbox.sent(items, time.monotonic(), ready))

    def _queue(self, item):
        self.outbox.add(item)
        self._flush()

    def _flush(self):
        """Send the outbox, then a ping whose answer confirms it."""
        if not self.ready or not self.outbox.queued:
            return
        items = self.outbox.take()
        for kind, text in items:
            if kind == "announce":
                for peer in sorted(self.peers):
                    self.session.chat(peer, "pushed " + text)
                for partner in self.partners:  # their account: its machines online hear it
                    self.session.chat(partner, "pushed " + text)
                log.info("announced push of %s to %d other machine(s)%s", text, len(self.peers),
                         " and to %s" % ", ".join(self.partners) if self.partners else "")
            else:
                self.session.chat(self.notify_to, text)
        self._ping(items)

    def _tell_link(self, up, error=None):
        """The committer hears when the link comes up or goes down, and why it cannot
        come up (a login or certificate refused) when that changes."""
        if self.speaks_for_link:
            self.link.tell(up, error)

    def _pull(self, why):
        log.info("asking the committer to pull (%s)", why)
        self.pulls.put("pull", {"cmd": "pull"})

    # -- committer events

    def on_event(self, event):
        kind = event.get("event")
        if kind == "_upstream":
            return self._upstream(event)
        if kind == "_subscribed":
            self.link.again()  # the committer may have restarted
        elif kind == "pushed":
            self._announce(str(event.get("url") or ""), event.get("rev"))
        if self.notify_to:
            self._notify(self.summariser.feed(event, time.monotonic()))

    def _upstream(self, event):
        """The committer's answer to a link-up names the upstream revision: a push made
        before the login, or while we were not subscribed (its event lost), is
        announced now."""
        rev = event.get("rev")
        if self.ready and rev and rev not in self.announced:
            log.info("the upstream branch is at %.12s, not announced yet", rev)
            self._announce(str(event.get("url") or ""), rev)

    def _announce(self, url, rev=None):
        """`pushed URL`, never with an empty URL (one that the committer did not know,
        at a first start or from `autosync-notify pushed` without one): the address
        last heard, else none is sent and the revision stays unannounced, for the
        next link-up's answer or push to announce once an address is known."""
        self.url = url.strip() or self.url
        if not self.url:
            if not self.unknown_url_told:
                self.unknown_url_told = True
                log.warning("a push is not announced yet: the remote's address is not known "
                            "(remoteurlcmd printed nothing); other machines pull it within "
                            "safetypull meanwhile")
            return
        if rev:
            self.announced = (self.announced + [rev])[-ANNOUNCED_KEPT:]
        self._queue(("announce", self.url))

    def _notify(self, messages):
        for message in messages:
            self._queue(("notify", message.text()))

    # -- what the server sends (xmpp_session calls these inside process())

    def own_peer(self, jid):
        """True for another resource of our own account."""
        bare, resource = split_jid(jid)
        return bare == self.bare and bool(resource) and resource != self.resource

    def on_presence(self, jid, typ):
        if not self.own_peer(jid):
            return
        if typ in (None, "", "available"):
            if jid not in self.peers:
                log.info("machine online: %s", split_jid(jid)[1])
                # Told to it directly: a machine that has just started (the original
                # above all) may miss the server's broadcast of who is online, and then
                # drops our announcements as from an unseen guest.
                self.session.send_presence(self.x.priority, to=jid)
                if self.ready:  # (at our own login, _on_ready pulls once for all)
                    # Its announcements made while it was away never came: catch up.
                    self._pull("%s came online" % split_jid(jid)[1])
            self.peers.add(jid)
        elif typ in ("unavailable", "error") and jid in self.peers:
            log.info("machine offline: %s", split_jid(jid)[1])
            self.peers.discard(jid)

    def on_message(self, sender, typ, body):
        if typ in ("error", "groupchat"):
            return  # an error bounce carries our own "pushed" body back to us
        body = body.strip()
        if not self.own_peer(sender):
            if split_jid(sender)[0] in self.partners and body.startswith("pushed"):
                # The other person's push (sharedwith): a pull of our own remote, no more.
                return self._pull("announcement from %s, who shares this folder"
                                  % split_jid(sender)[0])
            if split_jid(sender) != (self.bare, self.resource):
                self._stranger(sender, body)
            return
        if body.startswith("pushed"):
            self._pull("announcement from %s" % split_jid(sender)[1])
        elif body.lower() == "ping":
            self.session.chat(sender, "pong")

    def on_pong(self, ping_id):
        ours, ready = self.outbox.answered(ping_id)
        if ready:
            self._on_ready()
        return ours

    def _stranger(self, sender, body):
        """Log, at most hourly per sender, a message that we ignore."""
        bare, now = split_jid(sender)[0], time.monotonic()
        if now - self.strangers.get(bare, float("-inf")) < STRANGER_LOG_INTERVAL:
            return
        if len(self.strangers) > 1000:
            self.strangers.clear()
        self.strangers[bare] = now
        log.info("ignoring messages from %s (not another machine of this account): %.60r", bare or "the server", body)


# ---------------------------------------------------------------- command line

def main(argv=None):
    """autosync-xmpp [CONFIG] [-v]: announce pushes over XMPP, pull on announcements."""
    return Listener.main("autosync-xmpp", main.__doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
