"""Shared fixtures: a private HOME, a bare git remote on disk, and machines
(clones with a config file) on which the real suite runs. What they are made of is in
base.py; tests import from there (and the other support modules), never from here."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the support modules (base.py, helpers.py, prosody.py, ...) by name
from base import (BURNER_LIMIT, ORIGINAL_COMMANDS, ROOT, STARTED, Machine,  # noqa: E402
                  OrdinaryUser, Remote, git, hg, remove_private_tmp)
from run_order import E2E, run_order  # noqa: E402
# the unit tier's guard (autouse): a test of tests/unit/ starts no program of ours
from unitguard import (pytest_runtest_call, pytest_runtest_logreport,  # noqa: E402,F401
                       pytest_runtest_protocol, pytest_runtest_setup, pytest_sessionfinish)


@pytest.fixture(autouse=True)
def no_daemon_left():
    yield
    while STARTED:
        STARTED.pop().stop()


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    """Each test gets its own HOME and git identity; the user's settings never leak in."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    # Never the machine's own system bus: its resumes and networks are not the test's.
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=%s" % (tmp_path / "no-system-bus"))
    # An identity and nothing else: every other setting is the user's, and git's defaults
    # (no pull.rebase, no pull.ff) are what a new user has.
    for key, value in (("user.name", "Test"), ("user.email", "test@example.org")):
        git("config", "--global", key, value)
    yield home
    remove_private_tmp(str(home))


@pytest.fixture(params=["new", "original"])
def commands(request):
    """Run a test with the suite's own command strings and once with the original's."""
    return {} if request.param == "new" else dict(ORIGINAL_COMMANDS)


@pytest.fixture
def nobody(tmp_path):
    """An OrdinaryUser; its folder is removed afterwards."""
    user = OrdinaryUser()
    yield user
    user.remove()


@pytest.fixture
def remote(tmp_path):
    return Remote(tmp_path / "remote.git")


@pytest.fixture
def machines(tmp_path, remote):
    """machines("a", "b", readfrequency="0.5", dvcs={...}) -> started Machine objects;
    stopped afterwards."""
    made = []

    def make(*names, start=True, dvcs=None, **settings):
        new = [Machine(tmp_path, name, remote, dvcs, **settings) for name in names]
        made.extend(new)
        for m in new:
            if start:
                m.start()
        return new if len(new) > 1 else new[0]

    yield make
    for m in made:
        m.stop()


@pytest.fixture
def cpu_burners():
    """burn(n) starts n busy loops (a loaded machine, as races need); each is killed
    after the test, and ends on its own after BURNER_LIMIT seconds in any case."""
    started = []

    def burn(n):
        code = "import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end: pass" \
            % BURNER_LIMIT
        for _ in range(n):
            started.append(subprocess.Popen([sys.executable, "-c", code],
                                            stdin=subprocess.DEVNULL))
        return [p.pid for p in started]

    yield burn
    for proc in started:
        proc.kill()
        proc.wait()


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: in tests/e2e/: the real programs on real repositories")
    config.addinivalue_line("markers", "slow: left out of tests/run.sh (tests/run.sh -m slow runs them)")


def pytest_collection_modifyitems(config, items):
    # End-to-end by folder, never by hand: `-m e2e` / `-m "not e2e"` select tests/e2e/.
    for item in items:
        if str(item.fspath).startswith(E2E):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=run_order)  # stable: a file's tests stay in their order
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = [item for pile in range(workers) for item in items[pile::workers]]


@pytest.fixture
def spawn():
    """start(argv, **popen_options) -> a process with stdin and stdout piped; every
    process started is ended after the test."""
    started = []

    def start(argv, **options):
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **options)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def central(tmp_path, private_home, monkeypatch):
    # The example's pullcmd calls autosync-hgmerge: the checkout's launcher.
    monkeypatch.setenv("PATH", os.path.join(ROOT, "bin") + os.pathsep + os.environ["PATH"])
    with open(os.path.join(str(private_home), ".hgrc"), "w") as f:
        f.write("[ui]\nusername = Test <test@example.org>\n")
    path = str(tmp_path / "central")
    hg("init", path)
    seed = str(tmp_path / "seed")
    hg("clone", "-q", path, seed)
    with open(os.path.join(seed, "README"), "w") as f:
        f.write("synced folder\n")
    hg("add", "-q", "README", cwd=seed)
    hg("commit", "-q", "-m", "first", cwd=seed)
    hg("push", "-q", cwd=seed)
    return path


@pytest.fixture
def committer(tmp_path):
    from autosync.committer.committer import Committer
    from fakes import FakeRepository, FakeServer, config
    c = Committer(config(tmp_path, pushdelay=0.0, pullinterval=0.0, syncmethod="none"),
                  server=FakeServer, repository=FakeRepository)
    return c
