"""End-to-end: what users' machines hold and test machines did not.

A hostile but common ~/.gitconfig, a file the daemon's user cannot read, a
user's file that merely holds conflict markers, a project checked out inside
the synced folder, an editor's swap file present during a rescan.
"""
import os
import shlex
import subprocess
import sys
import time

import pytest

from autosync.vcs import git_environment
from base import ROOT, git, tree, wait_until
from helpers import committed, copies, cut_off, never_mid_merge_nor_markers, reconnect
from helpers import settle, write
from helpers import Events


HOSTILE = (("pull.rebase", "true"), ("pull.ff", "only"), ("merge.ff", "only"),
           ("color.ui", "always"), ("status.showUntrackedFiles", "no"),
           ("merge.conflictStyle", "zdiff3"), ("diff.renames", "false"),
           ("core.pager", "less"), ("commit.verbose", "true"))


def test_divergence_and_conflict_with_a_hostile_gitconfig(machines, remote, commands):
    """pull.rebase=true, pull.ff=only, zdiff3, colour and a pager: syncing behaves the same."""
    for key, value in HOSTILE:
        git("config", "--global", key, value)
    a, b = machines("a", "b", dvcs=commands)
    write(a, "from-a.txt", b"a\n")
    settle(a, remote)
    b.notify("pull")
    wait_until(lambda: b.read("from-a.txt") == b"a\n", 30, what="a's file on b")
    write(b, "from-b.txt", b"b\n")
    settle(b, remote)
    a.notify("pull")
    wait_until(lambda: a.read("from-b.txt") == b"b\n", 30, what="b's file on a")
    # Apart, both change the same file: a divergence and a modify/modify conflict.
    urls = [cut_off(m) for m in (a, b)]
    write(a, "from-a.txt", b"changed on a\n")
    committed(a)
    time.sleep(1.1)  # the later commit wins; commit times have one-second steps
    write(b, "from-a.txt", b"changed on b\n")
    committed(b)
    for m, url in zip((a, b), urls):
        reconnect(m, url)
    assert a.notify("sync").returncode == 0
    settle(a, remote)
    assert b.notify("sync").returncode == 0, b.logtext()[-2000:]
    settle(b, remote)
    a.notify("pull")
    settle(a, remote)
    for m in (a, b):
        files = tree(m)
        assert files["from-a.txt"] == b"changed on b\n"
        kept = copies(files, "from-a", ".txt")
        assert list(kept.values()) == [b"changed on a\n"], sorted(files)
    assert tree(a) == tree(b)
    never_mid_merge_nor_markers(remote, a, b)
    for m in (a, b):
        assert not os.path.exists(os.path.join(m.path, ".git", "rebase-merge"))
        assert "Need to specify how to reconcile" not in m.logtext()
        assert "\x1b[" not in m.logtext()  # no colour reached the log


def test_every_setting_is_in_the_readme_with_its_reason():
    """The table of settings left the README for docs/behaviour.md."""
    with open(os.path.join(ROOT, "docs", "behaviour.md")) as f:
        readme = " ".join(f.read().split())
    for key, value, why in git_environment.SETTINGS:
        row = "| `%s=%s` | %s |" % (key, value, why)
        assert row in readme, "README lacks the row: " + row


def test_an_unreadable_file_is_left_out_and_the_rest_goes_on(nobody):
    remote, (a,) = nobody.machines("a")
    try:
        a.start()
        events = Events(a)
        secret = os.path.join(a.path, "secret.txt")
        write(a, "secret.txt", b"private\n")
        nobody.chown(secret)
        os.chmod(secret, 0)  # its owner, the daemon's user, may not read it now
        write(a, "other.txt", b"other\n")
        failed = events.wait_for(lambda e: e.get("event") == "failed"
                                 and "secret.txt" in e.get("error", ""))
        assert "cannot be read" in failed["error"]
        wait_until(lambda: b"other.txt" in remote.files(), 30, what="other.txt pushed")
        status = a.status()
        assert status["held_back"] == ["secret.txt"]
        assert "secret.txt" in status["last_error"]
        assert "secret.txt" in a.logtext()
        # sync says it did not get everything in.
        result = a.notify("sync", check=False)
        assert result.returncode == 1 and "secret.txt" in result.stderr
        # Pulls go on: another clone pushes, a gets it.
        other = os.path.join(nobody.base, "other")
        script = ("git clone -q %s %s && cd %s && echo x > from-elsewhere.txt && git add -A "
                  "&& git commit -q -m elsewhere && git push -q" % (remote.path, other, other))
        subprocess.run(nobody.as_user(["sh", "-c", script]), check=True, cwd=nobody.base)
        assert a.notify("pull").returncode == 0
        assert a.read("from-elsewhere.txt") == b"x\n"
        # Readable again: committed, and the status clears.
        os.chmod(secret, 0o644)
        wait_until(lambda: remote.files().get(b"secret.txt") == b"private\n", 30,
                   what="secret.txt pushed once readable")
        wait_until(lambda: a.status().get("held_back") == [], 10, what="held_back cleared")
        assert a.notify("sync").returncode == 0
        assert "Traceback" not in a.logtext()
    finally:
        a.stop()


@pytest.mark.parametrize("label", ["real", "random"])
def test_a_file_that_merely_holds_conflict_markers_syncs(machines, remote, label):
    a, b = machines("a", "b")
    commit = git("--git-dir", remote.path, "rev-parse", "main").strip().decode()
    sha = commit if label == "real" else "0123456789abcdef0123456789abcdef01234567"
    notes = ("How a conflict looks:\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> %s\n"
             % sha).encode()
    write(a, "git-notes.md", notes)
    settle(a, remote)
    assert remote.files()[b"git-notes.md"] == notes
    # ... and it blocks nothing: both sides keep syncing.
    write(b, "later.txt", b"later\n")
    settle(b, remote)
    a.notify("pull")
    wait_until(lambda: a.read("later.txt") == b"later\n", 30, what="b's file on a")
    assert b.notify("pull").returncode == 0
    assert b.read("git-notes.md") == notes
    assert a.status()["last_error"] is None


def gitlinks(remote):
    out = git("--git-dir", remote.path, "ls-tree", "-r", "-z", "main").split(b"\0")
    return [e for e in out if e.startswith(b"160000")]


def nested_repository(machine, rel, commit=True):
    path = os.path.join(machine.path, rel)
    git("init", "-q", path)
    write(machine, rel + "/main.c", b"int main;\n")
    if commit:
        git("add", "-A", cwd=path)
        git("commit", "-q", "-m", "its own history", cwd=path)


@pytest.mark.parametrize("how", ["watched", "start-up"])
def test_a_nested_repository_is_reported_never_committed_as_a_gitlink(machines, remote, how):
    a = machines("a", start=how == "watched")
    events = Events(a) if how == "watched" else None
    nested_repository(a, "projects/tool")
    nested_repository(a, "empty-history", commit=False)  # git add -A fails outright on it
    write(a, "notes.txt", b"synced\n")
    if how == "start-up":
        a.start()
    wait_until(lambda: b"notes.txt" in remote.files(), 30, what="the other file pushed")
    if events:
        said = events.wait_for(lambda e: e.get("event") == "failed"
                               and "projects/tool" in e.get("error", ""))
        assert "submodule" in said["error"] and ".git" in said["error"]
    wait_until(lambda: a.status().get("nested_repositories") == ["empty-history",
                                                                 "projects/tool"],
               30, what="both reported in status")
    write(a, "projects/tool/later.c", b"x\n")
    assert a.notify("sync").returncode == 0
    assert not gitlinks(remote)
    assert not [p for p in remote.files() if p.startswith((b"projects/", b"empty-history"))]
    assert a.logtext().count("projects/tool holds a git repository of its own") == 1
    # Made a plain folder again, its files are synced.
    subprocess.run(["rm", "-rf", os.path.join(a.path, "projects", "tool", ".git")], check=True)
    assert a.notify("sync").returncode == 0
    files = remote.files()
    assert files[b"projects/tool/main.c"] == b"int main;\n"
    assert files[b"projects/tool/later.c"] == b"x\n"
    assert a.status()["nested_repositories"] == ["empty-history"]


def test_a_submodule_the_user_added_is_committed(machines, remote, tmp_path):
    lib = str(tmp_path / "lib")
    git("init", "-q", lib)
    with open(os.path.join(lib, "lib.c"), "w") as f:
        f.write("x\n")
    git("add", "-A", cwd=lib)
    git("commit", "-q", "-m", "lib", cwd=lib)
    a = machines("a")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib", cwd=a.path)
    assert a.notify("sync").returncode == 0
    names = git("--git-dir", remote.path, "ls-tree", "--name-only", "main").split()
    assert len(gitlinks(remote)) == 1 and b".gitmodules" in names
    assert a.status()["nested_repositories"] == []


@pytest.mark.parametrize("when", ["sync", "start-up"])
def test_a_swap_file_never_reaches_history_through_a_rescan(machines, remote, commands, when):
    a = machines("a", dvcs=commands, start=when == "sync")
    write(a, "notes.txt", b"text\n")
    write(a, ".notes.txt.swp", b"vim swap\n")
    write(a, "sub/#draft.txt#", b"emacs\n")
    if when == "start-up":
        a.start()
    else:
        assert a.notify("sync").returncode == 0
    settle(a, remote)
    assert remote.files().get(b"notes.txt") == b"text\n"
    everything = remote.log("--all", "--name-only", "--format=")
    assert ".swp" not in everything and "#draft" not in everything
    os.unlink(os.path.join(a.path, ".notes.txt.swp"))
    assert a.notify("sync").returncode == 0
    assert ".swp" not in remote.log("--all", "--name-only", "--format=")


def test_a_mass_delete_is_said_with_the_command_that_undoes_it(machines, remote):
    a = machines("a", notifymethod="none")
    for i in range(30):
        write(a, "photos/p%02d.jpg" % i, b"photo %d\n" % i)
    settle(a, remote)
    time.sleep(1.1)  # the undo names the second before the removal
    events = Events(a)
    subprocess.run("rm -rf photos/p0* photos/p1* photos/p2[0-4]*", shell=True, cwd=a.path,
                   check=True)
    said = events.wait_for(lambda e: e.get("event") == "mass-delete")
    assert said["count"] == 25 and said["total"] == 31  # README too
    command = said["restore"]
    at = command.split("--at ")[1].split()[0]
    assert command == "dvcs-autosync restore photos --at %s --config %s" % (at, a.config)
    settle(a, remote)
    assert a.status()["mass_delete"]["restore"] == command
    assert "25 of 31 files were removed in one commit" in a.logtext() and command in a.logtext()
    # The command does what it says: the photos come back, and reach the remote.
    argv = [sys.executable, "-m", "autosync.supervisor"] + shlex.split(command)[1:]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    settle(a, remote)
    files = remote.files()
    assert all(files.get(b"photos/p%02d.jpg" % i) == b"photo %d\n" % i for i in range(30))
