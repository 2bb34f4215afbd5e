"""The committer's pure parts: commit messages, pending changes, request checks."""
import os

import pytest

from autosync.committer import MESSAGE_LINES, Pending, arg, check_change, commit_message, \
    expand_moves


def test_message_names_each_file_and_the_host():
    message = commit_message("laptop", [
        {"action": "added", "path": "a.txt"},
        {"action": "modified", "path": "b.txt"},
        {"action": "moved", "path": "new/c.txt", "src": "old/c.txt"},
        {"action": "removed", "path": "d.txt"},
    ])
    head, blank, *body = message.split("\n")
    assert head == "autosync on laptop: 1 added, 1 modified, 1 removed, 1 moved"
    assert blank == ""
    assert body == ["added: a.txt", "modified: b.txt", "moved: new/c.txt (from old/c.txt)",
                    "removed: d.txt"]


def test_message_keeps_odd_names_on_one_line_and_counts_the_rest():
    changes = [{"action": "added", "path": "line\nbreak"}] + \
        [{"action": "added", "path": "f%d" % i} for i in range(MESSAGE_LINES + 50)]
    lines = commit_message("h", changes).split("\n")
    assert "added: 'line\\nbreak'" in lines
    assert lines[-1] == "... and 51 more"
    assert len(lines) == 2 + MESSAGE_LINES + 1


def test_message_with_note_and_context():
    assert commit_message("h", [], note="changes found at start-up") == \
        "autosync on h: changes found at start-up"
    message = commit_message("h", [{"action": "added", "path": "x"}], context="context: busy")
    assert message.endswith("added: x\ncontext: busy")


def test_pending_keeps_one_entry_per_path_and_added_stays_added():
    p = Pending()
    p.add([{"action": "added", "path": "x"}])
    p.add([{"action": "modified", "path": "x"}, {"action": "removed", "path": "y"}])
    changes, rescan = p.take()
    assert changes == [{"action": "added", "path": "x"}, {"action": "removed", "path": "y"}]
    assert not rescan and not p
    p.add([], rescan=True)
    assert p and p.take() == ([], True)


@pytest.mark.parametrize("change", [
    "text", {"action": "burn", "path": "x"}, {"action": "added"}, {"action": "added", "path": ""},
    {"action": "added", "path": "/etc/passwd"}, {"action": "added", "path": "a/../../b"},
    {"action": "moved", "path": "x"}, {"action": "added", "path": "nul\0byte"},
])
def test_bad_changes_are_refused(change):
    with pytest.raises(ValueError):
        check_change(change)


def test_a_leading_dash_never_reads_as_an_option():
    assert arg("-rf") == "./-rf" and arg("--exec=x") == "./--exec=x" and arg("a-b") == "a-b"


def test_a_moved_folder_is_listed_file_by_file(tmp_path):
    for rel in ("new/a.txt", "new/sub/b.txt"):
        os.makedirs(os.path.dirname(tmp_path / rel), exist_ok=True)
        (tmp_path / rel).write_text("x")
    listed = expand_moves(str(tmp_path), [{"action": "moved", "path": "new", "src": "old"}])
    assert listed == [{"action": "moved", "path": "new/a.txt", "src": "old/a.txt"},
                      {"action": "moved", "path": "new/sub/b.txt", "src": "old/sub/b.txt"}]
