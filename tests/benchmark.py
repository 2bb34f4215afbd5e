#!/usr/bin/env python3
"""Benchmark of the real dvcs-autosync suite, each figure beside bare git.

    python3 tests/benchmark.py [--quick] [--only NAME] [--sync xmpp|hook] [--keep]

Not a test: nothing is asserted, the script exits 0 even when an aim is
missed. Everything runs in a temporary folder with a private HOME: real
supervisors (`python -m autosync.supervisor CONFIG`), real git, bare
remotes on disk, and (with --sync xmpp, the default) a private prosody on
127.0.0.1 (tests/prosody.py). How to read the output: docs/benchmark.md.

Measurements (NAME for --only):
  propagation  a small file written on A until B has it, beside the bare-git floor
  burst        N small files untarred until committed and pushed, beside add/commit/push
  scale        start-up time and memory on a large committed tree, beside `git status`
  idle         CPU time of the whole suite over an idle period
"""
import argparse
import io
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)   # the product under test: this checkout
sys.path.insert(0, HERE)   # prosody.py

from autosync import protocol  # noqa: E402

FULL = dict(trials=20, burst_files=10_000, burst_trials=3, tree_files=100_000,
            tree_folders=10_000, idle_seconds=60, tree_idle_seconds=20)
QUICK = dict(trials=5, burst_files=2_000, burst_trials=1, tree_files=10_000,
             tree_folders=1_000, idle_seconds=10, tree_idle_seconds=5)

# The lowest delays the configuration allows for a fast round trip.
FAST = dict(readfrequency="0.2", pushdelay="0")
PASSWORD = "bench-Pa55word"
TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------
# small helpers

def git(*args, cwd=None, check=True):
    """Run git; its stdout as text."""
    return subprocess.run(("git",) + args, cwd=cwd, check=check, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def wait_for(predicate, timeout, interval=0.02):
    """The predicate's first true value, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def median(values):
    return statistics.median(values) if values else None


def p90(values):
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def private_environment(base):
    """A HOME of our own so the user's git settings and daemons never mix in."""
    home = os.path.join(base, "home")
    os.makedirs(home)
    os.environ["HOME"] = home
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    for name in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "GIT_DIR", "GIT_WORK_TREE"):
        os.environ.pop(name, None)
    # The hooks call autosync-notify; the checkout's launchers come first.
    os.environ["PATH"] = os.path.join(ROOT, "bin") + os.pathsep + os.environ["PATH"]
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    for key, value in (("user.name", "Bench"), ("user.email", "bench@example.org"),
                       ("init.defaultBranch", "main")):
        git("config", "--global", key, value)


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


# --------------------------------------------------------------------------
# processes, from /proc

def process_table():
    """{pid: (ppid, [utime, stime, cutime, cstime] in ticks)} of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # rest[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17.
        table[int(entry)] = (int(rest[1]), [int(x) for x in rest[11:15]])
    return table


def process_tree(root, table=None):
    """The pid `root` and all its descendants."""
    table = table or process_table()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            found.append(pid)
            todo.extend(children.get(pid, []))
    return found


def cpu_seconds(root):
    """CPU used so far by `root` and its descendants, those already reaped included."""
    table = process_table()
    return sum(sum(table[pid][1]) for pid in process_tree(root, table)) / TICKS


def memory(root):
    """[(pid, program, rss kB, pss kB)] of `root` and its descendants."""
    rows = []
    for pid in process_tree(root):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                words = f.read().split(b"\0")
            rss = pss = 0
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1])
        except OSError:
            continue
        names = [w.decode(errors="replace") for w in words if w.startswith(b"autosync.")]
        program = names[0].split(".", 1)[1] if names else os.path.basename(words[0].decode())
        rows.append((pid, program, rss, pss))
    return rows


# --------------------------------------------------------------------------
# repositories and machines

def make_remote(path, seed_files=None):
    """A bare repository with one first commit on main (plus `seed_files`)."""
    git("init", "-q", "--bare", path)
    seed = path + ".seed"
    git("clone", "-q", path, seed)
    write_file(os.path.join(seed, "README"), b"benchmark folder\n")
    if seed_files:
        seed_files(seed)
    # gc.auto=0: a large first commit would start git's auto-gc in the
    # background, deleting loose objects under the rmtree below.
    git("-c", "gc.auto=0", "add", "-A", cwd=seed)
    git("-c", "gc.auto=0", "commit", "-q", "-m", "first", cwd=seed)
    git("-c", "gc.auto=0", "push", "-q", "origin", "HEAD:main", cwd=seed)
    shutil.rmtree(seed, ignore_errors=True)
    return path


def remote_head(remote):
    """The remote's main commit, read cheaply (the loose ref a push writes)."""
    ref = read_file(os.path.join(remote, "refs", "heads", "main"))
    if ref:
        return ref.strip().decode()
    return git("--git-dir", remote, "rev-parse", "main").strip()


def commit_count(remote):
    return int(git("--git-dir", remote, "rev-list", "--count", "main"))


class Machine:
    """A clone of a remote with a config file, and the real suite running on it."""

    def __init__(self, base, name, remote, xmpp=None):
        self.name = name
        self.remote = remote
        self.path = os.path.join(base, name)
        self.config = os.path.join(base, name + ".autosync")
        self.log = os.path.join(base, name + ".log")
        self.socket = os.path.join(base, name + ".sock")
        self.proc = None
        git("clone", "-q", remote, self.path)
        lines = ["[autosync]", "path = " + self.path, "socket = " + self.socket,
                 "syncmethod = " + ("xmpp" if xmpp else "none"), "notifymethod = none",
                 "pullinterval = 0"] + ["%s = %s" % kv for kv in FAST.items()]
        if xmpp:
            lines += ["[xmpp]", "username = " + xmpp.jid, "password = " + PASSWORD,
                      "host = 127.0.0.1", "port = %d" % xmpp.port, "tls = required",
                      "cafile = " + xmpp.cafile, "resource = autosync-" + name]
        with open(os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self):
        self.logfile = open(self.log, "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "autosync.supervisor", self.config],
                                     stdin=subprocess.DEVNULL, stdout=self.logfile,
                                     stderr=subprocess.STDOUT)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                print("  ! %s: supervisor still running 15 s after SIGTERM; killed" % self.name)
                for pid in reversed(process_tree(self.proc.pid)):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait()
        if self.proc:
            self.logfile.close()

    def logtext(self):
        return (read_file(self.log) or b"").decode("utf-8", "replace")

    def status(self):
        """The committer's status, or {} while it does not answer."""
        try:
            conn = protocol.connect(self.socket, timeout=2)
        except Exception:
            return {}
        try:
            return conn.request({"cmd": "status"}, timeout=10).get("status") or {}
        except Exception:
            return {}
        finally:
            conn.close()

    def idle(self):
        s = self.status()
        return s.get("state") == "idle" and not s.get("pending") and not s.get("unpushed")

    def watching_line(self):
        for line in self.logtext().splitlines():
            if "watching " + self.path + ":" in line:
                return line
        return None

    def wait_ready(self, timeout=120):
        """Seconds from start until the watcher has logged its line and the committer is idle."""
        if not wait_for(self.watching_line, timeout, 0.02):
            raise RuntimeError("%s: no 'watching' line within %d s; see %s"
                               % (self.name, timeout, self.log))
        if not wait_for(self.idle, timeout, 0.02):
            raise RuntimeError("%s: not idle within %d s; see %s" % (self.name, timeout, self.log))
        return time.monotonic() - self.started

    def settled(self):
        """Idle, nothing unpushed, and the remote's main is our HEAD."""
        return self.idle() and git("rev-parse", "HEAD", cwd=self.path).strip() == \
            remote_head(self.remote)

    def sees(self, other):
        """Our XMPP listener has seen `other` online."""
        return ("autosync-" + other.name) in self.logtext()


class Events:
    """The committer's events (subscribe on its socket), recorded by a thread."""

    def __init__(self, machine):
        self.seen = []
        self.conn = protocol.connect(machine.socket)
        self.conn.request({"cmd": "subscribe"}, timeout=10)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for event in self.conn.events():
                self.seen.append(event)
        except OSError:
            pass

    def first(self, name, after):
        """Unix time of the first `name` event at or after `after`, or None."""
        for event in list(self.seen):
            if event.get("event") == name and event.get("time", 0) >= after:
                return event["time"]
        return None

    def close(self):
        self.conn.close()


class Run:
    """Everything one benchmark run starts, so that it is all stopped at the end."""

    def __init__(self, base, sync):
        self.base = base
        self.sync = sync
        self.machines = []
        self.server = None
        self.jid = None
        self.port = None
        self.cafile = None

    def start_prosody(self):
        if self.server:
            return
        from prosody import Prosody, missing
        reason = missing()
        if reason:
            raise SystemExit("--sync xmpp needs prosody: %s (or run with --sync hook)" % reason)
        self.server = Prosody(os.path.join(self.base, "prosody"), tls="required")
        self.jid = self.server.register("bench", PASSWORD)
        self.server.start()
        self.port, self.cafile = self.server.port, self.server.cafile

    def machine(self, name, remote):
        """A machine on `remote`, set up for the chosen sync method (not started)."""
        xmpp = None
        if self.sync == "xmpp":
            self.start_prosody()
            xmpp = self
        m = Machine(self.base, name, remote, xmpp)
        self.machines.append(m)
        return m

    def stop(self, *machines):
        for m in machines or list(self.machines):
            m.stop()
            if m in self.machines:
                self.machines.remove(m)

    def close(self):
        self.stop()
        if self.server:
            self.server.stop()


def install_hook(remote, *machines):
    """The repository's post-receive hook tells every machine about a push."""
    hook = os.path.join(remote, "hooks", "post-receive")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"), hook)
    os.chmod(hook, 0o755)
    for m in machines:
        git("--git-dir", remote, "config", "--add", "autosync.config", m.config)


# --------------------------------------------------------------------------
# 1. propagation

def propagation(run, sizes):
    """A small file written on A until B has it, beside write/add/commit/push/pull by hand."""
    remote = make_remote(os.path.join(run.base, "prop.git"))
    a, b = run.machine("prop-a", remote), run.machine("prop-b", remote)
    if run.sync == "hook":
        install_hook(remote, a, b)
    for m in (a, b):
        m.start()
    for m in (a, b):
        m.wait_ready()
    if run.sync == "xmpp" and not wait_for(lambda: a.sees(b) and b.sees(a), 30, 0.1):
        print("  ! the two XMPP listeners did not see each other within 30 s")

    floor_remote = make_remote(os.path.join(run.base, "floor.git"))
    c, d = os.path.join(run.base, "floor-c"), os.path.join(run.base, "floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)

    # Where the time goes, from the committers' own events (unix times).
    a_events, b_events = Events(a), Events(b)
    phases = {"A: write to committed": [], "A: committed to pushed": [],
              "B: A's push to pull started": [], "B: pull (git pull)": []}

    suite, floor, missed = [], [], 0
    for i in range(sizes["trials"]):
        # Our suite, then bare git, alternately: both see the same machine load.
        name = "trial-%03d.txt" % i
        content = ("trial %d written at %.6f\n" % (i, time.time())).encode()
        wall, started = time.time(), time.monotonic()
        write_file(os.path.join(a.path, name), content)
        if wait_for(lambda: read_file(os.path.join(b.path, name)) == content, 30, 0.003):
            suite.append(time.monotonic() - started)
            wait_for(lambda: b_events.first("pull-finished", wall), 5, 0.01)
            marks = [wall, a_events.first("committed", wall), a_events.first("pushed", wall),
                     b_events.first("pull-started", wall), b_events.first("pull-finished", wall)]
            if None not in marks:
                for key, start, end in zip(phases, marks, marks[1:]):
                    phases[key].append(end - start)
        else:
            missed += 1
            print("  ! trial %d: the file did not reach B within 30 s" % i)
            if missed >= 3 and not suite:
                print("  ! giving up on propagation (try --sync hook)")
                break
        wait_for(lambda: a.settled() and b.settled(), 30, 0.05)

        started = time.monotonic()
        write_file(os.path.join(c, name), content)
        git("add", "--", name, cwd=c)
        git("commit", "-q", "-m", "add " + name, cwd=c)
        git("push", "-q", cwd=c)
        git("pull", "-q", "--no-rebase", "--no-edit", cwd=d)
        if read_file(os.path.join(d, name)) == content:
            floor.append(time.monotonic() - started)
        time.sleep(0.2)
    a_events.close()
    b_events.close()
    run.stop(a, b)

    rows = []
    floor_median = median(floor)
    if suite:
        ok = floor_median is not None and median(suite) <= floor_median + 0.5
        rows.append(("propagation median (%d trials, %s)" % (len(suite), run.sync),
                     secs(median(suite)), secs(floor_median),
                     "<= floor + 0.5 s", ok))
        rows.append(("propagation 90th percentile", secs(p90(suite)), secs(p90(floor)),
                     "", None))
        rows.append(("propagation min / max", "%s / %s" % (secs(min(suite)), secs(max(suite))),
                     "%s / %s" % (secs(min(floor)), secs(max(floor))), "", None))
        for key, values in phases.items():
            if values:
                rows.append(("  of which " + key, secs(median(values)), "", "", None))
    if missed:
        rows.append(("propagation trials lost (30 s)", str(missed), "0", "0", False))
    return rows


# --------------------------------------------------------------------------
# 2. burst

def make_archive(folder, prefix, count, tag):
    """A tar of `count` small files, 100 to a folder, under `prefix`/; its path.

    Written straight from memory: creating and deleting thousands of files just
    before a timed untar makes ext4 slow to allocate inodes (perf shows tar's
    time in ext4_create -> recently_deleted), which would blur the figures."""
    archive = os.path.join(folder, prefix + ".tar")
    now = time.time()
    with tarfile.open(archive, "w") as tar:
        for d in range(0, count, 100):
            info = tarfile.TarInfo("%s/d%03d" % (prefix, d // 100))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for n in range(count):
            data = ("%s file %d\n" % (tag, n)).encode()
            info = tarfile.TarInfo("%s/d%03d/f%05d.txt" % (prefix, n // 100, n))
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return archive


def files_under(remote, prefix):
    return len(git("--git-dir", remote, "ls-tree", "-r", "--name-only", "main", "--",
                   prefix).splitlines())


def burst(run, sizes):
    """N files untarred into the folder until the remote has them, beside add/commit/push."""
    count = sizes["burst_files"]
    remote = make_remote(os.path.join(run.base, "burst.git"))
    floor_remote = make_remote(os.path.join(run.base, "burst-floor.git"))
    a = run.machine("burst-a", remote)
    a.start()
    a.wait_ready()

    events = Events(a)
    suite, floor, commits = [], [], []
    # Where the time goes: the suite from its committer's events, bare git step by step.
    phases = {"untar (tar -xf)": [], "untar end to last commit": [],
              "last commit to pushed": []}
    floor_phases = {"untar (tar -xf)": [], "git add -A": [], "git commit": [], "git push": []}

    def suite_trial(prefix, archive):
        before = commit_count(remote)
        head = remote_head(remote)
        wall, started = time.time(), time.monotonic()
        subprocess.run(["tar", "-xf", archive, "-C", a.path], check=True)
        untarred = time.time()

        def all_pushed():
            nonlocal head
            now = remote_head(remote)
            if now != head:
                head = now
                return files_under(remote, prefix) == count
            return False
        if not wait_for(all_pushed, 300, 0.02):
            print("  ! %s: not all %d files on the remote after 300 s (%d there)"
                  % (prefix, count, files_under(remote, prefix)))
            return
        suite.append(time.monotonic() - started)
        commits.append(commit_count(remote) - before)
        # The remote has the files a moment before the committer reports the push.
        wait_for(lambda: events.first("pushed", wall), 5, 0.01)
        committed = [e["time"] for e in list(events.seen)
                     if e.get("event") == "committed" and e["time"] >= wall]
        pushed = events.first("pushed", max(committed or [wall]))
        if committed and pushed:
            for key, value in zip(phases, (untarred - wall, committed[-1] - untarred,
                                           pushed - committed[-1])):
                phases[key].append(value)

    def floor_trial(prefix, archive):
        clone = os.path.join(run.base, "floor-" + prefix)
        git("clone", "-q", floor_remote, clone)
        os.sync()
        steps = [time.monotonic()]
        subprocess.run(["tar", "-xf", archive, "-C", clone], check=True)
        steps.append(time.monotonic())
        git("add", "-A", cwd=clone)
        steps.append(time.monotonic())
        git("commit", "-q", "-m", "burst", cwd=clone)
        steps.append(time.monotonic())
        git("push", "-q", cwd=clone)
        steps.append(time.monotonic())
        floor.append(steps[-1] - steps[0])
        for key, start, end in zip(floor_phases, steps, steps[1:]):
            floor_phases[key].append(end - start)
        # The clone stays until the end of the run: deleting 10,000 files here
        # would slow the next untar (see make_archive).

    for i in range(sizes["burst_trials"]):
        prefix = "burst-%d" % i
        archive = make_archive(run.base, prefix, count, "trial %d %.6f" % (i, time.time()))
        # Each side starts with nothing left to write back, and they take turns going first.
        os.sync()
        if i % 2:
            floor_trial(prefix, archive)
            os.sync()
        suite_trial(prefix, archive)
        wait_for(a.settled, 60, 0.1)
        if not i % 2:
            os.sync()
            floor_trial(prefix, archive)
    events.close()
    run.stop(a)

    rows = []
    if suite:
        ratio = median(suite) / median(floor)
        rows.append(("burst of %d files: untar to pushed (%d runs)" % (count, len(suite)),
                     secs(median(suite)), secs(median(floor)), "<= 1.5x bare git",
                     ratio <= 1.5, "%.2fx" % ratio))
        for key in ("untar (tar -xf)", "untar end to last commit", "last commit to pushed",
                    "git add -A", "git commit", "git push"):
            mine, bare = median(phases.get(key, [])), median(floor_phases.get(key, []))
            if mine is not None or bare is not None:
                rows.append(("  of which " + key, secs(mine), secs(bare), "", None))
        rows.append(("burst: commits made", ", ".join(map(str, commits)), "1", "<= 2",
                     max(commits) <= 2))
    else:
        rows.append(("burst of %d files" % count, "not pushed", secs(median(floor)),
                     "<= 1.5x bare git", False))
    return rows


# --------------------------------------------------------------------------
# 3. scale

def make_tree(folder, files, folders):
    """`files` files, 10 to a leaf folder, 100 leaf folders to a top folder."""
    per_leaf = files // folders
    n = 0
    for leaf in range(folders):
        path = os.path.join(folder, "t%03d" % (leaf // 100), "l%03d" % (leaf % 100))
        os.makedirs(path)
        for _ in range(per_leaf):
            with open(os.path.join(path, "f%06d.txt" % n), "w") as f:
                f.write("tree file %d\n" % n)
            n += 1


def scale(run, sizes):
    """Start-up on a large committed tree until watched and idle; memory; idle CPU there."""
    files, folders = sizes["tree_files"], sizes["tree_folders"]
    started = time.monotonic()
    remote = make_remote(os.path.join(run.base, "scale.git"),
                         lambda seed: make_tree(seed, files, folders))
    a = run.machine("scale-a", remote)
    print("  (tree of %d files made, committed and cloned in %.0f s)"
          % (files, time.monotonic() - started))

    status_times = []
    for _ in range(4):
        started = time.monotonic()
        git("status", "--porcelain", cwd=a.path)
        status_times.append(time.monotonic() - started)
    status_times = status_times[1:]  # the first one only warms the cache

    a.start()
    ready = a.wait_ready(300)
    line = a.watching_line()
    watcher_says = line.split(": ", 2)[-1] if line else "?"
    time.sleep(1.0)  # let whatever start-up left over finish before measuring memory
    rows_mem = memory(a.proc.pid)
    rss = sum(r[2] for r in rows_mem) / 1024
    pss = sum(r[3] for r in rows_mem) / 1024
    detail = ", ".join("%s %.0f" % (r[1], r[2] / 1024) for r in rows_mem)

    seconds = sizes["tree_idle_seconds"]
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(a.proc.pid) - cpu_before) / (time.monotonic() - t_before) * 100
    run.stop(a)

    return [
        ("scale: start until watching and idle (%d files)" % files, secs(ready),
         secs(median(status_times)) + " (git status)", "", None),
        ("scale: the watcher's own line", watcher_says, "", "", None),
        ("scale: memory, sum of RSS (MB)", "%.0f MB" % rss, "", "< 150 MB", rss < 150,
         "PSS %.0f MB; %s" % (pss, detail)),
        ("scale: idle CPU on that tree (%d s)" % seconds, "%.2f %%" % cpu, "", "< 1 %",
         cpu < 1),
    ]


# --------------------------------------------------------------------------
# 4. idle CPU

def idle(run, sizes):
    """CPU time of the whole suite, over an idle period, as percent of one core."""
    remote = make_remote(os.path.join(run.base, "idle.git"))
    a = run.machine("idle-a", remote)
    if run.sync == "hook":
        install_hook(remote, a)
    a.start()
    a.wait_ready()
    time.sleep(2.0)  # start-up's last log lines and commands
    seconds = sizes["idle_seconds"]
    pids = len(process_tree(a.proc.pid))
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    used = cpu_seconds(a.proc.pid) - cpu_before
    elapsed = time.monotonic() - t_before
    run.stop(a)
    percent = used / elapsed * 100
    return [("idle CPU over %d s (%d processes)" % (seconds, pids), "%.2f %%" % percent,
             "", "< 1 %", percent < 1, "%.2f s of CPU" % used)]


# --------------------------------------------------------------------------
# output

def secs(value):
    if value is None:
        return "-"
    return "%.0f ms" % (value * 1000) if value < 1 else "%.2f s" % value


def machine_description():
    def version(*cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True).stdout.strip()
        except OSError:
            return "not installed"
    load = open("/proc/loadavg").read().split()[:3]
    return [
        "machine: %s, %d cores (nproc), load %s" % (platform.platform(), len(os.sched_getaffinity(0)),
                                                   " ".join(load)),
        "python:  %s" % sys.version.split()[0],
        "git:     %s" % version("git", "--version"),
        "prosody: %s" % (version("dpkg-query", "-W", "-f", "${Version}", "prosody")
                         or "not installed"),
    ]


def print_table(rows):
    met = {True: "yes", False: "NO", None: ""}
    table = [("measurement", "autosync", "bare git", "aim", "met", "note")]
    for r in rows:
        r = tuple(r) + ("",) * (6 - len(r))
        table.append((r[0], r[1], r[2], r[3], met[r[4]], r[5]))
    widths = [max(len(str(r[i])) for r in table) for i in range(5)]
    for n, r in enumerate(table):
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + str(r[5]))
        if n == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 4)


MEASUREMENTS = {"propagation": propagation, "burst": burst, "scale": scale, "idle": idle}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (5 trials, 2,000 files, 10,000-file tree, 10 s idle)")
    p.add_argument("--only", choices=sorted(MEASUREMENTS), action="append",
                   help="run only this measurement (may be given more than once)")
    p.add_argument("--sync", choices=("xmpp", "hook"), default="xmpp",
                   help="how machines learn of a push: a private prosody (default), or the "
                        "bare repository's post-receive hook")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    sizes = QUICK if args.quick else FULL

    base = tempfile.mkdtemp(prefix="asbench-")
    private_environment(base)
    print("\n".join(machine_description()))
    print("sync:    %s; delays: %s; sizes: %s" % (
        "XMPP through a private prosody on 127.0.0.1 (STARTTLS)" if args.sync == "xmpp"
        else "the bare repository's post-receive hook (autosync-notify pushed)",
        ", ".join("%s = %s" % kv for kv in FAST.items()),
        "quick" if args.quick else "full"))
    print("folder:  %s" % base)
    print()

    run = Run(base, args.sync)
    rows = []
    try:
        for name, measure in MEASUREMENTS.items():
            if args.only and name not in args.only:
                continue
            print("running %s ..." % name, flush=True)
            started = time.monotonic()
            try:
                rows += measure(run, sizes)
            except Exception as e:  # report and go on with the next measurement
                traceback.print_exc()
                rows.append((name, "failed: %s" % e, "", "", False))
            finally:
                run.stop()
            print("  done in %.0f s" % (time.monotonic() - started), flush=True)
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        run.close()
        if args.keep:
            print("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)

    print()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
