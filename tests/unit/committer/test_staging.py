"""What goes into a commit: staging, rescans, what is held back, nested repositories."""
import os

from autosync.vcs.commands import CommandFailed
from autosync.committer.staging import arg, expand_moves, why_not_staged


def test_a_leading_dash_never_reads_as_an_option():
    assert arg("-rf") == "./-rf" and arg("--exec=x") == "./--exec=x" and arg("a-b") == "a-b"


def test_why_names_the_path_and_gits_own_reason(tmp_path):
    error = CommandFailed("addcmd", "git add -A -- x", 128,
                          "warning: noise\nerror: 'x' does not have a commit checked out\n"
                          "fatal: adding files failed\n")
    assert why_not_staged(str(tmp_path), "x", error) == \
        "x (error: 'x' does not have a commit checked out)"
    assert why_not_staged(str(tmp_path), "new\nline", error).startswith('"new\\nline" (')


def test_a_moved_folder_is_listed_file_by_file(tmp_path):
    for rel in ("new/a.txt", "new/sub/b.txt"):
        os.makedirs(os.path.dirname(tmp_path / rel), exist_ok=True)
        (tmp_path / rel).write_text("x")
    listed = expand_moves(str(tmp_path), [{"action": "moved", "path": "new", "src": "old"}])
    assert listed == [{"action": "moved", "path": "new/a.txt", "src": "old/a.txt"},
                      {"action": "moved", "path": "new/sub/b.txt", "src": "old/sub/b.txt"}]
