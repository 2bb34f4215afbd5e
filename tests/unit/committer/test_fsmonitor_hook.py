"""fsmonitor_hook.py: git's fsmonitor hook (version 2), answered from the state file."""
import subprocess
import sys

from autosync.committer import fsmonitor_hook
from autosync.committer.fsmonitor import HOOK, BatchJournal


def state(run=b"r1", floor=0, seq=3, blind=0, entries=b""):
    return b"autosync-fsmonitor 1\n%s\n%d %d %d\n%s" % (run, floor, seq, blind, entries)


def listed(out):
    """-> (token, [paths]) of an answer (each path once: the hook also names it with /)."""
    parts = out.split(b"\0")
    assert parts[-1] == b""
    return parts[0], [p for p in parts[1:-1] if not p.endswith(b"/")]


def test_a_token_of_this_run_gets_the_paths_of_later_batches_and_the_new_token():
    s = state(seq=5, entries=b"2:old\0" b"4:new\0" b"5:newer:with:colons\0")
    token, paths = listed(fsmonitor_hook.answer(s, b"autosync:r1:3"))
    assert token == b"autosync:r1:5"
    assert paths == [b"new", b"newer:with:colons"]


def test_each_path_is_also_named_as_a_folder_so_a_moved_folder_takes_its_files():
    out = fsmonitor_hook.answer(state(seq=2, entries=b"2:docs\0"), b"autosync:r1:1")
    assert out == b"autosync:r1:2\0docs\0docs/\0"


def test_nothing_since_the_token_is_an_empty_list_not_everything():
    assert fsmonitor_hook.answer(state(seq=3, entries=b"3:a\0"), b"autosync:r1:3") \
        == b"autosync:r1:3\0"


def test_tracked_files_the_watcher_never_reports_are_always_named():
    token, paths = listed(fsmonitor_hook.answer(state(seq=3, entries=b"*:private/key\0"),
                                                b"autosync:r1:3"))
    assert paths == [b"private/key"]


def test_tokens_that_cannot_be_trusted_answer_everything():
    s = state(floor=2, seq=5, entries=b"4:a\0")
    for token in (b"autosync:r0:4",    # an earlier run of the committer
                  b"autosync:r1:1",    # older than the last rescan (floor)
                  b"autosync:r1:6",    # from the future: not ours
                  b"1796495833980578293",  # git's own first token (a clock)
                  b"autosync:r1:x", b""):
        assert fsmonitor_hook.answer(s, token) == b"autosync:r1:5\0/\0", token


def test_folders_without_a_watch_answer_everything():
    assert fsmonitor_hook.answer(state(seq=3, blind=1), b"autosync:r1:3") \
        == b"autosync:r1:3\0/\0"


def test_no_state_or_a_bad_one_answers_everything_with_a_token_never_valid():
    for bad in (None, b"", b"something else\nr1\n0 1 0\n", b"autosync-fsmonitor 1\nr1\n0 x 0\n"):
        out = fsmonitor_hook.answer(bad, b"autosync:r1:1")
        assert out == b"autosync:none\0/\0"
        assert fsmonitor_hook.answer(bad, b"autosync:none") == out


def test_the_hook_as_git_runs_it_reads_the_journals_file(tmp_path):
    where = str(tmp_path / "state")
    journal = BatchJournal(where, run="abc")
    journal.received([{"action": "modified", "path": "a b"}])
    journal.write()
    run = subprocess.run([sys.executable, "-I", "-S", HOOK, where, "2", "autosync:abc:0"],
                         stdout=subprocess.PIPE, check=True)
    assert run.stdout == b"autosync:abc:1\0a b\0a b/\0"


def test_another_protocol_version_is_refused(tmp_path):
    run = subprocess.run([sys.executable, "-I", "-S", HOOK, str(tmp_path / "state"), "1", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.returncode == 1 and run.stdout == b""


def test_the_hook_imports_nothing_of_the_suite():
    """git starts it for every command that reads the index: stdlib only, no site."""
    with open(HOOK, encoding="utf-8") as f:
        text = f.read()
    assert [line for line in text.splitlines() if line.startswith(("import", "from"))] \
        == ["import sys"]
