"""The unit tier's guard: a test in tests/unit/ that starts a program of ours fails.
(Here, not in tests/unit/conftest.py: the tests import tests/conftest.py as `conftest`, which
a second conftest.py would shadow; tests/conftest.py imports its hooks.)

A unit test calls the code; a test that needs a program of ours running (the launchers
of bin/, an installed dvcs-autosync or autosync-*, `python -m autosync...`, a script
that imports autosync) belongs to the middle tier (the flat tests/*.py) or to tests/e2e/.
Programs that are not ours (git, hg, ssh-keygen, sh, a Python of the test's own) stay
allowed. subprocess.Popen (so also subprocess.run and friends) is watched for the test's
duration only (its fixtures' setup and teardown included); a start of ours is refused and
the test fails, naming the command."""
import os
import re
import shlex
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin") + os.sep
UNIT = os.path.join(ROOT, "tests", "unit") + os.sep
OURS = re.compile(r"^(dvcs-autosync|autosync-(committer|watcher|xmpp|notify|sshlink|remote"
                  r"|hgmerge|desktop|tray|web))$")
IMPORTS = re.compile(rb"(^|[;\s])(import|from)\s+autosync\b", re.M)
SHELLS = {"sh", "bash", "dash", "zsh"}


class StartedOurs(AssertionError):
    """A unit test started a program of ours."""


def _script_imports_autosync(path, shebang=True):
    """Whether the file at `path` is a script (with a #! line unless `shebang` is False: a
    Python's own argument) that imports autosync."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return (head.startswith(b"#!") or not shebang) and bool(IMPORTS.search(head))


def ours(argv, env=None):
    """The reason `argv` (as given to Popen: a list, or a string) is a program of ours, or
    None. `env`: the environment it would run with (its PATH finds argv[0])."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    words = [os.fsdecode(word) for word in argv]
    if not words:
        return None
    if len(words) == 1 and " " in words[0]:  # shell=True, or a command line as one string
        try:
            words = shlex.split(words[0])
        except ValueError:
            words = words[0].split()
        if not words:
            return None
    path = (env or os.environ).get("PATH", os.defpath)
    program = os.path.basename(words[0])
    if OURS.match(program):
        return "runs %s" % program
    for word in words:
        if os.path.isabs(word) and os.path.abspath(word).startswith(BIN):
            return "runs the launcher %s" % word
    flags = [index for index, word in enumerate(words[1:-1], 1)
             if re.match(r"^-[a-z]*c[a-z]*$", word)]  # -c, -lc, -ec
    if program in SHELLS and flags:
        code = words[flags[0] + 1]  # the words after it are $0, $1, ...
        try:
            tokens = shlex.split(code)
        except ValueError:
            tokens = code.split()
        for index, token in enumerate(tokens):
            if OURS.match(os.path.basename(token)):
                return "runs %s from a shell" % os.path.basename(token)
            following = "".join(tokens[index + 1:index + 2])
            if token == "-m" and re.match(r"^autosync(\.|$)", following):
                return "runs python -m %s from a shell" % tokens[index + 1]
    if program.startswith("python"):
        options = words[1:]
        for index, word in enumerate(options):
            if word == "-m" and index + 1 < len(options):
                if re.match(r"^autosync(\.|$)", options[index + 1]):
                    return "runs python -m %s" % options[index + 1]
                break
            if word == "-c" and index + 1 < len(options):
                if IMPORTS.search(options[index + 1].encode()):
                    return "runs Python code that imports autosync"
                break
            if not word.startswith("-"):
                if _script_imports_autosync(word, shebang=False):
                    return "runs %s, a script that imports autosync" % word
                break
    first = words[0] if os.sep in words[0] else shutil.which(words[0], path=path)
    if first and _script_imports_autosync(first):
        return "runs %s, a script that imports autosync" % first
    return None


# The refused starts of the unit test that runs now: (reason, argv).
STARTED = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Refuse, while a test of tests/unit/ runs (its fixtures too), every start of a program
    of ours: the refusal raises in the test, and the test fails."""
    if not str(item.fspath).startswith(UNIT):
        return (yield)
    original = subprocess.Popen.__init__

    def guarded(self, args, *rest, **options):
        reason = ours(args, options.get("env"))
        if reason:
            STARTED.append((reason, args))
            raise StartedOurs("unit test %s started a program of ours (%s): %r; it belongs "
                              "in tests/*.py or tests/e2e/" % (item.nodeid, reason, args))
        return original(self, args, *rest, **options)

    del STARTED[:]
    subprocess.Popen.__init__ = guarded
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original
        del STARTED[:]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A unit test whose code swallowed the refusal fails all the same."""
    result = yield
    if STARTED:
        pytest.fail("unit test %s started a program of ours (%s): %r; it belongs in tests/*.py "
                    "or tests/e2e/" % ((item.nodeid,) + STARTED[0]), pytrace=False)
    return result
