"""The commit message: written and read back in one place."""
import pytest

from autosync.core.messages import MESSAGE_LINES, action_of, commit_message, host_of, merge_message


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


def test_a_merge_names_each_conflict_copy():
    message = merge_message("pc", [{"path": "a.txt", "copy": "a (conflict from laptop).txt"}])
    assert message == ("autosync on pc: merged, 1 conflicts\n\n"
                       "conflict: a.txt (other version kept as a (conflict from laptop).txt)")
    assert action_of(message, "a.txt", False) == (
        "pc", "conflict (other version kept as a (conflict from laptop).txt)")


def test_the_host_is_read_from_the_summary_line():
    assert host_of("autosync on laptop.local: 1 added") == "laptop.local"
    assert host_of(commit_message("pc", [{"action": "added", "path": "x"}])) == "pc"
    assert host_of("Fix typo") is None


MESSAGE = ("autosync on laptop: 1 added, 1 modified, 1 removed, 1 moved\n\n"
           "added: new.txt\nmodified: notes.txt\nremoved: old.txt\n"
           "moved: b/x.txt (from a/x.txt)\n"
           "conflict: c.txt (other version kept as c (conflict from pc).txt)\ncontext: busy\n")


@pytest.mark.parametrize("path, action", [
    ("new.txt", "added"), ("notes.txt", "modified"), ("old.txt", "removed"),
    ("b/x.txt", "moved from a/x.txt"), ("a/x.txt", "moved to b/x.txt"),
    ("unlisted.txt", "changed"), ("notes", "changed"),
    ("c.txt", "conflict (other version kept as c (conflict from pc).txt)")])
def test_describe_finds_what_happened_to_the_path(path, action):
    assert action_of(MESSAGE, path, False) == ("laptop", action)


def test_describe_a_manual_commit_and_the_folder():
    assert action_of("Fix typo\n\nmodified: notes.txt\n", "x", False) == (None, "changed")
    assert action_of(MESSAGE, ".", True) == (
        "laptop", "1 added, 1 modified, 1 removed, 1 moved")
    assert action_of("Fix typo\n", ".", True) == (None, "Fix typo")
