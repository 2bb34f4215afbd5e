"""fsmonitor.py: the tokens and paths the hook answers with, which commands get the
setting, and (end to end, a running committer and watcher) that git with the
product's hook sees exactly what git without it sees."""
import os
import subprocess
import time

import pytest

from autosync.committer import fsmonitor, fsmonitor_hook
from autosync.vcs.commands import environment
from autosync.core.config import GIT_COMMANDS, load
from autosync.committer.repository import Repository
from base import ROOT, Remote, git, wait_until
from fakes import Reports, config


def answer(journal, token):
    """The hook's answer as (token, set of paths, or "/") from the journal's state now."""
    out = fsmonitor_hook.answer(journal.state(), token.encode()).split(b"\0")
    if out[1:] == [b"/", b""]:
        return out[0].decode(), "/"
    return out[0].decode(), {p.decode() for p in out[1:-1] if not p.endswith(b"/")}


# --- the journal: tokens and what they are answered with ---------------------------------

def test_a_token_is_the_number_of_batches_received_in_this_run(tmp_path):
    j = fsmonitor.BatchJournal(str(tmp_path / "s"), run="r")
    first, _ = answer(j, "autosync:r:0")
    assert first == "autosync:r:0"
    j.received([{"action": "modified", "path": "a"}])
    j.received([{"action": "moved", "src": "old", "path": "new"}, {"action": "added", "path": "b"}])
    token, paths = answer(j, first)
    assert token == "autosync:r:2" and paths == {"a", "old", "new", "b"}
    assert answer(j, "autosync:r:1") == (token, {"old", "new", "b"})
    assert answer(j, token) == (token, set())


def test_a_rescan_batch_makes_every_older_token_answer_everything(tmp_path):
    """A change made while a rescan is pending: git looks at every file."""
    j = fsmonitor.BatchJournal(str(tmp_path / "s"), run="r")
    j.received([{"action": "modified", "path": "a"}])
    before, _ = answer(j, "autosync:r:0")
    for reason_rescan in range(2):
        j.received([], rescan=True)
        assert answer(j, before)[1] == "/"
    token, _ = answer(j, before)
    j.received([{"action": "added", "path": "c"}])
    assert answer(j, token) == ("autosync:r:4", {"c"})


def test_the_committers_own_rescan_and_too_many_paths_answer_everything(tmp_path, monkeypatch):
    j = fsmonitor.BatchJournal(str(tmp_path / "s"), run="r")
    j.received([{"action": "modified", "path": "a"}])
    j.invalidate()  # a sync, a retry: git must find what no batch has named yet
    assert answer(j, "autosync:r:1")[1] == "/"
    monkeypatch.setattr(fsmonitor, "LIMIT", 3)
    token, _ = answer(j, "autosync:r:2")
    j.received([{"action": "added", "path": p} for p in "wxyz"])
    assert answer(j, token)[1] == "/" and not j.paths


def test_another_runs_token_and_folders_without_a_watch_answer_everything(tmp_path):
    j = fsmonitor.BatchJournal(str(tmp_path / "s"))
    j.received([{"action": "modified", "path": "a"}])
    assert answer(j, "autosync:0123456789abcdef:0")[1] == "/"
    token = fsmonitor.token(j.run, 1)
    assert answer(j, token)[1] == set()
    j.set_blind(True)
    assert answer(j, token)[1] == "/"
    j.set_blind(False)
    assert answer(j, token)[1] == set()


def test_ignored_tracked_files_are_named_whatever_the_token(tmp_path):
    j = fsmonitor.BatchJournal(str(tmp_path / "s"), run="r")
    j.ignored(["logs/x.log", "private/key"], replace=True)
    j.received([{"action": "modified", "path": "a"}])
    assert answer(j, "autosync:r:1")[1] == {"logs/x.log", "private/key"}
    j.ignored(["more"])
    assert answer(j, "autosync:r:1")[1] == {"logs/x.log", "private/key", "more"}


def test_the_state_file_is_replaced_whole_and_only_when_it_changed(tmp_path):
    where = str(tmp_path / "s")
    j = fsmonitor.BatchJournal(where, run="r")
    j.write()
    stamp = os.stat(where).st_ino
    j.write()
    assert os.stat(where).st_ino == stamp  # nothing new: not written
    j.received([{"action": "added", "path": "n\u00e9w"}])
    j.write()
    with open(where, "rb") as f:
        assert f.read() == j.state()
    assert os.stat(where).st_ino != stamp and not os.path.exists(where + ".new")
    j.remove()
    assert not os.path.exists(where)


def test_the_hooks_command_quotes_every_word_for_the_shell(tmp_path):
    where = str(tmp_path / "with space's")
    value = fsmonitor.hook_command(where)
    assert value.endswith(fsmonitor.HOOK + " \"" + where.replace("'", "'\"'\"'") + "\"") \
        or value.endswith("'" + where.replace("'", "'\"'\"'") + "'")
    assert " -I -S " in value


# --- real git: which commands get the setting, and what git then sees ---------------------

@pytest.fixture
def clone(tmp_path, monkeypatch):
    remote = Remote(tmp_path / "remote.git")
    path = tmp_path / "clone"
    git("clone", "-q", remote.path, str(path))
    return path


def make_repo(path, fsmonitor_key="yes", quick=True, **commands):
    cfg = config(path, fsmonitor=fsmonitor_key, commands=dict(GIT_COMMANDS, **commands))
    r = Repository(cfg, Reports())
    if not quick:  # the usual path: `git add` and `git commit`, which ask the hook
        r.quick = r.commits.quick = r.index.quick = None
    return r


def porcelain(folder, hook_value=None):
    """git status as the user's git sees it; with the product's hook when given. Neither
    writes the index (GIT_OPTIONAL_LOCKS=0): the token in it stays the daemon's."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    if hook_value:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
        env.update({"GIT_CONFIG_COUNT": str(count + 2),
                    "GIT_CONFIG_KEY_%d" % count: "core.fsmonitor",
                    "GIT_CONFIG_VALUE_%d" % count: hook_value,
                    "GIT_CONFIG_KEY_%d" % (count + 1): "core.fsmonitorHookVersion",
                    "GIT_CONFIG_VALUE_%d" % (count + 1): "2"})
    return subprocess.run(["git", "status", "--porcelain", "-z", "--untracked-files=all"],
                          cwd=str(folder), env=env, stdout=subprocess.PIPE, check=True).stdout


def index_token(folder):
    """The token git keeps in the index's fsmonitor extension, or None."""
    with open(os.path.join(str(folder), ".git", "index"), "rb") as f:
        data = f.read()
    at = data.rfind(b"FSMN")
    if at < 0:
        return None
    # signature, size (4), version (4, 2: a token), then the NUL-ended token
    return data[at + 12:data.index(b"\0", at + 12)].decode()


def test_only_the_staging_commands_and_the_pulls_index_get_the_setting(clone):
    r = make_repo(clone)
    assert r.fsmonitor is not None
    for name in fsmonitor.STAGING:
        assert isinstance(r.cmd[name], fsmonitor.Monitored), name
    for name in ("pullcmd", "pushcmd", "statuscmd", "remoteurlcmd", "maintenancecmd"):
        assert not isinstance(r.cmd[name], fsmonitor.Monitored), name
    assert r.git_pull.index_env == r.fsmonitor.env
    env = r.fsmonitor.env()
    assert env["GIT_CONFIG_VALUE_%d" % (int(env["GIT_CONFIG_COUNT"]) - 2)] == r.fsmonitor.value
    # ...and no other command of the daemon's: git's plain environment has no such key
    assert "core.fsmonitor" not in environment().values()
    r.close()
    assert not os.path.exists(r.cfg.socket + ".fsmonitor")


def test_a_users_own_commands_or_auto_in_a_small_tree_get_no_fsmonitor(clone):
    assert make_repo(clone, addcmd="git add %s && touch added").fsmonitor is None
    assert make_repo(clone, pullcmd="git pull --rebase").fsmonitor is not None  # not staging
    assert make_repo(clone, "auto").fsmonitor is None  # two files: lstat() costs less
    assert make_repo(clone, "no").fsmonitor is None


def test_auto_counts_the_files_in_the_index(clone, monkeypatch):
    monkeypatch.setattr(fsmonitor, "AUTO_FROM", 2)
    assert fsmonitor.index_entries(os.path.join(str(clone), ".git")) == 1
    assert make_repo(clone, "auto").fsmonitor is None
    (clone / "b").write_text("b")
    git("add", "b", cwd=str(clone))
    assert make_repo(clone, "auto").fsmonitor is not None


def test_a_commit_hook_or_git_annex_keeps_the_setting_away(clone):
    r = make_repo(clone)
    assert r.fsmonitor.env()
    hook = clone / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ngit checkout -- .\n")
    hook.chmod(0o755)
    assert r.fsmonitor.env() == {}
    with open(os.path.join(ROOT, "hooks", "post-commit")) as f:
        hook.write_text(f.read())  # the shipped hook leaves the daemon's commands alone
    assert r.fsmonitor.env()
    hook.unlink()
    (clone / ".git" / "annex").mkdir()
    assert r.fsmonitor.env() == {}


def test_commits_with_the_hook_record_every_change_the_batches_name(clone):
    r = make_repo(clone, quick=False)
    j = r.fsmonitor.journal
    (clone / "a.txt").write_text("a")
    j.received([{"action": "added", "path": "a.txt"}])
    assert r.commit([{"action": "added", "path": "a.txt"}])
    assert index_token(clone) == fsmonitor.token(j.run, j.seq)  # add and commit kept it
    (clone / "a.txt").write_text("changed")
    (clone / "README").write_text("changed too")
    changes = [{"action": "modified", "path": "a.txt"}, {"action": "modified", "path": "README"}]
    j.received(changes)
    assert r.commit(changes)
    assert git("status", "--porcelain", cwd=str(clone)) == b""
    assert git("show", "HEAD:a.txt", cwd=str(clone)) == b"changed"


def test_a_quick_commit_s_index_keeps_the_token_when_settled(clone):
    r = make_repo(clone)
    j = r.fsmonitor.journal
    (clone / "a.txt").write_text("a")
    j.received([{"action": "added", "path": "a.txt"}])
    assert r.commit([{"action": "added", "path": "a.txt"}])
    assert r.quick.owed() == ["a.txt"]  # committed without the index
    r.settle_index()  # the committer's step after the push
    assert index_token(clone) == fsmonitor.token(j.run, j.seq)
    assert git("status", "--porcelain", cwd=str(clone)) == b""


def test_the_comparison_catches_a_change_the_watcher_did_not_send(clone):
    """What the end-to-end test below relies on: were the product's answer to drop a
    path, git with the hook would miss that change, and the two statuses differ."""
    r = make_repo(clone, quick=False)
    j = r.fsmonitor.journal
    (clone / "a.txt").write_text("a")
    j.received([{"action": "added", "path": "a.txt"}])
    r.commit([{"action": "added", "path": "a.txt"}])
    (clone / "a.txt").write_text("changed")
    (clone / "README").write_text("changed too")
    j.received([{"action": "modified", "path": "a.txt"}])  # README's change never sent
    r.fsmonitor.publish()
    assert porcelain(clone, r.fsmonitor.value) != porcelain(clone)
    assert b" M README" in porcelain(clone) and b" M README" not in porcelain(
        clone, r.fsmonitor.value)
    j.received([{"action": "modified", "path": "README"}])
    r.fsmonitor.publish()
    assert porcelain(clone, r.fsmonitor.value) == porcelain(clone)


def test_tracked_files_ignored_later_are_read_from_git_and_pulls(clone):
    (clone / "logs").mkdir()
    (clone / "logs" / "x.log").write_text("1")
    git("add", "logs", cwd=str(clone))
    git("commit", "-q", "-m", "logs", cwd=str(clone))
    (clone / ".gitignore").write_text("logs/\n*.tmp\n")
    r = make_repo(clone)
    assert r.fsmonitor.journal.always == {"logs/x.log"}
    r.fsmonitor.pulled(["brought.tmp", "plain.txt"])  # a pull brought a file ignored here
    assert r.fsmonitor.journal.always == {"logs/x.log", "brought.tmp"}
    (clone / ".gitignore").write_text("")
    r.fsmonitor.pulled([".gitignore"])
    assert r.fsmonitor.journal.always == set()


# --- end to end: the running suite ----------------------------------------------------------

def write(machine, rel, content):
    path = os.path.join(machine.path, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)


def committed(machine, remote, name):
    """The machine is idle with nothing pending and `name` is on the remote."""
    s = machine.status()
    return s.get("state") == "idle" and not s.get("pending") and not s.get("unpushed") \
        and name in remote.files()


@pytest.mark.e2e
def test_git_with_the_products_hook_sees_what_git_without_it_sees(machines, remote):
    """Changes, renames, deletions, a new file and folder, tracked files the watcher
    ignores: while the committer holds them (paused), git status with core.fsmonitor
    set to the product's hook equals git status without it, and the hook answered
    with paths, not with "look at everything"."""
    a = machines("a", start=False, fsmonitor="yes", ignorepath=".git .svn .hg private")
    for rel in ("keep.txt", "edit.txt", "gone.txt", "old.txt", "dir/one", "dir/two",
                "private/key", "logs/x.log"):
        write(a, rel, "first %s\n" % rel)
    git("add", "-A", cwd=a.path)
    git("commit", "-q", "-m", "tree", cwd=a.path)
    write(a, ".gitignore", "logs/\n")  # after logs/x.log was committed
    git("add", ".gitignore", cwd=a.path)
    git("commit", "-q", "-m", "ignore logs", cwd=a.path)
    git("push", "-q", "origin", "HEAD:main", cwd=a.path)
    a.start()
    write(a, "warm.txt", "a change, so that the index holds the product's token\n")
    time.sleep(0.5)
    # (not a.settled(): its `git status` would rewrite the index without the token)
    wait_until(lambda: committed(a, remote, b"warm.txt"), 60, 0.1, "a to commit")
    hook = fsmonitor.hook_command(load(a.config).socket + ".fsmonitor")
    # (a quick commit leaves the index to be settled after the push: the token with it)
    wait_until(lambda: (index_token(a.path) or "").startswith("autosync:"), 10, 0.1,
               "the index to hold the product's token")

    a.notify("pause")
    write(a, "edit.txt", "changed\n")
    os.unlink(os.path.join(a.path, "gone.txt"))
    os.rename(os.path.join(a.path, "old.txt"), os.path.join(a.path, "renamed.txt"))
    os.rename(os.path.join(a.path, "dir"), os.path.join(a.path, "moved-dir"))
    write(a, "new.txt", "new\n")
    write(a, "newdir/inner/file", "new folder\n")
    write(a, "private/key", "changed, never in a batch (ignorepath)\n")
    write(a, "logs/x.log", "changed, never in a batch (.gitignore)\n")
    sent = {"edit.txt", "gone.txt", "renamed.txt", "moved-dir", "new.txt"}
    wait_until(lambda: sent <= set(a.status().get("pending", [])), 30, 0.1,
               "the watcher's batches to reach the committer")
    time.sleep(0.3)  # the last batch (newdir) too

    token = index_token(a.path)
    with open(load(a.config).socket + ".fsmonitor", "rb") as f:
        said = fsmonitor_hook.answer(f.read(), token.encode()).split(b"\0")
    assert said[1] != b"/", "the hook answered 'everything': the comparison would prove nothing"
    without = porcelain(a.path)
    for entry in (b" M edit.txt", b" D gone.txt", b" D old.txt", b"?? renamed.txt",
                  b" D dir/one", b"?? moved-dir/two", b"?? new.txt", b"?? newdir/inner/file",
                  b" M private/key", b" M logs/x.log"):
        assert entry in without.split(b"\0"), entry
    assert porcelain(a.path, hook) == without
    assert {b"private/key", b"logs/x.log", b"edit.txt"} <= set(said[1:])

    a.notify("resume")
    time.sleep(0.5)
    wait_until(lambda: a.settled(remote), 60, 0.1, "a to settle after the resume")
    files = remote.files()
    assert files[b"edit.txt"] == b"changed\n" and b"gone.txt" not in files
    assert files[b"moved-dir/one"] == b"first dir/one\n" and b"newdir/inner/file" in files
