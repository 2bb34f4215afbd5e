"""End-to-end: with pulllock = conservative, an edit made the instant a pull
brought a file in is committed, every time, on a loaded machine."""
import subprocess
import sys
import os
import signal

import pytest

from autosync.core.config import load
from autosync.core.protocol import connect
from base import git, suite_burners, wait_until, write_during_checkout
from helpers import settle, write


ROUNDS = 20


@pytest.fixture
def load_cpu():
    """Processes that burn CPU for the whole test (more than the machine's cores; in the
    parallel suite, its other workers: base.suite_burners)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(suite_burners(3))]
    yield
    for p in burners:
        p.kill()
        p.wait()


def test_an_edit_the_instant_a_pull_wrote_the_file_is_committed(machines, remote, load_cpu):
    a, b = machines("a", "b", pulllock="conservative")
    b_socket = load(b.config).socket
    for i in range(ROUNDS):
        name = "round-%02d.txt" % i
        pulled, edited = b"from a %d\n" % i, b"edited on b the instant it came, %d\n" % i
        write(a, name, pulled)
        wait_until(lambda: remote.files().get(name.encode()) == pulled, 30, 0.05,
                   "round %d: a's file in the remote" % i)
        conn = connect(b_socket)
        assert conn.request({"cmd": "pushed", "url": remote.path}, timeout=10)["ok"]
        conn.close()
        # Poll hard for the pulled content, and edit it at once.
        wait_until(lambda: b.read(name) == pulled, 30, 0.0005, "round %d: the pull on b" % i)
        write(b, name, edited)
        # Nothing else makes b rescan: a dropped edit would never arrive.
        wait_until(lambda: remote.files().get(name.encode()) == edited, 30, 0.1,
                   "round %d: b's edit made right after the pull to reach the remote" % i)
    settle(b, remote)
    assert "Traceback" not in b.logtext()


def test_a_pulled_file_removed_before_the_pull_ended_is_removed_everywhere(machines, remote):
    """The worst moment for a removal: b's pull has written the new file and not yet
    said it finished (its post-merge hook runs then, and removes the file, once). The
    pull's events net to nothing for that file (created, removed); the removal must
    still be committed and reach the remote."""
    a, b = machines("a", "b")
    hook = os.path.join(b.path, ".git", "hooks", "post-merge")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\n[ -e pulled.txt ] && [ ! -e .git/removed-once ] && "
                "rm pulled.txt && touch .git/removed-once\nexit 0\n")
    os.chmod(hook, 0o755)
    write(a, "pulled.txt", b"from a\n")
    settle(a, remote)
    b.notify("pushed", remote.path)
    wait_until(lambda: os.path.exists(os.path.join(b.path, ".git", "removed-once")), 30,
               0.05, "b's pull and its hook")
    wait_until(lambda: b"pulled.txt" not in remote.files(), 30, 0.1,
               "the removal made before the pull ended to reach the remote")
    settle(b, remote)
    assert b.read("pulled.txt") is None


def test_an_edit_while_the_watcher_lags_behind_the_pull_is_committed(machines, remote):
    """The watcher is descheduled (stopped) between pull-started and pull-finished; the
    edit comes after the pull but before the watcher reads pull-finished."""
    a, b = machines("a", "b", pulllock="conservative", start=False)
    b.dvcs["pullcmd"] = "sleep 1; git pull -q --no-rebase --no-edit"
    b.write_config()
    a.start()
    b.start()
    write(a, "pulled.txt", b"from a\n")
    settle(a, remote)
    watcher = b.children()["watcher"]
    b.notify("pushed", remote.path)  # b pulls, after a second
    wait_until(lambda: b.status().get("state") == "pulling", 10, 0.01, "b to pull")
    os.kill(watcher, signal.SIGSTOP)  # it has read pull-started: the sleep is long
    try:
        wait_until(lambda: b.read("pulled.txt") == b"from a\n", 20, 0.01, "the pull on b")
        wait_until(lambda: b.status().get("state") == "idle", 20, 0.05, "b's pull to end")
        write(b, "pulled.txt", b"edited after the pull\n")
    finally:
        os.kill(watcher, signal.SIGCONT)
    wait_until(lambda: remote.files().get(b"pulled.txt") == b"edited after the pull\n", 30,
               0.1, "the edit to reach the remote")
    assert b.children()["watcher"] == watcher


def test_a_write_during_the_own_pull_to_a_path_it_did_not_touch_is_committed_without_a_rescan(
        machines, remote):
    """Issue 21: after the committer's own (guarded) pull the watcher sends the paths
    the pull's events name instead of asking for a rescan of the whole folder. A file
    written during that pull, at a path the pull does not write (a smudge filter run
    by the pull's checkout of a.txt stands for the user), is committed all the same,
    by a commit that is no rescan."""
    a, b = machines("a", "b", pulllock="conservative")
    write(a, "a.txt", b"a 1\n")
    settle(a, remote)
    b.notify("pushed", remote.path)
    wait_until(lambda: b.read("a.txt") == b"a 1\n", 30, 0.05, "b to have a.txt")
    settle(b, remote)
    flag = write_during_checkout(b, "a.txt", "untouched.txt", "typed on b\n")
    write(a, "a.txt", b"a 2\n")
    settle(a, remote)
    b.notify("pushed", remote.path)
    wait_until(lambda: os.path.exists(flag), 30, 0.05, "b's pull to write a.txt")
    wait_until(lambda: remote.files().get(b"untouched.txt") == b"typed on b\n", 30, 0.1,
               "the write made during the pull to reach the remote")
    settle(b, remote)
    assert b.read("a.txt") == b"a 2\n"
    messages = git("--git-dir", remote.path, "log", "--format=%B%x00").decode().split("\0")
    holding = [m for m in messages if "untouched.txt" in m]
    assert holding and all("rescan" not in m for m in holding), holding
    assert "Traceback" not in b.logtext()
