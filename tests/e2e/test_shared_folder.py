"""End-to-end: a folder two people keep together (docs/sharing.md), on one private sshd.

Alice and Bob each have their own key, git identity and machine (a daemon whose git
reaches the server with that person's key only: core.sshCommand with a client config
naming one IdentityFile). The server is one account (the one sshd.py logs into) with
two restricted key lines, both allowed the shared repository and nothing else: the
lines `dvcs-autosync share` prints.
"""
import os
import re
import subprocess
import sys
import time

import pytest

from base import Machine, Remote, git, wait_until
from helpers import STAMP, Joined, committed, cut_off, ok, reconnect, settle, write
from prosody import prosody_certs, prosody_factory, prosody_server  # noqa: F401 (fixtures)
from sshd import Sshd, keygen, missing

PASSWORD = "s3cret-for-tests"


def person_ssh(sshd, name, key):
    """An ssh client config for `name`: sshd.py's, with `key` as its only identity."""
    with open(sshd.client_config) as f:
        text = f.read()
    own = os.path.join(sshd.folder, name + "_ssh_config")
    with open(own, "w") as f:
        f.write(text.replace("IdentityFile " + sshd.client_key, "IdentityFile " + key))
    return "ssh -F " + own


def as_person(path, name, ssh):
    for key, value in (("user.name", name), ("user.email", name.lower() + "@example.org"),
                       ("core.sshCommand", ssh)):
        git("config", key, value, cwd=path)


def subjects(remote):
    """[(author, subject)] of the remote's main, newest first."""
    return [tuple(line.split("\t", 1)) for line in remote.log("--format=%an\t%s").splitlines()]


def folder_page(machine):
    """The history page of machine's folder, as its browser gets it."""
    from autosync.web import app as web
    from autosync.core.paths import folder_id
    page = web.App(8080, "secret", [machine.config])
    answer = {}
    body = page({"REQUEST_METHOD": "GET", "PATH_INFO": "/folder",
                 "QUERY_STRING": "f=" + folder_id(machine.path), "HTTP_HOST": "127.0.0.1:8080",
                 "HTTP_COOKIE": "%s=secret" % web.COOKIE},
                lambda status, headers: answer.update(status=status))
    assert answer["status"].startswith("200"), answer
    return b"".join(body).decode()


@pytest.mark.e2e
def test_two_people_share_a_folder_and_one_is_removed(tmp_path, monkeypatch):
    reason = missing()
    if reason:
        pytest.skip(reason)
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    sshd = Sshd(tmp_path / "sshd").start()
    remote = Remote(tmp_path / "shared.git")
    url = sshd.url(remote.path)
    bob_key = str(tmp_path / "bob_key")
    keygen(bob_key)
    alice_ssh, bob_ssh = person_ssh(sshd, "alice", sshd.client_key), \
        person_ssh(sshd, "bob", bob_key)
    alice, bob = None, Joined(tmp_path, "bob")
    try:
        # Alice's machine syncs the folder; she asks what sharing it takes.
        alice = Machine(tmp_path, "alice", remote, syncmethod="ssh", hostname="alice-laptop")
        git("remote", "set-url", "origin", url, cwd=alice.path)
        as_person(alice.path, "Alice", alice_ssh)
        said = subprocess.run([sys.executable, "-m", "autosync.supervisor", "share", alice.path,
                               "--with", "Bob", "--key", bob_key + ".pub"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        words = ok(said)
        with open(bob_key + ".pub") as f:
            bob_public = " ".join(f.read().split()[:2])
        restricted = 'command="autosync-remote serve %s",restrict' % remote.path
        assert "       %s %s Bob\n" % (restricted, bob_public) in words
        join = "       dvcs-autosync init %s ~/alice\n" % url
        assert join in words and "(conflict from Bob on HOST DATE)" in words
        assert "To stop sharing, remove Bob's line from authorized_keys" in words
        # The server's lines, as the words say (autosync-remote by its full path: it is
        # not on the sessions' PATH here); Alice's own key gets the same options.
        line = [w.strip() for w in words.splitlines() if bob_public in w][0]
        line = line.replace("autosync-remote", sshd.remote_program, 1)
        with open(sshd.client_key + ".pub") as f:
            alice_line = line.split(" ssh-")[0] + " " + f.read().strip()
        with open(sshd.authorized, "w") as f:
            f.write(alice_line + "\n" + line + "\n")
        alice.start()
        # Bob joins with the init of the words, his key, and his own identity.
        joined = bob.init(url, env=dict(os.environ, GIT_SSH_COMMAND=bob_ssh))
        assert joined.returncode == 0, joined.stdout + joined.stderr
        as_person(bob.path, "Bob", bob_ssh)
        bob.settings = dict(path=bob.path, syncmethod="ssh", notifymethod="none",
                            maxwait="3", pullinterval="0", hostname="bob-desk")
        bob.dvcs, bob.xmpp = {}, {}
        bob.write_config()
        bob.start()
        for m in (alice, bob):
            wait_until(lambda: m.status().get("link") == "up", 30, what="%s's link" % m.name)

        # Both directions, each commit by its person and machine.
        write(alice, "plan.txt", b"Alice's plan\n")
        wait_until(lambda: bob.read("plan.txt") == b"Alice's plan\n", 30, what="plan to Bob")
        write(bob, "notes.txt", b"Bob's notes\n")
        wait_until(lambda: alice.read("notes.txt") == b"Bob's notes\n", 30,
                   what="notes to Alice")
        settle(alice, remote)
        made = subjects(remote)
        assert ("Bob", "autosync on bob-desk: 1 added") in made
        assert ("Alice", "autosync on alice-laptop: 1 added") in made

        # A conflict: Bob, apart, changes plan.txt first; Alice later. Bob's version
        # goes beside Alice's, named for Bob and his machine.
        there = cut_off(bob)
        write(bob, "plan.txt", b"Bob's plan\n")
        committed(bob)
        # Alice's change in a later second than Bob's (commit times are in seconds).
        wait_until(lambda: int(git("log", "-1", "--format=%ct", cwd=bob.path)) <
                   int(time.time()), 5, 0.1, "a later second")
        write(alice, "plan.txt", b"Alice's second plan\n")
        settle(alice, remote)
        reconnect(bob, there)
        assert bob.notify("sync").returncode == 0
        settle(bob, remote)
        wait_until(lambda: alice.read("plan.txt") == b"Alice's second plan\n" and
                   len(os.listdir(alice.path)) == 5, 30, what="the merge at Alice's")
        copy = [n for n in os.listdir(alice.path) if n.startswith("plan (")]
        assert len(copy) == 1 and re.fullmatch(
            r"plan \(conflict from Bob on bob-desk %s\)\.txt" % STAMP, copy[0]), copy
        assert alice.read(copy[0]) == b"Bob's plan\n" and bob.read(copy[0]) == b"Bob's plan\n"
        conflicts = subprocess.run([sys.executable, "-m", "autosync.supervisor", "conflicts",
                                    "--config", alice.config], stdout=subprocess.PIPE,
                                   text=True).stdout
        assert "Bob on bob-desk" in conflicts
        # The history page says who changed what (its WSGI app, asked as the browser would).
        page = folder_page(alice)
        assert '<td>alice-laptop</td><td class="who">Alice</td>' in page
        assert '<td>bob-desk</td><td class="who">Bob</td>' in page
        assert "(from Bob on bob-desk, " in page
        log = subprocess.run([sys.executable, "-m", "autosync.supervisor", "log", "--config",
                              alice.config], stdout=subprocess.PIPE, text=True).stdout
        assert "  Alice on alice-laptop  " in log and "  Bob on bob-desk  " in log, log

        # Bob is removed: his line dropped, and his open connection ended (sshd
        # restarted: a removed line stops new logins only). He gets no new version,
        # keeps what he had, and his status says the server refused his key.
        with open(sshd.authorized, "w") as f:
            f.write(alice_line + "\n")
        sshd.restart()
        kept = {n: bob.read(n) for n in os.listdir(bob.path) if n != ".git"}
        wait_until(lambda: "Permission denied" in bob.notify("status").stdout, 60,
                   what="Bob's refusal in his status")
        write(alice, "after.txt", b"not for Bob\n")
        settle(alice, remote)  # Alice still syncs, with her key
        pulled = bob.notify("pull", check=False)  # asked at once: refused too
        assert pulled.returncode != 0 and "Could not read from remote" in pulled.stderr
        said = bob.notify("status").stdout
        assert "you were removed from the share" in said.splitlines()[0], said  # the headline
        assert bob.read("after.txt") is None
        assert {n: bob.read(n) for n in os.listdir(bob.path) if n != ".git"} == kept
    finally:
        for m in (alice, bob):
            if m is not None:
                m.stop()
        sshd.stop()


@pytest.mark.e2e
def test_over_xmpp_each_person_s_pushes_reach_the_other_s_machines(machines, prosody_server):
    """Two people, two XMPP accounts, each naming the other in sharedwith: a push is
    announced to the other account, whose machine pulls at once (pullinterval and
    safetypull off: nothing else would bring it). The original's alsonotify keeps its
    place beside it (notifications only; tests/unit/xmpp/test_listener.py)."""
    accounts = {name: prosody_server.register(name, PASSWORD) for name in ("alice", "bob")}
    people = {}
    for name, other in (("alice", "bob"), ("bob", "alice")):
        m = machines(name, start=False, syncmethod="xmpp", pullinterval="0", safetypull="0")
        m.xmpp = dict(username=accounts[name], password=PASSWORD, host="127.0.0.1",
                      port=prosody_server.port, cafile=prosody_server.cafile,
                      sharedwith=accounts[other], resource="autosync-" + name)
        m.write_config()
        git("config", "user.name", name.title(), cwd=m.path)
        people[name] = m.start()
    alice, bob = people["alice"], people["bob"]
    for m in (alice, bob):
        wait_until(lambda: m.status().get("link") == "up", 30, what="%s's link" % m.name)
    write(alice, "from-alice.txt", b"hello Bob\n")
    wait_until(lambda: bob.read("from-alice.txt") == b"hello Bob\n", 30, what="Bob's pull")
    assert "announcement from alice@localhost, who shares this folder" in bob.logtext()
    write(bob, "from-bob.txt", b"hello Alice\n")
    wait_until(lambda: alice.read("from-bob.txt") == b"hello Alice\n", 30, what="Alice's pull")
    assert "announcement from bob@localhost, who shares this folder" in alice.logtext()
