"""The guarded writer: a write into the folder never destroys what it did not expect.

The races are injected at the worst moment through the writer's seam
(`checked`: after the check, before the swap), not hoped for."""
import os
import subprocess
import sys
import threading
import time

import pytest

from autosync.fs import guarded
from autosync.fs.guarded import Expect, Refused, Writer, blob_id
from base import HERE  # tests/, the checkout above it
from repos import state  # noqa: F401 (a fixture)


def oid(data):
    return blob_id(len(data), [data], 40)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(b"committed\n")
    return tmp_path


def no_temps(root):
    return [p for p in root.rglob("*") if p.name.startswith(".autosync-write.")] == []


def test_a_file_as_expected_is_replaced_keeping_its_permissions(root):
    os.chmod(root / "d" / "a.txt", 0o600)
    assert Writer(str(root)).put("d/a.txt", "100644", b"pulled\n", Expect("100644", oid=oid(b"committed\n")))
    assert (root / "d" / "a.txt").read_bytes() == b"pulled\n"
    assert os.stat(root / "d" / "a.txt").st_mode & 0o777 == 0o600
    assert no_temps(root)


def test_an_executable_gets_x_where_r(root):
    assert Writer(str(root)).put("d/a.txt", "100755", b"#!/bin/sh\n", Expect("100644", data=b"committed\n"))
    assert os.stat(root / "d" / "a.txt").st_mode & 0o111


def test_a_file_changed_before_the_check_is_kept(root):
    (root / "d" / "a.txt").write_bytes(b"mine\n")
    assert not Writer(str(root)).put("d/a.txt", "100644", b"pulled\n", Expect("100644", oid=oid(b"committed\n")))
    assert (root / "d" / "a.txt").read_bytes() == b"mine\n"
    assert no_temps(root)


def test_a_file_open_for_writing_counts_as_changed(root):
    with open(root / "d" / "a.txt", "ab"):
        assert not Writer(str(root)).put("d/a.txt", "100644", b"pulled\n",
                                         Expect("100644", oid=oid(b"committed\n")))
    assert (root / "d" / "a.txt").read_bytes() == b"committed\n"


def test_a_write_between_the_check_and_the_swap_is_kept(root):
    """Another process opens the file for writing right after the check: it waits for
    the lease, the swap is undone, and its bytes land in the file at the path."""
    path = root / "d" / "a.txt"
    writer = Writer(str(root))
    done = []

    def write():
        with open(path, "ab") as f:  # blocks until the lease is let go
            f.write(b"typed meanwhile\n")
        done.append(True)

    def inject(rel):
        threading.Thread(target=write).start()
        time.sleep(0.2)  # the writer is now waiting in open()
        assert not done

    writer.checked = inject
    assert not writer.put("d/a.txt", "100644", b"pulled\n", Expect("100644", oid=oid(b"committed\n")))
    deadline = time.time() + 5
    while not done and time.time() < deadline:
        time.sleep(0.01)
    assert path.read_bytes() == b"committed\ntyped meanwhile\n"
    assert no_temps(root)


def test_an_editor_saving_by_rename_between_the_check_and_the_swap_is_kept(root):
    path = root / "d" / "a.txt"

    def inject(rel):
        (root / "d" / ".a.txt.swp").write_bytes(b"saved by an editor\n")
        os.replace(root / "d" / ".a.txt.swp", path)

    writer = Writer(str(root))
    writer.checked = inject
    assert not writer.put("d/a.txt", "100644", b"pulled\n", Expect("100644", oid=oid(b"committed\n")))
    assert path.read_bytes() == b"saved by an editor\n"


def test_a_new_file_is_never_written_over_one_that_appeared(root):
    def inject(rel):
        (root / "d" / "new.txt").write_bytes(b"made here meanwhile\n")

    writer = Writer(str(root))
    writer.checked = inject
    assert not writer.put("d/new.txt", "100644", b"pulled\n", None)
    assert (root / "d" / "new.txt").read_bytes() == b"made here meanwhile\n"
    assert no_temps(root)


def test_a_file_removed_here_gets_the_new_version(root):
    os.unlink(root / "d" / "a.txt")
    assert Writer(str(root)).put("d/a.txt", "100644", b"pulled\n", Expect("100644", data=b"committed\n"))
    assert (root / "d" / "a.txt").read_bytes() == b"pulled\n"


def test_links_are_written_and_checked(root):
    os.symlink("a.txt", root / "d" / "l")
    writer = Writer(str(root))
    assert writer.put("d/l", "120000", b"b.txt", Expect("120000", data=b"a.txt"))
    assert os.readlink(root / "d" / "l") == "b.txt"
    assert not writer.put("d/l", "120000", b"c.txt", Expect("120000", data=b"a.txt"))
    assert os.readlink(root / "d" / "l") == "b.txt"


def test_nothing_is_written_through_a_symlinked_folder(root, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("other-disk")
    (elsewhere / "a.txt").write_bytes(b"never in history\n")
    os.rename(root / "d", root / "d.old")
    os.symlink(elsewhere, root / "d")
    with pytest.raises(Refused, match="d is a symbolic link"):
        Writer(str(root)).put("d/a.txt", "100644", b"old\n", Expect("100644", data=b"never in history\n"))
    with pytest.raises(Refused):
        Writer(str(root)).remove("d/a.txt", Expect("100644", data=b"never in history\n"))
    assert (elsewhere / "a.txt").read_bytes() == b"never in history\n"


def test_a_file_where_a_folder_should_be_is_refused_in_one_line(root):
    (root / "x").write_bytes(b"a file now\n")
    with pytest.raises(Refused) as e:
        Writer(str(root)).put("x/a.txt", "100644", b"old\n", None)
    assert str(e.value) == "x is not a folder: nothing is written through it"


def test_paths_outside_are_refused(root):
    with pytest.raises(Refused):
        Writer(str(root)).put("../evil", "100644", b"x", None)


def test_remove_only_what_was_expected_and_empty_folders(root):
    writer = Writer(str(root))
    assert not writer.remove("d/a.txt", Expect("100644", data=b"other\n"))
    assert (root / "d" / "a.txt").exists()
    assert writer.remove("d/a.txt", Expect("100644", data=b"committed\n"))
    assert not (root / "d").exists() and root.exists()


def test_a_write_during_a_remove_is_kept(root):
    path = root / "d" / "a.txt"

    def inject(rel):
        threading.Thread(target=lambda: path.open("ab").write(b"more\n")).start()
        time.sleep(0.2)

    writer = Writer(str(root))
    writer.checked = inject
    assert not writer.remove("d/a.txt", Expect("100644", data=b"committed\n"))
    deadline = time.time() + 5
    while path.read_bytes() != b"committed\nmore\n" and time.time() < deadline:
        time.sleep(0.01)
    assert path.read_bytes() == b"committed\nmore\n"
    assert no_temps(root)


def test_confirm_is_asked_when_the_plain_hash_differs(root):
    asked = []
    writer = Writer(str(root), confirm=lambda rel, data: asked.append(rel) or "f" * 40)
    assert writer.put("d/a.txt", "100644", b"x", Expect("100644", oid="f" * 40))
    assert asked == ["d/a.txt"]


def test_sha256_blob_ids():
    assert guarded.blob_id(0, [b""], 64) == \
        "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"


def test_holds_looks_without_writing(root, tmp_path_factory):
    writer = Writer(str(root))
    assert writer.holds("d/a.txt", Expect("100644", oid=oid(b"committed\n")))
    assert not writer.holds("d/a.txt", Expect("100644", data=b"other\n"))
    assert not writer.holds("d/a.txt", Expect("100755", data=b"committed\n"))
    assert not writer.holds("d/none.txt", Expect("100644", data=b""))
    assert not writer.holds("e/none.txt", Expect("100644", data=b""))
    with open(root / "d" / "a.txt", "ab"):
        assert not writer.holds("d/a.txt", Expect("100644", data=b"committed\n"))
    other = tmp_path_factory.mktemp("other")
    (other / "a.txt").write_bytes(b"")
    os.symlink(other, root / "l")
    assert not writer.holds("l/a.txt", Expect("100644", data=b""))  # never through a link
    assert (root / "d" / "a.txt").read_bytes() == b"committed\n" and no_temps(root)


# --- a write cut off between its swap and its swap back (recovery.leftover_writes) ----

CUT_OFF = r"""
import os, sys
from autosync.fs import guarded
root, edit = sys.argv[1], sys.argv[2] == "edit"
writer = guarded.Writer(root)
def inject(rel):  # the user saves by rename after the check: their bytes are at the path
    if edit:
        with open(os.path.join(root, "d", ".a.txt.swp"), "wb") as f:
            f.write(b"saved by an editor\n")
        os.replace(os.path.join(root, "d", ".a.txt.swp"), os.path.join(root, "d", "a.txt"))
writer.checked = inject
writer.swapped = lambda rel: os._exit(9)  # killed right after the swap
old = b"committed\n"
writer.put("d/a.txt", "100644", b"pulled\n",
           guarded.Expect("100644", oid=guarded.blob_id(len(old), [old], 40)))
"""


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "autosync" / "writing"


def cut_off(root, edit):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", CUT_OFF, str(root), "edit" if edit else "-"],
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 9  # killed where it was meant to be
    return [p for p in (root / "d").iterdir() if p.name.startswith(".autosync-write.")]


def copy_beside(path):
    return path + " (kept)"


def holds(data):
    """in_history for leftover_writes: the one content history has."""
    return lambda temp, path: open(temp, "rb").read() == data


def entries(state):
    """The journal's swap entries (a plan lists the temporary files of one writer)."""
    return [p for p in state.iterdir() if not p.name.endswith(".plan")]


def test_bytes_moved_aside_by_a_killed_write_are_kept_beside_the_path(root, state):
    from autosync.vcs import recovery
    temps = cut_off(root, edit=True)
    # The kill left the user's bytes under the temporary name, and the entry says where.
    assert [t.read_bytes() for t in temps] == [b"saved by an editor\n"]
    assert len(entries(state)) == 1
    kept = recovery.leftover_writes(str(root), holds(b"committed\n"),
                                    copy_beside)
    assert kept == [str(root / "d" / "a.txt") + " (kept)"]
    assert (root / "d" / "a.txt (kept)").read_bytes() == b"saved by an editor\n"
    assert (root / "d" / "a.txt").read_bytes() == b"pulled\n"
    assert no_temps(root) and list(state.iterdir()) == []


def test_a_content_history_has_is_removed_not_copied(root, state):
    from autosync.vcs import recovery
    temps = cut_off(root, edit=False)
    assert [t.read_bytes() for t in temps] == [b"committed\n"]
    assert recovery.leftover_writes(str(root), holds(b"committed\n"),
                                    copy_beside) == []
    assert sorted(p.name for p in (root / "d").iterdir()) == ["a.txt"]
    assert list(state.iterdir()) == []


def test_without_a_history_to_ask_everything_is_kept(root, state):
    from autosync.vcs import recovery
    cut_off(root, edit=False)
    assert recovery.leftover_writes(str(root), None, copy_beside)
    assert (root / "d" / "a.txt (kept)").read_bytes() == b"committed\n"


def test_a_live_writer_and_another_folder_are_left_alone(root, state, tmp_path_factory):
    from autosync.vcs import recovery
    cut_off(root, edit=True)
    other = tmp_path_factory.mktemp("other")
    assert recovery.leftover_writes(str(other), None, copy_beside) == []
    assert len(entries(state)) == 1 and not no_temps(root)  # another folder's
    entry = entries(state)[0]
    live = entry.with_name("%d.1" % os.getpid())
    entry.rename(live)  # as if the writer were this (live) process
    assert recovery.leftover_writes(str(root), None, copy_beside) == []
    assert live.exists() and not no_temps(root)


def test_a_finished_write_leaves_no_entry(root, state):
    assert Writer(str(root)).put("d/a.txt", "100644", b"pulled\n",
                                 Expect("100644", oid=oid(b"committed\n")))
    assert Writer(str(root)).remove("d/a.txt", Expect("100644", data=b"pulled\n"))
    assert list(state.iterdir()) == [] and no_temps(root)


@pytest.mark.e2e
def test_a_running_suite_keeps_what_a_killed_restore_moved_aside(machines, remote):
    """A restore (or settle) killed between its swap and its swap back, while the suite
    runs: at its next pull the committer keeps the user's bytes as a conflict copy, and
    they reach the remote like any change."""
    from base import git, wait_until
    a = machines("a", start=False)
    os.makedirs(os.path.join(a.path, "d"))
    with open(os.path.join(a.path, "d", "a.txt"), "wb") as f:
        f.write(b"committed\n")
    git("add", "-A", cwd=a.path)
    git("commit", "-qm", "a file", cwd=a.path)
    git("push", "-q", cwd=a.path)
    a.start()
    import pathlib
    cut_off(pathlib.Path(a.path), edit=True)
    a.notify("pull")

    def copy_pushed():
        names = git("--git-dir", remote.path, "ls-tree", "-r", "--name-only", "main").decode()
        return next((n for n in names.splitlines() if n.startswith("d/a (conflict from ")),
                    None)
    copy = wait_until(copy_pushed, 30, what="the kept bytes to be pushed")
    assert git("--git-dir", remote.path, "show", "main:" + copy) == b"saved by an editor\n"
    assert not [n for n in os.listdir(os.path.join(a.path, "d"))
                if n.startswith(".autosync-write.")]


AS_USER = r"""
import os, sys
from autosync.fs import guarded
root = sys.argv[1]
old = b"committed\n"
expect = guarded.Expect("100644", oid=guarded.blob_id(len(old), [old], 40))
w = guarded.Writer(root)
print(w.put("d/theirs.txt", "100644", b"pulled\n", expect),
      w.put("d/changed.txt", "100644", b"pulled\n", expect))
"""


def test_an_ordinary_user_without_a_lease_on_anothers_file_still_checks_it(nobody):
    """A file the user does not own (root's, copied in with sudo) cannot be leased
    (EACCES without CAP_LEASE): the content and inode checks still decide."""
    import subprocess
    folder = os.path.join(nobody.base, "sync", "d")
    os.makedirs(folder)
    for name, data in (("theirs.txt", b"committed\n"), ("changed.txt", b"edited\n")):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    nobody.chown(os.path.join(nobody.base, "sync"))
    for name in ("theirs.txt", "changed.txt"):  # root's files in the user's folder
        os.chown(os.path.join(folder, name), 0, 0)
        os.chmod(os.path.join(folder, name), 0o644)
    out = subprocess.run(nobody.command(["-c", AS_USER, os.path.join(nobody.base, "sync")]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]
    with open(os.path.join(folder, "theirs.txt"), "rb") as f:
        assert f.read() == b"pulled\n"
    with open(os.path.join(folder, "changed.txt"), "rb") as f:
        assert f.read() == b"edited\n"


KILLED = r"""
import os, signal, sys
from autosync.fs import guarded
root, rel, expect = sys.argv[1], sys.argv[2], sys.argv[3]
writer = guarded.Writer(root)
def source(fd):  # a 300 MB version; the writer is killed 8 MB into it
    chunk = b"pulled " * (1 << 17)
    written = 0
    while written < 300 << 20:
        written += os.write(fd, chunk)
        if written >= 8 << 20:
            os.kill(os.getpid(), signal.SIGKILL)
old = b"committed\n"
writer.put(rel, "100644", source,
           guarded.Expect("100644", oid=guarded.blob_id(len(old), [old], 40))
           if expect == "swap" else None)
"""


@pytest.mark.parametrize("kind", ["swap", "new"])
def test_a_write_killed_midway_leaves_no_prefix_anywhere(tmp_path, state, kind):
    from autosync.vcs import recovery
    root = tmp_path / "synced"
    (root / "d").mkdir(parents=True)
    if kind == "swap":
        (root / "d" / "a.bin").write_bytes(b"committed\n")
    proc = subprocess.run([sys.executable, "-c", KILLED, str(root), "d/a.bin", kind],
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)))
    assert proc.returncode == -9
    temps = [p for p in (root / "d").iterdir() if p.name.startswith(".autosync-write.")]
    assert len(temps) == 1 and temps[0].stat().st_size >= 8 << 20  # the prefix is there
    kept = recovery.leftover_writes(str(root), lambda t, p: False, lambda p: p + " (kept)")
    assert kept == []
    assert sorted(p.name for p in (root / "d").iterdir()) == (["a.bin"] if kind == "swap" else [])
    if kind == "swap":
        assert (root / "d" / "a.bin").read_bytes() == b"committed\n"
    assert list(state.iterdir()) == []
