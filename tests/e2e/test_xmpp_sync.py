"""End-to-end through XMPP: the whole suite on several clones, announcements
through a private prosody on 127.0.0.1 (tests/prosody.py), real git."""
import os
import signal
import time

import pytest

from autosync.core.config import load
from base import git, wait_until
from prosody import prosody_certs, prosody_factory, prosody_server  # noqa: F401 (fixtures)
from helpers import write


PASSWORD = "s3cret-for-tests"


def arrives(machine, rel, expected, timeout=20):
    wait_until(lambda: machine.read(rel) == expected, timeout, 0.05,
               "%s to have %s = %r" % (machine.name, rel, expected))


@pytest.fixture
def xmpp_machines(machines, prosody_server):
    """xmpp_machines(("a", 0), ("b", 5)) -> started machines on one account."""
    jid = prosody_server.register("me", PASSWORD)

    def make(*specs):
        made = []
        for name, priority in specs:
            m = machines(name, start=False, syncmethod="xmpp", pullinterval="0")
            m.xmpp = dict(username=jid, password=PASSWORD, host="127.0.0.1",
                          port=prosody_server.port, cafile=prosody_server.cafile,
                          priority=priority, resource="autosync-" + name)
            m.write_config()
            made.append(m)
        for m in made:
            m.start()
        # Every listener must have seen the others' presence before a push counts.
        for m in made:
            others = [o for o in made if o is not m]
            # A machine's log names another's resource only once it saw it online.
            wait_until(lambda: all("autosync-" + o.name in m.logtext() for o in others), 20,
                       what="%s to see the others online" % m.name)
        return made
    return make


def test_changes_travel_both_ways(xmpp_machines):
    a, b = xmpp_machines(("a", 0), ("b", 0))
    write(a, "notes.txt", b"from a\n")
    arrives(b, "notes.txt", b"from a\n")
    with open(os.path.join(b.path, "notes.txt"), "ab") as f:
        f.write(b"and b\n")
    arrives(a, "notes.txt", b"from a\nand b\n")
    os.rename(os.path.join(a.path, "notes.txt"), os.path.join(a.path, "ideas.txt"))
    arrives(b, "ideas.txt", b"from a\nand b\n")
    assert b.read("notes.txt") is None
    os.unlink(os.path.join(b.path, "ideas.txt"))
    arrives(a, "ideas.txt", None)
    assert PASSWORD not in a.logtext() + b.logtext()
    assert PASSWORD not in a.notify("--json", "status").stdout


def test_every_priority_hears_every_push(xmpp_machines):
    high, zero, negative = xmpp_machines(("high", 5), ("zero", 0), ("negative", -1))
    for source in (high, zero, negative):
        name = "from-%s.txt" % source.name
        write(source, name, source.name.encode())
        for m in (high, zero, negative):
            arrives(m, name, source.name.encode())


def test_a_change_made_while_the_server_is_down_still_arrives(xmpp_machines, prosody_server):
    a, b = xmpp_machines(("a", 0), ("b", 0))
    prosody_server.stop()
    write(a, "while-down.txt", b"written with the server down\n")
    wait_until(lambda: a.status().get("unpushed") == 0 and a.status().get("last_commit"), 20,
               what="a to commit and push without XMPP")
    prosody_server.start()
    # b reconnects and asks for a catch-up pull (or a announces once it is back).
    arrives(b, "while-down.txt", b"written with the server down\n", timeout=90)



# Long enough for any machine, however loaded, and far below b's safety pull (600 s):
# what has not come by then comes only by that timer, never by the announcement.
NEVER = 90


def on_remote(remote, rel):
    return git("--git-dir", remote.path, "cat-file", "blob", "main:" + rel, check=False)


def restart(machine, how, write_change):
    """Stop `how` much of the machine's suite, write_change() meanwhile, and start it again.

    "daemon": the whole suite; "committer": the committer dies (SIGKILL) and the
    supervisor starts it again, while the XMPP listener stays logged in and
    subscribes again a moment later; "committer+xmpp": both die, so the listener
    logs in again too."""
    if how == "daemon":
        machine.stop()
        write_change()
        machine.start(wait=False)
        return
    killed = {name: pid for name, pid in machine.children().items()
              if name in how.split("+")}
    for pid in killed.values():
        os.kill(pid, signal.SIGKILL)
    write_change()
    wait_until(lambda: all(machine.children().get(name) not in (None, pid)
                           for name, pid in killed.items()), 20, what="the restarts")


# Three starts of each kind (AUTOSYNC_STARTS=20 for the 20 of issue 32's soak).
STARTS = int(os.environ.get("AUTOSYNC_STARTS", "9"))


def test_a_change_made_while_stopped_reaches_the_other_machine_soon_after_every_start(
        xmpp_machines, remote):
    """The start-up push may come before the XMPP login, or before the listener has
    subscribed to the committer's events: it is announced all the same, every time.

    Each start waits for the product's own steps, not for a guess at the machine's
    speed: a's start-up push (the remote has the file), then b's pull of it. b has no
    timer pull (pullinterval 0) and its safety pull is 10 minutes away, so only a's
    announcement brings it: a start whose push is never announced leaves b behind for
    good, which the generous NEVER tells apart from a slow machine."""
    a, b = xmpp_machines(("a", 0), ("b", 0))
    assert (b.status().get("syncmethod"), load(b.config).pullinterval) == ("xmpp", 0)
    late = []
    for i in range(STARTS):
        how = ("daemon", "committer", "committer+xmpp")[i % 3]
        name, content = "stopped-%d.txt" % i, b"written while a was stopped %d\n" % i
        started = time.monotonic()
        restart(a, how, lambda: write(a, name, content))
        wait_until(lambda: on_remote(remote, name) == content, NEVER, what="a's start-up push")
        pushed = time.monotonic()
        try:
            arrives(b, name, content, timeout=NEVER)
            print("start %d (%s): pushed after %.2f s, on b %.2f s later"
                  % (i, how, pushed - started, time.monotonic() - pushed))
        except AssertionError:
            late.append((i, how))  # b stays behind until a's next own change
        wait_until(lambda: a.settled(remote), NEVER, what="a to settle")
    assert late == [], "starts after which b stayed behind: %s" % late


def test_a_description_of_a_pushed_commit_reaches_the_other_machine_by_itself(
        xmpp_machines):
    """Describing a pushed commit (a git note) is announced like a push: b has the text
    in `dvcs-autosync log` without being asked to pull."""
    import subprocess
    import sys
    from autosync.core.config import load
    from autosync.core.protocol import connect
    a, b = xmpp_machines(("a", 0), ("b", 0))
    write(a, "notes.txt", b"from a\n")
    arrives(b, "notes.txt", b"from a\n")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=a.path, stdout=subprocess.PIPE,
                         text=True, check=True).stdout.strip()
    conn = connect(load(a.config).socket)
    try:
        reply = conn.request({"cmd": "describe", "text": "Meeting notes", "rev": rev},
                             timeout=60)
    finally:
        conn.close()
    assert reply["to"] == "note" and reply["rev"] == rev

    def on_b():
        return subprocess.run([sys.executable, "-m", "autosync.supervisor", "log", "--config",
                               b.config, os.path.join(b.path, "notes.txt")],
                              stdout=subprocess.PIPE, text=True).stdout
    wait_until(lambda: "-- Meeting notes" in on_b(), 20, 0.2, "the description on b")
