"""End-to-end: a problem produced for real shows in the readable status, the JSON status
and the log, is told once when it starts and once when it ends, and clears by itself."""
import os


from base import wait_until
from dbus_session import Host, Recorder, WatcherRecorder, bus  # noqa: F401 (a fixture)
from helpers import write



def refuse_pushes(remote, why):
    hook = os.path.join(remote.path, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho '%s' >&2\nexit 1\n" % why)
    os.chmod(hook, 0o755)
    return hook


def test_a_push_the_remote_refuses_is_named_until_it_works(machines, remote):
    hook = refuse_pushes(remote, "quota exceeded on the server")
    a = machines("a")
    write(a, "notes.txt", b"kept locally meanwhile\n")
    wait_until(lambda: "push" in (a.status().get("failing") or {}), 30, 0.1, "the push problem")
    status = a.status()
    assert [p["name"] for p in status["problems"]] == ["push"]
    assert status["headline"].startswith("NOT syncing: push: ")
    text = a.notify("status").stdout
    assert text.splitlines()[0].startswith("NOT syncing: push:") and "check the remote" in text
    os.unlink(hook)  # the server is fixed: the retry (backoff, at most a minute) pushes
    wait_until(lambda: a.status().get("headline") == "in sync", 90, 0.2, "the problem to clear")
    assert a.notify("status").stdout.splitlines()[0] == "in sync"
    assert remote.files().get(b"notes.txt") == b"kept locally meanwhile\n"
    log = a.logtext()
    assert log.count("push failed") == 1 and log.count("push works again") == 1


def test_an_empty_remote_is_waited_on_and_the_first_change_goes_out(tmp_path):
    """Two machines cloned an empty remote: no error, 'waiting for the first change'
    until one writes; then the other has it."""
    from base import Machine, git

    class Empty:
        path = str(tmp_path / "empty.git")

        def files(self):
            names = git("--git-dir", self.path, "ls-tree", "-r", "-z", "--name-only", "main",
                        check=False) or b""
            return {n: git("--git-dir", self.path, "cat-file", "blob", "main:" + n.decode())
                    for n in names.split(b"\0") if n}

    git("init", "-q", "--bare", "-b", "main", Empty.path)
    empty = Empty()
    a, b = (Machine(tmp_path, n, empty) for n in ("a", "b"))
    try:
        a.start(), b.start()
        for m in (a, b):  # (syncmethod none here: no pull at start, so one is asked for)
            assert m.notify("pull").returncode == 0
            status = m.status()
            assert status["problems"] == [] and status["headline"] == \
                "in sync: the remote is empty: waiting for the first change", status
        write(a, "first.txt", b"the first file\n")
        wait_until(lambda: empty.files().get(b"first.txt") == b"the first file\n", 30, 0.1,
                   "a's first push")
        b.notify("pull")
        assert b.read("first.txt") == b"the first file\n"
        assert b.status()["waiting"] is None and "ERROR" not in a.logtext() + b.logtext()
    finally:
        a.stop(), b.stop()


def test_no_git_identity_is_named_with_gits_hint_and_clears_once_set(machines, remote):
    """A new machine whose git has no identity: the commit fails; status says so with
    git's own words; once the user sets one, the retry commits with no new change."""
    from base import git
    git("config", "--global", "--unset", "user.email")
    git("config", "--global", "user.useConfigOnly", "true")  # no guessing from the host name
    a = machines("a")
    write(a, "first.txt", b"written before git knew who I am\n")
    wait_until(lambda: "commit" in (a.status().get("failing") or {}), 30, 0.1, "the commit problem")
    status = a.status()
    assert status["problems"][0]["name"] == "commit"
    assert "email" in status["problems"][0]["error"]
    assert a.notify("status").stdout.startswith("NOT syncing: commit:")
    git("config", "--global", "user.email", "me@example.org")
    wait_until(lambda: remote.files().get(b"first.txt") is not None, 90, 0.2,
               "the retry to commit and push")
    wait_until(lambda: a.status().get("headline") == "in sync", 30, 0.1, "the problem to clear")
    log = a.logtext()
    assert log.count("commit failed") == 1 and log.count("commit works again") == 1


def test_a_problem_reaches_the_notifications_and_the_tray_once_and_clears(machines, remote,
                                                                          bus):
    """The same refused push, seen as a desktop user sees it: the real notifier and tray
    of the suite on a private session bus, a notification service and a tray host
    standing in for the desktop's. One notification when it starts, one when it clears;
    the tray offline with the reason, then synced."""
    with Recorder(bus.address) as notes, WatcherRecorder(bus.address) as trays:
        hook = refuse_pushes(remote, "quota exceeded on the server")
        a = machines("a", notifymethod="desktop", tray="yes")
        tray = Host(bus.address, trays.wait_for(1, timeout=20)[-1][1])
        try:
            write(a, "notes.txt", b"kept locally meanwhile\n")
            wait_until(lambda: "push" in (a.status().get("failing") or {}), 30, 0.1, "the problem")
            wait_until(lambda: tray.get("IconName") == "network-offline", 10, what="tray offline")
            assert "quota exceeded" in tray.get("ToolTip")[3].split("\n")[0]
            wait_until(lambda: [n for n in notes.calls if "Push failed" in n.summary], 10,
                       what="the notification")
            # Retried and refused again before the fix: the repeats must stay quiet.
            wait_until(lambda: a.logtext().count("pushcmd:") >= 3, 60, 0.2, "two retries")
            os.unlink(hook)
            wait_until(lambda: a.status().get("headline") == "in sync", 90, 0.2, "the fix")
            wait_until(lambda: tray.get("IconName") == "emblem-default", 10, what="tray synced")
            wait_until(lambda: [n for n in notes.calls if "Push works again" in n.summary], 10,
                       what="the all-clear")
            calls = notes.settled(1.0)
            # Many retries failed in between: still one notification each way.
            assert [n.summary for n in calls if "Push" in n.summary] == [
                "%s: Push failed" % os.path.basename(a.path),
                "%s: Push works again" % os.path.basename(a.path)], [n.summary for n in calls]
            assert "quota exceeded" in [n for n in calls if "failed" in n.summary][0].body
        finally:
            tray.close()
