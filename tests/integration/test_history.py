"""dvcs-autosync log and restore: message parsing, times, and the real thing on
real git history with the daemon running."""
import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

from types import SimpleNamespace

import pytest

from autosync.fs import guarded
from autosync.tools import history
from autosync.vcs import history as vhistory
from autosync.core.protocol import Server
from base import git, tree, wait_until
from helpers import share


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor"] + list(args), cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)


# --- units ---------------------------------------------------------------------------

def test_parse_log_falls_back_to_the_author_for_manual_commits():
    out = ("abc123 1700000000 Ann Smith\nFix typo\n\0"
           "def456 1690000000 Test\nautosync on pc: 1 added\n\nadded: f\n\0")
    assert vhistory.parse_log(out, "f", False) == [
        vhistory.Version("abc123", 1700000000.0, "Ann Smith", "Ann Smith", "changed"),
        vhistory.Version("def456", 1690000000.0, "Test", "pc", "added")]


def test_parse_when():
    now = 1_700_000_000.0
    assert vhistory.parse_when("@1690000000", now) == 1690000000.0
    assert vhistory.parse_when("3 hours ago", now) == now - 3 * 3600
    assert vhistory.parse_when("2 days ago", now) == now - 2 * 86400
    assert vhistory.parse_when("yesterday", now) == now - 86400
    local = time.mktime((2024, 5, 1, 14, 30, 0, 0, 0, -1))
    assert vhistory.parse_when("2024-05-01 14:30", now) == local
    assert vhistory.parse_when("2024-05-01T14:30:00", now) == local
    with pytest.raises(history.HistoryError):
        vhistory.parse_when("last tuesday-ish", now)


def test_a_config_file_named_log_is_still_a_config(tmp_path):
    (tmp_path / "log").write_text("[autosync]\npath = .\nreadfrequency = soon\n")
    result = run("log", cwd=str(tmp_path))
    assert result.returncode == 2
    assert "log: [autosync] readfrequency: expected" in result.stderr


@pytest.mark.parametrize("reply, goes_on", [
    ({"ok": True, "committed": True, "pushed": True}, True),
    ({"ok": True, "committed": False, "pushed": False}, True),  # nothing was pending
    ({"ok": False, "committed": True, "pushed": False, "error": "push: remote unreachable"}, True),
    ({"ok": False, "error": "sync did not finish in time"}, False),
    ({"ok": False, "committed": False, "pushed": False,
      "error": "commit: left out of the commit, the rest is committed: big.iso (too large)"}, False),
    ({"ok": False, "error": "syncing is paused since 2026-12-04 18:00:00: nothing is committed, "
                            "pushed or pulled until dvcs-autosync resume"}, False),
])
def test_restore_goes_on_only_once_the_daemon_committed_the_folder(tmp_path, reply, goes_on):
    """The daemon's replies to `sync` (committer/committer.py's wording), from a socket server."""
    cfg = SimpleNamespace(socket=str(tmp_path / "run" / "s.sock"))
    server = Server(cfg.socket, lambda message, client: reply)
    server.start()
    try:
        if goes_on:
            assert history.commit_first(cfg, "restored") == reply
        else:
            with pytest.raises(history.HistoryError) as e:
                history.commit_first(cfg, "restored")
            assert str(e.value) == "the daemon could not commit the folder first, so nothing " \
                                   "was restored: " + reply["error"]
    finally:
        server.close()
    assert history.commit_first(cfg, "restored") is None  # no daemon: the writer's check only


# --- end to end ------------------------------------------------------------------------

def write(machine, rel, content):
    os.makedirs(os.path.dirname(os.path.join(machine.path, rel)), exist_ok=True)
    with open(os.path.join(machine.path, rel), "wb") as f:
        f.write(content)


def settle(machine, remote):
    wait_until(lambda: machine.settled(remote), 30, 0.1, "%s to settle" % machine.name)


@pytest.mark.e2e
def test_log_and_restore_on_real_history_with_the_daemon_running(machines, remote):
    a = machines("a")
    notes = os.path.join(a.path, "notes.txt")
    write(a, "notes.txt", b"version 1\n")
    settle(a, remote)
    first_time = time.time()
    time.sleep(1.1)  # git keeps whole seconds: let version 2 be later
    write(a, "notes.txt", b"version 2\n")
    settle(a, remote)

    # log of the file: newest first, with the host and what happened.
    result = run("log", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    host = socket.gethostname()
    assert len(lines) == 2
    assert lines[0].split()[3:] == [host, "modified"]
    assert lines[1].split()[3:] == [host, "added"]
    # log of the folder, run from inside it, also lists the first (manual) commit.
    folder_log = run("log", "--config", a.config, cwd=a.path).stdout.splitlines()
    assert folder_log[-1].split()[3:] == ["Test", "first"]

    # restore with no --at: the version before the last change.
    result = run("restore", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 1\n"
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 1\n"

    # a removed file comes back, and the restore syncs like any change.
    os.unlink(notes)
    settle(a, remote)
    assert b"notes.txt" not in remote.files()
    result = run("restore", notes, "--config", a.config)
    assert result.returncode == 0, result.stderr
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 1\n"
    assert "added: notes.txt" in remote.log("-1", "--format=%B")

    # --at a time, and --at a revision shown by log.
    result = run("restore", notes, "--at", "@%d" % first_time, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 1\n"
    second = lines[0].split()[2]
    result = run("restore", notes, "--at", second, "--config", a.config)
    assert result.returncode == 0, result.stderr
    assert open(notes, "rb").read() == b"version 2\n"
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"version 2\n"
    assert not [n for n in os.listdir(a.path) if n.endswith("~")]

    # Clear errors: no such file, a time before it existed.
    result = run("restore", os.path.join(a.path, "never.txt"), "--config", a.config)
    assert result.returncode == 1 and "never.txt has no history" in result.stderr
    result = run("restore", notes, "--at", "2001-01-01", "--config", a.config)
    assert result.returncode == 1 and "no version as early as" in result.stderr


@pytest.mark.e2e
def test_contextcmd_output_is_in_the_pushed_commit_message(machines, remote):
    a = machines("a", start=False)
    a.dvcs = {"contextcmd": "echo context: busy"}
    a.write_config()
    a.start()
    write(a, "report.txt", b"draft\n")
    settle(a, remote)
    message = remote.log("-1", "--format=%B")
    assert message.startswith("autosync on ")
    assert "added: report.txt" in message and "context: busy" in message
    # log still reads such a message right.
    result = run("log", os.path.join(a.path, "report.txt"), "--config", a.config)
    assert result.stdout.split()[3:] == [socket.gethostname(), "added"]


# --- restore of folders and of the whole tree ------------------------------------------

def test_parse_list_takes_git_ls_tree_and_plain_records():
    git_style = b"\0".join([b"100644 blob 1f2e\tphotos/a b.jpg", b"100755 blob 3c4d\tphotos/run.sh",
                            b"120000 blob 5e6f\tphotos/link", b"160000 commit 7a8b\tphotos/nested",
                            b""])
    assert vhistory.parse_list(git_style) == {"photos/a b.jpg": "100644",
                                             "photos/run.sh": "100755",
                                             "photos/link": "120000"}
    assert vhistory.parse_list(b"100644\tx\n100755\ty z\n") == {"x": "100644", "y z": "100755"}
    assert vhistory.parse_list(b"") == {}
    assert vhistory.parse_entries(b"100644 blob " + b"1f" * 20 + b"\tx\x00100755\ty\x00") == {
        "x": ("100644", "1f" * 20), "y": ("100755", None)}
    with pytest.raises(history.HistoryError):
        vhistory.parse_list(b"photos/a.jpg\0")


def test_restore_note_is_one_short_printable_line():
    version = vhistory.Version("ab" * 20, 1700000000.0, "Test", "pc", "removed")
    note = history.restore_note("photos", version)
    assert note.startswith("restore of photos as it was at ") and note.endswith("(abababababab)")
    long = history.restore_note("x/" * 400 + "new\nline", version)
    assert long.isprintable() and len(long) <= history.TEXT_MAX
    assert history.restore_note(".", version).startswith("restore of the whole folder as it")


def plain_repo(tmp_path):
    """A git working tree and a config for it, no daemon."""
    folder = str(tmp_path / "plain")
    git("init", "-q", "-b", "main", folder)
    config = str(tmp_path / "plain.autosync")
    with open(config, "w") as f:
        f.write("[autosync]\npath = %s\nsyncmethod = none\nnotifymethod = none\n"
                "ignorepath = .git scratch\n" % folder)
    return folder, config


def commit_all(folder, message):
    git("add", "-A", cwd=folder)
    git("commit", "-q", "-m", message, cwd=folder)
    return git("rev-parse", "HEAD", cwd=folder).decode().strip()


def test_a_folder_is_never_written_as_a_file(tmp_path):
    folder, config = plain_repo(tmp_path)
    os.makedirs(os.path.join(folder, "photos"))
    for name in ("a.jpg", "b.jpg"):
        with open(os.path.join(folder, "photos", name), "w") as f:
            f.write(name)
    then = commit_all(folder, "photos")
    subprocess.run(["rm", "-r", os.path.join(folder, "photos")], check=True)
    with open(os.path.join(folder, "photos"), "w") as f:
        f.write("a file now\n")
    commit_all(folder, "a file where the folder was")
    # Restoring the file "photos" at a time when it was a folder brings the folder back.
    result = run("restore", os.path.join(folder, "photos"), "--at", then[:10], "--config", config)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:3] == ["removed photos (still in history)",
                                              "brought back photos/a.jpg",
                                              "brought back photos/b.jpg"]
    assert "no dvcs-autosync runs" in result.stdout
    assert sorted(os.listdir(os.path.join(folder, "photos"))) == ["a.jpg", "b.jpg"]
    # And back (once committed, as the daemon would): the folder's files go, the file
    # comes back, no folder is left.
    now = git("rev-parse", "HEAD", cwd=folder).decode().strip()
    commit_all(folder, "restored")
    result = run("restore", os.path.join(folder, "photos"), "--at", now, "--config", config)
    assert result.returncode == 0, result.stderr
    assert open(os.path.join(folder, "photos")).read() == "a file now\n"
    # A path that did not exist then is refused, not written.
    result = run("restore", os.path.join(folder, "nothing"), "--at", then, "--config", config)
    assert result.returncode == 1 and "has no history" in result.stderr
    assert not [n for n in os.listdir(folder) if n.endswith("~")]


def test_without_a_daemon_a_file_not_in_history_is_kept(tmp_path):
    folder, config = plain_repo(tmp_path)
    with open(os.path.join(folder, "old.txt"), "w") as f:
        f.write("old\n")
    with open(os.path.join(folder, "edited.txt"), "w") as f:
        f.write("first\n")
    then = commit_all(folder, "old")
    with open(os.path.join(folder, "later.txt"), "w") as f:
        f.write("later\n")
    with open(os.path.join(folder, "edited.txt"), "w") as f:
        f.write("second\n")
    commit_all(folder, "later")
    with open(os.path.join(folder, "draft.txt"), "w") as f:
        f.write("never committed\n")
    with open(os.path.join(folder, "edited.txt"), "w") as f:
        f.write("edited, not committed\n")  # not in history: never written over
    # What is never synced is left alone: ignorepath, editor junk.
    os.makedirs(os.path.join(folder, "scratch"))
    for junk in ("scratch/x.txt", "old.txt~", ".later.txt.swp"):
        with open(os.path.join(folder, junk), "w") as f:
            f.write("junk\n")
    result = run("restore", folder, "--at", then, "--config", config)
    assert result.returncode == 1, result.stderr  # not all of it: edited.txt is kept
    assert "removed later.txt (still in history)" in result.stdout
    assert "kept draft.txt: it did not exist then, but it is not in history yet" in result.stdout
    assert "kept edited.txt as it is: it is not in history as it is now" in result.stdout
    assert result.stderr.startswith("restore left 1 path as it is: it changed after the ")
    assert sorted(n for n in os.listdir(folder) if n != ".git") == [
        ".later.txt.swp", "draft.txt", "edited.txt", "old.txt", "old.txt~", "scratch"]
    assert open(os.path.join(folder, "edited.txt")).read() == "edited, not committed\n"
    assert os.listdir(os.path.join(folder, "scratch")) == ["x.txt"]
    result = run("restore", os.path.join(folder, "scratch"), "--config", config)
    assert result.returncode == 1 and "has no history" in result.stderr


def restore(machine, *args):
    result = run("restore", *args, "--config", machine.config, cwd=machine.path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def one_restore_commit(a, remote, before, what):
    """The restore arrived as exactly one commit, pushed, saying what and from when."""
    # A batch of the restored files made by the watcher, first or late, carries the note
    # too (the note request, before the writes); waited for so that an extra commit shows.
    time.sleep(1)
    settle(a, remote)
    assert remote.commit_count() == before + 1, remote.log("-3", "--format=%B")
    message = remote.log("-1", "--format=%B")
    assert message.split("\n")[2].startswith("restore of %s as it was at 20" % what), message
    return message


def on_b(b, remote):
    b.notify("pull")
    settle(b, remote)


@pytest.mark.e2e
def test_restore_a_removed_folder(machines, remote):
    a, b = machines("a", "b")
    photo = os.urandom(20000)
    os.makedirs(os.path.join(a.path, "photos", "2026"))
    write(a, "photos/2026/beach.jpg", photo)
    write(a, "photos/index.txt", b"beach\n")
    write(a, "photos/show.sh", b"#!/bin/sh\necho slides\n")
    os.chmod(os.path.join(a.path, "photos/show.sh"), 0o755)
    os.symlink("2026/beach.jpg", os.path.join(a.path, "photos", "latest"))
    share(a, b, remote)
    wanted = tree(a)
    shutil.rmtree(os.path.join(a.path, "photos"))
    share(a, b, remote)
    assert not os.path.exists(os.path.join(b.path, "photos"))
    before = remote.commit_count()

    lines = restore(a, "photos", "--dry-run")
    assert lines[:4] == ["would bring back photos/%s" % n for n in
                         ("2026/beach.jpg", "index.txt", "latest", "show.sh")]
    assert lines[4].startswith("would make photos as it was at ") and "nothing written" in lines[4]
    assert not os.path.lexists(os.path.join(a.path, "photos"))
    assert not [n for n in os.listdir(a.path) if n.endswith("~")]

    started = time.monotonic()
    lines = restore(a, "photos")
    took = time.monotonic() - started
    assert lines[:4] == ["brought back photos/%s" % n for n in
                         ("2026/beach.jpg", "index.txt", "latest", "show.sh")]
    assert lines[4].startswith("photos is as it was at ") and lines[4].endswith("4 brought back")
    assert lines[5] == "committed and pushed"
    assert os.path.isdir(os.path.join(a.path, "photos"))  # never git's tree object as a file
    message = one_restore_commit(a, remote, before, "photos")
    assert "added: photos/2026/beach.jpg" in message
    on_b(b, remote)
    for m in (a, b):
        assert tree(m) == wanted
        assert os.readlink(os.path.join(m.path, "photos", "latest")) == "2026/beach.jpg"
        assert os.stat(os.path.join(m.path, "photos", "show.sh")).st_mode & 0o111
        assert not os.stat(os.path.join(m.path, "photos", "index.txt")).st_mode & 0o111
    print("restore of a removed folder took %.2f s" % took)
    assert "Traceback" not in a.logtext() + b.logtext()


@pytest.mark.e2e
def test_restore_a_folder_with_files_changed_added_and_removed_since(machines, remote):
    a, b = machines("a", "b")
    os.makedirs(os.path.join(a.path, "docs"))
    for name in ("plan.txt", "same.txt", "gone.txt"):
        write(a, "docs/" + name, ("%s, first\n" % name).encode())
    write(a, "outside.txt", b"not in docs\n")
    share(a, b, remote)
    wanted = tree(a)
    # One burst, one commit: the last change to docs.
    write(a, "docs/plan.txt", b"plan, second\n")
    os.makedirs(os.path.join(a.path, "docs", "new"))
    write(a, "docs/new/draft.txt", b"a draft\n")
    os.unlink(os.path.join(a.path, "docs", "gone.txt"))
    share(a, b, remote)
    changed = tree(a)
    write(a, "outside.txt", b"changed outside docs, later\n")  # not docs: not restored
    before_change = remote.commit_count()
    settle(a, remote)
    before = remote.commit_count()
    assert before == before_change + 1

    lines = restore(a, os.path.join(a.path, "docs"))
    assert lines[:4] == ["brought back docs/gone.txt",
                         "removed docs/new/draft.txt (still in history)",
                         "restored docs/plan.txt",
                         lines[3]]
    assert lines[3].endswith("1 restored, 1 brought back, 1 removed")
    assert not os.path.exists(os.path.join(a.path, "docs", "new"))  # emptied folder goes
    message = one_restore_commit(a, remote, before, "docs")
    assert "removed: docs/new/draft.txt" in message and "modified: docs/plan.txt" in message
    on_b(b, remote)
    expected = dict(wanted, **{"outside.txt": b"changed outside docs, later\n"})
    assert tree(a) == tree(b) == expected
    # The removed draft stays in history: restore it by naming the later version.
    assert git("--git-dir", remote.path, "show", "main~1:docs/new/draft.txt") == b"a draft\n"
    assert changed["docs/new/draft.txt"] == b"a draft\n"


@pytest.mark.e2e
def test_restore_the_whole_tree_after_a_mass_delete(machines, remote):
    a, b = machines("a", "b")
    for i in range(25):
        write(a, "f%02d.txt" % i if i < 10 else "dir%d/f%02d.txt" % (i % 3, i), b"file %d\n" % i)
    share(a, b, remote)
    wanted = tree(a)
    assert len(wanted) == 26  # and the README
    subprocess.run("rm -rf ./*", shell=True, cwd=a.path, check=True)
    share(a, b, remote)
    assert "26 removed" in remote.log("-1", "--format=%s")
    assert tree(b) == {}  # applied on the other machine, by design
    before = remote.commit_count()

    assert restore(a, ".", "--dry-run")[-1].endswith("26 brought back; nothing written")
    assert tree(a) == {}
    lines = restore(a, ".")
    assert len([l for l in lines if l.startswith("brought back ")]) == 26
    assert lines[-2].startswith("the whole folder is as it was at ")
    message = one_restore_commit(a, remote, before, "the whole folder")
    assert message.startswith("autosync on %s: 26 added" % socket.gethostname())
    on_b(b, remote)
    assert tree(a) == tree(b) == wanted
    # Nothing to do now: said, and no commit.
    assert restore(a, ".", "--at", git("rev-parse", "HEAD", cwd=a.path).decode().strip())[-1] \
        .endswith("nothing to do")
    assert remote.commit_count() == before + 1


def test_a_relative_path_outside_the_folder_is_taken_from_the_folder(tmp_path):
    folder, config = plain_repo(tmp_path)
    os.makedirs(os.path.join(folder, "photos"))
    with open(os.path.join(folder, "photos", "a.jpg"), "w") as f:
        f.write("a\n")
    commit_all(folder, "photos")
    shutil.rmtree(os.path.join(folder, "photos"))
    commit_all(folder, "removed")
    elsewhere = str(tmp_path / "home")
    # As the mass-delete warning words it, run from anywhere.
    result = run("restore", "photos", "--config", config, cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("brought back photos/a.jpg\n")
    result = run("restore", "../x", "--config", config, cwd=elsewhere)
    assert result.returncode == 1 and "not inside the synced folder" in result.stderr


def test_hostile_names_come_back_as_they_were(tmp_path):
    folder, config = plain_repo(tmp_path)
    names = ["-rf", "a b", "new\nline", "$(touch pwned)", "*", "caf\xe9", "x\udcff"]
    os.makedirs(os.path.join(folder, "d"))
    for name in names:
        with open(os.path.join(os.fsencode(folder), b"d", os.fsencode(name)), "wb") as f:
            f.write(os.fsencode(name))
    commit_all(folder, "names")
    shutil.rmtree(os.path.join(folder, "d"))
    commit_all(folder, "removed")
    result = run("restore", os.path.join(folder, "d"), "--config", config)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(os.path.join(folder, "d"))) == sorted(names)
    for name in names:
        with open(os.path.join(os.fsencode(folder), b"d", os.fsencode(name)), "rb") as f:
            assert f.read() == os.fsencode(name)
    assert 'brought back "d/new\\nline"' in result.stdout
    assert not os.path.exists(os.path.join(folder, "pwned"))


# --- restore never writes over what is not in history -----------------------------------

def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_a_write_while_restore_replaces_a_file_is_kept(tmp_path, monkeypatch, capsys):
    """An editor writes to the file between restore's check of it and the swap: the
    swap is undone, and the editor's bytes stay at the path (the restore says so)."""
    folder, config = plain_repo(tmp_path)
    notes = os.path.join(folder, "notes.txt")
    put(notes, b"version 1\n")
    commit_all(folder, "one")
    put(notes, b"version 2\n")
    commit_all(folder, "two")
    editors = []

    def type_into_notes(rel):
        editor = threading.Thread(target=lambda: open(notes, "ab").write(b"typed meanwhile\n"))
        editor.start()
        editors.append((rel, editor))
        time.sleep(0.2)  # the editor now waits in open() for the writer's lease

    monkeypatch.setattr(guarded.Writer, "checked", staticmethod(type_into_notes))
    code = history.main(["restore", notes, "--config", config])
    for _, editor in editors:
        editor.join(5)
    out = capsys.readouterr()
    assert [rel for rel, _ in editors] == ["notes.txt"], \
        "restore wrote notes.txt without the guarded writer's check"
    assert open(notes, "rb").read() == b"version 2\ntyped meanwhile\n"
    assert "kept notes.txt as it is: it is not in history as it is now" in out.out
    assert code == 1 and out.err.startswith("restore left 1 path as it is")
    assert not [n for n in os.listdir(folder) if n.endswith("~")]


def test_an_editor_saving_over_a_file_restore_removes_is_kept(tmp_path, monkeypatch, capsys):
    folder, config = plain_repo(tmp_path)
    put(os.path.join(folder, "docs", "plan.txt"), b"plan\n")
    then = commit_all(folder, "plan")
    later = os.path.join(folder, "docs", "later.txt")
    put(later, b"later\n")
    commit_all(folder, "later")
    saved = []

    def save_by_rename(rel):
        if rel == "docs/later.txt":
            put(later + ".swp", b"saved by an editor\n")
            os.replace(later + ".swp", later)
            saved.append(rel)

    monkeypatch.setattr(guarded.Writer, "checked", staticmethod(save_by_rename))
    code = history.main(["restore", os.path.join(folder, "docs"), "--at", then,
                         "--config", config])
    out = capsys.readouterr()
    assert saved == ["docs/later.txt"], "restore removed docs/later.txt without the guard"
    assert open(later, "rb").read() == b"saved by an editor\n"
    assert "kept docs/later.txt as it is" in out.out and code == 1


def test_a_folder_that_is_now_a_file_is_one_line(tmp_path):
    folder, config = plain_repo(tmp_path)
    put(os.path.join(folder, "x", "a.txt"), b"in a folder\n")
    commit_all(folder, "x/a.txt")
    shutil.rmtree(os.path.join(folder, "x"))
    put(os.path.join(folder, "x"), b"a file now\n")
    commit_all(folder, "x is a file")
    result = run("restore", os.path.join(folder, "x", "a.txt"), "--config", config)
    assert result.returncode == 1
    assert result.stderr == "dvcs-autosync restore: cannot restore x/a.txt: x is not a " \
                            "folder: nothing is written through it\n"
    assert open(os.path.join(folder, "x"), "rb").read() == b"a file now\n"
    # Restoring x itself brings the folder back (the file x is in history).
    folder_time = git("rev-parse", "HEAD~1", cwd=folder).decode().strip()
    result = run("restore", os.path.join(folder, "x"), "--at", folder_time, "--config", config)
    assert result.returncode == 0, result.stderr
    assert open(os.path.join(folder, "x", "a.txt"), "rb").read() == b"in a folder\n"


def one_line_error(result):
    assert result.returncode == 1, result.stdout
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


@pytest.mark.e2e
def test_restore_while_paused_refuses_and_the_edit_survives(machines, remote):
    a = machines("a")
    notes = os.path.join(a.path, "notes.txt")
    write(a, "notes.txt", b"version 1\n")
    settle(a, remote)
    time.sleep(1.1)
    write(a, "notes.txt", b"version 2\n")
    settle(a, remote)
    a.notify("pause")
    write(a, "notes.txt", b"edited while paused\n")
    error = one_line_error(run("restore", notes, "--config", a.config))
    assert error.startswith("dvcs-autosync restore: the daemon could not commit the folder "
                            "first, so nothing was restored: syncing is paused since "), error
    assert open(notes, "rb").read() == b"edited while paused\n"
    a.notify("resume")
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"edited while paused\n"


@pytest.mark.e2e
def test_restore_in_the_middle_of_a_rebase_refuses_and_the_edit_survives(machines, remote):
    a = machines("a")
    notes = os.path.join(a.path, "notes.txt")
    write(a, "notes.txt", b"version 1\n")
    settle(a, remote)
    time.sleep(1.1)
    write(a, "notes.txt", b"version 2\n")
    settle(a, remote)
    # A rebase the user started stops after its first commit (its --exec fails).
    git("rebase", "--exec", "false", "HEAD~1", cwd=a.path, check=False)
    assert os.path.isdir(os.path.join(a.path, ".git", "rebase-merge"))
    write(a, "notes.txt", b"edited in the middle of a rebase\n")
    error = one_line_error(run("restore", notes, "--config", a.config))
    assert error.startswith("dvcs-autosync restore: the daemon could not commit the folder "
                            "first, so nothing was restored: "), error
    assert "the repository is in the middle of a rebase" in error
    assert open(notes, "rb").read() == b"edited in the middle of a rebase\n"


@pytest.mark.e2e
def test_restore_through_a_symlinked_folder_is_refused(machines, remote, tmp_path):
    a = machines("a")
    write(a, "docs/a.txt", b"version 1\n")
    settle(a, remote)
    time.sleep(1.1)
    write(a, "docs/a.txt", b"version 2\n")
    settle(a, remote)
    # docs moves to another disk, and a link takes its place.
    elsewhere = tmp_path / "other-disk"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_bytes(b"on the other disk, never in history\n")
    shutil.rmtree(os.path.join(a.path, "docs"))
    os.symlink(str(elsewhere), os.path.join(a.path, "docs"))
    settle(a, remote)
    error = one_line_error(run("restore", os.path.join(a.path, "docs", "a.txt"),
                               "--config", a.config))
    assert error == "dvcs-autosync restore: cannot restore docs/a.txt: docs is a symbolic " \
                    "link: nothing is written through it\n"
    assert os.listdir(elsewhere) == ["a.txt"]
    assert (elsewhere / "a.txt").read_bytes() == b"on the other disk, never in history\n"
    assert os.path.islink(os.path.join(a.path, "docs"))
    settle(a, remote)
    assert "restore of" not in remote.log("--format=%B")
    # Restoring docs itself takes the link away (it is in history) and brings the
    # folder back; the other disk is not touched.
    assert restore(a, "docs")[:2] == [
        "removed docs (still in history)", "brought back docs/a.txt"]
    assert not os.path.islink(os.path.join(a.path, "docs"))
    assert a.read("docs/a.txt") == b"version 2\n"
    assert os.listdir(elsewhere) == ["a.txt"]
    assert (elsewhere / "a.txt").read_bytes() == b"on the other disk, never in history\n"


def test_log_names_the_person_where_more_than_one_changed_the_folder():
    from autosync.vcs.history import Version
    alone = [Version("a" * 40, 1700000000, "Alice", "laptop", "added", None),
             Version("b" * 40, 1700000100, "Alice", "desk", "modified", None)]
    assert history.made_by(alone) == ["laptop", "desk"]
    shared = alone + [Version("c" * 40, 1700000200, "Bob", "Bob", "modified", None)]
    assert history.made_by(shared) == ["Alice on laptop", "Alice on desk", "Bob"]
    out = io.StringIO()
    history.print_versions(shared, out=out)
    assert "  Alice on laptop  added\n" in out.getvalue()


def test_log_lines_carry_nothing_a_terminal_acts_on():
    """`log` prints another machine's words (host, author, commit message): quoted."""
    out = io.StringIO()
    hostile = "\033]0;owned\007\u009b2J"
    from autosync.vcs.history import Version
    history.print_versions([Version("a" * 40, 1700000000, "t", "lap" + hostile,
                                    "moved from \"%s\"" % hostile, "text" + hostile)],
                           out=out)
    line = out.getvalue()
    assert line.endswith("\n") and line[:-1].isprintable()
    assert line.endswith('moved from "\\033]0;owned\\a\\302\\2332J"  -- '
                         'text\\033]0;owned\\a\\302\\2332J\n')
