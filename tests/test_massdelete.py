"""massdelete.py: which commits are mass deletes, and the command that undoes one."""
import os

from autosync import massdelete
from fakes import config


def folder_with(tmp_path, kept):
    root = tmp_path / "sync"
    os.makedirs(root / "photos")
    for i in range(kept):
        (root / ("keep%d" % i)).write_text("x")
    return root


def removed(n, under="photos"):
    return [{"action": "removed", "path": "%s/%d.jpg" % (under, i)} for i in range(n)]


def test_many_removed_at_once_is_said_with_the_undoing_command(tmp_path):
    root = folder_with(tmp_path, kept=30)
    cfg = config(root, file=str(tmp_path / "my.autosync"))
    fields = massdelete.notice(cfg, None, removed(24) + [{"action": "added", "path": "a"}],
                               1700000000.5)
    assert (fields["count"], fields["total"]) == (24, 54)
    assert fields["restore"] == ("dvcs-autosync restore photos --at @1699999999 --config %s"
                                 % (tmp_path / "my.autosync"))


def test_few_or_a_small_part_is_not(tmp_path):
    root = folder_with(tmp_path, kept=200)
    cfg = config(root)
    assert massdelete.notice(cfg, None, removed(19), 1.0) is None  # fewer than 20
    assert massdelete.notice(cfg, None, removed(40), 1.0) is None  # under a quarter of 240


def test_metadata_is_not_counted(tmp_path):
    root = folder_with(tmp_path, kept=0)
    os.makedirs(root / ".git" / "objects")
    for i in range(500):
        (root / ".git" / "objects" / str(i)).write_text("x")
    assert massdelete.tracked_files(str(root), None) == 0
