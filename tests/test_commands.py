"""autosync.commands with real processes: a shell helper that logs its argv, real git."""
import logging
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from autosync import commands
from autosync.commands import CommandFailed, Result, Template, environment, remote_said

# Each must reach the program as exactly one argument, byte for byte, and never run.
HOSTILE = [
    "$(touch pwned)", "`touch pwned`", "a;b", "*", "?", "-rf", "--exec=x", "with space",
    'quote"s', "it's", "new\nline", os.fsdecode(b"bad\xffname"), "~", "~root", "%s",
    "${1}", '"$@"', "'\"${1}\"'", " lead", "trail ", "tab\there", "back\\slash", "$HOME",
    "!", "-", "--", "a|touch pwned", "> pwned", "\u00e9t\u00e9",
]
ARGS = HOSTILE + [""]   # the empty string is an argument too, but not a file name

HELPER = """#!/bin/sh
# Logs its arguments NUL-terminated; refuses (exit 1) when one of them holds "FAIL".
for a in "$@"; do case "$a" in *FAIL*) echo "cannot take: $a"; exit 1;; esac; done
echo run >> "$0.runs"
printf '%s\\0' "$@" >> "$0.log"
"""


class Helper:
    def __init__(self, tmp):
        (tmp / "bin").mkdir()
        self.path = tmp / "bin" / "argvlog"
        self.path.write_text(HELPER)
        self.path.chmod(0o755)
        self.cmd = shlex.quote(str(self.path))

    def take(self):
        """-> (arguments received as bytes, number of runs); then forget them."""
        log, runs = Path(f"{self.path}.log"), Path(f"{self.path}.runs")
        args = log.read_bytes().split(b"\0")[:-1] if log.exists() else []
        n = len(runs.read_text().splitlines()) if runs.exists() else 0
        for f in (log, runs):
            f.unlink(missing_ok=True)
        return args, n


@pytest.fixture
def helper(tmp_path):
    return Helper(tmp_path)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


@pytest.fixture
def git_env(monkeypatch):
    """A private git identity and no user/system config, for our commands and the test's."""
    for key, value in dict(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
                           GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.org",
                           GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.org").items():
        monkeypatch.setenv(key, value)


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=environment()).stdout


@pytest.fixture
def repo(tmp_path, git_env):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    return repo


def assert_nothing_ran(tmp_path):
    assert not list(tmp_path.rglob("pwned")) and not Path("pwned").exists()


def fsbytes(s):
    return os.fsencode(s)


# -- parsing -------------------------------------------------------------------

@pytest.mark.parametrize("text, nargs, shell, many", [
    ("git add %s", 1, [False], True),
    ("git add -- %s", 1, [False], True),
    ("git commit -m \"Autosync: %s\"", 1, [False], False),
    ("git commit -m'%s'", 1, [False], False),
    ("git status | grep -iq \"nothing to commit\"", 0, [True], False),
    ("git rm %s\n  git add %s", 2, [False, False], False),
    ("git add %s && true", 1, [True], True),
    ("git add \"%s\" ; true", 1, [True], False),
    ("git add x%s ; true", 1, [True], False),
    ("FOO=1 git add %s", 1, [True], True),
    ("git push", 0, [False], False),
    ("git add %s\n\ngit status >/dev/null", 1, [False, True], True),
])
def test_parse(text, nargs, shell, many):
    t = Template("cmd", text)
    assert (t.nargs, [l.shell for l in t.lines], t.many, t.empty) == (nargs, shell, many, False)


def test_empty_template_does_nothing(work):
    t = Template("startupcmd", "  \n\n ")
    assert t.empty and t.nargs == 0
    assert t.run(cwd=work) == Result(0, "")
    assert t.run_many(["a", "b"], cwd=work) == []


def test_wrong_number_of_arguments(work):
    with pytest.raises(ValueError):
        Template("movecmd", "git rm %s\ngit add %s").run("only one", cwd=work)
    with pytest.raises(ValueError):
        Template("pushcmd", "git push").run("extra", cwd=work)
    with pytest.raises(ValueError):
        Template("addcmd", "git add -A").run_many(["a"], cwd=work)
    with pytest.raises(ValueError):
        Template("addcmd", "git add 'unbalanced %s")


# -- hostile arguments ---------------------------------------------------------

FORMS = {   # template (helper at {h}) -> what the helper receives for argument a
    "plain": ("{h} %s", lambda a: [a]),
    "plain in a token": ("{h} -m\"Autosync: %s\" x%sy", lambda a: ["-mAutosync: " + a, "x" + a + "y"]),
    "shell word": ("{h} %s && true", lambda a: [a]),
    "shell in double quotes": ("{h} \"pre %s post\" | cat", lambda a: ["pre " + a + " post"]),
    "shell in single quotes": ("{h} 'pre %s post' ; true", lambda a: ["pre " + a + " post"]),
    "shell glued": ("{h} x%s\"y\"%s ; true", lambda a: ["x" + a + "y" + a]),
    "shell after a backslash": ("{h} \\%s\\\\%s ; true", lambda a: [a + "\\" + a]),
}


@pytest.mark.parametrize("form", FORMS)
def test_hostile_arguments_arrive_whole(form, helper, work, tmp_path):
    text, expect = FORMS[form]
    t = Template("cmd", text.format(h=helper.cmd))
    for arg in ARGS:
        t.run(*[arg] * t.nargs, cwd=work)
        assert helper.take() == ([fsbytes(x) for x in expect(arg)], 1), repr(arg)
    assert_nothing_ran(tmp_path)


@pytest.mark.parametrize("text", ["{h} %s", "{h} %s && true", "{h} --\t%s|cat"])
def test_run_many_hostile_in_one_run(text, helper, work, tmp_path):
    t = Template("addcmd", text.format(h=helper.cmd))
    assert t.run_many(ARGS, cwd=work) == []
    args, runs = helper.take()
    assert [a for a in args if a != b"--"] == [fsbytes(a) for a in ARGS if a != "--"]
    assert runs == 1
    assert_nothing_ran(tmp_path)


def test_git_add_and_commit_hostile_names(repo, tmp_path):
    (repo / "other").write_text("not to be added")   # `*` must not match it
    for name in HOSTILE:
        with open(os.path.join(os.fsencode(repo), fsbytes(name)), "wb") as f:
            f.write(fsbytes(name))
    assert Template("addcmd", "git add -- %s").run_many(HOSTILE, cwd=repo) == []
    message = "Autosync: " + " ".join(HOSTILE[:10])
    Template("commitcmd", "git commit -q -m \"%s\"").run(message, cwd=repo)
    listed = git(repo, "ls-files", "-z").split(b"\0")[:-1]
    assert sorted(listed) == sorted(fsbytes(n) for n in HOSTILE)
    assert git(repo, "log", "-1", "--format=%B").rstrip(b"\n") == fsbytes(message)
    assert_nothing_ran(tmp_path)


def test_git_commit_message_through_a_shell_line(repo, tmp_path):
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    message = "Autosync: $(touch pwned) `touch pwned` it's \"q\" a;b"
    Template("commitcmd", "git commit -q -m \"%s\" && git log -1 --format=%%B").run(message, cwd=repo)
    assert git(repo, "log", "-1", "--format=%B").rstrip(b"\n") == fsbytes(message)
    assert_nothing_ran(tmp_path)


# -- several lines -------------------------------------------------------------

def test_placeholders_fill_in_order_across_lines(helper, work):
    Template("movecmd", f"{helper.cmd} rm %s\n  {helper.cmd} add %s").run("src", "dst", cwd=work)
    assert helper.take() == ([b"rm", b"src", b"add", b"dst"], 2)


def test_first_failure_stops_the_rest(helper, work):
    t = Template("pullcmd", f"{helper.cmd} one\nsh -c 'echo boom; exit 3'\n{helper.cmd} three")
    with pytest.raises(CommandFailed) as info:
        t.run(cwd=work)
    e = info.value
    assert (e.name, e.command, e.returncode, e.output) == ("pullcmd", "sh -c 'echo boom; exit 3'", 3, "boom\n")
    assert str(e) == "pullcmd failed (exit 3): sh -c 'echo boom; exit 3': boom"
    assert helper.take() == ([b"one"], 1)
    result = t.run(cwd=work, check=False)
    assert result == Result(3, "boom\n") and helper.take() == ([b"one"], 1)


def test_failure_message_is_one_line(helper, work):
    t = Template("addcmd", f"{helper.cmd} -- %s; printf 'a\\nb\\n\\nlast words\\n\\n'; exit 2")
    with pytest.raises(CommandFailed) as info:
        t.run("new\nline", cwd=work)
    e = info.value
    assert e.output == "a\nb\n\nlast words\n\n" and e.returncode == 2
    assert "\n" not in str(e) and "\n" not in e.command
    assert str(e) == f"addcmd failed (exit 2): {helper.cmd} -- $'new\\nline'; " \
                     "printf 'a\\nb\\n\\nlast words\\n\\n'; exit 2: last words"
    with pytest.raises(CommandFailed) as info:
        Template("addcmd", "git add -- %s").run(os.fsdecode(b"x\xff\n"), cwd=work)
    assert "\n" not in str(info.value) and "git add -- $'x\\xff\\n'" in str(info.value)


# What git prints when a remote's pre-receive hook refuses a push (git pads `remote:` lines).
REFUSED = ("remote: quota exceeded on the sync server        \n"
           "remote: ask Sam for more room        \n"
           "To /srv/sync.git\n"
           " ! [remote rejected] main -> main (pre-receive hook declined)\n"
           "error: failed to push some refs to '/srv/sync.git'\n")


def test_a_refusal_names_the_remotes_reason_not_only_gits_last_line():
    assert remote_said(REFUSED) == ("quota exceeded on the sync server; ask Sam for more room; "
                                    "! [remote rejected] main -> main (pre-receive hook declined)")
    e = CommandFailed("pushcmd", "git push -q", 1, REFUSED)
    assert str(e) == ("pushcmd failed (exit 1): git push -q: the remote said: quota exceeded on "
                      "the sync server; ask Sam for more room; ! [remote rejected] main -> main "
                      "(pre-receive hook declined); error: failed to push some refs to "
                      "'/srv/sync.git'")
    behind = " ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs\n"
    assert remote_said(behind) == "! [rejected] main -> main (fetch first)"
    # Nothing from a remote: the last line alone, as before; a remote's flood is cut short.
    assert remote_said("fatal: unable to access 'x'\n") == ""
    assert str(CommandFailed("pushcmd", "git push", 128, "fatal: unable to access 'x'\n")) \
        == "pushcmd failed (exit 128): git push: fatal: unable to access 'x'"
    flood = remote_said("".join("remote: line %d %s\n" % (i, "x" * 100) for i in range(50)))
    assert flood.startswith("line 0 ") and len(flood) <= 400 and "line 9" not in flood
    last = CommandFailed("pullcmd", "hg pull", 255, "remote: abort: repository is locked\n")
    assert str(last) == "pullcmd failed (exit 255): hg pull: the remote said: abort: repository is locked"


def test_missing_program_is_a_failure(work):
    with pytest.raises(CommandFailed) as info:
        Template("pushcmd", "no-such-program-autosync --x").run(cwd=work)
    assert info.value.returncode == 127 and "no-such-program-autosync" in str(info.value)
    assert Template("pushcmd", "no-such-program-autosync").run(cwd=work, check=False).returncode == 127


# -- many paths ----------------------------------------------------------------

@pytest.mark.parametrize("text", ["{h} %s", "{h} %s && true"])
def test_run_many_twenty_thousand_paths(text, helper, work):
    paths = [f"folder{i % 97:03d}/{'long-name-' * 8}{i:05d}.txt" for i in range(20000)]
    assert Template("addcmd", text.format(h=helper.cmd)).run_many(paths, cwd=work) == []
    args, runs = helper.take()
    assert sorted(args) == sorted(fsbytes(p) for p in paths)
    assert 1 < runs <= 20


def test_run_many_retries_a_failed_chunk_in_halves(helper, work):
    paths = [f"p{i}" for i in range(30)]
    paths.insert(17, "FAIL")
    failed = Template("addcmd", f"{helper.cmd} %s").run_many(paths, cwd=work)
    assert [p for p, _ in failed] == ["FAIL"]
    e = failed[0][1]
    assert e.returncode == 1 and str(e) == f"addcmd failed (exit 1): {helper.cmd} FAIL: cannot take: FAIL"
    args, runs = helper.take()
    # Each good path went in once; the halves around the bad one took 5 runs, not 30.
    assert sorted(args) == sorted(fsbytes(p) for p in paths if p != "FAIL") and runs == 5


@pytest.mark.parametrize("text, argv", [
    ("git add -A -- %s", ["git", "add", "--pathspec-from-file=-", "--pathspec-file-nul", "-A",
                          "--"]),
    ("git add %s", ["git", "add", "--pathspec-from-file=-", "--pathspec-file-nul"]),
    ("/usr/bin/git rm -q --cached -- %s", ["/usr/bin/git", "rm", "--pathspec-from-file=-",
                                           "--pathspec-file-nul", "-q", "--cached", "--"]),
])
def test_git_add_and_rm_take_their_paths_on_stdin(text, argv):
    line = Template("addcmd", text).lines[0]
    assert line.stdin
    assert line.fill_stdin(["a b", "-x", "new\nline"]) == (
        argv, " ".join(argv) + " < 'a b' (and 2 more)", b"a b\0-x\0new\nline\0")


@pytest.mark.parametrize("text", ["git add %s --force", "git add %s && true", "git commit -- %s",
                                  "hg add -- %s", "git add x%s", "git -C x add %s"])
def test_other_lines_take_their_paths_as_arguments(text):
    assert not any(l.stdin for l in Template("addcmd", text).lines)


def test_git_add_from_stdin_one_process_hostile_names_literal(repo, tmp_path, monkeypatch):
    """All the paths in one git process; a bad one costs a few more, and is said as alone."""
    names = HOSTILE + [f"d/f{i:05d}" for i in range(3000)]
    (repo / "d").mkdir()
    (repo / "other").write_text("not to be added")   # `*` and `?` must not match it
    for name in names:
        with open(os.path.join(os.fsencode(repo), fsbytes(name)), "wb") as f:
            f.write(fsbytes(name))
    spawned = []
    real = commands._spawn
    monkeypatch.setattr(commands, "_spawn", lambda argv, *a: spawned.append(argv) or real(argv, *a))
    t = Template("addcmd", "git add -A -- %s")
    assert t.run_many(names + ["gone"], cwd=repo)[0][0] == "gone"   # no such file
    listed = git(repo, "ls-files", "-z").split(b"\0")[:-1]
    assert sorted(listed) == sorted(fsbytes(n) for n in names)
    assert spawned[0][:4] == ["git", "add", "--pathspec-from-file=-", "--pathspec-file-nul"]
    # 3,030 paths: the whole, then a good and a bad half on each of 12 levels, then alone.
    assert len(spawned) <= 1 + 2 * 12 + 1 and spawned[-1] == ["git", "add", "-A", "--", "gone"]
    assert_nothing_ran(tmp_path)


def test_a_git_without_pathspec_from_file_gets_arguments(helper, work, tmp_path):
    fake = tmp_path / "bin" / "git"   # says what git before 2.26 says to the option
    fake.write_text("#!/bin/sh\ncase \"$*\" in *--pathspec-from-file*) echo "
                    "\"error: unknown option \\`pathspec-from-file=-'\"; exit 129;; esac\n"
                    f"exec {helper.cmd} \"$@\"\n")
    fake.chmod(0o755)
    t = Template("addcmd", f"{fake} add -- %s")
    assert t.run_many(["a", "b"], cwd=work) == [] and not t.lines[0].stdin
    assert helper.take() == ([b"add", b"--", b"a", b"b"], 1)


@pytest.mark.parametrize("text, expect", [
    ("{h} -x%s", lambda p: [b"-x" + p]),
    ("{h} %s %s", lambda p: [p, p]),
    ("{h} \"%s\" && true", lambda p: [p]),
])
def test_run_many_one_by_one_where_a_template_cannot_take_many(text, expect, helper, work):
    paths = ["a", "b b", "FAIL", "c"]
    failed = Template("modifycmd", text.format(h=helper.cmd)).run_many(paths, cwd=work)
    assert [p for p, _ in failed] == ["FAIL"]
    args, runs = helper.take()
    assert args == [x for p in ["a", "b b", "c"] for x in expect(fsbytes(p))] and runs == 3


# -- environment, output, timeout, logging ---------------------------------------

def test_original_statuscmd_in_a_german_environment(repo, monkeypatch):
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de:en")   # would win over LC_ALL=C.UTF-8 if kept
    status = Template("statuscmd", "git status | grep -iq \"nothing to commit\"")
    assert status.run(cwd=repo, check=False).returncode == 0
    (repo / "f").write_text("x")
    assert status.run(cwd=repo, check=False).returncode == 1
    git(repo, "add", "f")
    assert status.run(cwd=repo, check=False).returncode == 1
    git(repo, "commit", "-q", "-m", "f")
    assert status.run(cwd=repo, check=False).returncode == 0


def test_environment(monkeypatch, work):
    monkeypatch.setenv("LANGUAGE", "de")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    env = environment({"EXTRA": "1"})
    assert "LANGUAGE" not in env and env["EXTRA"] == "1" and env["PATH"] == os.environ["PATH"]
    assert {k: env[k] for k in ("LC_ALL", "GIT_LITERAL_PATHSPECS", "GIT_TERMINAL_PROMPT",
                                "GIT_MERGE_AUTOEDIT", "AUTOSYNC_DAEMON")} == {
        "LC_ALL": "C.UTF-8", "GIT_LITERAL_PATHSPECS": "1", "GIT_TERMINAL_PROMPT": "0",
        "GIT_MERGE_AUTOEDIT": "no", "AUTOSYNC_DAEMON": "1"}
    shown = Template("t", "sh -c 'echo $AUTOSYNC_DAEMON $LC_ALL $EXTRA'").output(cwd=work, env={"EXTRA": "x"})
    assert shown == "1 C.UTF-8 x"


def test_stdin_is_dev_null(work):
    assert Template("t", "cat").run(cwd=work, timeout=10) == Result(0, "")


def test_output_is_last_stdout_only(work):
    t = Template("remoteurlcmd", "echo first\nsh -c 'echo out; echo err >&2; printf \"bad\\377name\\n\\n\"'")
    assert t.output(cwd=work) == "out\n" + os.fsdecode(b"bad\xffname")
    assert Template("t", "echo %s").output("x y", cwd=work) == "x y"
    with pytest.raises(CommandFailed):
        Template("t", "false").output(cwd=work)


def test_timeout_kills_the_process_group(work):
    t = Template("pushcmd", "sleep 60 & echo $! > bg.pid; sleep 60")
    start = time.monotonic()
    with pytest.raises(CommandFailed) as info:
        t.run(cwd=work, timeout=0.5)
    assert time.monotonic() - start < 10
    assert "timed out after 0.5 s" in str(info.value) and "\n" not in str(info.value)
    pid = int((work / "bg.pid").read_text())
    for _ in range(100):   # gone, or a zombie waiting for a parent that does not reap
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the background child of the timed-out command still runs")
    with pytest.raises(CommandFailed):   # check=False does not hide a timeout
        Template("t", "sleep 60").run(cwd=work, timeout=0.2, check=False)


def test_commands_are_logged_on_one_line(caplog, work):
    caplog.set_level(logging.DEBUG, logger="autosync.commands")
    Template("addcmd", "true %s").run("new\nline", cwd=work)
    assert [r.getMessage() for r in caplog.records] == ["addcmd: true $'new\\nline'"]
