"""The commit message: written and read back in one place."""
import pytest

from autosync.core.messages import (MERGED_COPY, MESSAGE_LINES, action_of, commit_message,
                                     escaped, host_of, merge_message, printable, unquoted)


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
    assert 'added: "line\\nbreak"' in lines
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


# git's own quoting (core.quotePath) of these names, as `git ls-files` prints them; a
# printable character beyond ASCII is left as it is (quotePath=false), an unprintable one
# (C1, a bidi override) is quoted as quotePath=true quotes every byte beyond ASCII.
@pytest.mark.parametrize("name, shown", [
    ("plain name.txt", "plain name.txt"),
    ("caf\u00e9/\u65e5\u672c.txt", "caf\u00e9/\u65e5\u672c.txt"),
    ("\033]0;x\007", '"\\033]0;x\\a"'),
    ("a\tb\nc\rd\013\014\010", '"a\\tb\\nc\\rd\\v\\f\\b"'),
    ('a"b', '"a\\"b"'),
    ("a\\b", '"a\\\\b"'),
    ("\x7f", '"\\177"'),
    ("\u009b", '"\\302\\233"'),
    ("\udcff", '"\\377"'),  # a byte that is not UTF-8 (surrogateescape)
    ("\u202etxt.exe", '"\\342\\200\\256txt.exe"'),
])
def test_a_name_is_quoted_as_git_quotes_it(name, shown):
    assert printable(name) == shown
    assert shown.isprintable()


def test_free_text_keeps_its_lines_and_quotes_the_rest():
    assert escaped("error: \033[2J\nnext\tline") == "error: \\033[2J\nnext\tline"
    assert escaped('a "plain" \\ text') == 'a "plain" \\ text'


def test_old_messages_with_pythons_quoting_are_still_read():
    name = "line\nbreak"
    assert action_of("autosync on h: 1 added\n\nadded: 'line\\nbreak'\n", name, False) == (
        "h", "added")
    assert action_of(commit_message("h", [{"action": "added", "path": name}]), name, False) \
        == ("h", "added")
    assert action_of("autosync on h: 1 added\n\nadded: a\\b\n", "a\\b", False) == (
        "h", "added")


@pytest.mark.parametrize("name", [
    "plain.txt", "caf\u00e9", '"', "\\", 'a"b\\c', "\033]0;x\007", "a\tb\nc\rd\013\014\010",
    "\x7f\u009b", "\udcff\udc80x", "\\033", '"quoted"'])
def test_a_quoted_name_reads_back_as_itself(name):
    """A merge's conflict lines, read back by the machines that pull it."""
    assert unquoted(printable(name)) == name
    message = merge_message("pc", [{"path": name, "copy": name + " (conflict)"}])
    found = MERGED_COPY.fullmatch(message.split("\n")[-1])
    assert (unquoted(found.group(1)), unquoted(found.group(2))) == (name, name + " (conflict)")
