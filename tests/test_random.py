"""Randomized, seeded: three real clients on one bare remote; nothing is ever lost.

    AUTOSYNC_SEED=7 AUTOSYNC_OPS=400 python3 -m pytest tests/test_random.py -q

runs a longer soak (defaults: seed 1, 60 operations, in the normal suite).
The seed and the operations done are printed, so a failure can be replayed.
The same world runs on Mercurial clones with docs/examples/mercurial.autosync
(AUTOSYNC_HG_OPS operations, default 20: hg's commands are slower, about
2 minutes on two cores).
"""
import os
import random
import shutil
import signal
import subprocess

import pytest

from conftest import git, wait_until
from test_mercurial import central  # noqa: F401 (a fixture)
from test_conflicts import committed, cut_off, reconnect, tree
from test_sync import write

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("AUTOSYNC_SEED", "1"))
OPS = int(os.environ.get("AUTOSYNC_OPS", "60"))
HG_OPS = int(os.environ.get("AUTOSYNC_HG_OPS", "20"))
HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hooks",
                    "post-receive")
# Operation -> weight.
KINDS = {"create": 6, "modify": 5, "append": 4, "delete": 2, "rename": 2, "rename-folder": 1,
         "same-file": 3, "cut-off": 1, "kill": 1}


def files_of(machine):
    return sorted(tree(machine))


def folders_of(machine):
    return sorted({os.path.dirname(p) for p in files_of(machine)} - {""})


class World:
    """The machines, what was ever written, and what is being done to them."""

    def __init__(self, rng, machines, remote, cut=cut_off, join=reconnect):
        self.rng, self.machines, self.remote = rng, machines, remote
        self.cut, self.join = cut, join  # take one machine off the remote, and back
        self.tokens = set()
        self.offline = {}  # machine name -> (url, operations left)
        self.log = []

    def token(self, machine):
        t = "%s-%d-%08x" % (machine.name, len(self.tokens), self.rng.getrandbits(32))
        self.tokens.add(t)
        return t

    def new_path(self):
        folder = self.rng.choice(["", "d0", "d1", "d2", "d1/e0", "d2/e1"])
        return os.path.join(folder, "f%d.txt" % self.rng.randrange(15))

    def do(self, n):
        kind = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        m = self.rng.choice(self.machines)
        touched = [m]
        existing = [p for p in files_of(m) if p != "README"]
        if kind in ("modify", "append", "delete", "rename") and not existing:
            kind = "create"
        self.log.append("%d %s on %s" % (n, kind, m.name))
        try:
            if kind == "create":
                write(m, self.new_path(), (self.token(m) + "\n").encode())
            elif kind == "modify":
                write(m, self.rng.choice(existing), (self.token(m) + "\n").encode())
            elif kind == "append":
                with open(os.path.join(m.path, self.rng.choice(existing)), "a") as f:
                    f.write(self.token(m) + "\n")
            elif kind == "delete":
                os.unlink(os.path.join(m.path, self.rng.choice(existing)))
            elif kind == "rename":
                dst = os.path.join(m.path, self.new_path())
                if not os.path.exists(dst):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    os.rename(os.path.join(m.path, self.rng.choice(existing)), dst)
            elif kind == "rename-folder":
                folders = [f for f in folders_of(m) if "/" not in f]
                dst = os.path.join(m.path, "d%d" % self.rng.randrange(5))
                if folders and not os.path.exists(dst):
                    os.rename(os.path.join(m.path, self.rng.choice(folders)), dst)
            elif kind == "same-file":
                other = self.rng.choice([x for x in self.machines if x is not m])
                shared = sorted(set(existing) & set(files_of(other)))
                path = self.rng.choice(shared) if shared else self.new_path()
                for x in (m, other):
                    write(x, path, (self.token(x) + "\n").encode())
                touched.append(other)
            elif kind == "cut-off" and not self.offline:
                self.offline[m.name] = (self.cut(m), self.rng.randint(4, 12))
            elif kind == "kill":
                pid = m.children().get("committer")
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    wait_until(lambda: m.children().get("committer") not in (None, pid), 30,
                               what="the committer of %s to be restarted" % m.name)
        except FileNotFoundError:
            pass  # a pull took the file away meanwhile
        for x in touched:
            committed(x)  # so that every token written is in some commit
        self.reconnect_due()

    def reconnect_due(self, now=False):
        for name, (url, left) in list(self.offline.items()):
            if now or left <= 1:
                self.join(next(m for m in self.machines if m.name == name), url)
                del self.offline[name]
            else:
                self.offline[name] = (url, left - 1)


def git_head(machine):
    return git("rev-parse", "HEAD", cwd=machine.path)


def quiet(machines, remote, timeout=120, head=git_head):
    """Sync until every machine has the remote's head and nothing left to do."""
    def converged():
        for m in machines:
            m.notify("sync", check=False)
        for m in machines:
            m.notify("pull", check=False)
        heads = {head(m) for m in machines}
        return len(heads) == 1 and all(m.settled(remote) for m in machines)
    wait_until(converged, timeout, 0.5, "the three machines to converge")


def history_blobs(remote):
    """Every file content reachable from the remote's main, concatenated."""
    objects = git("--git-dir", remote.path, "rev-list", "--objects", "main")
    ids = b"\n".join(line.split()[0] for line in objects.splitlines())
    out = subprocess.run(["git", "--git-dir", remote.path, "cat-file", "--batch"], input=ids + b"\n",
                         stdout=subprocess.PIPE, check=True).stdout
    return out.decode("utf-8", "replace")


def same_and_unmarked(ms):
    final = tree(ms[0])
    assert tree(ms[1]) == final and tree(ms[2]) == final
    for path, content in final.items():
        for line in content.splitlines():
            assert not line.startswith((b"<<<<<<< ", b">>>>>>> ")), path


def test_three_machines_random_operations_converge_and_lose_nothing(machines, remote, commands):
    print("AUTOSYNC_SEED=%d AUTOSYNC_OPS=%d" % (SEED, OPS))
    shutil.copy(HOOK, os.path.join(remote.path, "hooks", "post-receive"))
    ms = machines("a", "b", "c", pullinterval="2", dvcs=commands)
    for m in ms:
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
    world = World(random.Random(SEED), ms, remote)
    try:
        for n in range(OPS):
            world.do(n)
        world.reconnect_due(now=True)
        quiet(ms, remote)
    finally:
        print("\n".join(world.log))
    same_and_unmarked(ms)
    history = history_blobs(remote)
    lost = sorted(t for t in world.tokens if t not in history)
    assert not lost, "contents neither in the tree nor in history: %s" % lost
    for m in ms:
        assert not os.path.exists(os.path.join(m.path, ".git", "MERGE_HEAD"))


@pytest.mark.slow  # two to five minutes: the suite must stay well under 15
def test_three_mercurial_machines_random_operations_converge_and_lose_nothing(tmp_path, central):
    """The same with Mercurial clones and the example's commands (autosync-hgmerge)."""
    from test_mercurial import HgMachine, hg, notify_hook
    print("AUTOSYNC_SEED=%d AUTOSYNC_HG_OPS=%d" % (SEED, HG_OPS))
    ms = [HgMachine(tmp_path, name, central) for name in ("a", "b", "c")]
    for m in ms:
        # hg's pull, helper and rescan take over a second: a 2 s timer keeps a machine
        # busy most of the time, and the three are then rarely idle at once.
        m.settings["pullinterval"] = "5"
        m.write_config()
    notify_hook(central, ms)
    world = World(random.Random(SEED), ms, central,
                  cut=lambda m: m.cut_off(), join=lambda m, url: m.reconnect())
    try:
        for m in ms:
            m.start()
        for n in range(HG_OPS):
            world.do(n)
        world.reconnect_due(now=True)
        quiet(ms, central, head=lambda m: m.head())
    finally:
        print("\n".join(world.log))
        for m in ms:
            m.stop()
    same_and_unmarked(ms)
    history = hg("log", "-p", "--git", cwd=central)
    lost = sorted(t for t in world.tokens if t not in history)
    assert not lost, "contents neither in the tree nor in history: %s" % lost
    assert "<<<<<<<" not in history and ">>>>>>>" not in history
    for m in ms:
        m.never_mid_merge()
    assert hg("heads", "-T", "x", cwd=central) == "x"
    merges = hg("log", "-r", "merge()", "-T", "{desc}\n", cwd=central)
    print("merges:\n" + merges)
