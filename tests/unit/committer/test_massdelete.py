"""massdelete.py: which commits are mass deletes, and the command that undoes one."""
import os
import subprocess

from autosync.committer import massdelete
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


def test_the_total_is_what_the_commit_holds_not_a_lagging_index(tmp_path):
    # After a quick commit the index still lists the removed files until it is settled.
    root = folder_with(tmp_path, kept=10)
    for i in range(30):
        (root / "photos" / ("%d.jpg" % i)).write_text("x")
    run = lambda *a: subprocess.run(("git",) + a, cwd=str(root), check=True,
                                    capture_output=True)
    run("init", "-q")
    run("add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "all")
    tree = run("ls-tree", "HEAD").stdout.replace(
        [line for line in run("ls-tree", "HEAD").stdout.split(b"\n") if b"photos" in line][0]
        + b"\n", b"")
    new_tree = subprocess.run(["git", "mktree"], cwd=str(root), input=tree, check=True,
                              capture_output=True).stdout.strip()
    commit = run("-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", "-p", "HEAD",
                 "-m", "photos gone", new_tree.decode()).stdout.strip()
    run("update-ref", "HEAD", commit.decode())
    assert b"photos/0.jpg" in run("ls-files").stdout  # the index lags
    fields = massdelete.notice(config(root), str(root / ".git"), removed(30), 1.0)
    assert (fields["count"], fields["total"]) == (30, 40)
