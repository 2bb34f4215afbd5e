"""End-to-end: a first sync of a few thousand files says what the committer is doing and
how far, in `status` (and its --json) and in the events the tray follows, while it runs
(issue 35 item 4; core/underway.py). Each step is held by a git hook that waits for a
file the test makes: what is asserted is seen while the step is under way, not timed."""
import json
import os

from base import wait_until
from helpers import Events, settle

FILES = 3000


def gate(machine, hook):
    """A git hook that waits for a file; -> the file's path (made: the step goes on)."""
    opened = os.path.join(os.path.dirname(machine.path), "%s-%s-open" % (machine.name, hook))
    path = os.path.join(machine.path, ".git", "hooks", hook)
    with open(path, "w") as f:
        f.write("#!/bin/sh\nwhile [ ! -e '%s' ]; do sleep 0.05; done\n" % opened)
    os.chmod(path, 0o755)
    return opened


def progress(machine):
    return machine.status().get("progress")


def test_a_first_sync_of_many_files_shows_its_step_and_count_in_status(machines, remote):
    a, b = machines("a", "b", start=False)
    for i in range(FILES):
        folder = os.path.join(a.path, "d%02d" % (i // 100))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "f%04d.txt" % i), "w") as f:
            f.write("file %d\n" % i)
    commit_open, push_open = gate(a, "pre-commit"), gate(a, "pre-push")
    b.start()
    pulls = Events(b)
    a.start(wait=False)  # its first commit holds every file: held by pre-commit
    wait_until(lambda: (progress(a) or {}).get("doing") == "committing", 120,
               what="a's first commit under way")
    under_way = progress(a)
    assert under_way["files"] == FILES and under_way["done"] is None and \
        a.status()["state"] == "committing", under_way
    said = a.notify("status").stdout
    assert "progress:    committing 3,000 files, since " in said, said
    assert json.loads(a.notify("--json", "status").stdout)["progress"] == under_way
    open(commit_open, "w").close()
    wait_until(lambda: (progress(a) or {}).get("doing") == "pushing", 120,
               what="a's first push under way")
    assert progress(a)["files"] == FILES and a.status()["state"] == "pushing"
    assert "progress:    pushing 3,000 files to the remote, since " in a.notify("status").stdout
    open(push_open, "w").close()
    settle(a, remote, timeout=120)
    assert progress(a) is None and "progress:" not in a.notify("status").stdout
    # The first pull of them onto the other machine: how many are written, as it goes.
    b.notify("pull")
    pulls.wait_for(lambda e: e["event"] == "progress" and e["progress"] is None
                   and any(s.get("progress") for s in pulls.seen), timeout=120)
    told = [e["progress"] for e in pulls.seen if e["event"] == "progress" and e["progress"]]
    assert {p["doing"] for p in told} == {"writing"} and {p["files"] for p in told} == {FILES}
    done = [p["done"] for p in told]
    assert done[0] == 0 and done[-1] == FILES and done == sorted(done) and len(done) == 101, done
    wait_until(lambda: b.status().get("state") == "idle", 60, what="b's pull to end")
    assert len(os.listdir(os.path.join(b.path, "d29"))) == 100 and progress(b) is None
