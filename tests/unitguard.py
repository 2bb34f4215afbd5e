"""The unit tier's guard: a test in tests/unit/ that starts a program of ours fails.
(A module of its own, not tests/unit/conftest.py: its test imports it, and no test imports a
conftest.py (tests/unit/test_test_layout.py); tests/conftest.py imports its hooks.)

A unit test calls the code; a test that needs a program of ours running (the launchers
of bin/, an installed dvcs-autosync or autosync-*, `python -m autosync...`, a script
that imports autosync) belongs to the middle tier (tests/integration/) or to tests/e2e/.
Programs that are not ours (git, hg, ssh-keygen, sh, a Python of the test's own) stay
allowed. subprocess.Popen (so also subprocess.run and friends) is watched for the test's
duration only (its fixtures' setup and teardown included); a start of ours is refused and
the test fails, naming the command.

The tier's time is held by a budget: a unit test (its fixtures included) may use at most
BUDGET seconds of CPU, its own and that of the programs it waited for (git's). CPU, not the
clock: a loaded machine stretches the clock, not the work, so the verdict stays."""
import os
import re
import resource
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
# Seconds of CPU a unit test may use in its setup or its call (the heaviest take 3.5 s);
# more is a middle-tier test, or a test to split. The whole tier may use TIER_BUDGET (it
# used 40 s: about 30 s on two cores).
BUDGET = 6.0
TIER_BUDGET = 75.0


def cpu_seconds():
    """CPU used so far by this process and the children it waited for."""
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


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
                              "in tests/integration/ or tests/e2e/" % (item.nodeid, reason, args))
        return original(self, args, *rest, **options)

    del STARTED[:]
    subprocess.Popen.__init__ = guarded
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = original
        del STARTED[:]


def within_budget(item, phase, began):
    """Fail a unit test's phase (its fixtures' setup, or the test) that used more than
    the budget; note what it used for the tier's sum (the report carries it, also from
    a pytest-xdist worker)."""
    if not str(item.fspath).startswith(UNIT):
        return
    used = cpu_seconds() - began
    item.user_properties.append(("cpu", used))
    if used > BUDGET:
        pytest.fail("unit test %s used %.1f s of CPU in its %s, more than the tier's %.0f s a "
                    "test: split it, or move it out of tests/unit/" % (item.nodeid, used, phase,
                                                                   BUDGET), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    began = cpu_seconds()
    result = yield
    within_budget(item, "setup", began)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A unit test whose code swallowed the refusal fails all the same; one over the
    budget fails too."""
    began = cpu_seconds()
    result = yield
    within_budget(item, "call", began)
    if STARTED:
        pytest.fail("unit test %s started a program of ours (%s): %r; it belongs in "
                    "tests/integration/ or tests/e2e/" % ((item.nodeid,) + STARTED[0]),
                    pytrace=False)
    return result


# The unit tier's CPU so far, summed where the reports arrive (the controller of a
# pytest-xdist run, or the only process).
TIER = []


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        TIER.extend(used for name, used in report.user_properties if name == "cpu")


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return  # a worker's share: the controller sums them all
    used = sum(TIER)
    if used > TIER_BUDGET:
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            "the unit tier used %.0f s of CPU, more than its budget of %.0f s "
            "(tests/unitguard.py): make the heaviest tests lighter, or move them out of "
            "tests/unit/" % (used, TIER_BUDGET), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
