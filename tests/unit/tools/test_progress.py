"""Progress on long work (autosync/tools/progress.py): the lines it writes on a terminal and
the nothing it writes elsewhere (tests/integration/test_progress_programs.py: `dvcs-autosync init` of
10,000 files and a restore, on a real pseudo-terminal and into a file)."""
import io

import pytest

from base import git
from terminal import ERASE

from autosync.tools import progress

class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_count_is_shown_again_only_when_its_percent_changes():
    out = Terminal()
    shown = progress.Progress(out)
    for done in range(1, 1001):
        shown.files("Adding", done, 1000, done * 10, 10000)
    assert out.getvalue().count(ERASE) == 101  # 0% (1 of 1,000) to 100%
    assert out.getvalue().endswith(ERASE + "Adding: 1,000 of 1,000 files (10.0 kB of 10.0 kB)")
    shown.clear()
    assert out.getvalue().endswith(ERASE)
    shown.clear()  # nothing shown: nothing to erase
    assert out.getvalue().count(ERASE) == 102


def test_a_remotes_words_on_the_progress_line_act_on_no_terminal():
    out = Terminal()
    progress.Progress(out).show("Cloning: remote: \033]0;owned\007\u009b2J done\nnext")
    assert out.getvalue() == ERASE + "Cloning: remote: \\033]0;owned\\a\\302\\2332J done next"


def test_nothing_is_written_where_there_is_no_terminal():
    out = io.StringIO()
    shown = progress.Progress(out)
    shown.show("Reading the remote...")
    shown.files("Adding", 5, 10, 50, 100)
    shown.clear()
    assert out.getvalue() == ""


def test_run_gives_each_line_as_it_comes_and_fails_with_gits_words(tmp_path):
    repo = tmp_path / "repo"
    git("init", "-q", str(repo))
    (repo / "a b.txt").write_text("a\n")
    (repo / "c.txt").write_text("c\n")
    lines = []
    progress.run(str(repo), ["add", "-A", "--verbose"], on_out=lines.append)
    assert sorted(lines) == ["add 'a b.txt'", "add 'c.txt'"]
    with pytest.raises(RuntimeError) as failed:
        progress.run(str(repo), ["rev-parse", "--verify", "no-such-revision"])
    assert str(failed.value).startswith("git rev-parse: fatal: ")
