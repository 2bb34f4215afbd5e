"""End-to-end: faults injected for real; nothing is lost, nothing is force-pushed."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import time


from base import git, wait_until
from base import tree
from helpers import committed, cut_off, never_mid_merge_nor_markers, reconnect, share
from helpers import settle, write


PULL = "git pull -q --no-rebase --no-edit"


def slow(machine, key, command, seconds=2):
    """Make a command of machine sleep first, so that a kill lands in the middle of it.

    One shell line, one process: killed mid-way, the committer leaves it running."""
    machine.dvcs[key] = "sleep %s; %s" % (seconds, command)
    machine.write_config()


def kill_committer(machine):
    pid = machine.children()["committer"]
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: machine.children().get("committer") not in (None, pid), 20,
               what="the committer to be restarted")


def test_unreachable_remote_queues_commits_and_pushes_them_when_back(machines, remote):
    a = machines("a")
    away = remote.path + ".away"
    os.rename(remote.path, away)
    write(a, "one.txt", b"one\n")
    committed(a)
    write(a, "two.txt", b"two\n")
    committed(a)
    wait_until(lambda: a.status().get("unpushed", 0) >= 2, 20, what="two unpushed commits")
    text = a.notify("status").stdout
    assert re.search(r"unpushed: +[2-9] commits", text), text
    assert re.search(r"last error: +push: ", text), text
    os.rename(away, remote.path)
    # No request: the push is retried by itself, with a short backoff after a short outage.
    wait_until(lambda: remote.files().get(b"two.txt") == b"two\n", 40, 0.2, "the retried push")
    settle(a, remote)
    assert a.status()["last_error"] is None


def test_push_rejected_merges_and_pushes_again_without_force(machines, remote):
    a, b = machines("a", "b")
    write(a, "from-a.txt", b"a\n")
    settle(a, remote)
    a_head = git("rev-parse", "HEAD", cwd=a.path).strip()
    write(b, "from-b.txt", b"b\n")  # b has not pulled: its push is rejected
    settle(b, remote)
    assert remote.files()[b"from-a.txt"] == b"a\n" and remote.files()[b"from-b.txt"] == b"b\n"
    git("--git-dir", remote.path, "merge-base", "--is-ancestor", a_head, "main")


def test_changes_during_a_pull_are_committed_once(machines, remote):
    a, b = machines("a", "b")
    slow(b, "pullcmd", PULL)
    b.stop()
    b.start()
    write(a, "pulled.txt", b"from a\n")
    settle(a, remote)
    b.notify("pushed", remote.path)  # asks b to pull; answered at once
    wait_until(lambda: b.status().get("state") == "pulling", 10, what="b to pull")
    write(b, "local.txt", b"written during the pull\n")
    wait_until(lambda: b.status().get("state") == "idle", 20, what="the pull to end")
    settle(b, remote)
    assert remote.files()[b"local.txt"] == b"written during the pull\n"
    assert tree(b)["pulled.txt"] == b"from a\n"
    touched = remote.log("--format=", "--name-only").split("\n")  # a name per commit touching it
    assert touched.count("pulled.txt") == 1 and touched.count("local.txt") == 1, touched


def test_committer_killed_mid_commit_loses_and_repeats_nothing(machines, remote):
    a = machines("a", start=False)
    # commitcmd holds until the test lets it go: the kill lands while it runs, and it
    # still runs when the restarted committer looks (a fixed sleep ended first when the
    # restart was slow, on a busy machine).
    release = str(a.path) + ".release"
    a.dvcs["commitcmd"] = "while [ ! -e '%s' ]; do sleep 0.05; done; git commit -q -m %%s" \
        % release
    a.write_config()
    a.start()
    write(a, "mid.txt", b"committed while killed\n")
    # Kill while commitcmd itself runs (not while staging, which may be over in a blink).
    wait_until(lambda: subprocess.run(["pgrep", "-f", "done; git commit"],
                                      stdout=subprocess.DEVNULL).returncode == 0,
               10, what="the commit command")
    kill_committer(a)
    wait_until(lambda: "left running by a killed committer" in a.logtext(), 30,
               what="the restarted committer to wait for the commit left running")
    open(release, "w").close()
    write(a, "after.txt", b"after the restart\n")
    settle(a, remote)
    files = remote.files()
    assert files[b"mid.txt"] == b"committed while killed\n"
    assert files[b"after.txt"] == b"after the restart\n"
    assert remote.log("--format=%B").count("mid.txt") == 1


def test_committer_killed_mid_pull_with_conflict_recovers(machines, remote):
    a, b = machines("a", "b")
    write(a, "notes.txt", b"base\n")
    share(a, b, remote)
    slow(b, "pullcmd", PULL)
    b.stop()
    b.start()
    url = cut_off(b)
    write(b, "notes.txt", b"b's older notes\n")
    committed(b)
    time.sleep(1.1)
    write(a, "notes.txt", b"a's newer notes\n")
    settle(a, remote)
    reconnect(b, url)
    b.notify("pushed", url)
    wait_until(lambda: b.status().get("state") == "pulling", 10, what="b to pull")
    kill_committer(b)  # the pull goes on without it and stops on the conflict
    settle(b, remote, timeout=90)
    a.notify("pull")
    settle(a, remote)
    files = tree(a)
    assert tree(b) == files
    assert files["notes.txt"] == b"a's newer notes\n"
    assert [c for p, c in files.items() if p.startswith("notes (conflict from ")] == \
        [b"b's older notes\n"]
    never_mid_merge_nor_markers(remote, a, b)


def test_stale_index_lock_is_removed(machines, remote):
    a = machines("a", start=False)
    lock = os.path.join(a.path, ".git", "index.lock")
    open(lock, "w").close()
    a.start()
    write(a, "x.txt", b"x\n")
    settle(a, remote)
    assert not os.path.exists(lock)
    assert "removed a stale" in a.logtext()


def test_index_lock_of_a_live_process_is_left_alone(machines, remote):
    a = machines("a")
    lock = os.path.join(a.path, ".git", "index.lock")
    # Someone else's git-like process holds the lock for 3 s, then dies leaving it behind.
    holder = subprocess.Popen(["sh", "-c", "exec 3>.git/index.lock; sleep 3"], cwd=a.path)
    wait_until(lambda: os.path.exists(lock), 5, what="the lock")
    write(a, "y.txt", b"y\n")
    time.sleep(2.0)
    assert holder.poll() is None and os.path.exists(lock)
    assert b"y.txt" not in remote.files()
    holder.wait()
    settle(a, remote, timeout=40)  # retried: now the lock is stale and goes
    assert remote.files()[b"y.txt"] == b"y\n"


def diverge_by_hand(machine, remote, tmp_path, pull_args):
    """Leave machine's clone in the middle of a conflicted pull, as a user's git would."""
    write(machine, "notes.txt", b"local notes\n")
    git("add", "notes.txt", cwd=machine.path)
    git("commit", "-q", "-m", "by hand", cwd=machine.path)
    time.sleep(1.1)
    other = str(tmp_path / "other")
    git("clone", "-q", remote.path, other)
    with open(os.path.join(other, "notes.txt"), "wb") as f:
        f.write(b"remote notes\n")
    git("add", "notes.txt", cwd=other)
    git("commit", "-q", "-m", "autosync on elsewhere: 1 added", cwd=other)
    git("push", "-q", "origin", "HEAD:main", cwd=other)
    git("pull", "-q", *pull_args, cwd=machine.path, check=False)


def test_repository_left_mid_merge_is_finished_at_start_up(machines, remote, tmp_path):
    a = machines("a", start=False)
    diverge_by_hand(a, remote, tmp_path, ["--no-rebase", "--no-edit"])
    assert os.path.exists(os.path.join(a.path, ".git", "MERGE_HEAD"))
    a.start()
    settle(a, remote)
    files = remote.files()
    assert files[b"notes.txt"] == b"remote notes\n"
    assert [c for p, c in files.items() if p.startswith(b"notes (conflict from Test ")] == \
        [b"local notes\n"]
    never_mid_merge_nor_markers(remote, a)


def test_repository_mid_rebase_is_reported_and_never_committed(machines, remote, tmp_path):
    a = machines("a", start=False)
    diverge_by_hand(a, remote, tmp_path, ["--rebase"])
    a.start()
    write(a, "new.txt", b"new\n")
    wait_until(lambda: "rebase" in (a.status().get("last_error") or ""), 10,
               what="the rebase to be reported")
    time.sleep(1.0)
    assert b"new.txt" not in remote.files()
    assert "<<<<<<<" not in git("log", "-p", "HEAD", cwd=a.path).decode(errors="replace")
    git("rebase", "--abort", cwd=a.path)
    settle(a, remote, timeout=40)  # looked at again, and synced once the rebase is gone
    files = remote.files()
    assert files[b"new.txt"] == b"new\n" and files[b"notes.txt"] == b"remote notes\n"
    never_mid_merge_nor_markers(remote, a)


def test_folder_replaced_by_an_empty_one_is_not_a_mass_delete(machines, remote):
    a = machines("a")
    write(a, "keep.txt", b"keep\n")
    settle(a, remote)
    before = remote.files()
    moved = a.path + ".moved"
    # The watcher judges a new folder at the path once it was quiet for 2 s, and stops
    # the daemon if it is another one (test_watcher.py): held still here, so that the
    # original is back before it looks, however slow this machine is.
    watcher = a.children()["watcher"]
    os.kill(watcher, signal.SIGSTOP)
    try:
        os.rename(a.path, moved)
        os.mkdir(a.path)
        git("init", "-q", a.path)  # even with fresh metadata it is not our folder
        reply = a.notify("--json", "sync", check=False)
        assert reply.returncode != 0 or '"ok": false' in reply.stdout
        assert "replaced" in a.status()["last_error"]
        time.sleep(1.0)
        assert remote.files() == before
        shutil.rmtree(a.path)
        os.rename(moved, a.path)  # back: syncing resumes
    finally:
        os.kill(watcher, signal.SIGCONT)
    write(a, "later.txt", b"later\n")
    settle(a, remote, timeout=40)
    assert remote.files()[b"keep.txt"] == b"keep\n"


def test_folder_that_lost_its_metadata_is_not_committed(machines, remote):
    a = machines("a")
    write(a, "keep.txt", b"keep\n")
    settle(a, remote)
    before = remote.files()
    for name in os.listdir(a.path):  # everything goes, the folder itself stays
        full = os.path.join(a.path, name)
        shutil.rmtree(full) if os.path.isdir(full) else os.unlink(full)
    a.notify("sync", check=False)
    wait_until(lambda: "metadata" in (a.status().get("last_error") or ""), 10,
               what="the refusal")
    assert remote.files() == before


def refuse_pushes(remote, why):
    """The remote's pre-receive hook refuses every push, saying `why` (git shows it as remote:)."""
    hook = os.path.join(remote.path, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho %s >&2\nexit 1\n" % shlex.quote(why))
    os.chmod(hook, 0o755)
    return hook


def local_only(machine):
    """Commits on the machine's HEAD that the remote's main does not have, counted by git."""
    return int(git("rev-list", "--count", "origin/main..HEAD", cwd=machine.path))


def test_refused_commits_are_counted_across_a_restart_and_pushed_when_the_remote_accepts(
        machines, remote):
    a = machines("a")
    hook = refuse_pushes(remote, "quota exceeded on the sync server, ask Sam")
    for name in ("one.txt", "two.txt"):
        write(a, name, name.encode())
        committed(a)
    wait_until(lambda: a.status().get("unpushed") == 2, 20, what="two unpushed commits")
    assert "quota exceeded on the sync server, ask Sam" in a.status()["last_error"]
    a.stop()
    assert local_only(a) == 2
    a.start(wait=False)
    # Read from the repository: from the first answer on, the restart forgets nothing,
    # and the reason is said again.
    seen = []
    wait_until(lambda: seen.append(a.status()) or "ask Sam" in (seen[-1].get("last_error") or ""),
               30, 0.02, "the refusal after the restart")
    counts = {s["unpushed"] for s in seen if s}
    assert counts == {2}, counts
    os.unlink(hook)
    # No new change: the retry pushes because the count is above zero. The backoff
    # has only begun (a few seconds), well within its longest wait.
    started = time.monotonic()
    wait_until(lambda: remote.files().get(b"two.txt") == b"two.txt", 20, 0.1,
               "the refused commits to reach the remote")
    print("pushed %.1f s after the remote accepted again" % (time.monotonic() - started))
    wait_until(lambda: a.status().get("unpushed") == 0, 10, what="a to count 0 unpushed")
    assert local_only(a) == 0 and a.status()["last_error"] is None


def test_the_folder_moved_away_in_the_middle_of_a_commit_is_the_folder_problem(machines,
                                                                               remote):
    """The worst moment for a move of the folder: after the committer checked that it is
    there, while its commit runs (commitcmd itself moves it, once). The next command's
    working folder is gone: that is the folder problem, said in status, and the committer
    goes on; it died there (the worker thread, then the process) and, restarted, refused
    to start on a folder that did not exist, with nobody left to say why."""
    a = machines("a", start=False)
    moved = a.path + ".moved"
    a.dvcs["commitcmd"] = "git commit -q -m %%s && if [ ! -e '%s.once' ]; then " \
        ": > '%s.once'; mv '%s' '%s'; fi" % (moved, moved, a.path, moved)
    a.write_config()
    a.start()
    committer = a.children()["committer"]
    write(a, "first.txt", b"committed, then the folder went\n")
    problem = wait_until(lambda: a.status().get("folder"), 30,
                         what="status to say the folder is away")
    assert "gone" in problem and a.path in problem
    assert a.children()["committer"] == committer  # still the same process
    os.rename(moved, a.path)
    wait_until(lambda: (lambda s: s and s.get("folder") is None)(a.status()), 30,
               what="the folder to be taken back")
    write(a, "after.txt", b"after\n")
    wait_until(lambda: a.settled(remote), 30, what="a to settle")
    files = remote.files()
    assert files[b"first.txt"] == b"committed, then the folder went\n"
    assert files[b"after.txt"] == b"after\n"
    assert "Traceback" not in a.logtext()


def test_a_failed_pullcmd_s_cut_files_never_reach_the_remote(machines, remote, tmp_path):
    """Issue 40: a pullcmd of the user's (helpers.CUT_PULL, as git-annex's sync does on a
    full disk) writes the remote's files cut short and fails. The start's pull and its
    "changes made before a pull" commit, the rescan after it and the retries commit
    none of them; the user's edit made while the daemon was stopped is committed;
    status names the failure; once there is space, all syncs and no cut version was
    ever pushed."""
    from helpers import CUT_PULL
    full, script = tmp_path / "full", tmp_path / "pull.sh"
    full.touch()
    script.write_text(CUT_PULL % {"full": full})
    a = machines("a", start=False, pullinterval="3600", dvcs={"pullcmd": "bash %s" % script})
    b = machines("b")
    contents = {"big.txt": b"x" * 9000 + b"\n", "empty.txt": b"", "README": b"from b\n"}
    for name, data in contents.items():
        write(b, name, data)
    wait_until(lambda: b.settled(remote), 30, what="b to push")
    write(a, "mine.txt", b"the user's own edit\n")
    a.start(wait=False)
    wait_until(lambda: "pull" in a.status().get("failing", {}), 60, what="the failed pull")
    status = a.status()
    assert "No space left on device" in status["failing"]["pull"]
    assert any(p["name"] == "pull" for p in status["problems"])
    # The cut files put back (removed) and README as committed: between two of the
    # pull's retries (a retry may be writing its own cut files, to put them back too).
    wait_until(lambda: sorted(tree(a)) == ["README", "mine.txt"] and
               a.read("README") == b"synced folder\n", 30, what="the cut files put back")
    assert b"mine.txt" in git("show", "--name-only", "--format=", "HEAD", cwd=a.path)
    full.unlink()
    a.notify("pull")
    wait_until(lambda: a.settled(remote), 60, what="a to sync")
    files = remote.files()
    assert files[b"mine.txt"] == b"the user's own edit\n"
    for name, data in contents.items():
        assert files[name.encode()] == data
        for rev in git("--git-dir", remote.path, "log", "--format=%H", "main", "--",
                       name).split():
            assert git("--git-dir", remote.path, "show", b"%s:%s" % (rev, name.encode()),
                       check=False) in (data, b"synced folder\n", None)
