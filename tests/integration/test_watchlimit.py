"""Running out of inotify watches is a named, handled state; nothing goes unsynced.

The suite runs in a user namespace of its own whose inotify watch limit
(user.max_inotify_watches) is tiny: the kernel really refuses watches, for
this suite alone, and no system setting changes (the namespace goes with it)."""
import json
import os
import subprocess
import sys

import pytest

from autosync.watcher import watchlimit
from autosync.core.config import load
from autosync.core.summary import Summariser
from autosync.core.protocol import connect
from base import wait_until
from helpers import settle, write
from helpers import watches_of

LIMIT = 12
SET_LIMIT = 'echo %d > /proc/sys/user/max_inotify_watches && exec "$@"'


def test_suggested_limit_fits_the_tree_twice_and_leaves_others_room():
    assert watchlimit.suggested_limit(10000, 8192) == 20480
    assert watchlimit.suggested_limit(100, 8192) == 9216  # the limit plus the tree
    assert watchlimit.suggested_limit(60, None) == 1024
    text = watchlimit.problem_text(21, 31, 12)
    assert "sudo sysctl fs.inotify.max_user_watches=1024" in text and "21 of 31" in text


def test_a_watch_problem_becomes_one_notification():
    s = Summariser("quiet", folder="Sync")
    event = {"event": "failed", "op": "watch", "error": watchlimit.problem_text(3, 9, 8)}
    [message] = s.feed(event, 0.0)
    assert "Watch" in message.title and "fs.inotify.max_user_watches" in message.body
    assert s.feed(event, 1.0) == []  # the same problem is not told twice


def start_limited(machine, limit):
    machine.logfile = open(machine.log, "ab")
    machine.proc = subprocess.Popen(
        ["unshare", "--user", "--map-root-user", "sh", "-c", SET_LIMIT % limit, "sh",
         sys.executable, "-m", "autosync.supervisor", "-v", machine.config],
        stdout=machine.logfile, stderr=machine.logfile, stdin=subprocess.DEVNULL)
    wait_until(lambda: machine.status().get("state") == "idle", 30, what="a to start")
    wait_until(lambda: b"watching" in open(machine.log, "rb").read(), 30, what="a's watcher")


@pytest.fixture
def can_limit():
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            SET_LIMIT % LIMIT, "sh", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no user namespace with its own inotify limit here: %s" % probe.stderr)


@pytest.mark.e2e
def test_watches_running_out_is_told_once_and_nothing_waits(machines, remote, can_limit):
    a = machines("a", start=False)
    for i in range(5):
        write(a, "d%d/file" % i, b"%d\n" % i)
    start_limited(a, LIMIT)
    assert a.status()["watch"] is None
    events = connect(load(a.config).socket)
    assert events.request({"cmd": "subscribe"}, timeout=10)["ok"]
    # Twenty new folders, and only LIMIT watches for the whole tree.
    for i in range(20):
        write(a, "many/f%02d/file" % i, b"first %d\n" % i)
    told = next(e for e in events.events() if e.get("event") == "failed")
    events.close()
    assert told["op"] == "watch" and "sudo sysctl fs.inotify.max_user_watches=" in told["error"]
    status = a.status()
    assert status["watch"]["unwatched"] > 0 and "polled every" in status["watch"]["problem"]
    assert "sudo sysctl fs.inotify.max_user_watches=" in a.notify("status").stdout
    assert watches_of(a.children()["watcher"]) == LIMIT
    settle(a, remote)
    # Changes in folders without a watch are found by polling: new, changed, moved files.
    for i in range(20):
        write(a, "many/f%02d/file" % i, b"second %d\n" % i)
        write(a, "many/f%02d/new" % i, b"new %d\n" % i)
    os.rename(os.path.join(a.path, "many/f19/new"), os.path.join(a.path, "many/f19/renamed"))
    settle(a, remote)
    files = remote.files()
    for i in range(19):
        assert files[b"many/f%02d/file" % i] == b"second %d\n" % i
        assert files[b"many/f%02d/new" % i] == b"new %d\n" % i
    assert files[b"many/f19/renamed"] == b"new 19\n" and b"many/f19/new" not in files
    # Watches freed: every folder gets one again, and the status says so.
    for i in range(5):
        subprocess.run(["rm", "-rf", os.path.join(a.path, "d%d" % i)], check=True)
    for i in range(12):
        subprocess.run(["rm", "-rf", os.path.join(a.path, "many/f%02d" % i)], check=True)
    wait_until(lambda: a.status().get("watch", "?") is None, 30, 0.2, "every folder watched")
    write(a, "many/f18/after", b"after\n")
    settle(a, remote)
    assert remote.files()[b"many/f18/after"] == b"after\n"
    assert b"d0/file" not in remote.files() and b"many/f00/file" not in remote.files()
    log = a.logtext()
    assert log.count("inotify watches ran out") == 1, log
    assert "every folder has an inotify watch again" in log
    assert "cannot watch" not in log and "Traceback" not in log
    assert json.loads(a.notify("--json", "status").stdout)["watch"] is None


@pytest.mark.e2e
def test_a_tree_too_big_for_the_limit_at_start_is_still_synced(machines, remote, can_limit):
    a = machines("a", start=False)
    for i in range(8):
        write(a, "d%d/sub/file" % i, b"%d\n" % i)
    start_limited(a, 4)
    assert "more have no watch" in a.logtext()
    wait_until(lambda: (a.status().get("watch") or {}).get("unwatched", 0) >= 13, 20, 0.1,
               "the status to count the folders without a watch")
    for i in range(8):
        write(a, "d%d/sub/file" % i, b"changed %d\n" % i)
    settle(a, remote)
    assert all(remote.files()[b"d%d/sub/file" % i] == b"changed %d\n" % i for i in range(8))
    assert a.logtext().count("inotify watches ran out") == 1
