"""The Listener's decisions, with a fake XMPP session (tests/fakes.py): no
server, no socket, no thread. What the Listener asks of the committer stays
in its request queues, which are never started here."""
import logging
import time
import types

import pytest

from autosync.xmpp import listener as ax
from autosync.core.config import Xmpp
from fakes import FakeXmpp, Replaced

ME = "me@example.org"
OWN = ME + "/autosync-own"
PEER_B = ME + "/autosync-b"
PEER_C = ME + "/autosync-c"
STRANGER = "eve@example.org/autosync-b"

TIMING = ax.ListenerTiming(ping_interval=10.0, ping_timeout=5.0, backoff_min=1.0, backoff_max=8.0,
                   notify_quiet=0.5, notify_interval=1.0)


def make(notify_to="", priority=3, sharedwith=""):
    cfg = types.SimpleNamespace(
        socket="/nonexistent/autosync.sock", notifymethod="xmpp" if notify_to else "none",
        xmpp=Xmpp(username="Me@Example.org", password="x", alsonotify=notify_to,
                  sharedwith=sharedwith,
                  host="", port=5999, priority=priority, resource="autosync-own"))
    server = FakeXmpp()
    listener = ax.Listener(cfg, TIMING, open_session=server)
    return listener, server


@pytest.fixture
def made():
    """made() -> (listener, fake server); the listener's inbox is closed afterwards."""
    listeners = []

    def factory(**options):
        listeners.append(make(**options))
        return listeners[-1]

    yield factory
    for listener, _ in listeners:
        listener.inbox.close()


def up(listener, server, peers=(PEER_B,)):
    """Log in, see `peers` online, and get the answer that makes the link ready."""
    listener.login()
    session = server.session
    for peer in peers:
        session.presence(peer)
    assert session.answer_pings() == [True]
    assert listener.ready
    session.take_sent()
    listener.pulls.pending.clear()
    return session


def pulls(listener):
    return list(listener.pulls.pending.values())


def test_login_sends_presence_and_is_ready_only_once_the_server_answered(made):
    listener, server = made(priority=3)
    listener.login()
    session = server.session
    assert session.priority == 3 and len(session.pings) == 1
    assert not listener.ready and listener.links.pending == {}
    session.presence(PEER_B)
    session.answer_pings()
    assert listener.ready and listener.peers == {PEER_B}
    assert listener.links.pending == {"link": {"cmd": "link", "up": True}}
    assert pulls(listener) == [{"cmd": "pull"}], "a catch-up pull after connecting"


def test_the_server_address_comes_from_the_config(made):
    listener, _ = made()
    assert listener.server == "example.org:5999"


def test_peers_are_the_other_resources_of_our_own_account(made):
    listener, server = made()
    session = up(listener, server, peers=())
    session.presence(PEER_B)
    session.presence("ME@EXAMPLE.ORG/autosync-c")  # the bare part is compared without case
    session.presence(OWN)                  # ourselves
    session.presence(ME)                   # no resource
    session.presence(STRANGER)             # another account
    session.presence("example.org")        # the server
    assert listener.peers == {PEER_B, "ME@EXAMPLE.ORG/autosync-c"}
    session.presence(PEER_B, "unavailable")
    assert listener.peers == {"ME@EXAMPLE.ORG/autosync-c"}


def test_a_push_is_announced_to_every_other_online_full_jid(made):
    listener, server = made()
    session = up(listener, server, peers=(PEER_B, PEER_C))
    listener.on_event({"event": "pushed", "url": "/srv/repo.git"})
    assert sorted(session.take_sent()) == [(PEER_B, "pushed /srv/repo.git"),
                                           (PEER_C, "pushed /srv/repo.git")]
    assert len(session.pings) == 1, "a ping confirms the announcement"
    assert pulls(listener) == [], "our own push makes us pull nothing"


def test_a_peer_that_left_hears_nothing(made):
    listener, server = made()
    session = up(listener, server, peers=(PEER_B, PEER_C))
    session.presence(PEER_C, "unavailable")
    listener.on_event({"event": "pushed", "url": "u"})
    assert session.take_sent() == [(PEER_B, "pushed u")]


def test_announcements_from_own_resources_become_pulls(made):
    listener, server = made()
    session = up(listener, server)
    session.message(PEER_B, "pushed /srv/repo.git")
    assert pulls(listener) == [{"cmd": "pull"}]


def test_the_original_tools_announcement_counts_even_unseen(made):
    """The original announces to the bare JID with a bytes-formatted URL."""
    listener, server = made()
    session = up(listener, server, peers=())
    session.message(ME + "/laptop", "  pushed b'/srv/repo.git\\n'  ")
    assert pulls(listener) == [{"cmd": "pull"}]


@pytest.mark.parametrize("sender,body,typ", [
    (OWN, "pushed /srv/repo.git", "chat"),        # our own copy
    (PEER_B, "pushed /srv/repo.git", "error"),    # a bounce of our own announcement
    (PEER_B, "pushed /srv/repo.git", "groupchat"),
    (STRANGER, "pushed /srv/evil.git", "chat"),   # another account, even with our resource name
    (ME, "pushed /srv/repo.git", "chat"),         # no resource
    (PEER_B, "hello", "chat"),
])
def test_what_is_no_announcement_makes_no_pull(made, sender, body, typ):
    listener, server = made()
    session = up(listener, server)
    session.message(sender, body, typ)
    assert pulls(listener) == []
    assert session.take_sent() == []


def test_many_announcements_leave_one_pull_queued(made):
    listener, server = made()
    session = up(listener, server)
    for _ in range(20):
        session.message(PEER_B, "pushed /srv/repo.git")
    assert pulls(listener) == [{"cmd": "pull"}]


def test_ping_is_answered_only_for_own_resources(made):
    listener, server = made()
    session = up(listener, server)
    session.message(PEER_B, "ping")
    session.message(STRANGER, "PING")
    session.message("eve@example.org", "ping")
    assert session.take_sent() == [(PEER_B, "pong")]


def test_strangers_are_logged_once_an_hour(made, caplog):
    caplog.set_level(logging.INFO, logger="autosync.xmpp")
    listener, server = made()
    session = up(listener, server)
    for _ in range(3):
        session.message(STRANGER, "pushed /srv/evil.git")
        session.message("eve@example.org/other", "hi")
    session.message("mallory@example.org/x", "hi")
    lines = [r.getMessage() for r in caplog.records if "ignoring messages" in r.getMessage()]
    assert len(lines) == 2 and "eve@example.org" in lines[0] and "mallory" in lines[1]


def test_a_push_while_the_link_is_down_is_announced_once_the_link_is_ready(made):
    listener, server = made()
    listener.on_event({"event": "pushed", "url": "u"})
    listener.login()
    session = server.session
    session.presence(PEER_B)
    assert session.sent == [], "not before the server answered the first ping"
    session.answer_pings()
    assert session.take_sent() == [(PEER_B, "pushed u")]
    assert listener.outbox.queued == [] and len(session.pings) == 1


def test_an_announcement_the_server_did_not_confirm_goes_out_again(made):
    listener, server = made()
    first = up(listener, server)
    listener.on_event({"event": "pushed", "url": "u"})
    assert first.take_sent() == [(PEER_B, "pushed u")]
    first.lose()
    listener._process()  # the loop notices the session is gone
    assert first.closed is False and listener.session is None
    assert listener.links.pending == {"link": {"cmd": "link", "up": False}}
    listener.login()
    second = server.session
    second.presence(PEER_B)
    second.answer_pings()
    assert second.take_sent() == [(PEER_B, "pushed u")]
    second.answer_pings()  # confirmed: a third session would not send it again
    assert listener.outbox.queued == [] and listener.outbox.pings == {}


def test_an_unanswered_ping_ends_the_session(made, caplog):
    listener, server = made()
    session = up(listener, server)
    listener.on_event({"event": "pushed", "url": "u"})
    listener.tick(time.monotonic() + TIMING.ping_timeout + 0.1)
    assert listener.session is None and session.closed is False
    assert any("did not answer a ping" in r.getMessage() for r in caplog.records)


def test_a_quiet_link_is_pinged(made):
    listener, server = made()
    session = up(listener, server)
    assert session.pings == []
    listener.tick(time.monotonic() + TIMING.ping_interval + 0.1)
    assert len(session.pings) == 1 and listener.session is session


def test_login_failures_back_off_and_are_logged_loudly_once(made, caplog):
    caplog.set_level(logging.INFO, logger="autosync.xmpp")
    listener, server = made()
    server.refuse = "XMPP server example.org:5999 refused the login of me: wrong user name or password"
    delays = []
    for _ in range(5):
        before = time.monotonic()
        listener.login()
        delays.append(listener.next_login - before)
    assert all(a < b for a, b in zip(delays, delays[1:4])), delays
    assert 0.8 * TIMING.backoff_max <= delays[-1] <= TIMING.backoff_max + 0.01
    levels = [r.levelno for r in caplog.records if "wrong user name" in r.getMessage()]
    assert levels == [logging.ERROR] + [logging.INFO] * 4
    # The committer hears why, so that status names the problem (core/problems.py).
    assert listener.links.pending == {"link": {"cmd": "link", "up": False, "error": server.refuse}}
    server.refuse = None
    up(listener, server)
    assert listener.backoff.current == TIMING.backoff_min


def test_a_replaced_session_waits_the_longest(made, caplog):
    listener, server = made()
    session = up(listener, server)
    session.lose(Replaced("another client logged in and replaced this one"))
    listener._process()
    assert listener.next_login - time.monotonic() > TIMING.backoff_max - 0.5
    assert any("reconnecting in %.1fs" % TIMING.backoff_max in r.getMessage()
               for r in caplog.records)


def test_a_restarted_committer_is_told_the_link_state_again(made):
    listener, server = made()
    up(listener, server)
    listener.links.pending.clear()
    listener.on_event({"event": "_subscribed"})
    assert listener.links.pending == {"link": {"cmd": "link", "up": True}}


def test_stopping_says_goodbye(made):
    listener, server = made()
    session = up(listener, server)
    listener._close_session(goodbye=True)
    assert session.closed is True and listener.peers == set()


# ---------------------------------------------------------------- alsonotify

def test_alsonotify_gets_one_summary_per_burst_and_failures_at_once(made):
    listener, server = made(notify_to="watcher@example.org")
    session = up(listener, server, peers=())
    listener.on_event({"event": "failed", "op": "push", "error": "remote unreachable"})
    assert session.take_sent() == [("watcher@example.org", "Push failed\nremote unreachable")]
    session.answer_pings()
    for name in ("a.txt", "b.txt", "c.txt"):
        listener.on_event({"event": "committed", "count": 1, "host": "laptop",
                           "changes": [{"action": "added", "path": name}]})
    assert session.take_sent() == []
    listener.tick(time.monotonic() + 5.0)
    assert session.take_sent() == [("watcher@example.org", "3 files saved\na.txt, b.txt and c.txt")]


def test_without_notifymethod_xmpp_alsonotify_hears_nothing(made):
    listener, server = made()
    listener.x.alsonotify = "watcher@example.org"  # set, but notifymethod is none
    session = up(listener, server, peers=())
    listener.on_event({"event": "failed", "op": "push", "error": "remote unreachable"})
    listener.tick(time.monotonic() + 5.0)
    assert session.take_sent() == []


def test_alsonotify_cannot_command_us(made):
    listener, server = made(notify_to="watcher@example.org")
    session = up(listener, server, peers=())
    session.message("watcher@example.org/phone", "pushed x")
    session.message("watcher@example.org/phone", "ping")
    assert pulls(listener) == [] and session.take_sent() == []


# ---------------------------------------------------------------- sharedwith

def test_a_shared_folder_s_other_person_hears_our_pushes_and_is_heard(made):
    """sharedwith (docs/sharing.md): our push is also sent to Bob's account; Bob's
    machines' announcements make us pull; Bob can do nothing else, and alsonotify
    still cannot command us."""
    listener, server = made(notify_to="watcher@example.org", sharedwith="Bob@Example.org")
    session = up(listener, server)
    listener.on_event({"event": "pushed", "url": "ssh://srv/shared.git"})
    sent = session.take_sent()
    assert ("bob@example.org", "pushed ssh://srv/shared.git") in sent
    assert (PEER_B, "pushed ssh://srv/shared.git") in sent
    session.answer_pings()
    session.message("bob@example.org/autosync-desk", "ping")
    session.message("watcher@example.org/phone", "pushed x")
    assert pulls(listener) == [] and session.take_sent() == []
    session.message("bob@example.org/autosync-desk", "pushed ssh://srv/shared.git")
    assert pulls(listener) == [{"cmd": "pull"}]


# ---------------------------------------------------------------- the outbox

def test_outbox_keeps_items_once_and_at_most_its_limit():
    box = ax.Outbox(limit=3)
    for item in [("announce", "u"), ("announce", "u"), ("notify", "1"), ("notify", "2"),
                 ("notify", "3")]:
        box.add(item)
    assert box.queued == [("notify", "1"), ("notify", "2"), ("notify", "3")]


def test_outbox_requeues_what_no_ping_answer_confirmed_first():
    box = ax.Outbox()
    box.add(("announce", "u"))
    confirmed = box.sent(box.take(), now=1.0)
    box.add(("notify", "n"))
    unconfirmed = box.sent(box.take(), now=2.0)
    box.add(("notify", "later"))
    assert box.answered(confirmed) == (True, False)
    assert box.answered("not-ours") == (False, False)
    assert box.oldest() == 2.0
    box.requeue()
    assert box.queued == [("notify", "n"), ("notify", "later")]
    assert box.pings == {} and box.oldest() is None
    assert unconfirmed not in box.pings


def committer_answers_link(listener, upstream, url="/srv/repo.git"):
    """The committer's reply to a link-up request reaches the loop."""
    listener._linked({"cmd": "link", "up": True}, {"ok": True, "upstream": upstream, "url": url})
    for event in listener.inbox.take():
        listener.on_event(event)


def test_an_upstream_revision_not_announced_yet_is_announced_when_the_link_is_up(made):
    listener, server = made()
    listener.login()
    session = server.session
    session.presence(PEER_B)
    # The committer pushed before we logged in (or subscribed): its reply to link-up says
    # where the upstream branch is. An answer that comes while the link is not ready
    # (it went down again) is left for the next link-up.
    committer_answers_link(listener, "abc123")
    assert session.take_sent() == []
    session.answer_pings()
    committer_answers_link(listener, "abc123")
    assert session.take_sent() == [(PEER_B, "pushed /srv/repo.git")]
    committer_answers_link(listener, "abc123")  # told again (the committer restarted)
    committer_answers_link(listener, None)  # another DVCS: it cannot say
    assert session.take_sent() == []
    listener.on_event({"event": "pushed", "url": "/srv/repo.git", "source": "committer",
                       "rev": "def456"})
    assert session.take_sent() == [(PEER_B, "pushed /srv/repo.git")]
    committer_answers_link(listener, "def456")  # the same push: announced once
    assert session.take_sent() == []


def test_a_machine_that_comes_online_is_caught_up_with_by_a_pull(made):
    listener, server = made()
    session = up(listener, server, peers=(PEER_B,))
    session.presence(PEER_B)  # seen already: nothing new
    assert pulls(listener) == []
    session.presence(PEER_C)
    assert pulls(listener) == [{"cmd": "pull"}]
    listener.pulls.pending.clear()
    session.presence(PEER_C, "unavailable")
    assert pulls(listener) == []


def test_a_machine_that_comes_online_gets_our_presence_directed_to_it(made):
    """An original that restarts may miss the broadcast of who is online and then drops
    our announcements as from an unseen guest: each machine that comes online is told
    directly, once, with our priority."""
    listener, server = made(priority=3)
    session = up(listener, server, peers=(PEER_B,))
    assert session.directed == [(PEER_B, 3)]
    session.presence(PEER_B)  # seen already: not again
    session.presence(STRANGER)  # another account: never
    assert session.directed == [(PEER_B, 3)]
    session.presence(PEER_C)
    session.presence(PEER_C, "unavailable")
    session.presence(PEER_C)  # back again: told again
    assert session.directed == [(PEER_B, 3), (PEER_C, 3), (PEER_C, 3)]


def test_a_push_is_never_announced_with_an_empty_url(made, caplog):
    """At a first start the committer may answer the link-up before it knows the remote's
    address, and `autosync-notify pushed` may come without one: `pushed ` never goes out.
    The revision stays unannounced until an address is known; then the last one is used."""
    listener, server = made()
    session = up(listener, server, peers=(PEER_B,))
    with caplog.at_level(logging.WARNING, logger="autosync"):
        committer_answers_link(listener, "abc123", url="")
        listener.on_event({"event": "pushed", "url": "", "source": "notify"})
    assert session.take_sent() == []
    assert "the remote's address is not known" in caplog.text
    committer_answers_link(listener, "abc123", url="/srv/repo.git")  # the next link-up
    assert session.take_sent() == [(PEER_B, "pushed /srv/repo.git")]
    listener.on_event({"event": "pushed", "url": "", "source": "notify"})
    assert session.take_sent() == [(PEER_B, "pushed /srv/repo.git")]  # the address known
