"""Randomized, seeded: three real clients on one bare remote; nothing is ever lost.

    AUTOSYNC_SEED=7 AUTOSYNC_OPS=400 python3 -m pytest tests/e2e/test_random.py -q -rP

runs a longer soak (defaults: seed 1, 20 operations, three machines, in the normal
suite, once with the suite's commands and once with the original's). With `-m slow`
the same runs, at 200 operations, for each seed of AUTOSYNC_SEEDS (default 2,3,4). AUTOSYNC_MACHINES
(default 3), AUTOSYNC_READFREQUENCY (not set: as shipped), AUTOSYNC_BURNERS (busy
loops beside the run, default 2) and AUTOSYNC_BULK
(files rewritten beside half the races' first change, default 300) set the rest.
Each run prints one RESULT line (seed, operations, contents written, lost, conflict
copies, races and how many of them landed during the writer's own pull); the seed and
the operations done are printed, so a failure can be replayed.
The same world runs on Mercurial clones with docs/examples/mercurial.autosync
(AUTOSYNC_HG_OPS operations, default 20: hg's commands are slower, about
2 minutes on two cores).
"""
import errno
import os
import random
import shutil
import subprocess
import signal
import time

import pytest

from autosync.core import protocol
from autosync.core.copies import COPY_NAME
from autosync.core.config import load
from base import git, wait_until
from base import suite_burners, tree
from helpers import cut_off, reconnect
from helpers import write
from helpers import HOOK, Pulls, history_blobs, quiet, remote_main


SEED = int(os.environ.get("AUTOSYNC_SEED", "1"))
SEEDS = [int(s) for s in os.environ.get("AUTOSYNC_SEEDS", "2,3,4").split(",") if s.strip()]
# The normal suite's two runs take about half a minute each at 20 operations (2 cores);
# the slow ones take 200 (about 5 minutes each). AUTOSYNC_OPS sets both.
OPS = int(os.environ.get("AUTOSYNC_OPS", "20"))
SLOW_OPS = int(os.environ.get("AUTOSYNC_OPS", "200"))
MACHINES = int(os.environ.get("AUTOSYNC_MACHINES", "3"))
READFREQUENCY = os.environ.get("AUTOSYNC_READFREQUENCY", "")  # not set: as shipped
# Two busy loops load the machine, as races need; the normal suite's runs start them only
# when run by themselves (base.suite_burners); the slow seeds always.
BURNERS = int(os.environ.get("AUTOSYNC_BURNERS", "2"))
SUITE_BURNERS = suite_burners(BURNERS)
HG_OPS = int(os.environ.get("AUTOSYNC_HG_OPS", "20"))
# Operation -> weight. "race": one machine writes a file, another writes the same file
# 0-300 ms later, while its own pull of the first one's change may be running (issue 17).
KINDS = {"create": 6, "modify": 5, "append": 4, "delete": 2, "rename": 2, "rename-folder": 1,
         "same-file": 3, "race": 8, "cut-off": 1, "kill": 1, "fill": 1}
# File names, drawn from forms that cross every pipe of git's only with -z: quotes,
# a newline, a tab, a backslash (issue 31).
NAME_FORMS = ("f%d.txt",) * 4 + ('"q%d".txt', "new\nline %d.txt", "tab\t%d.txt",
                                 "back\\slash %d.txt")
# Mercurial's: hg refuses to record a name with a newline (it is held back on its machine:
# test_repository's real-hg test); in its place a name hg reads as a regular expression
# unless the product makes it literal (the same number of forms: a seed draws as before).
HG_NAME_FORMS = tuple("re:.*%d.txt" if "\n" in f else f for f in NAME_FORMS)
# The last machine's folder is on a small file system ("fill" leaves it this many bytes
# for a few operations): its pulls cannot be written meanwhile (issue 31).
SMALL_DISK = 64 << 20
FILLED_FOR = 4
LEFT = 4096  # one page of tmpfs: a pull's temporary files do not fit
RACE_DELAY = 0.3
ANCHORS = ("write", "push", "pull-started")
# Half the races rewrite this many files besides: a longer pull, as an untar or a
# build makes, and with it a wider window between git's check of a file and its write.
BULK = int(os.environ.get("AUTOSYNC_BULK", "300"))
BULK_FOLDER = "0bulk"  # + "-" and the machine's name (its own: no conflicts there);
# it sorts before every other path


# Each conflict copy of a copy adds 37 bytes to the name; past 255 the product's merge
# fails with ENAMETOOLONG for ever (reported separately). The operations that make
# conflicts on purpose pick names short enough for a few more copies.
LONGEST_NAME = 120


def conflicting(mine, theirs):
    """The files both machines have, whose names can take a few copies more."""
    return sorted(p for p in set(mine) & set(theirs)
                  if len(os.fsencode(os.path.basename(p))) <= LONGEST_NAME)


def files_of(machine):
    """The files' names only: a pull may take one away while they are listed."""
    found = []
    for root, dirs, files in os.walk(machine.path):
        dirs[:] = [d for d in dirs if d not in (".git", ".hg")]
        found += [os.path.relpath(os.path.join(root, name), machine.path) for name in files
                  if not (root == machine.path and name == ".git")]  # (a .git file)
    return sorted(found)


def folders_of(machine):
    return sorted({os.path.dirname(p) for p in files_of(machine)} - {""})


def ask(machine, message):
    """One request to the committer over its socket (what autosync-notify sends), without
    starting a Python per question (a run asks thousands of times); {} if it is away."""
    try:
        conn = protocol.connect(load(machine.config).socket, timeout=5)
    except protocol.NoDaemon:
        return {}  # restarting after a kill
    try:
        return conn.request(message, timeout=10)
    except (OSError, ConnectionError, protocol.ProtocolError):
        return {}
    finally:
        conn.close()


def status(machine):
    """What `autosync-notify --json status` prints."""
    return ask(machine, {"cmd": "status"}).get("status", {})


def committed(machine, full=False):
    """Wait until everything written on machine is committed (pushed or not); on a full
    disk (`full`), until that, or until the commit's failure is named in its status
    (git cannot write the commit's objects: it commits once the disk is freed)."""
    def done():
        s = status(machine)
        if s.get("state") == "idle" and not s.get("pending") and not machine.dirty():
            return True
        return full and bool((s.get("failing") or {}).get("commit"))
    wait_until(done, 30, 0.05, machine.name + " to commit")


class World:
    """The machines, what was ever written, and what is being done to them."""

    def __init__(self, rng, machines, remote, cut=cut_off, join=reconnect, forms=NAME_FORMS):
        self.rng, self.machines, self.remote, self.forms = rng, machines, remote, forms
        self.cut, self.join = cut, join  # take one machine off the remote, and back
        self.tokens = set()
        self.offline = {}  # machine name -> (url, operations left)
        self.log = []
        self.races = []  # (machine name, unix time its write was closed)
        self.pulls = None  # a Pulls, for the race's last anchor
        self.anchors = ("write",)  # what a race's write is timed from (see race)
        self.bulk = 0  # files a race's first change may rewrite beside its file
        self.small = None  # (machine, mount) of the machine on a small disk
        self.filled = 0  # operations until its disk is freed
        self.owed = False  # it was written to while full: to be committed once freed
        self.drawn = []  # the tokens of the operation under way

    def token(self, machine):
        t = "%s-%d-%08x" % (machine.name, len(self.tokens), self.rng.getrandbits(32))
        self.tokens.add(t)
        self.drawn.append(t)
        self.log[-1] += " " + t  # which operation wrote what, when one is lost
        return t

    def new_path(self):
        folder = self.rng.choice(["", "d0", "d1", "d2", "d1/e0", "d2/e1"])
        return os.path.join(folder, self.rng.choice(self.forms) % self.rng.randrange(15))

    def fill(self):
        """The small machine's disk full (a file beside its folder), until FILLED_FOR
        operations later; then freed."""
        if self.small is None or self.filled:
            return
        machine, mount = self.small
        st = os.statvfs(mount)
        with open(os.path.join(mount, "filler"), "wb") as f:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - LEFT))
        self.filled = FILLED_FOR
        self.log[-1] += " (%s's disk full)" % machine.name

    def free(self, now=False):
        if self.filled and (now or self.filled <= 1):
            os.unlink(os.path.join(self.small[1], "filler"))
            self.filled = 0
            if self.owed:  # what was written while full is committed now, by itself
                committed(self.small[0])
                self.owed = False
        elif self.filled:
            self.filled -= 1

    def do(self, n):
        kind = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        m = self.rng.choice(self.machines)
        touched = [m]
        existing = [p for p in files_of(m) if p != "README" and not p.startswith(BULK_FOLDER)]
        if kind in ("modify", "append", "delete", "rename") and not existing:
            kind = "create"
        self.log.append("%d %s on %s" % (n, kind, m.name))
        began = time.monotonic()
        self.drawn = []
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
                folders = [f for f in folders_of(m)
                           if "/" not in f and not f.startswith(BULK_FOLDER)]
                dst = os.path.join(m.path, "d%d" % self.rng.randrange(5))
                if folders and not os.path.exists(dst):
                    os.rename(os.path.join(m.path, self.rng.choice(folders)), dst)
            elif kind == "same-file":
                other = self.rng.choice([x for x in self.machines if x is not m])
                shared = conflicting(existing, files_of(other))
                path = self.rng.choice(shared) if shared else self.new_path()
                for x in (m, other):
                    write(x, path, (self.token(x) + "\n").encode())
                touched.append(other)
            elif kind == "race":
                touched.append(self.race(m, existing))
            elif kind == "cut-off" and not self.offline:
                self.offline[m.name] = (self.cut(m), self.rng.randint(4, 12))
            elif kind == "kill":
                pid = m.children().get("committer")
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    wait_until(lambda: m.children().get("committer") not in (None, pid), 30,
                               what="the committer of %s to be restarted" % m.name)
            elif kind == "fill":
                self.fill()
        except (FileNotFoundError, NotADirectoryError):
            pass  # a pull took the file away meanwhile
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            self.tokens.difference_update(self.drawn)  # the user's write failed: not theirs
            self.log[-1] += " (disk full)"
        for x in touched:
            full = bool(self.filled) and x is self.small[0]
            committed(x, full)  # so that every token written is in some commit
            self.owed = self.owed or full
        self.log[-1] += " %.2f s" % (time.monotonic() - began)
        self.reconnect_due()
        self.free()

    def race(self, m, existing):
        """Another machine changes a file m has; m writes the same file 0-300 ms after
        that change: after its write, after its push reached the remote, or after m's
        own pull (of that change) started. Nothing else is waited for: the write often
        lands while m pulls that very change (issue 17). -> the other machine."""
        other = self.rng.choice([x for x in self.machines if x is not m])
        shared = conflicting(existing, files_of(other))
        path = self.rng.choice(shared) if shared else self.new_path()
        anchor = self.rng.choice(self.anchors)
        delay = self.rng.uniform(0, RACE_DELAY)
        append = self.rng.random() < 0.3
        big = self.bulk and self.rng.random() < 0.5
        mine, theirs = self.token(m), self.token(other)  # drawn first: replayable
        self.log[-1] += " (%s first%s, %s, %s writes %.0f ms after the %s)" % (
            other.name, " with %d more" % self.bulk if big else "", path, m.name, delay * 1000,
            anchor)
        before = remote_main(self.remote)
        seen = self.pulls.count(m.name) if self.pulls else 0
        if big:
            # A change of BULK files and this one in one commit (paused meanwhile): the
            # pull checks every file, then writes the bulk (sorted first) before this one.
            paused = ask(other, {"cmd": "pause"}).get("ok")
            try:  # (a full disk ends the bulk: the machine is resumed all the same)
                for i in range(self.bulk):
                    write(other, os.path.join(BULK_FOLDER + "-" + other.name, "%03d.txt" % i),
                          b"bulk %d of operation %d\n" % (i, len(self.log)))
                self.put(other, path, theirs, mine)
            finally:
                if paused:
                    ask(other, {"cmd": "resume"})
        else:
            self.put(other, path, theirs, mine)
        if anchor != "write" and other.name not in self.offline:
            # Polled, not waited on through the daemon: the anchor is the push itself,
            # or m's pull-started event.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and (
                    remote_main(self.remote) == before if anchor == "push"
                    else self.pulls.count(m.name) == seen):
                time.sleep(0.005)
        time.sleep(delay)
        self.put(m, path, mine, append=append)
        self.races.append((m.name, time.time()))
        return other

    def put(self, machine, path, token, *unwritten, append=False):
        """Write a token (and forget it and `unwritten` if that fails: they are not lost)."""
        full = os.path.join(machine.path, path)
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "a" if append else "w") as f:
                f.write(token + "\n")
        except OSError:
            self.tokens.difference_update((token,) + unwritten)
            raise

    def reconnect_due(self, now=False):
        for name, (url, left) in list(self.offline.items()):
            if now or left <= 1:
                self.join(next(m for m in self.machines if m.name == name), url)
                del self.offline[name]
            else:
                self.offline[name] = (url, left - 1)


def conflict_copies(remote):
    """Every conflict copy ever added on the remote's main (some are deleted later)."""
    # -m: copies are added by merge commits, which git log shows no diff for otherwise.
    added = git("--git-dir", remote.path, "log", "-m", "--diff-filter=A", "--name-only", "-z",
                "--format=", "main")
    return sorted({n for n in os.fsdecode(added).split("\0")
                   if n and COPY_NAME.match(os.path.basename(n.strip()))})


def same_and_unmarked(ms):
    final = tree(ms[0])
    for m in ms[1:]:
        assert tree(m) == final, "%s and %s differ" % (ms[0].name, m.name)
    for path, content in final.items():
        for line in content.splitlines():
            assert not line.startswith((b"<<<<<<< ", b">>>>>>> ")), path


def random_run(seed, ops, machines, remote, commands, cpu_burners, burners=BURNERS):
    mounted = []
    try:
        run(seed, ops, machines, remote, commands, cpu_burners, burners, mounted)
    finally:  # (lazily: the daemons on it are stopped by the fixture, after)
        for mount in mounted:
            subprocess.run(["umount", "-l", mount])


def run(seed, ops, machines, remote, commands, cpu_burners, burners, mounted):
    """One run: `ops` random operations on MACHINES machines beside `burners` busy loops,
    at the shipped delays; every content written must end in history."""
    names = [chr(ord("a") + i) for i in range(MACHINES)]
    print("AUTOSYNC_SEED=%d AUTOSYNC_OPS=%d AUTOSYNC_MACHINES=%d AUTOSYNC_BURNERS=%d "
          "AUTOSYNC_READFREQUENCY=%s commands=%s" % (seed, ops, MACHINES, burners, READFREQUENCY,
                                                    "original" if commands else "new"))
    shutil.copy(HOOK, os.path.join(remote.path, "hooks", "post-receive"))
    # The shipped delays (base.Machine's shorter maxwait dropped); a 2 s timer pull on
    # top of the hook's, which adds pulls to race with.
    ms = machines(*names, start=False, pullinterval="2", dvcs=commands)
    small = on_small_disk(ms[-1], remote)
    mounted += [small[1]] if small else []
    for m in ms:
        del m.settings["maxwait"]
        if READFREQUENCY:  # the second setting: batches ended by a quiet time
            m.settings["readfrequency"] = READFREQUENCY
        m.write_config()
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
        m.start()
    pulls = Pulls(ms)
    cpu_burners(burners)
    world = World(random.Random(seed), ms, remote)
    world.pulls, world.anchors, world.bulk, world.small = pulls, ANCHORS, BULK, small
    started = time.monotonic()
    try:
        for n in range(ops):
            world.do(n)
        world.reconnect_due(now=True)
        world.free(now=True)
        quiet(ms, remote)
    finally:
        pulls.close()
        print("\n".join(world.log))
    same_and_unmarked(ms)
    history = history_blobs(remote)
    on_disk = "".join(c.decode("utf-8", "replace") for m in ms for c in tree(m).values())
    lost = sorted(t for t in world.tokens if t not in history and t not in on_disk)
    copies = conflict_copies(remote)
    during = sum(pulls.during(name, when) for name, when in world.races)
    took = sorted(pulls.durations())
    print("pulls: %d, median %.0f ms, longest %.0f ms" % (
        len(took), 1000 * took[len(took) // 2] if took else 0, 1000 * max(took or [0])))
    print("RESULT seed=%d commands=%s machines=%d readfrequency=%s burners=%d operations=%d "
          "contents=%d lost=%d conflict-copies=%d races=%d races-during-own-pull=%d seconds=%.0f"
          % (seed, "original" if commands else "new", MACHINES, READFREQUENCY or "shipped",
             burners, ops, len(world.tokens),
             len(lost), len(copies), len(world.races), during, time.monotonic() - started))
    assert not lost, "contents neither on disk nor in history: %s" % lost
    for m in ms:
        assert not os.path.exists(os.path.join(m.path, ".git", "MERGE_HEAD"))


def on_small_disk(machine, remote):
    """Move machine's folder to a small tmpfs of its own (its .git stays on the ordinary
    disk, as a git dir of its own) -> (machine, mount); None where no tmpfs can be
    mounted (not root)."""
    mount = machine.path + ".small"
    os.mkdir(mount)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % SMALL_DISK, "tmpfs", mount],
                      stderr=subprocess.DEVNULL).returncode:
        return None
    shutil.rmtree(machine.path)
    machine.path = os.path.join(mount, machine.name)
    git("clone", "-q", "--separate-git-dir", mount + ".git", remote.path, machine.path)
    machine.settings["path"] = machine.path
    machine.write_config()
    return machine, mount


def test_three_machines_random_operations_converge_and_lose_nothing(machines, remote, commands,
                                                                    cpu_burners):
    random_run(SEED, OPS, machines, remote, commands, cpu_burners, SUITE_BURNERS)


@pytest.mark.slow  # several minutes each: more seeds than the normal suite has time for
@pytest.mark.parametrize("seed", SEEDS)
def test_more_seeds_converge_and_lose_nothing(seed, machines, remote, commands, cpu_burners):
    random_run(seed, SLOW_OPS, machines, remote, commands, cpu_burners)


@pytest.mark.slow  # two to five minutes: the suite must stay well under 15
def test_three_mercurial_machines_random_operations_converge_and_lose_nothing(tmp_path, central):
    """The same with Mercurial clones and the example's commands (autosync-hgmerge)."""
    from base import hg
    from helpers import HgMachine, notify_hook
    print("AUTOSYNC_SEED=%d AUTOSYNC_HG_OPS=%d" % (SEED, HG_OPS))
    ms = [HgMachine(tmp_path, name, central) for name in ("a", "b", "c")]
    for m in ms:
        # hg's pull, helper and rescan take over a second: a 2 s timer keeps a machine
        # busy most of the time, and the three are then rarely idle at once.
        m.settings["pullinterval"] = "5"
        m.write_config()
    notify_hook(central, ms)
    world = World(random.Random(SEED), ms, central,
                  cut=lambda m: m.cut_off(), join=lambda m, url: m.reconnect(),
                  forms=HG_NAME_FORMS)
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
