"""autosync.commands with real processes: a shell helper that logs its argv, real git."""
import logging
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from autosync.vcs import commands
from autosync.vcs.commands import CommandFailed, Result, Template, environment, remote_said

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
    assert "\n" not in str(info.value)
    assert "git add --pathspec-from-file=- --pathspec-file-nul -- < $'x\\xff\\n'" in str(info.value)


# What git prints when a remote's pre-receive hook refuses a push (git pads `remote:` lines).
REFUSED = ("remote: quota exceeded on the sync server        \n"
           "remote: ask Sam for more room        \n"
           "To /srv/sync.git\n"
           " ! [remote rejected] main -> main (pre-receive hook declined)\n"
           "error: failed to push some refs to '/srv/sync.git'\n")


def test_a_refusal_names_the_remotes_reason_not_only_gits_last_line():
    assert remote_said(REFUSED) == ("quota exceeded on the sync server; ask Sam for more room; "
                                    "! [remote rejected] main -> main (pre-receive hook declined)")
    e = str(CommandFailed("pushcmd", "git push -q", 1, REFUSED))
    # The remote's own words and its verdict are in the one-line error (why()).
    assert "quota exceeded on the sync server" in e and "ask Sam for more room" in e
    assert "! [remote rejected] main -> main (pre-receive hook declined)" in e
    behind = " ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs\n"
    assert remote_said(behind) == "! [rejected] main -> main (fetch first)"
    # Nothing from a remote: the last line alone, as before; a remote's flood is cut short.
    assert remote_said("fatal: unable to access 'x'\n") == ""
    assert str(CommandFailed("pushcmd", "git push", 128, "fatal: unable to access 'x'\n")) \
        == "pushcmd failed (exit 128): git push: fatal: unable to access 'x'"
    flood = remote_said("".join("remote: line %d %s\n" % (i, "x" * 100) for i in range(50)))
    assert flood.startswith("line 0 ") and len(flood) <= 400 and "line 9" not in flood
    last = CommandFailed("pullcmd", "hg pull", 255, "remote: abort: repository is locked\n")
    assert "abort: repository is locked" in str(last)


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
    assert line.fill_stdin(["a b", "-x", "new\nline"])[:3] == (
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
    # 3,030 paths: the whole, then a good and a bad half on each of 12 levels; every run
    # with its paths on stdin, the one that fails alone too.
    assert all(argv == ["git", "add", "--pathspec-from-file=-", "--pathspec-file-nul", "-A", "--"]
               for argv in spawned) and len(spawned) <= 1 + 2 * 12
    assert_nothing_ran(tmp_path)


def test_a_git_without_pathspec_from_file_gets_arguments(helper, work, tmp_path):
    fake = tmp_path / "bin" / "git"   # says what git before 2.26 says to the option
    fake.write_text("#!/bin/sh\ncase \"$*\" in *--pathspec-from-file*) echo "
                    "\"error: unknown option \\`pathspec-from-file=-'\"; exit 129;; esac\n"
                    f"exec {helper.cmd} \"$@\"\n")
    fake.chmod(0o755)
    t = Template("addcmd", f"{fake} add -- %s")
    assert t.run_many(["a", "b"], cwd=work) == [] and not t.lines[0].private
    assert helper.take() == ([b"add", b"--", b"a", b"b"], 1)
    t = Template("movecmd", f"{fake} rm -- %s\n{fake} add -- %s")   # one path per line
    t.run("a", "b", cwd=work)
    assert helper.take() == ([b"rm", b"--", b"a", b"add", b"--", b"b"], 2)


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


# -- arguments on stdin, off the command line (every local user reads /proc/PID/cmdline) ---

@pytest.mark.parametrize("text, kind", [
    ("git add -A -- %s", "pathspec"),
    ("git rm %s", "pathspec"),
    ("git commit -q -m %s", "message"),
    ("git commit -m %s", "message"),
    ("git commit -q --amend --only -m %s", "message"),
    ("git commit -m \"Autosync: %s\"", "message"),
    ("git commit -m'%s'", "message"),
    ("git commit --message=%s", "message"),
    ("git commit --message %s", "message"),
    ("git commit -qam %s", "message"),
    ("hg commit -q -m %s", "message"),
    ("hg commit -q --amend -X path:. -m %s", "message"),
    ("git log -z '--format=%H %at %an%n%B' -- %s", "log"),
    ("git ls-tree -r -z %s -- %s", "ls-tree"),
    ("git cat-file --filters %s:./%s", "cat-file"),
    ("hg add -q -- %s", "hglist"),
    ("hg cat -r %s -- %s", "hglist"),
    # forms that cannot take it on stdin keep it an argument
    ("git commit -m %s && true", None),
    ("hg commit -q --amend -X 'glob:**' -m %s", None),   # `*`: a shell line
    ("git commit -m x -m %s", None),
    ("git commit -F msg -m %s", None),
    ("git commit -m %s -- %s", None),
    ("git log -- %s x", None),
    ("git ls-tree -r %s -- %s", None),
    ("git cat-file -p %s:./%s", None),
    ("hg rename -q --after -- %s %s", None),
    ("svn commit -m %s", None),
])
def test_private_forms(text, kind):
    line = Template("cmd", text).lines[0]
    assert line.private == kind


FAKE = """#!/bin/sh
# Logs its arguments and its standard input, NUL-terminated, like argvlog.
printf '%s\\0' "$@" >> "$0.log"
cat >> "$0.stdin"
"""


@pytest.fixture
def fake(tmp_path):
    """fake(name) -> (path of a program `name` that logs argv and stdin, take())."""
    (tmp_path / "bin").mkdir(exist_ok=True)

    def make(name):
        path = tmp_path / "bin" / name
        path.write_text(FAKE)
        path.chmod(0o755)

        def take():
            argv = Path(f"{path}.log").read_bytes().split(b"\0")[:-1]
            data = Path(f"{path}.stdin").read_bytes()
            Path(f"{path}.log").unlink()
            Path(f"{path}.stdin").unlink()
            return argv, data
        return shlex.quote(str(path)), take
    return make


@pytest.mark.parametrize("text, argv, data", [
    ("commit -q -m %s", [b"commit", b"-q", b"-F", b"-"], "{}"),
    ("commit -m \"Autosync: %s\" --no-verify", [b"commit", b"-F", b"-", b"--no-verify"],
     "Autosync: {}"),
    ("commit --message=%s", [b"commit", b"-F", b"-"], "{}"),
    ("commit -qam %s", [b"commit", b"-qa", b"-F", b"-"], "{}"),
    ("commit -q --amend --only -m%s", [b"commit", b"-q", b"--amend", b"--only", b"-F", b"-"],
     "{}"),
])
def test_a_commit_message_goes_on_stdin(text, argv, data, fake, work, tmp_path):
    git_path, take = fake("git")
    message = "autosync on pc: 1 added\n\nadded: secret $(touch pwned) 'q' \"q\"\n-x"
    Template("commitcmd", f"{git_path} {text}").run(message, cwd=work)
    assert take() == (argv, data.format(message).encode())
    assert_nothing_ran(tmp_path)


def test_hg_commit_message_and_paths_go_on_stdin(fake, work):
    hg, take = fake("hg")
    Template("commitcmd", f"{hg} commit -q -m %s").run("added: a b\nc", cwd=work)
    assert take() == ([b"commit", b"-q", b"-l", b"-"], b"added: a b\nc")
    assert Template("addcmd", f"{hg} add -q -- %s").run_many(["a b", "-x", "c\nd"], cwd=work) == []
    assert take() == ([b"add", b"-q", b"--", b"listfile0:/dev/stdin"],
                      b"path:a b\0path:-x\0path:c\nd\0")
    Template("restorecmd", f"{hg} cat -r %s -- %s").run("abc123", "secret f", cwd=work)
    assert take() == ([b"cat", b"-r", b"abc123", b"--", b"listfile0:/dev/stdin"],
                      b"path:secret f\0")
    Template("movecmd", f"{hg} rename -q --after -- %s %s").run("re:a", "./b", cwd=work)
    assert take() == ([b"rename", b"-q", b"--after", b"--", b"./re:a", b"./b"], b"")


def test_real_git_commit_and_amend_read_the_message_from_stdin(repo, monkeypatch):
    spawned = []
    real = commands._spawn
    monkeypatch.setattr(commands, "_spawn", lambda argv, *a: spawned.append(argv) or real(argv, *a))
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    message = "autosync on pc: 1 added\n\n#not a comment\nadded: secret-salary.txt"
    Template("commitcmd", "git commit -q -m %s").run(message, cwd=repo)
    assert git(repo, "log", "-1", "--format=%B").rstrip(b"\n") == fsbytes(message)
    Template("amendcmd", "git commit -q --amend --only -m %s").run("Tax " + message, cwd=repo)
    assert git(repo, "log", "-1", "--format=%B").rstrip(b"\n") == fsbytes("Tax " + message)
    assert git(repo, "rev-list", "--count", "HEAD") == b"1\n"
    assert not [a for argv in spawned for a in argv if "secret" in a]


@pytest.fixture
def history_repo(repo):
    """Two commits: odd names, a folder, a file with a filter (CRLF on checkout)."""
    names = ["secret salary.txt", " lead", "-dash", "new\nline", "dir/a.txt", "dir/sub/b.txt",
             "dirx.txt", "crlf.txt"]
    (repo / "dir" / "sub").mkdir(parents=True)
    (repo / ".gitattributes").write_text("crlf.txt text eol=crlf\n")
    for n in names:
        (repo / n).write_bytes(b"one\ntwo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "dir" / "a.txt").write_text("changed\n")
    git(repo, "commit", "-q", "-am", "second")
    return repo, names


def test_log_list_and_restore_same_as_on_the_command_line(history_repo, monkeypatch):
    repo, names = history_repo
    spawned = []
    real = commands._spawn
    monkeypatch.setattr(commands, "_spawn", lambda argv, *a: spawned.append(argv) or real(argv, *a))
    log = Template("logcmd", "git log -z '--format=%H %at %an%n%B' -- %s")
    ls = Template("listcmd", "git ls-tree -r -z %s -- %s")
    cat = Template("restorecmd", "git cat-file --filters %s:./%s")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip().decode()
    for cwd, rel in [(repo, n) for n in names + ["dir", "dir/sub", ".", "gone"]] + [
            (repo / "dir", "a.txt"), (repo / "dir", "sub"), (repo / "dir", ".")]:
        assert log.output(rel, cwd=cwd) == os.fsdecode(git(
            cwd, "log", "-z", "--format=%H %at %an%n%B", "--", rel)).rstrip("\n"), rel
        assert ls.output_bytes(first, rel, cwd=cwd) == git(
            cwd, "ls-tree", "-r", "-z", first, "--", rel), rel
        if (cwd / rel).is_file():
            assert cat.output_bytes(first, rel, cwd=cwd) == git(
                cwd, "cat-file", "--filters", f"{first}:./{rel}"), rel
    assert cat.output_bytes(first, "crlf.txt", cwd=repo) == b"one\r\ntwo\r\n"
    assert cat.output_bytes("HEAD", "dir/a.txt", cwd=repo) == b"changed\n"
    # Names went on stdin, except the one with a newline for git log (read by lines).
    assert [a for argv in spawned for a in argv if any(n in a for n in ("secret", "lead",
                                                                          "dash", "a.txt"))] == []
    for rel, why in [("gone", "does not exist"), ("dir", "is not a file")]:
        with pytest.raises(CommandFailed) as info:
            cat.output_bytes(first, rel, cwd=repo)
        assert why in str(info.value) and info.value.returncode == 128


# -- a failure says why, in git's own words ---------------------------------------------

def test_why_keeps_the_lines_that_say_why():
    push = ("To /srv/remote.git\n ! [rejected]        main -> main (fetch first)\n"
            "error: failed to push some refs to '/srv/remote.git'\n"
            "hint: Updates were rejected because the remote contains work that you do\n"
            "hint: not have locally.\n")
    assert commands.why(push) == [
        "! [rejected]        main -> main (fetch first)",
        "error: failed to push some refs to '/srv/remote.git'",
        "hint: Updates were rejected because the remote contains work that you do not have "
        "locally."]
    remote = ("remote: error: refusing to update checked out branch\nremote: more\n"
              " ! [remote rejected] main -> main (branch is currently checked out)\n")
    assert commands.why(remote) == ["remote: error: refusing to update checked out branch",
                                    "remote: more",
                                    "! [remote rejected] main -> main (branch is currently checked out)"]
    assert commands.why("some\nlast words\n\n") == ["last words"]
    assert commands.why("") == []
    many = "".join(f"error: {i}\n" for i in range(20))
    assert commands.why(many) == [f"error: {i}" for i in range(5)] + ["error: 19"]
    assert commands.why("fatal: " + "x" * 1000)[0].endswith("...")


def test_a_failed_git_commit_names_the_identity_to_set(repo, monkeypatch):
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
                "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(repo.parent))   # no ~/.gitconfig
    git(repo, "config", "user.useConfigOnly", "true")   # no guess from the host name
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    with pytest.raises(CommandFailed) as info:
        Template("commitcmd", "git commit -q -m %s").run("m", cwd=repo)
    said = str(info.value)
    assert "\n" not in said
    assert 'git config --global user.email "you@example.com"' in said
    assert "fatal: no email was given and auto-detection is disabled" in said


def test_a_refused_push_keeps_git_s_reasons(tmp_path, repo):
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'quota exceeded for this repository'\nexit 1\n")
    hook.chmod(0o755)
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    git(repo, "commit", "-q", "-m", "f")
    with pytest.raises(CommandFailed) as info:
        Template("pushcmd", f"git push -q {shlex.quote(str(bare))} HEAD:main").run(cwd=repo)
    assert info.value.why == ["remote: quota exceeded for this repository",
                              "! [remote rejected] HEAD -> main (pre-receive hook declined)",
                              "error: failed to push some refs to '%s'" % bare]
    assert "(exit 1): git push -q %s HEAD:main: remote: quota exceeded for this repository | " \
           "! [remote rejected]" % bare in str(info.value)


def test_the_daemon_s_commands_find_our_programs_on_a_short_path(tmp_path, monkeypatch):
    """A git hook run by the daemon's push calls autosync-notify: its folder (a venv's
    bin/) ends the commands' PATH when PATH lacks it, and is not added twice."""
    bin_ = tmp_path / "venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "autosync-notify").write_text("#!/bin/sh\n")
    (bin_ / "autosync-notify").chmod(0o755)
    monkeypatch.setattr(commands.sys, "executable", str(bin_ / "python3"))
    commands.our_programs.cache_clear()  # looked for once a process: again, here
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert commands.environment()["PATH"] == "/usr/bin:/bin:" + str(bin_)
    monkeypatch.setenv("PATH", "%s:/usr/bin" % bin_)
    assert commands.environment()["PATH"] == "%s:/usr/bin" % bin_
    (bin_ / "autosync-notify").unlink()  # not ours to name: PATH as it was
    monkeypatch.setattr(commands.sysconfig, "get_path", lambda *a: str(tmp_path / "none"))
    commands.our_programs.cache_clear()
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert commands.environment()["PATH"] == "/usr/bin:/bin"
    commands.our_programs.cache_clear()  # the next test's process-wide answer, not ours


def test_a_stop_between_a_command_s_spawn_and_its_listing_still_ends_it():
    """The window a loaded machine opens: the command was spawned (its child may already
    have said it started) and the stop came before the parent listed it. A Cancel for
    what began before the stop only (later=False, the push's) ends it all the same,
    with SIGTERM: before, it ran on (here until its timeout's SIGKILL)."""
    import signal

    class StopInTheWindow(commands.Cancel):
        def started(self, pid, *token):
            if not self.cancelled:
                self.cancel()  # the stop lands exactly here, before the listing
            super().started(pid, *token)

    cancel = StopInTheWindow(later=False)
    with pytest.raises(CommandFailed) as failed:
        Template("pushcmd", "sleep 60").run(cwd="/", cancel=cancel, timeout=10)
    assert failed.value.returncode == -signal.SIGTERM
    # One begun after the stop still runs (the push of the stop's last commit).
    Template("pushcmd", "true").run(cwd="/", cancel=cancel)  # no CommandFailed
