"""dvcs-autosync conflicts: listing the conflict copies and settling one, after a
real two-machine conflict."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from autosync.core import copies
from autosync.fs import guarded
from autosync.tools import conflicts as settle
from autosync.vcs.history import HistoryError
from base import git, tree
from helpers import committed, cut_off, reconnect, share, sync_both
from helpers import settle as settled, write

STAMP = time.mktime((2026, 12, 3, 10, 15, 2, 0, 0, -1))


def test_pick_wants_one_copy(tmp_path):
    found = [copies.read_copy_name(copies.copy_name("f.txt", "x", STAMP + i, lambda n: True))
             for i in (0, 1)]
    assert settle.pick(found, found[1].copy) == found[1]
    with pytest.raises(HistoryError, match="has 2 conflict copies: name the copy"):
        settle.pick(found, "f.txt")
    with pytest.raises(HistoryError, match="g.txt has no conflict copy"):
        settle.pick(found, "g.txt")
    assert settle.pick(found[:1], "f.txt") == found[0]


def test_note_is_one_bounded_line():
    copy = copies.Copy("c", "x" * 400 + "\n", "h", STAMP)
    text = settle.note(copy, "theirs")
    assert text.startswith("conflict settled: kept their version of ")
    assert len(text) <= settle.TEXT_MAX and text.isprintable()


def conflicts_cmd(machine, *args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor", "conflicts",
                           "--config", machine.config] + list(args), cwd="/",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_without_a_daemon_nothing_is_settled(tmp_path):
    folder = tmp_path / "f"
    git("init", "-q", str(folder))
    copy = copies.copy_name("a.txt", "x", STAMP, lambda n: True)
    (folder / "a.txt").write_text("mine\n")
    (folder / copy).write_text("theirs\n")
    cfgfile = tmp_path / "c.autosync"
    cfgfile.write_text("[autosync]\npath = %s\nsocket = %s\nsyncmethod = none\n"
                       "notifymethod = none\n" % (folder, tmp_path / "s.sock"))
    os.chmod(cfgfile, 0o600)
    done = subprocess.run([sys.executable, "-m", "autosync.supervisor", "conflicts", "--keep",
                           "theirs", "a.txt", "--config", str(cfgfile)], cwd="/",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("dvcs-autosync conflicts: no dvcs-autosync runs for ")
    assert (folder / copy).read_text() == "theirs\n" and (folder / "a.txt").read_text() == "mine\n"
    bad = subprocess.run([sys.executable, "-m", "autosync.supervisor", "conflicts", "--keep",
                          "mine", "--config", str(cfgfile)], stderr=subprocess.PIPE, text=True)
    assert bad.returncode == 2 and "--keep and PATH go together" in bad.stderr


@pytest.mark.e2e
def test_list_and_settle_both_ways_after_a_real_conflict(machines, remote):
    a = machines("a", hostname="hosta")
    b = machines("b", hostname="hostb")
    assert conflicts_cmd(a).stdout == "no conflict copies in %s\n" % a.path
    write(a, "doc/plan.md", b"v1\n")
    write(a, "list.txt", b"v1\n")
    share(a, b, remote)
    url = cut_off(b)
    write(a, "doc/plan.md", b"a's plan\n")
    write(a, "list.txt", b"a's list\n")
    settled(a, remote)
    time.sleep(1.1)  # b's versions are the newer ones: they stay at the paths
    write(b, "doc/plan.md", b"b's plan\n")
    write(b, "list.txt", b"b's list\n")
    committed(b)
    reconnect(b, url)
    sync_both(a, b, remote)
    files = tree(a)
    assert tree(b) == files
    plan_copy, list_copy = sorted(p for p in files if "(conflict from hosta " in p)

    # Both machines list the two copies: from hosta, a's version, "mine" on a only.
    for machine, whose in ((a, "mine"), (b, "theirs")):
        listed = conflicts_cmd(machine)
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert len(lines) == 3 and lines[2].startswith("2 conflict copies; settle one with")
        for line, copy, path in zip(lines, (plan_copy, list_copy), ("doc/plan.md", "list.txt")):
            assert line.endswith("  hosta  %-6s  %s  (copy of %s)" % (whose, copy, path))
        listed = conflicts_cmd(machine, "--json")  # the same, for the history page
        assert [(c["copy"], c["path"], c["host"], c["mine"]) for c in json.loads(listed.stdout)] \
            == [(plan_copy, "doc/plan.md", "hosta", whose == "mine"),
                (list_copy, "list.txt", "hosta", whose == "mine")]

    # On a: keep mine (a's plan, in the copy), keep theirs (b's list, at the path).
    done = conflicts_cmd(a, "--keep", "mine", "doc/plan.md")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "doc/plan.md now holds the version from hosta\ncommitted and pushed\n"
    done = conflicts_cmd(a, "--keep", "theirs", list_copy)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kept list.txt as it is; removed %s\ncommitted and pushed\n" % list_copy
    b.notify("pull")
    settled(b, remote)
    files = tree(b)
    assert tree(a) == files
    assert files["doc/plan.md"] == b"a's plan\n" and files["list.txt"] == b"b's list\n"
    assert not [p for p in files if "conflict from" in p]
    assert conflicts_cmd(b).stdout == "no conflict copies in %s\n" % b.path
    # The versions dropped stay in history; the commits say what was settled.
    log = remote.log("-p", "--format=%B")
    assert "+b's plan" in log and "+a's list" in log
    assert "conflict settled: kept my version of doc/plan.md" in log
    assert "conflict settled: kept their version of list.txt" in log


@pytest.mark.e2e
def test_two_machines_of_one_host_name_tell_mine_from_theirs_by_history(machines, remote):
    """Cloned machines share a host name: the copy's name says "twin" either way. Whose
    version it holds is read from each machine's own history (which side of the merge
    it committed), so `--keep theirs` on b keeps a's version, never b's own."""
    a = machines("a", hostname="twin")
    b = machines("b", hostname="twin")
    write(a, "notes.txt", b"v1\n")
    share(a, b, remote)
    url = cut_off(b)
    write(a, "notes.txt", b"a's notes\n")
    settled(a, remote)
    time.sleep(1.1)  # b's version is the newer one: it stays at the path (commit seconds)
    write(b, "notes.txt", b"b's notes\n")
    committed(b)
    reconnect(b, url)
    sync_both(a, b, remote)
    (copy,) = [p for p in tree(b) if "(conflict from twin " in p]
    assert tree(b)[copy] == b"a's notes\n" and tree(b)["notes.txt"] == b"b's notes\n"
    for machine, whose in ((a, "mine"), (b, "theirs")):
        listed = conflicts_cmd(machine)
        assert listed.stdout.splitlines()[0].endswith(
            "  twin  %-6s  %s  (copy of notes.txt)" % (whose, copy)), listed.stdout
    done = conflicts_cmd(b, "--keep", "theirs", "notes.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("notes.txt now holds the version from twin\n"), done.stdout
    assert b.read("notes.txt") == b"a's notes\n" and b.read(copy) is None
    assert "+b's notes" in remote.log("-p", "--format=%B")  # b's own stays in history


def test_a_copy_naming_this_host_that_no_merge_made_is_refused_in_words(tmp_path, monkeypatch):
    """No merge in history made it, and its name is this machine's host name (a namesake's
    or its own): which version is whose cannot be told, so nothing is deleted."""
    folder = tmp_path / "f"
    git("init", "-q", str(folder))
    copy = copies.read_copy_name(copies.copy_name("a.txt", "twin", STAMP, lambda n: True))
    cfg = type("Cfg", (), {"path": str(folder), "hostname": "twin"})()
    assert settle.mine_is_copy(cfg, copy, True) is None
    assert settle.mine_is_copy(cfg, copy._replace(host="other"), True) is False
    assert str(settle.cannot_tell(copy)).startswith(
        "cannot tell which version of a.txt this machine made: its history does not say")


# --- settling never writes over an edit that is not in history ----------------------------

def conflicted(a, remote):
    """a.txt (this machine's version) and a copy of it from hostb (the other's), committed."""
    copy = copies.copy_name("a.txt", "hostb", STAMP, lambda n: True)
    write(a, "a.txt", b"mine\n")
    write(a, copy, b"theirs\n")
    settled(a, remote)
    return copy


@pytest.mark.e2e
def test_keep_while_paused_refuses_and_the_edit_survives(machines, remote):
    a = machines("a", hostname="hosta")
    copy = conflicted(a, remote)
    a.notify("pause")
    write(a, "a.txt", b"edited while paused\n")
    done = conflicts_cmd(a, "--keep", "theirs", "a.txt")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "dvcs-autosync conflicts: the daemon could not commit the folder first, so nothing "
        "was settled: syncing is paused since "), done.stderr
    assert a.read("a.txt") == b"edited while paused\n" and a.read(copy) == b"theirs\n"
    a.notify("resume")
    settled(a, remote)
    assert remote.files()[b"a.txt"] == b"edited while paused\n"


@pytest.mark.e2e
def test_a_write_while_settling_is_kept(machines, remote, monkeypatch, capsys):
    """An editor writes to a.txt between the check of it and the swap that puts the
    other version there: a.txt keeps the editor's bytes, the copy stays, nothing settled."""
    a = machines("a", hostname="hosta")
    copy = conflicted(a, remote)
    path = os.path.join(a.path, "a.txt")
    editors = []

    def type_into_a(rel):
        editor = threading.Thread(target=lambda: open(path, "ab").write(b"typed meanwhile\n"))
        editor.start()
        editors.append((rel, editor))
        time.sleep(0.2)  # the editor now waits in open() for the writer's lease

    monkeypatch.setattr(guarded.Writer, "checked", staticmethod(type_into_a))
    code = settle.main(["conflicts", "--keep", "theirs", "a.txt", "--config", a.config])
    for _, editor in editors:
        editor.join(5)
    out = capsys.readouterr()
    assert [rel for rel, _ in editors] == ["a.txt"], "settled without the guarded writer's check"
    assert a.read("a.txt") == b"mine\ntyped meanwhile\n" and a.read(copy) == b"theirs\n"
    assert code == 1 and out.err == "dvcs-autosync conflicts: a.txt changed just now, so " \
        "nothing was settled: run this again once the daemon has committed it\n"
    settled(a, remote)
    assert remote.files()[b"a.txt"] == b"mine\ntyped meanwhile\n"
    # Once committed, the same command settles it.
    monkeypatch.setattr(guarded.Writer, "checked", None)
    assert settle.main(["conflicts", "--keep", "theirs", "a.txt", "--config", a.config]) == 0
    assert a.read("a.txt") == b"theirs\n" and a.read(copy) is None


def test_a_path_is_resolved_without_the_history_commands(tmp_path, monkeypatch):
    """history.relative needs only the folder (conflicts --keep and restore name a path
    the same way), not a History with logcmd and listcmd."""
    from autosync.tools.history import relative
    folder = str(tmp_path / "sync")
    os.makedirs(os.path.join(folder, "sub"))
    monkeypatch.chdir(os.path.join(folder, "sub"))
    assert relative(folder, "a.txt") == "sub/a.txt"
    assert relative(folder, folder) == "."
    monkeypatch.chdir(str(tmp_path))
    assert relative(folder, "photos/a.jpg") == "photos/a.jpg"  # from the folder, elsewhere
    with pytest.raises(HistoryError, match="not inside the synced folder"):
        relative(folder, "../x")
