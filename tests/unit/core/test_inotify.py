"""inotify.py: pyinotify with names decoded as os.fsdecode does, and never waiting."""
import os
import select
import time

import pyinotify

from autosync.core.inotify import Inotify


def collect(tmp_path, excluded=lambda path: False):
    events, refused = [], []
    ino = Inotify(events.append, refused.append, excluded)
    return ino, events, refused


def settle(ino):
    while select.select([ino], [], [], 0.2)[0]:
        ino.drain()


def test_a_name_that_is_not_utf8_comes_through(tmp_path):
    ino, events, _ = collect(tmp_path)
    assert ino.watch(str(tmp_path), recursive=True)
    name = os.fsencode(str(tmp_path)) + b"/caf\xe9.txt"  # Latin-1, not UTF-8
    with open(name, "wb") as f:
        f.write(b"x")
    settle(ino)
    names = {e.pathname for e in events}
    assert os.fsdecode(name) in names
    assert any(e.mask & pyinotify.IN_CLOSE_WRITE for e in events)


def test_drain_never_waits_and_new_folders_are_watched(tmp_path):
    ino, events, _ = collect(tmp_path)
    ino.watch(str(tmp_path), recursive=True)
    started = time.monotonic()
    ino.drain()  # nothing queued: returns at once
    assert time.monotonic() - started < 0.1
    os.makedirs(tmp_path / "a" / "b")
    settle(ino)
    (tmp_path / "a" / "b" / "f").write_text("x")
    settle(ino)
    assert str(tmp_path / "a" / "b") in ino.watched()
    assert str(tmp_path / "a" / "b" / "f") in {e.pathname for e in events}


def test_excluded_folders_and_links_get_no_watch(tmp_path):
    tmp_path = tmp_path / "root"
    tmp_path.mkdir()
    (tmp_path / "skip").mkdir()
    (tmp_path / "keep").mkdir()
    os.symlink("/usr", tmp_path / "link")
    ino, _, refused = collect(tmp_path, excluded=lambda p: p.endswith("/skip"))
    ino.watch(str(tmp_path), recursive=True)
    assert ino.watched() == {str(tmp_path), str(tmp_path / "keep")}
    assert len(ino) == 2
    assert not ino.watch(str(tmp_path / "missing"), recursive=False)
    assert refused == []  # a missing folder is not the kernel running out of watches


def test_events_say_whether_pyinotify_made_them_up(tmp_path):
    """pyinotify invents IN_CREATE for what a new folder already holds; a file's own
    creation comes from the kernel."""
    ino, events, _ = collect(tmp_path)
    ino.watch(str(tmp_path), recursive=True)
    (tmp_path / "real.txt").write_text("x")
    # Nothing is read until settle(): the folder gets its watch only then, so what it
    # holds by then is only listed by pyinotify.
    os.makedirs(tmp_path / "made")
    (tmp_path / "made" / "inside.txt").write_text("x")
    settle(ino)
    creates = {e.pathname: e.made_up for e in events if e.mask & pyinotify.IN_CREATE}
    assert creates[str(tmp_path / "real.txt")] is False
    assert creates[str(tmp_path / "made")] is False
    assert creates[str(tmp_path / "made" / "inside.txt")] is True


def test_pyinotify_says_nothing_when_the_watched_folder_is_moved(tmp_path, capfd):
    root = tmp_path / "root"
    root.mkdir()
    ino, events, _ = collect(tmp_path)
    ino.watch(str(root), recursive=True)
    root_wd = ino.wd(str(root))
    os.rename(root, tmp_path / "elsewhere")
    settle(ino)
    assert any(e.wd == root_wd and e.mask & pyinotify.IN_MOVE_SELF for e in events)
    assert capfd.readouterr().err == ""  # pyinotify's "-unknown-path" error is not said
    ino.close()


def scanned_wd(ino, path):
    """pyinotify's own answer: every watch compared with the path."""
    return pyinotify.WatchManager.get_wd(ino.wm, path)


def test_a_watch_is_found_by_path_as_pyinotify_finds_it_through_moves_and_removals(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    ino, events, _ = collect(tmp_path)
    ino.watch(str(root), recursive=True)

    def agrees():
        for path in ino.watched() | {str(root / "gone"), str(root / "a" / "b") + "/"}:
            assert ino.wm.get_wd(path) == scanned_wd(ino, path), path
        assert ino.wm.get_wd(str(root / "a" / "b")) is not None or not (root / "a" / "b").exists()

    agrees()
    os.makedirs(root / "new" / "deep")  # added by pyinotify (auto_add)
    settle(ino)
    agrees()
    assert ino.wm.get_wd(str(root / "new" / "deep")) is not None
    os.rename(root / "a", root / "moved")  # pyinotify renames the watches in place
    settle(ino)
    agrees()
    assert ino.wm.get_wd(str(root / "moved" / "b")) is not None
    assert ino.wm.get_wd(str(root / "a" / "b")) is None
    os.rmdir(root / "new" / "deep")  # its watch removed (IN_IGNORED)
    settle(ino)
    agrees()
    assert ino.wm.get_wd(str(root / "new" / "deep")) is None
    ino.close()


def test_files_in_a_new_folder_do_not_each_go_through_every_watch(tmp_path):
    """pyinotify looks up each name a new folder holds: 10,000 names among 10,000
    watches was 100 million comparisons (5-6 s at 1,000,000 files)."""
    root = tmp_path / "root"
    for i in range(30):
        (root / ("d%02d" % i)).mkdir(parents=True)
    ino, events, _ = collect(tmp_path)
    ino.watch(str(root), recursive=True)
    built = []

    class Watches(dict):  # pyinotify's scan and the dict's building both go through
        def items(self):
            built.append(1)
            return super().items()
    ino.wm._wmd = Watches(ino.wm._wmd)
    new = root / "photos"
    new.mkdir()
    for i in range(300):  # written before the folder's watch: pyinotify lists them
        (new / ("p%03d.jpg" % i)).write_text("x")
    settle(ino)
    made_up = [e for e in events if e.made_up and e.pathname.startswith(str(new) + "/")]
    assert len(made_up) == 300
    assert 1 <= len(built) <= 2  # the dict built again once or twice, not per name
    ino.close()
