"""The man pages and the bash completion docs/generate.py writes (at each Debian build)
from the programs' own parsers and the configuration's docs: one page per program and
autosync(5), each option and key in them, readable by man without a warning, and a
completion of every subcommand and option each parser knows."""
import argparse
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "docs"))
import generate  # noqa: E402


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The folder the script wrote into, run as debian/rules runs it."""
    out = tmp_path_factory.mktemp("generated")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "generate.py"),
                             str(out)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return out


@pytest.fixture(scope="module")
def pages(written):
    return str(written / "man")


@pytest.fixture(scope="module")
def completion(written):
    return str(written / "bash-completion" / "dvcs-autosync")


def test_every_program_has_a_page_and_the_config_file_one(pages):
    written_pages = sorted(os.listdir(pages))
    wanted = sorted([name + ".1" for name in generate.scripts()] + ["autosync.5"])
    assert written_pages == wanted


def test_a_page_holds_every_option_and_subcommand_of_its_parser(pages):
    found, commands = generate.programs()
    for name, parser in found:
        page = open(os.path.join(pages, name + ".1")).read()
        for invocation, _ in generate.actions(parser):
            assert "\\fB%s\\fR" % generate.roff(invocation) in page, (name, invocation)
    page = open(os.path.join(pages, "dvcs-autosync.1")).read()
    for word, parser in commands:
        assert ".SS %s\n" % word in page
    for section, keys in generate.config.KEYS.items():
        text = open(os.path.join(pages, "autosync.5")).read()
        assert ".SS [%s]" % section in text
        for name in keys:
            assert "\n\\fB%s\\fR " % name in text, (section, name)


def test_man_reads_every_page_without_a_warning(pages):
    man = shutil.which("man")
    if man is None:
        pytest.fail("man is missing: install the Debian package man-db")
    for page in sorted(os.listdir(pages)):
        result = subprocess.run([man, "--warnings", "-l", os.path.join(pages, page)],
                                capture_output=True, text=True,
                                env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
        assert result.returncode == 0 and result.stderr == "", (page, result.stderr)
        assert "SEE ALSO" in re.sub(".\b", "", result.stdout)  # without the overstrikes


def complete(completion, *words):
    """What bash completes for the command line `words` (the last one being typed)."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'complete -p "$1" >/dev/null || exit 3; '
              '_autosync_complete "$1"; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", script, "bash", completion] + list(words),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_bash_completes_every_option_and_subcommand_the_parsers_know(completion):
    found, commands = generate.programs()
    for name, parser in found:
        options = {o for a in parser._actions for o in a.option_strings}
        assert options and options <= complete(completion, name, "-"), name
    for word, parser in commands:
        options = {o for a in parser._actions for o in a.option_strings}
        assert options <= complete(completion, "dvcs-autosync", word, "-"), word
    assert complete(completion, "dvcs-autosync", "") == {word for word, _ in commands}
    prefixed = {word for word, _ in commands if word.startswith("re")}
    assert "restore" in prefixed and complete(completion, "dvcs-autosync", "re") == prefixed


def test_bash_completes_the_values_an_option_or_argument_takes(completion):
    assert complete(completion, "dvcs-autosync", "conflicts", "--keep", "") == {"mine", "theirs"}
    notify = dict(generate.programs()[0])["autosync-notify"]
    messages = next(a.choices for a in notify._actions if a.dest == "message")
    assert complete(completion, "autosync-notify", "") == set(messages)
    assert complete(completion, "autosync-notify", "--config", "") == set()  # a file: bash's own
    # `dvcs-autosync status` already has its message: only options follow.
    assert complete(completion, "dvcs-autosync", "status", "") == set()


def test_a_parser_is_caught_before_it_parses():
    def program():
        p = argparse.ArgumentParser(prog="x")
        p.add_argument("--flag")
        p.parse_args(["--no-such-option"])  # would exit
    assert generate.caught(program).prog == "x"
    with pytest.raises(RuntimeError):
        generate.caught(lambda: None)
