"""The history's size in `status` (issue 21, item 3): measured with git count-objects,
here and on a remote that is a path on this machine, in the committer's idle time."""
import os
import time

import pytest

from autosync.vcs import sizes
from base import Machine, git, wait_until
from helpers import ThinRemote, thin_machine


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_human_sizes():
    assert sizes.human(512) == "512 bytes"
    assert sizes.human(12345) == "12.3 kB"
    assert sizes.human(4_500_000) == "4.5 MB"
    assert sizes.human(1_200_000_000) == "1.2 GB"


def test_the_status_line():
    assert sizes.text(None) == "not measured yet"
    assert sizes.text({"here": 2_000_000, "thin": False, "remote": 9_000_000}) == \
        "2.0 MB here, 9.0 MB on the remote"
    assert sizes.text({"here": 2_000_000, "thin": True, "remote": None,
                       "remote_unknown": "not measured over the network"}) == \
        "2.0 MB here (thin: current files only, old versions on the remote), on the remote " \
        "unknown (not measured over the network)"


def test_only_a_remote_on_this_machine_is_measured(tmp_path):
    assert sizes.remote_path("server:sync.git", str(tmp_path)) is None
    assert sizes.remote_path("ssh://server/sync.git", str(tmp_path)) is None
    assert sizes.remote_path("https://example.org/sync.git", str(tmp_path)) is None
    assert sizes.remote_path(str(tmp_path), "/") == str(tmp_path)
    assert sizes.remote_path("file://%s" % tmp_path, "/") == str(tmp_path)
    assert sizes.remote_path(str(tmp_path / "gone"), "/") is None


def test_a_thin_machine_holds_less_than_a_full_one(tmp_path):
    remote = ThinRemote(tmp_path / "remote.git")
    seed = remote.path + ".seed"
    for n in range(5):  # five versions of a file of 200 kB that does not compress
        with open(os.path.join(seed, "big.bin"), "wb") as f:
            f.write(os.urandom(200_000))
        git("add", "-A", cwd=seed)
        git("commit", "-q", "-m", "big %d" % n, cwd=seed)
    git("push", "-q", "origin", "HEAD:main", cwd=seed)
    full = Machine(tmp_path, "full", remote)
    thin = thin_machine(tmp_path, remote)
    f, t = sizes.measure(full.path), sizes.measure(thin.path)
    assert not f["thin"] and t["thin"]
    assert f["here"] > 1_000_000 and 200_000 < t["here"] < 400_000, (f, t)
    assert f["remote"] == t["remote"] > 1_000_000
    git("remote", "set-url", "origin", "server:sync.git", cwd=full.path)
    f = sizes.measure(full.path)
    assert f["remote"] is None and f["remote_unknown"] == "not measured over the network"
    assert sizes.measure(str(tmp_path)) is None  # no repository: nothing


@pytest.mark.e2e
def test_status_shows_the_history_size_and_it_follows_commits(tmp_path, remote):
    a = Machine(tmp_path, "a", remote, maintenanceinterval="1",
                dvcs={"maintenancecmd": "true"})
    try:
        a.start()
        first = wait_until(lambda: a.status().get("history"), 30, 0.2, "a first measurement")
        # Idle is idle: the committer's worker does not spin on a deadline it passed.
        committer = a.children()["committer"]
        before = cpu_seconds(committer)
        time.sleep(2)
        assert cpu_seconds(committer) - before < 0.3
        assert first["remote"] and first["here"] and not first["thin"]
        text = a.notify("status").stdout
        assert "history:     %s here, %s on the remote" % (
            sizes.human(first["here"]), sizes.human(first["remote"])) in text
        with open(os.path.join(a.path, "big.bin"), "wb") as f:
            f.write(os.urandom(300_000))
        wait_until(lambda: a.settled(remote), 30, 0.2, "the commit pushed")
        # Measured again after the work (here: after the maintenance that follows it).
        grown = wait_until(lambda: (a.status().get("history") or {}).get("here", 0)
                           > first["here"] + 250_000 and a.status()["history"], 30, 0.2,
                           "the size to follow the commit")
        assert grown["remote"] > first["remote"] + 250_000
    finally:
        a.stop()
