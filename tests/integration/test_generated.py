"""The man pages and the bash completion docs/generate.py writes (at each Debian build)
from the programs' own parsers and the configuration's docs: one page per program and
autosync(5), each option and key in them, readable by man without a warning, and a
completion of every subcommand and option each parser knows."""
import argparse
import os
import pty
import re
import shutil
import subprocess
import sys
import threading

import pytest

from base import ROOT, wait_until

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


def test_dvcs_autosync_s_page_names_it_in_a_user_s_words_and_each_usage_once(pages):
    page = open(os.path.join(pages, "dvcs-autosync.1")).read()
    name = page.split(".SH NAME\n")[1].split("\n")[0]
    # the package's description, not the module docstring's developer line
    assert name == "dvcs\\-autosync \\- " + generate.roff(
        "keep a folder in sync between machines through git (or any DVCS)")
    synopsis = page.split(".SH SYNOPSIS\n")[1].split(".SH ")[0]
    lines = [line for line in synopsis.split("\n") if line and line != ".PP"]
    assert len(lines) == len(set(lines)) and all(
        line.startswith("dvcs\\-autosync") for line in lines), lines
    _, commands = generate.programs()
    notify = [word for word, parser in commands if generate.delegated(word, parser)]
    assert "pause" in notify and "log" not in notify
    assert sum(1 for line in lines if "{%s}" % ",".join(notify) in line) == 1
    for name in ("autosync-sshlink", "autosync-xmpp"):  # no usage in the NAME line
        page = open(os.path.join(pages, name + ".1")).read()
        assert "[CONFIG]" not in page.split(".SH NAME\n")[1].split("\n")[0], name


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
    assert complete(completion, "dvcs-autosync", "conflicts", "--keep", "") == {"mine", "theirs", "both"}
    notify = dict(generate.programs()[0])["autosync-notify"]
    messages = next(a.choices for a in notify._actions if a.dest == "message")
    assert complete(completion, "autosync-notify", "") == set(messages)
    assert complete(completion, "autosync-notify", "--config", "") == set()  # a file: bash's own
    # `dvcs-autosync status` already has its message: only options follow.
    assert complete(completion, "dvcs-autosync", "status", "") == set()
    assert complete(completion, "dvcs-autosync", "resume", "") == set()
    # pause takes a duration, as autosync/core/pause.py reads it
    assert complete(completion, "dvcs-autosync", "pause", "") == set(generate.DURATIONS)
    assert complete(completion, "autosync-notify", "pause", "") == set(generate.DURATIONS)
    assert complete(completion, "autosync-notify", "--json", "pause", "1") == {"1h", "1d"}


def test_the_durations_offered_after_pause_are_ones_pause_takes():
    from autosync.core.pause import parse_duration
    assert generate.DURATIONS and all(parse_duration(d) > 0 for d in generate.DURATIONS)


def test_a_parser_is_caught_before_it_parses():
    def program():
        p = argparse.ArgumentParser(prog="x")
        p.add_argument("--flag")
        p.parse_args(["--no-such-option"])  # would exit
    assert generate.caught(program).prog == "x"
    with pytest.raises(RuntimeError):
        generate.caught(lambda: None)


# --- zsh --------------------------------------------------------------------------------

# Put before zsh's own compadd, once compinit has loaded the completion system: each match
# a completion function offers for the word being typed is also written to a file.
RECORD = r'''
compadd() {
    if (( ${@[(I)-[OAD]*]} )); then builtin compadd "$@"; return; fi
    local -a matched
    builtin compadd -O matched "$@"
    (( $#matched )) && print -rl -- $matched >> %s
    builtin compadd "$@"
}
# Tab completes, then says so: the next keys are typed only after it (typed ahead, they
# came while a completion was still loading and it offered nothing, at load 4).
integer tabs=0
record-complete() { zle expand-or-complete; print -r -- "@@tab$(( ++tabs ))@@" >> %s; }
zle -N record-complete
bindkey '^I' record-complete
'''


class Zsh:
    """An interactive zsh (no user's setup) on a pseudo-terminal, with the written
    completion in its fpath; complete() types a command line and a tab, and reads what
    was offered from the file RECORD writes."""

    def __init__(self, fpath, home):
        zsh = shutil.which("zsh")
        if zsh is None:
            pytest.fail("zsh is missing: install the Debian package zsh")
        self.record = os.path.join(home, "offered")
        open(self.record, "w").close()
        self.asked = 0
        empty = os.path.join(home, "empty")  # where it runs: no file names to offer
        os.mkdir(empty)
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([zsh, "-f", "-i"], stdin=slave, stdout=slave, stderr=slave,
                                     cwd=empty, start_new_session=True,
                                     env={"PATH": os.environ["PATH"], "HOME": home,
                                          "TERM": "xterm", "ZDOTDIR": home})
        os.close(slave)
        self.master = master
        threading.Thread(target=self.drain, daemon=True).start()
        self.send("fpath=(%s $fpath); autoload -Uz compinit; compinit -u -D; "
                  "unsetopt auto_list auto_menu list_beep beep\n" % fpath)
        self.send(RECORD % (self.record, self.record) + "\n")
        # zsh drops what was typed before its line editor started: the first line is
        # typed once the setup has run
        self.send("print -r -- @@0@@ >> %s\n" % self.record)
        wait_until(lambda: "@@0@@" in open(self.record).read().split(), 30,
                   what="zsh to start")

    def drain(self):
        while True:
            try:
                if not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def send(self, text):
        os.write(self.master, text.encode())

    def complete(self, *words):
        """The matches zsh offers for the command line `words` (the last one being typed)."""
        self.asked += 1
        mark = "@@%d@@" % self.asked
        # the line and a tab; once it is done, the line erased (^U) and a mark written
        # after the matches
        self.send(" ".join(words) + "\t")
        wait_until(lambda: "@@tab%d@@" % self.asked in open(self.record).read().split(), 30,
                   what="zsh's tab after %r" % (words,))
        self.send("\x15print -r -- %s >> %s\n" % (mark, self.record))
        wait_until(lambda: mark in open(self.record).read().split(), 30,
                   what="zsh to complete %r" % (words,))
        lines = open(self.record).read().split("\n")
        start = lines.index("@@%d@@" % (self.asked - 1)) + 1
        return set(lines[start:lines.index(mark)]) - {"@@tab%d@@" % self.asked}

    def close(self):
        self.send("exit\n")
        self.proc.wait(timeout=30)
        os.close(self.master)


@pytest.fixture(scope="module")
def zsh(written, tmp_path_factory):
    home = tmp_path_factory.mktemp("zsh-home")
    shell = Zsh(str(written / "zsh"), str(home))
    yield shell
    shell.close()


def test_the_zsh_completion_is_read_by_zsh_and_names_every_program(written):
    path = str(written / "zsh" / "_dvcs-autosync")
    first = open(path).readline().split()
    found, _ = generate.programs()
    assert first[0] == "#compdef" and sorted(first[1:]) == sorted(name for name, _ in found)
    result = subprocess.run(["zsh", "-n", path], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_zsh_completes_every_option_and_subcommand_the_parsers_know(zsh):
    # what test_bash_completes_every_option_and_subcommand_the_parsers_know asks of bash
    found, commands = generate.programs()
    for name, parser in found:
        options = {o for a in parser._actions for o in a.option_strings}
        assert options and options <= zsh.complete(name, "-"), name
    for word, parser in commands:
        options = {o for a in parser._actions for o in a.option_strings}
        assert options <= zsh.complete("dvcs-autosync", word, "-"), word
    assert zsh.complete("dvcs-autosync", "") == {word for word, _ in commands}
    prefixed = {word for word, _ in commands if word.startswith("re")}
    assert "restore" in prefixed and zsh.complete("dvcs-autosync", "re") == prefixed


def test_zsh_completes_the_values_an_option_or_argument_takes(zsh):
    assert zsh.complete("dvcs-autosync", "conflicts", "--keep", "") == {"mine", "theirs", "both"}
    assert zsh.complete("dvcs-autosync", "--config", "x.conf", "expire", "--") >= \
        {"--older-than", "--yes", "--config"}
    notify = dict(generate.programs()[0])["autosync-notify"]
    messages = set(next(a.choices for a in notify._actions if a.dest == "message"))
    assert zsh.complete("autosync-notify", "") == messages
    # `dvcs-autosync status` already has its message: none is offered again.
    assert not zsh.complete("dvcs-autosync", "status", "") & messages
    # pause takes a duration, whichever way it is typed
    assert zsh.complete("dvcs-autosync", "pause", "") == set(generate.DURATIONS)
    assert zsh.complete("autosync-notify", "pause", "") == set(generate.DURATIONS)
