#!/usr/bin/env python3
"""Benchmark of the real dvcs-autosync suite, each figure beside bare git and Syncthing.

    python3 tests/benchmark.py [--quick] [--only NAME] [--sync xmpp|hook] [--no-peers] [--keep]
                               [--trials N] [--burst-trials N]
                               [--onechange-files N] [--onechange-trials N] [--onechange-thin]
                               [--git-config K=V] [--setting K=V]

Not a test: nothing is asserted, the script exits 0 even when an aim is
missed. Everything runs in a temporary folder with a private HOME: real
supervisors (`python -m autosync.supervisor CONFIG`), real git, bare
remotes on disk, and (with --sync xmpp, the default) a private prosody on
127.0.0.1 (tests/prosody.py). Syncthing (Debian's `syncthing`), when
installed and not turned off with --no-peers, runs as two instances on
127.0.0.1 beside us. Our machines run at the product's shipped defaults (no
delay written in their config) and at the lowest settings (FAST). How to
read the output: docs/benchmark.md.

Measurements (NAME for --only):
  propagation  a small file written on A until B has it, beside the bare-git floor and Syncthing;
               announced the chosen way (--sync), and over ssh (a private sshd, when installed):
               over the held connection, and (at the defaults) with a login per command as
               before it (ControlPath=none in the ssh command), beside the local-path floor
  burst        N small files untarred into A until B has them all (and until pushed)
  machines     8 machines on one account: a change on one until all 7 others have it
  slowwriter   a file written over 15 s: was a half-written version pushed before maxwait?
  scale        start-up time and memory on a large committed tree, beside `git status`;
               the disk a thin machine and a full one use after 1,000 commits of a 1 MB file
  onechange    one file changed in a committed tree of N files (N/100 folders) until B has it,
               beside bare git's add/commit/push/pull on the same tree (--onechange-files N)
  bigfile      a new 1 GB file, and a 1 MB edit inside a 50 MB file, until B has it, beside
               bare git and Syncthing; what each grows the history by (--big-trials N)
  idle         CPU time of the whole suite over an idle period
"""
import argparse
import io
import json
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
import urllib.request
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)   # the product under test: this checkout
sys.path.insert(0, HERE)   # prosody.py

from autosync.core import config as autosync_config, protocol
from prosody import free_port  # noqa: E402

FULL = dict(trials=20, burst_files=10_000, burst_trials=3, tree_files=100_000,
            tree_folders=10_000, idle_seconds=60, tree_idle_seconds=20, machines=8,
            many_trials=20, slow_seconds=15, onechange_files=100_000, onechange_trials=10,
            home_files=100_000, big_new_mb=1024, big_file_mb=50, big_new_trials=3,
            big_edit_trials=5)
QUICK = dict(trials=3, burst_files=2_000, burst_trials=1, tree_files=10_000,
             tree_folders=1_000, idle_seconds=10, tree_idle_seconds=5, machines=8,
             many_trials=3, slow_seconds=15, onechange_files=10_000, onechange_trials=3,
             home_files=10_000, big_new_mb=1024, big_file_mb=50, big_new_trials=1,
             big_edit_trials=3)

# The lowest delays the configuration allows for a fast round trip: no quiet
# at all once every writer closed its file (no settle time), push at once.
FAST = dict(readfrequency="0", pushdelay="0")
# The machines' settings: "defaults" writes no delay into the config, so the
# product's own defaults (autosync.config.KEYS) apply, whatever they are today.
PROFILES = {"defaults": {}, "lowest": FAST}
DELAY_KEYS = ("readfrequency", "pushdelay", "maxwait")
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


def terminate(proc, what, wait=15):
    """SIGTERM; after `wait` seconds SIGKILL to it and everything it started (said)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        print("  ! %s still running %d s after SIGTERM; killed" % (what, wait))
        for pid in reversed(process_tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


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


def serve_partial_clones(remote):
    """The setting `init --thin` asks of the remote, and nothing more."""
    git("--git-dir", remote, "config", "uploadpack.allowFilter", "true")


def make_thin(path):
    """Turn a full clone into what `init --thin` makes once every blob has been
    fetched: origin a promisor remote with the blob:none filter. git then treats its
    fetches as a thin machine's (no connectivity walk over the whole tree, blobs fetched
    when read), without the blobless clone's checkout, which at a million files was
    still running after 8 minutes here (git 2.39). The remote must serve partial
    clones (serve_partial_clones)."""
    for key, value in (("core.repositoryformatversion", "1"),
                       ("extensions.partialClone", "origin"),
                       ("remote.origin.promisor", "true"),
                       ("remote.origin.partialclonefilter", "blob:none")):
        git("config", key, value, cwd=path)


class Machine:
    """A clone of a remote with a config file, and the real suite running on it."""

    def __init__(self, base, name, remote, xmpp=None, settings=None, ssh=None, thin=False):
        self.name = name
        self.remote = remote
        self.path = os.path.join(base, name)
        self.config = os.path.join(base, name + ".autosync")
        self.log = os.path.join(base, name + ".log")
        self.socket = os.path.join(base, name + ".sock")
        self.proc = None
        git("clone", "-q", remote, self.path)
        if thin:
            make_thin(self.path)
        if ssh:  # git and the watch both go through the private sshd
            git("remote", "set-url", "origin", ssh.url(remote), cwd=self.path)
        lines = ["[autosync]", "path = " + self.path, "socket = " + self.socket,
                 "syncmethod = " + ("ssh" if ssh else "xmpp" if xmpp else "none"),
                 "notifymethod = none",
                 "pullinterval = 0"] + ["%s = %s" % kv for kv in (settings or {}).items()]
        if xmpp:
            lines += ["[xmpp]", "username = " + xmpp.jid, "password = " + PASSWORD,
                      "host = 127.0.0.1", "port = %d" % xmpp.port, "tls = required",
                      "cafile = " + xmpp.cafile, "resource = autosync-" + name]
        with open(os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("\n".join(lines) + "\n")

    def delays(self):
        """{readfrequency, pushdelay, maxwait} as the product reads this machine's config."""
        cfg = autosync_config.load(self.config)
        return {key: getattr(cfg, key) for key in DELAY_KEYS}

    def start(self):
        self.logfile = open(self.log, "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "autosync.supervisor", self.config],
                                     stdin=subprocess.DEVNULL, stdout=self.logfile,
                                     stderr=subprocess.STDOUT)
        return self

    def stop(self):
        if self.proc:
            terminate(self.proc, "%s's supervisor" % self.name)
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


def ask(machine, request):
    """One request on the machine's socket; -> the reply."""
    conn = protocol.connect(machine.socket, timeout=10)
    try:
        return conn.request(request, timeout=600)
    finally:
        conn.close()


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
        self.peers = False          # run Syncthing beside us
        self.sshd = None            # a private sshd, for the rows over ssh
        self.peers_running = []

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

    def start_sshd(self):
        """A private sshd (tests/sshd.py); None, said once, where there is none."""
        if self.sshd is None:
            from sshd import Sshd, missing
            reason = missing()
            if reason:
                print("  ! no rows over ssh: " + reason)
                self.sshd = False
            else:
                self.sshd = Sshd(os.path.join(self.base, "sshd")).start()
                # Our git and the daemons' (started after this) use its client files.
                os.environ["GIT_SSH_COMMAND"] = self.sshd.ssh_command
        return self.sshd or None

    def machine(self, name, remote, settings=FAST, via=None, thin=False):
        """A machine on `remote`, set up for the chosen sync method, or `via` "ssh"
        (syncmethod = ssh through the private sshd); a thin one (see make_thin) with
        `thin`; not started."""
        xmpp = None
        if via == "ssh":
            m = Machine(self.base, name, remote, None, settings, ssh=self.start_sshd(),
                        thin=thin)
            self.machines.append(m)
            return m
        if self.sync == "xmpp":
            self.start_prosody()
            xmpp = self
        m = Machine(self.base, name, remote, xmpp, settings, thin=thin)
        self.machines.append(m)
        return m

    def stop(self, *machines):
        for m in machines or list(self.machines):
            m.stop()
            if m in self.machines:
                self.machines.remove(m)

    def close(self):
        self.stop()
        for pair in self.peers_running:
            pair.stop()
        if self.server:
            self.server.stop()
        if self.sshd:
            self.sshd.stop()


def install_hook(remote, *machines):
    """The repository's post-receive hook tells every machine about a push."""
    hook = os.path.join(remote, "hooks", "post-receive")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"), hook)
    os.chmod(hook, 0o755)
    for m in machines:
        git("--git-dir", remote, "config", "--add", "autosync.config", m.config)


# --------------------------------------------------------------------------
# Syncthing, the peer: two instances on loopback sharing one folder

SYNCTHING_DELAYS = (1, 10)  # fsWatcherDelayS: its fastest, and its default
SYNCTHING_INSTALL = "Syncthing not found (install it with `apt-get install -y syncthing`)"
PROPAGATION_AIMS = {"defaults": 0.25, "lowest": 0.1}


def syncthing_missing():
    return None if shutil.which("syncthing") else SYNCTHING_INSTALL


class Syncthing:
    """One instance: its own home, GUI/REST and sync port on 127.0.0.1, nothing else.

    No discovery (global or local), no relays, NAT, STUN, usage reporting, crash
    reporting or upgrades: all off in config.xml, and STNOUPGRADE in its environment."""

    def __init__(self, base, name):
        self.name = name
        self.home = os.path.join(base, "st-" + name)
        self.log = os.path.join(base, "st-" + name + ".log")
        self.proc = None
        out = subprocess.run(["syncthing", "generate", "--home=" + self.home,
                              "--no-default-folder", "--skip-port-probing"],
                             env=self.environment(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             check=True).stdout
        self.tree = ET.parse(os.path.join(self.home, "config.xml"))
        root = self.tree.getroot()
        self.id = root.find("device").get("id")
        self.apikey = root.find("gui/apikey").text
        self.gui_port, self.port = free_port(), free_port()
        assert self.id in out, out

    def environment(self):
        env = dict(os.environ, STNOUPGRADE="1", STNORESTART="1", STNODEFAULTFOLDER="1",
                   STNOUPGRADECHECK="1")
        for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                     "ALL_PROXY"):
            env.pop(name, None)
        return env

    def configure(self, peer, folder, delay):
        """Loopback only; `peer` by ID at its port; one folder shared with it, watched."""
        root = self.tree.getroot()
        root.find("gui").find("address").text = "127.0.0.1:%d" % self.gui_port
        options = root.find("options")
        for key, value in (("listenAddress", "tcp://127.0.0.1:%d" % self.port),
                           ("globalAnnounceServer", ""), ("globalAnnounceEnabled", "false"),
                           ("localAnnounceEnabled", "false"), ("relaysEnabled", "false"),
                           ("natEnabled", "false"), ("urAccepted", "-1"), ("urSeen", "3"),
                           ("autoUpgradeIntervalH", "0"), ("crashReportingEnabled", "false"),
                           ("startBrowser", "false"), ("announceLANAddresses", "false"),
                           ("stunKeepaliveStartS", "0"), ("stunServer", ""),
                           ("releasesURL", ""), ("urURL", ""), ("crashReportingURL", ""),
                           ("setLowPriority", "false")):
            element = options.find(key)
            if element is None:
                element = ET.SubElement(options, key)
            element.text = value
        device = ET.SubElement(root, "device", id=peer.id, name=peer.name, compression="metadata",
                               introducer="false", skipIntroductionRemovals="false",
                               introducedBy="")
        ET.SubElement(device, "address").text = "tcp://127.0.0.1:%d" % peer.port
        ET.SubElement(device, "paused").text = "false"
        ET.SubElement(device, "autoAcceptFolders").text = "false"
        os.makedirs(os.path.join(folder, ".stfolder"), exist_ok=True)
        shared = ET.SubElement(root, "folder", id="bench", label="bench", path=folder,
                               type="sendreceive", rescanIntervalS="3600",
                               fsWatcherEnabled="true", fsWatcherDelayS=str(delay),
                               ignorePerms="false", autoNormalize="true")
        for device_id in (self.id, peer.id):
            ET.SubElement(shared, "device", id=device_id, introducedBy="")
        self.tree.write(os.path.join(self.home, "config.xml"))
        self.folder = folder

    def start(self):
        self.logfile = open(self.log, "ab")
        self.proc = subprocess.Popen(["syncthing", "serve", "--home=" + self.home, "--no-browser",
                                      "--no-restart", "--no-upgrade"],
                                     env=self.environment(), stdin=subprocess.DEVNULL,
                                     stdout=self.logfile, stderr=subprocess.STDOUT)

    def rest(self, path):
        request = urllib.request.Request("http://127.0.0.1:%d%s" % (self.gui_port, path),
                                         headers={"X-API-Key": self.apikey})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=5) as response:
                return json.load(response)
        except (OSError, ValueError):
            return None

    def connected(self, peer):
        answer = self.rest("/rest/system/connections") or {}
        return (answer.get("connections") or {}).get(peer.id, {}).get("connected")

    def idle(self):
        answer = self.rest("/rest/db/status?folder=bench") or {}
        return answer.get("state") == "idle" and answer.get("needTotalItems") == 0

    def stop(self):
        if self.proc:
            terminate(self.proc, "Syncthing %s" % self.name)
            self.logfile.close()
            self.proc = None


class SyncthingPair:
    """A and B, one shared folder each, watcher delay `delay`; started and connected."""

    def __init__(self, run, label, delay, fill=None, timeout=60):
        """fill(folder): what both folders hold before the start (the same files)."""
        base = os.path.join(run.base, "st-%s-%d" % (label, delay))
        os.makedirs(base)
        self.a, self.b = Syncthing(base, "a"), Syncthing(base, "b")
        self.a.configure(self.b, os.path.join(base, "folder-a"), delay)
        self.b.configure(self.a, os.path.join(base, "folder-b"), delay)
        for s in (self.a, self.b) if fill else ():
            fill(s.folder)
        run.peers_running.append(self)
        started = time.monotonic()
        for s in (self.a, self.b):
            s.start()
        if not wait_for(lambda: self.a.connected(self.b) and self.b.connected(self.a), 60, 0.1):
            raise RuntimeError("the two Syncthing instances did not connect within 60 s; see "
                               + base)
        if not wait_for(self.idle, timeout, 0.1):
            raise RuntimeError("Syncthing not idle within %d s; see %s" % (timeout, base))
        self.ready = time.monotonic() - started  # both scanned, indexes exchanged

    def idle(self):
        return self.a.idle() and self.b.idle()

    def stop(self):
        for s in (self.a, self.b):
            s.stop()


def syncthing_propagation(run, delay, trials, pair=None):
    """Seconds from writing a small file in A's folder until B's holds the same content
    (on `pair`, or a new pair with empty folders)."""
    pair = pair or SyncthingPair(run, "prop", delay)
    times = []
    try:
        for i in range(trials):
            name = "trial-%03d.txt" % i
            content = ("syncthing trial %d written at %.6f\n" % (i, time.time())).encode()
            started = time.monotonic()
            write_file(os.path.join(pair.a.folder, name), content)
            if wait_for(lambda: read_file(os.path.join(pair.b.folder, name)) == content,
                        30 + delay, 0.003):
                times.append(time.monotonic() - started)
            else:
                print("  ! Syncthing trial %d: not on B within %d s" % (i, 30 + delay))
            wait_for(pair.idle, 30, 0.05)
            time.sleep(0.2)
    finally:
        pair.stop()
    return times


def peer_cells(peers, mine, stat=median):
    """Syncthing's columns for a row: its figure at each delay, and fastest / ours."""
    cells = {}
    for delay in SYNCTHING_DELAYS:
        values = peers.get(delay)
        cells["st%d" % delay] = secs(stat(values)) if values else ("lost" if delay in peers
                                                                   else "")
    fastest = [stat(peers[d]) for d in SYNCTHING_DELAYS if peers.get(d)]
    if fastest and mine:
        cells["ratio"] = "%.1fx" % (min(fastest) / mine)
    return cells


# --------------------------------------------------------------------------
# 1. propagation

def describe(delays):
    """readfrequency/pushdelay/maxwait, as the table's labels show them."""
    # readfrequency not set: the batch closes when its files are closed ("on close").
    return "/".join("on close" if delays[key] in (None, "") else "%g" % delays[key]
                    for key in DELAY_KEYS) + " s"


def start_pair(run, prefix, remote, settings, via=None, thin=False):
    """Two started machines on `remote`, ready and (XMPP) seeing each other, or (via
    "ssh") each watching the remote; thin machines with `thin`."""
    a = run.machine(prefix + "-a", remote, settings, via, thin)
    b = run.machine(prefix + "-b", remote, settings, via, thin)
    if via == "ssh":
        for m in (a, b):
            m.start()
        for m in (a, b):
            m.wait_ready()
        if not wait_for(lambda: all(m.status().get("link") == "up" for m in (a, b)), 30, 0.05):
            print("  ! the two ssh links did not come up within 30 s")
        return a, b
    if run.sync == "hook":
        install_hook(remote, a, b)
    for m in (a, b):
        m.start()
    for m in (a, b):
        m.wait_ready()
    if run.sync == "xmpp" and not wait_for(lambda: a.sees(b) and b.sees(a), 30, 0.1):
        print("  ! the two XMPP listeners did not see each other within 30 s")
    return a, b


def propagation(run, sizes):
    """A small file written on A until B has it: at the shipped defaults, at the lowest
    settings, bare git doing it by hand, and Syncthing (delay 1 s and 10 s)."""
    floor_remote = make_remote(os.path.join(run.base, "floor.git"))
    c, d = os.path.join(run.base, "floor-c"), os.path.join(run.base, "floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    floor, floor_ssh = [], []
    results = {}
    # Each profile announced the chosen way (XMPP or the hook), then over ssh (a private
    # sshd: the remote watched with autosync-remote, git's push and pull through it too),
    # the floor interleaved with both; over ssh its floor is bare git through the same sshd.
    series = [(p, s, run.sync) for p, s in PROFILES.items()]
    sshd = run.start_sshd()
    if sshd:
        series += [(p, s, "ssh") for p, s in PROFILES.items()]
        # As before the held connection: a login for every push, fetch and watch.
        series += [("defaults", PROFILES["defaults"], "ssh-percommand")]

    def floor_trial(i, profile):
        name = "floor-%s-%03d.txt" % (profile, i)
        content = ("floor %d written at %.6f\n" % (i, time.time())).encode()
        started = time.monotonic()
        write_file(os.path.join(c, name), content)
        git("add", "--", name, cwd=c)
        git("commit", "-q", "-m", "add " + name, cwd=c)
        over_ssh = "-ssh" in profile
        url = sshd.url(floor_remote) if over_ssh else floor_remote
        git("push", "-q", url, "HEAD:main", cwd=c)
        git("pull", "-q", "--no-rebase", "--no-edit", url, "main", cwd=d)
        if read_file(os.path.join(d, name)) == content:
            (floor_ssh if over_ssh else floor).append(time.monotonic() - started)

    for profile, settings, via in series:
        print("  autosync at the %s, %s ..." % (profile, via), flush=True)
        over_ssh = via.startswith("ssh")
        tag = profile + ("-" + via if over_ssh else "")
        remote = make_remote(os.path.join(run.base, "prop-%s.git" % tag))
        held = os.environ.get("GIT_SSH_COMMAND")
        if via == "ssh-percommand":  # the daemons' ssh: the user's own "no multiplexing"
            os.environ["GIT_SSH_COMMAND"] = held + " -o ControlPath=none"
        try:
            a, b = start_pair(run, "prop-" + tag, remote, settings, "ssh" if over_ssh else None)
        finally:
            if held is not None:
                os.environ["GIT_SSH_COMMAND"] = held
        delays = a.delays()
        a_events, b_events = Events(a), Events(b)
        phases = {"A: write to committed": [], "A: committed to pushed": [],
                  "B: A's push to pull started": [], "B: pull (git pull)": []}
        suite, missed = [], 0
        timeout = 30 + sum(v or 0 for v in delays.values())
        for i in range(sizes["trials"]):
            # Our suite, then bare git, alternately: both see the same machine load.
            name = "trial-%03d.txt" % i
            content = ("trial %d written at %.6f\n" % (i, time.time())).encode()
            wall, started = time.time(), time.monotonic()
            write_file(os.path.join(a.path, name), content)
            if wait_for(lambda: read_file(os.path.join(b.path, name)) == content, timeout, 0.003):
                suite.append(time.monotonic() - started)
                wait_for(lambda: b_events.first("pull-finished", wall), 5, 0.01)
                marks = [wall, a_events.first("committed", wall), a_events.first("pushed", wall),
                         b_events.first("pull-started", wall),
                         b_events.first("pull-finished", wall)]
                if None not in marks:
                    for key, start, end in zip(phases, marks, marks[1:]):
                        phases[key].append(end - start)
            else:
                missed += 1
                print("  ! trial %d: the file did not reach B within %.0f s" % (i, timeout))
                if missed >= 3 and not suite:
                    print("  ! giving up on propagation (try --sync hook)")
                    break
            wait_for(lambda: a.settled() and b.settled(), 30, 0.05)
            floor_trial(i, tag)
            time.sleep(0.2)
        a_events.close()
        b_events.close()
        run.stop(a, b)
        results[profile, via] = (delays, suite, phases, missed)

    peers = {}
    if run.peers:
        for delay in SYNCTHING_DELAYS:
            print("  Syncthing at fsWatcherDelayS %d ..." % delay, flush=True)
            try:
                peers[delay] = syncthing_propagation(run, delay, sizes["trials"])
            except Exception as e:  # ours still count
                print("  ! Syncthing at delay %d failed: %s" % (delay, e))
                peers[delay] = []

    rows = []
    for (profile, via), (delays, suite, phases, missed) in results.items():
        slack = PROPAGATION_AIMS[profile]
        floor_median, floor_times = (median(floor_ssh), floor_ssh) if via.startswith("ssh") \
            else (median(floor), floor)
        label = "propagation, %s (%s)%s: median" % (
            profile, describe(delays), {"ssh": ", over ssh (held connection)",
                                        "ssh-percommand": ", over ssh (a login per command)"
                                        }.get(via, ""))
        if suite:
            mine = median(suite)
            ok = floor_median is not None and mine <= floor_median + slack
            rows.append(row(label, secs(mine), secs(floor_median), "<= floor + %g s" % slack, ok,
                            "%d trials, %s" % (len(suite), via) + (
                                "; floor: bare git through the same sshd (a login per "
                                "command)" if via.startswith("ssh") else ""),
                            **peer_cells(peers, mine)))
            if via == "ssh" and profile == "defaults" and floor:
                # The aim: the held connection as near the local path as this.
                rows.append(row("  beside the local-path floor", secs(mine), secs(median(floor)),
                                "<= floor + 0.15 s", mine <= median(floor) + 0.15,
                                "bare git through a local path"))
            rows.append(row("  90th percentile", secs(p90(suite)), secs(p90(floor_times)),
                            **peer_cells(peers, p90(suite), p90)))
            rows.append(row("  min / max", "%s / %s" % (secs(min(suite)), secs(max(suite))),
                            "%s / %s" % (secs(min(floor_times, default=None)),
                                         secs(max(floor_times, default=None)))))
            for key, values in phases.items():
                if values:
                    rows.append(row("  of which " + key, secs(median(values))))
        else:
            rows.append(row(label, "lost", secs(floor_median), "", False))
        if missed:
            rows.append(row("  trials lost", str(missed), "0", "0", False))
    if peers:
        best = min((median(v) for v in peers.values() if v), default=None)
        mine = median(results["defaults", run.sync][1])
        if best and mine:
            rows.append(row("propagation: Syncthing's fastest / ours at the defaults",
                            "%.1fx" % (best / mine), "", ">= 3x", best / mine >= 3))
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


def count_files(folder, prefix):
    """Files (not Syncthing's hidden temporaries) under folder/prefix/*/."""
    total = 0
    try:
        subfolders = os.listdir(os.path.join(folder, prefix))
    except OSError:
        return 0
    for sub in subfolders:
        try:
            total += sum(1 for n in os.listdir(os.path.join(folder, prefix, sub))
                         if not n.startswith("."))
        except OSError:
            pass
    return total


def burst(run, sizes):
    """N files untarred into A until B has them all (and until the remote has them), at
    the shipped defaults and the lowest settings, beside bare git (untar, add, commit,
    push, pull) and Syncthing (untar until all are in B's folder)."""
    count = sizes["burst_files"]
    limit = 300
    floor_remote = make_remote(os.path.join(run.base, "burst-floor.git"))
    floor_d = os.path.join(run.base, "burst-floor-d")
    git("clone", "-q", floor_remote, floor_d)

    sides = {}     # name: {"arrived": [], "pushed": [], "commits": [], "phases": {...}}
    pairs = {}
    for profile, settings in PROFILES.items():
        remote = make_remote(os.path.join(run.base, "burst-%s.git" % profile))
        a, b = start_pair(run, "burst-" + profile, remote, settings)
        pairs[profile] = (a, b, remote, (Events(a), Events(b)), a.delays())
        sides[profile] = {"arrived": [], "pushed": [], "commits": [],
                          "phases": {"untar (tar -xf)": [], "untar end to last commit": [],
                                     "last commit to pushed": [], "pushed to all on B": [],
                                     "B: A's push to pull started": [],
                                     "B: pull started to all on disk": [],
                                     "B: pull (pull-started to pull-finished)": [],
                                     "B: pull-finished to both settled": []}}
    sides["floor"] = {"arrived": [], "pushed": [], "phases": {
        "untar (tar -xf)": [], "git add -A": [], "git commit": [], "git push": [],
        "git pull": []}}
    st_pairs = {}
    if run.peers:
        for delay in SYNCTHING_DELAYS:
            sides["st%d" % delay] = {"arrived": []}
            try:
                st_pairs[delay] = SyncthingPair(run, "burst", delay)
            except Exception as e:  # ours still count
                print("  ! Syncthing at delay %d failed: %s" % (delay, e))

    def ours(profile, prefix, archive):
        a, b, remote, (events, b_events), delays = pairs[profile]
        side = sides[profile]
        before, head = commit_count(remote), remote_head(remote)
        wall, started = time.time(), time.monotonic()
        subprocess.run(["tar", "-xf", archive, "-C", a.path], check=True)
        untarred = time.time()
        marks = {}

        def done():
            nonlocal head
            now = time.monotonic()
            if "pushed" not in marks:
                new = remote_head(remote)
                if new != head:
                    head = new
                    if files_under(remote, prefix) == count:
                        marks["pushed"] = now
            if "arrived" not in marks and count_files(b.path, prefix) == count:
                marks["arrived"] = now
            return len(marks) == 2
        if not wait_for(done, limit, 0.02):
            print("  ! %s %s: after %d s, %d files on the remote, %d on B"
                  % (profile, prefix, limit, files_under(remote, prefix),
                     count_files(b.path, prefix)))
            return
        side["arrived"].append(marks["arrived"] - started)
        side["pushed"].append(marks["pushed"] - started)
        side["commits"].append(commit_count(remote) - before)
        wait_for(lambda: events.first("pushed", wall), 5, 0.01)
        committed = [e["time"] for e in list(events.seen)
                     if e.get("event") == "committed" and e["time"] >= wall]
        pushed = events.first("pushed", max(committed or [wall]))
        arrived = wall + marks["arrived"] - started  # as Unix time, like the events
        if committed and pushed:
            for key, value in zip(side["phases"], (
                    untarred - wall, committed[-1] - untarred, pushed - committed[-1],
                    arrived - pushed)):
                side["phases"][key].append(value)
        wait_for(lambda: a.settled() and b.settled(), 60, 0.1)
        # B's side: its pull of the burst (the last pull that started before all arrived),
        # and what its committer did after it (the rescan) until idle again.
        idle = time.time()
        starts = [e["time"] for e in list(b_events.seen) if e.get("event") == "pull-started"
                  and pushed and pushed <= e["time"] <= arrived]
        if starts:
            finished = b_events.first("pull-finished", starts[-1])
            for key, value in (("B: A's push to pull started", starts[-1] - pushed),
                               ("B: pull started to all on disk", arrived - starts[-1]),
                               ("B: pull (pull-started to pull-finished)",
                                finished and finished - starts[-1]),
                               ("B: pull-finished to both settled", finished and idle - finished)):
                if value is not None:
                    side["phases"][key].append(value)

    def floor(prefix, archive):
        clone = os.path.join(run.base, "burst-floor-" + prefix)
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
        git("pull", "-q", "--no-rebase", "--no-edit", cwd=floor_d)
        steps.append(time.monotonic())
        side = sides["floor"]
        if count_files(floor_d, prefix) == count:
            side["arrived"].append(steps[-1] - steps[0])
        side["pushed"].append(steps[-2] - steps[0])
        for key, start, end in zip(side["phases"], steps, steps[1:]):
            side["phases"][key].append(end - start)
        # The clone stays until the end of the run: deleting 10,000 files here
        # would slow the next untar (see make_archive).

    def syncthing(delay, prefix, archive):
        pair = st_pairs[delay]
        started = time.monotonic()
        subprocess.run(["tar", "-xf", archive, "-C", pair.a.folder], check=True)
        if wait_for(lambda: count_files(pair.b.folder, prefix) == count, limit, 0.02):
            sides["st%d" % delay]["arrived"].append(time.monotonic() - started)
        else:
            print("  ! Syncthing %d s %s: %d files on B after %d s"
                  % (delay, prefix, count_files(pair.b.folder, prefix), limit))
        wait_for(pair.idle, 60, 0.1)

    steps = [(name, (lambda f, arg: lambda p, ar: f(arg, p, ar))(ours, name))
             for name in PROFILES]
    steps.append(("floor", floor))
    steps += [("st%d" % d, (lambda arg: lambda p, ar: syncthing(arg, p, ar))(d))
              for d in st_pairs]
    for i in range(sizes["burst_trials"]):
        prefix = "burst-%d" % i
        archive = make_archive(run.base, prefix, count, "trial %d %.6f" % (i, time.time()))
        # Each side starts with nothing left to write back; they take turns going first.
        order = steps[i % len(steps):] + steps[:i % len(steps)]
        for name, step in order:
            print("  trial %d: %s ..." % (i, name), flush=True)
            os.sync()
            step(prefix, archive)
    for a, b, remote, events, delays in pairs.values():
        for e in events:
            e.close()
        run.stop(a, b)
    for pair in st_pairs.values():
        pair.stop()

    rows = []
    bare = sides["floor"]
    floor_arrived, floor_pushed = median(bare["arrived"]), median(bare["pushed"])
    peers = {d: sides["st%d" % d]["arrived"] for d in SYNCTHING_DELAYS if run.peers}
    for profile in PROFILES:
        side, delays = sides[profile], pairs[profile][4]
        label = "burst of %d files, %s (%s): untar to on B" % (count, profile,
                                                                  describe(delays))
        if not side["arrived"]:
            rows.append(row(label, "lost", secs(floor_arrived), "<= 1.5x bare git", False))
            continue
        mine = median(side["arrived"])
        ratio = mine / floor_arrived if floor_arrived else None
        rows.append(row(label, secs(mine), secs(floor_arrived), "<= 1.5x bare git",
                        ratio is not None and ratio <= 1.5,
                        "%.2fx bare git; %d runs" % (ratio, len(side["arrived"]))
                        if ratio else "", **peer_cells(peers, mine)))
        rows.append(row("  untar to pushed (the remote has all)", secs(median(side["pushed"])),
                        secs(floor_pushed)))
        for key, values in side["phases"].items():
            if values:
                rows.append(row("  of which " + key, secs(median(values))))
        rows.append(row("  commits made", ", ".join(map(str, side["commits"])), "1", "<= 2",
                        max(side["commits"]) <= 2))
        if peers.get(1):
            rows.append(row("  sooner than Syncthing at delay 1", "", "", "yes",
                            mine < median(peers[1])))
    for key in ("untar (tar -xf)", "git add -A", "git commit", "git push", "git pull"):
        rows.append(row("  bare git: " + key, "", secs(median(bare["phases"][key]))))
    return rows


# --------------------------------------------------------------------------
# 3. many machines

def many_machines(run, sizes):
    """N machines on one account and one bare remote: a change on one until all the
    others have it (the last arrival), and their pulls at once, counting failures."""
    rows = []
    for profile in PROFILES:
        print("  %d machines at the %s ..." % (sizes["machines"], profile), flush=True)
        rows += many_machines_at(run, sizes, profile)
    return rows


def many_machines_at(run, sizes, profile):
    n, settings = sizes["machines"], PROFILES[profile]
    remote = make_remote(os.path.join(run.base, "many-%s.git" % profile))
    machines = [run.machine("many-%s-%d" % (profile, i), remote, settings) for i in range(n)]
    if run.sync == "hook":
        install_hook(remote, *machines)
    started = time.monotonic()
    for m in machines:
        m.start()
    for m in machines:
        m.wait_ready(300)
    if run.sync == "xmpp" and not wait_for(
            lambda: all(m.sees(o) for m in machines for o in machines if o is not m), 60, 0.2):
        print("  ! not every XMPP listener saw all the others within 60 s")
    print("  (%d machines started and ready in %.0f s)" % (n, time.monotonic() - started))
    delays = machines[0].delays()
    events = [Events(m) for m in machines]

    floor_remote = make_remote(os.path.join(run.base, "many-floor-%s.git" % profile))
    clones = [os.path.join(run.base, "many-floor-%s-%d" % (profile, i)) for i in range(n)]
    for clone in clones:
        git("clone", "-q", floor_remote, clone)

    last, floor, lost = [], [], 0
    timeout = 30 + sum(v or 0 for v in delays.values())
    for i in range(sizes["many_trials"]):
        writer = machines[i % n]
        others = [m for m in machines if m is not writer]
        name = "many-%03d.txt" % i
        content = ("written on %s at %.6f\n" % (writer.name, time.time())).encode()
        started = time.monotonic()
        write_file(os.path.join(writer.path, name), content)
        arrived = {}

        def everyone():
            for m in others:
                if m.name not in arrived and read_file(os.path.join(m.path, name)) == content:
                    arrived[m.name] = time.monotonic() - started
            return len(arrived) == len(others)
        if wait_for(everyone, timeout, 0.003):
            last.append(max(arrived.values()))
        else:
            lost += 1
            print("  ! trial %d: after %.0f s only %d of %d machines have it"
                  % (i, timeout, len(arrived), len(others)))
        wait_for(lambda: all(m.settled() for m in machines), 60, 0.1)

        # The floor: bare git commits and pushes on one clone, then the others pull at once.
        source = clones[i % n]
        started = time.monotonic()
        write_file(os.path.join(source, name), content)
        git("add", "--", name, cwd=source)
        git("commit", "-q", "-m", "add " + name, cwd=source)
        git("push", "-q", cwd=source)
        pulls = [subprocess.Popen(["git", "pull", "-q", "--no-rebase", "--no-edit"], cwd=c,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
                 for c in clones if c != source]
        codes = [p.wait() for p in pulls]
        if not any(codes):
            floor.append(time.monotonic() - started)
        time.sleep(0.2)

    failed = [e for ev in events for e in list(ev.seen) if e.get("event") == "failed"]
    failed_pulls = [e for e in failed if "pull" in str(e.get("op", ""))]
    errors = ["%s: %s" % (m.name, m.status().get("last_error")) for m in machines
              if m.status().get("last_error")]
    for ev in events:
        ev.close()
    run.stop(*machines)

    rows = []
    label = "%d machines, %s (%s): last of %d arrivals" % (n, profile, describe(delays), n - 1)
    if last:
        mine, bare = median(last), median(floor)
        rows.append(row(label + ", median", secs(mine), secs(bare), "<= floor + 0.5 s",
                        bare is not None and mine <= bare + 0.5,
                        "%d trials; floor: push, then %d git pulls at once" % (len(last), n - 1)))
        rows.append(row("  90th percentile of the last arrival", secs(p90(last)),
                        secs(p90(floor))))
    else:
        rows.append(row(label, "lost", secs(median(floor)), "", False))
    if lost:
        rows.append(row("  trials lost", str(lost), "0", "0", False))
    rows.append(row("  failed pulls (failed events)", str(len(failed_pulls)), "", "0",
                    not failed_pulls, "; ".join(sorted({str(e.get("error"))[:80]
                                                        for e in failed_pulls}))[:200]))
    if len(failed) > len(failed_pulls) or errors:
        rows.append(row("  other failures / last_error", str(len(failed) - len(failed_pulls)),
                        "", "", None, "; ".join(errors)[:200]))
    return rows


# --------------------------------------------------------------------------
# 4. a slow writer

def slow_writer(run, sizes):
    """A file written over N s, a line a second, the writer keeping it open: was a
    half-written version of it pushed, and how soon after the writer opened it?
    One machine per setting, one after the other: all machines share one XMPP
    account, and another machine's push makes a machine pull (and commit first)."""
    rows = []
    for profile in PROFILES:
        print("  at the %s ..." % profile, flush=True)
        rows += slow_writer_at(run, sizes, profile)
    return rows


def slow_writer_at(run, sizes, profile):
    settings = PROFILES[profile]
    seconds = sizes["slow_seconds"]
    remote = make_remote(os.path.join(run.base, "slow-%s.git" % profile))
    a = run.machine("slow-" + profile, remote, settings)
    if run.sync == "hook":
        install_hook(remote, a)
    a.start()
    a.wait_ready()
    # The catch-up pull after the XMPP login commits whatever is there, whatever the
    # delays: the writer starts once it is over, so the batching alone is measured.
    if run.sync == "xmpp" and not wait_for(lambda: "link up" in a.logtext(), 30, 0.05):
        print("  ! %s: no 'link up' line within 30 s" % a.name)
    time.sleep(1.0)
    wait_for(a.settled, 30, 0.05)
    delays = a.delays()
    name = "slow.txt"
    seen, stop = [], threading.Event()
    opened = time.monotonic()

    def watch_remote():
        head = remote_head(remote)
        while not stop.is_set():
            new = remote_head(remote)
            if new != head:
                head = new
                content = subprocess.run(
                    ["git", "--git-dir", remote, "show", "%s:%s" % (new, name)],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
                seen.append((time.monotonic() - opened, content))
            time.sleep(0.05)
    watcher = threading.Thread(target=watch_remote, daemon=True)
    with open(os.path.join(a.path, name), "w") as f:
        opened = time.monotonic()
        watcher.start()
        for k in range(seconds):
            f.write("line %d of a slowly written file\n" % (k + 1))
            f.flush()
            time.sleep(1.0)
    finished = time.monotonic() - opened
    final = read_file(os.path.join(a.path, name))
    arrived = wait_for(lambda: any(c == final for _, c in seen),
                       30 + sum(v or 0 for v in delays.values()), 0.1)
    stop.set()
    watcher.join()
    # Every version of the file in the remote's history, not only the heads seen.
    revisions = git("--git-dir", remote, "log", "--format=%H", "main", "--", name).split()
    versions = [git("--git-dir", remote, "show", "%s:%s" % (r, name)).encode()
                for r in revisions]
    half = [v for v in versions if v != final and final.startswith(v)]
    early = [t for t, c in seen if c and c != final and final.startswith(c) and t < finished]
    run.stop(a)
    first = min(early) if early else None
    ok = first is None or first >= delays["maxwait"]
    note = "written over %.0f s" % finished
    if first is not None:
        note = "first pushed %.1f s after opening; " % first + note
    if not arrived:
        note += "; final content not pushed"
    return [row("slow writer, %s (%s): half-written pushed" % (profile, describe(delays)),
                "%d of %d versions" % (len(half), len(versions)), "", "none before maxwait",
                ok, note)]


# --------------------------------------------------------------------------
# 5. scale

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
    ] + history_disk(run, sizes)


def tree_bytes(folder):
    total = 0
    for root, _, names in os.walk(folder):
        total += sum(os.lstat(os.path.join(root, n)).st_size for n in names)
    return total


def history_disk(run, sizes):
    """The disk a thin machine (`init --thin`: a partial clone, --filter=blob:none) and a
    full one use after N commits of a 1 MB file that does not compress (1,000; 50 with
    --quick). The remote's history is written with `git fast-import` (no work tree); the
    clones are what `init` makes (--no-local: a local clone would ignore the filter)."""
    commits = 1000 if sizes["tree_files"] >= FULL["tree_files"] else 50
    remote = os.path.join(run.base, "history.git")
    git("init", "-q", "--bare", "-b", "main", remote)
    serve_partial_clones(remote)
    started = time.monotonic()
    proc = subprocess.Popen(("git", "--git-dir", remote, "-c", "gc.auto=0", "fast-import",
                             "--quiet"), stdin=subprocess.PIPE)
    for i in range(commits):
        data, message = os.urandom(1_000_000), b"version %d\n" % i
        proc.stdin.write(b"blob\nmark :%d\ndata %d\n" % (2 * i + 1, len(data)) + data + b"\n")
        proc.stdin.write(b"commit refs/heads/main\nmark :%d\ncommitter bench <b@x> %d +0000\n"
                         b"data %d\n%s" % (2 * i + 2, 1_700_000_000 + i, len(message), message))
        if i:
            proc.stdin.write(b"from :%d\n" % (2 * i))
        proc.stdin.write(b"M 100644 :%d big.bin\n\n" % (2 * i + 1))
    proc.stdin.close()
    proc.wait()
    made = time.monotonic() - started
    used = {}
    for kind, options in (("full", []), ("thin", ["--filter=blob:none"])):
        folder = os.path.join(run.base, "history-%s" % kind)
        started = time.monotonic()
        git("clone", "-q", "--no-local", *options, remote, folder)
        used[kind] = (tree_bytes(os.path.join(folder, ".git")), time.monotonic() - started)
    mb = lambda n: "%.1f MB" % (n / 1e6)
    print("  (%d commits of a 1 MB file written in %.0f s; clones: full %.1f s, thin %.1f s)"
          % (commits, made, used["full"][1], used["thin"][1]))
    return [
        ("scale: .git after %d commits of a 1 MB file: thin machine" % commits,
         mb(used["thin"][0]), mb(used["full"][0]) + " (full clone)", "", None,
         "the remote %s; thin = init --thin (a partial clone), plus the 1 MB file in the "
         "folder on both" % mb(tree_bytes(remote))),
    ]


# --------------------------------------------------------------------------
# 6. one change in a large tree

def make_bulk_remote(path, files, per_folder=100):
    """A bare repository whose main holds README and `files` small files, `per_folder` to
    a folder (d0000/f0000000.txt ...), built with `git fast-import`: no work tree and no
    index, so a million files cost a minute or two rather than an hour of writes and
    `git add -A`. Its objects are packed, as a clone would have them."""
    git("init", "-q", "--bare", path)
    proc = subprocess.Popen(("git", "--git-dir", path, "-c", "gc.auto=0", "fast-import",
                             "--quiet"), stdin=subprocess.PIPE)
    out = io.BufferedWriter(proc.stdin, 1 << 20)
    names = []
    for n in range(files):
        data = b"tree file %d\n" % n
        out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (n + 1, len(data), data))
        names.append(b"d%04d/f%07d.txt" % (n // per_folder, n))
    readme = b"benchmark folder\n"
    out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (files + 1, len(readme), readme))
    message = b"first"
    out.write(b"commit refs/heads/main\ncommitter Bench <bench@example.org> %d +0000\n"
              b"data %d\n%s\n" % (int(time.time()), len(message), message))
    out.write(b"M 100644 :%d README\n" % (files + 1))
    for n, name in enumerate(names):
        out.write(b"M 100644 :%d %s\n" % (n + 1, name))
    out.write(b"\n")
    out.close()
    if proc.wait():
        raise RuntimeError("git fast-import failed for %s" % path)
    git("--git-dir", path, "symbolic-ref", "HEAD", "refs/heads/main")
    return path


def bulk_path(files, n, per_folder=100):
    return "d%04d/f%07d.txt" % ((n % files) // per_folder, n % files)


def onechange(run, sizes):
    """A one-file change in a committed tree of N small files (N/100 folders) until B has
    it, on the real suite at the shipped defaults, beside bare git doing it plainly
    (`git add -- PATH`, `git commit`, `git push`, `git pull` in a second clone)."""
    files, trials = sizes["onechange_files"], sizes["onechange_trials"]
    started = time.monotonic()
    remote = make_bulk_remote(os.path.join(run.base, "one.git"), files)
    made = time.monotonic() - started
    # The floor's remote: the same history, its own refs (a local clone links the objects).
    floor_remote = os.path.join(run.base, "one-floor.git")
    git("clone", "-q", "--bare", remote, floor_remote)
    c, d = os.path.join(run.base, "one-floor-c"), os.path.join(run.base, "one-floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    print("  (tree of %d files made in %.0f s; the floor's two clones ready after %.0f s)"
          % (files, made, time.monotonic() - started), flush=True)
    thin = sizes.get("onechange_thin")
    if thin:  # both remotes serve partial clones, as `init --thin` requires; bare git thin too
        for where in (remote, floor_remote):
            serve_partial_clones(where)
        for path in (c, d):
            make_thin(path)
    extra = sizes.get("git_config") or []
    env_before = dict(os.environ)
    if extra:  # candidate git settings, for the suite only (git_environment keeps them)
        count = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
        for i, (key, value) in enumerate(extra, start=count):
            os.environ["GIT_CONFIG_KEY_%d" % i] = key
            os.environ["GIT_CONFIG_VALUE_%d" % i] = value
        os.environ["GIT_CONFIG_COUNT"] = str(count + len(extra))
    try:
        a, b = start_pair(run, "one", remote,
                          dict(PROFILES["defaults"], **dict(sizes.get("settings") or [])),
                          thin=thin)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    print("  (the suite's two machines watching and idle after %.0f s)"
          % (time.monotonic() - started), flush=True)
    delays = a.delays()
    a_events, b_events = Events(a), Events(b)
    phases = {"A: write to committed": [], "A: committed to pushed": [],
              "B: A's push to pull started": [], "B: pull (git pull)": []}
    floor_phases = {"git add -- PATH": [], "git commit": [], "git push": [], "git pull (B)": []}
    suite, floor, missed = [], [], 0
    for i in range(trials):
        # Our suite, then bare git, alternately: both see the same machine load.
        name = bulk_path(files, 7919 * (i + 1))  # spread over the tree
        content = ("changed in trial %d at %.6f\n" % (i, time.time())).encode()
        wall, t0 = time.time(), time.monotonic()
        write_file(os.path.join(a.path, name), content)
        if wait_for(lambda: read_file(os.path.join(b.path, name)) == content, 60, 0.003):
            suite.append(time.monotonic() - t0)
            wait_for(lambda: b_events.first("pull-finished", wall), 5, 0.01)
            marks = [wall, a_events.first("committed", wall), a_events.first("pushed", wall),
                     b_events.first("pull-started", wall), b_events.first("pull-finished", wall)]
            if None not in marks:
                for key, start, end in zip(phases, marks, marks[1:]):
                    phases[key].append(end - start)
        else:
            missed += 1
            print("  ! trial %d: the change did not reach B within 60 s" % i)
        wait_for(lambda: a.settled() and b.settled(), 60, 0.05)

        t0 = time.monotonic()
        write_file(os.path.join(c, name), content)
        steps = [("git add -- PATH", ("add", "--", name), c),
                 ("git commit", ("commit", "-q", "-m", "change " + name), c),
                 ("git push", ("push", "-q", "origin", "HEAD:main"), c),
                 ("git pull (B)", ("pull", "-q", "--no-rebase", "--no-edit", "origin", "main"),
                  d)]
        for key, args, cwd in steps:
            s0 = time.monotonic()
            git(*args, cwd=cwd)
            floor_phases[key].append(time.monotonic() - s0)
        if read_file(os.path.join(d, name)) == content:
            floor.append(time.monotonic() - t0)
        time.sleep(0.2)
    a_events.close()
    b_events.close()
    run.stop(a, b)

    label = "onechange: one file changed in %d files, on B (%s)" % (files, describe(delays))
    if extra or sizes.get("settings"):
        label += " with " + ", ".join("%s=%s" % kv for kv in extra + sizes["settings"])
    if thin:
        label += ", thin machines"
    rows = []
    if suite:
        mine = median(suite)
        rows.append(row(label + ": median", secs(mine), secs(median(floor)),
                        "<= 0.5 s, 8x under bare git", mine <= 0.5 and bool(floor)
                        and median(floor) >= 8 * mine, "%d trials" % len(suite)))
        rows.append(row("  min / max", "%s / %s" % (secs(min(suite)), secs(max(suite))),
                        "%s / %s" % (secs(min(floor, default=None)),
                                     secs(max(floor, default=None)))))
        for key, values in phases.items():
            if values:
                rows.append(row("  of which " + key, secs(median(values))))
        for key, values in floor_phases.items():
            if values:
                rows.append(row("  bare git: " + key, "", secs(median(values))))
    else:
        rows.append(row(label, "lost", secs(median(floor)), "", False))
    if missed:
        rows.append(row("  trials lost", str(missed), "0", "0", False))
    return rows


# --------------------------------------------------------------------------
# 6b. a home folder's scale (issue 21): start, memory, idle, a rescan, a burst

HOME_AT = 1_000_000  # the size the aims are for


def write_many(folder, count, tag):
    """`count` new small files in a new folder `folder` (100 to a subfolder)."""
    for n in range(count):
        path = os.path.join(folder, "s%03d" % (n // 100))
        if n % 100 == 0:
            os.makedirs(path)
        with open(os.path.join(path, "n%05d.txt" % n), "w") as f:
            f.write("%s %d\n" % (tag, n))


def home(run, sizes):
    """A committed tree of N small files (N/100 folders, the issue's aims are at
    1,000,000): each machine's start until watching and idle (one machine at a time),
    the suite's memory and idle CPU there, a rescan that finds nothing, and a burst of
    new files until B has them all; bare git beside each on a clone of the same tree."""
    files, burst_files = sizes["home_files"], sizes["burst_files"]
    at_aim = files >= HOME_AT
    started = time.monotonic()
    remote = make_bulk_remote(os.path.join(run.base, "home.git"), files)
    floor_remote = os.path.join(run.base, "home-floor.git")
    git("clone", "-q", "--bare", remote, floor_remote)
    c, d = os.path.join(run.base, "home-floor-c"), os.path.join(run.base, "home-floor-d")
    git("clone", "-q", floor_remote, c)
    git("clone", "-q", floor_remote, d)
    a = run.machine("home-a", remote, PROFILES["defaults"])
    b = run.machine("home-b", remote, PROFILES["defaults"])
    print("  (tree of %d files, the floor's clones and ours ready after %.0f s)"
          % (files, time.monotonic() - started), flush=True)
    if run.sync == "hook":
        install_hook(remote, a, b)
    ready = [m.start().wait_ready(1800) for m in (a, b)]  # one at a time: no contention
    if run.sync == "xmpp" and not wait_for(lambda: a.sees(b) and b.sees(a), 60, 0.1):
        print("  ! the two XMPP listeners did not see each other within 60 s")
    status_times = []
    for _ in range(3):
        t0 = time.monotonic()
        git("status", "--porcelain", cwd=c)
        status_times.append(time.monotonic() - t0)
    time.sleep(1.0)
    rss = sum(r[2] for r in memory(a.proc.pid)) / 1024
    seconds = sizes["tree_idle_seconds"]
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(a.proc.pid) - cpu_before) / (time.monotonic() - t_before) * 100

    # A rescan that finds nothing (what a user's pullcmd, a resume or an overflow asks
    # for), as `autosync-notify sync` asks it: rescan, commit, push, answered once done;
    # bare git: `git add -A`.
    rescans, floor_rescans = [], []
    for _ in range(3):
        t0 = time.monotonic()
        if ask(a, {"cmd": "sync"}).get("ok"):
            rescans.append(time.monotonic() - t0)
        t0 = time.monotonic()
        git("add", "-A", cwd=c)
        floor_rescans.append(time.monotonic() - t0)

    # A resume that finds nothing (pause, then resume): a pull when the sync method asks,
    # a commit of what the watcher saw while paused (no rescan unless it missed events),
    # a push; until the committer is idle again.
    resumes = []
    for _ in range(3):
        ask(a, {"cmd": "pause"})
        wait_for(lambda: a.status().get("state") == "paused", 30, 0.01)
        t0 = time.monotonic()
        ask(a, {"cmd": "resume"})
        if wait_for(lambda: a.status().get("state") not in ("paused", None), 30, 0.002) and \
                wait_for(lambda: a.idle(), 600, 0.005):
            resumes.append(time.monotonic() - t0)

    # A burst of new files until B has them all; bare git: write, add -A, commit, push, pull.
    a_events = Events(a)
    t0 = time.monotonic()
    write_many(os.path.join(a.path, "burst"), burst_files, "home burst")
    last = os.path.join(b.path, "burst", "s%03d" % ((burst_files - 1) // 100),
                        "n%05d.txt" % (burst_files - 1))
    arrived = wait_for(lambda: count_files(b.path, "burst") == burst_files
                       and os.path.exists(last), 900, 0.05) and time.monotonic() - t0
    # ... and until A is idle again: its index brought up to date after the push (a
    # settle that cost 127 s at 1,000,000 files until each tree was read once).
    settled = arrived and wait_for(lambda: a.idle(), 900, 0.05) and time.monotonic() - t0
    commits = len([e for e in a_events.seen if e.get("event") == "committed"])
    a_events.close()
    t0 = time.monotonic()
    write_many(os.path.join(c, "burst"), burst_files, "home burst")
    git("add", "-A", cwd=c)
    git("commit", "-q", "-m", "burst", cwd=c)
    git("push", "-q", "origin", "HEAD:main", cwd=c)
    git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=d)
    floor_burst = time.monotonic() - t0
    run.stop(a, b)

    peer = {}
    if run.peers:
        peer = syncthing_home(run, min(files, SYNCTHING_HOME_FILES), sizes["onechange_trials"])

    def aim(text, ok):
        return (text, ok) if at_aim else ("%s (at %d files)" % (text, HOME_AT), None)

    rows = [row("home: %d files: start until watching and idle, A" % files, secs(ready[0]),
                secs(median(status_times)) + " (git status)", *aim("<= 15 s", ready[0] <= 15),
                "B: %s (started after A)" % secs(ready[1])),
            row("  memory, sum of RSS, A", "%.0f MB" % rss, "", *aim("<= 300 MB", rss <= 300)),
            row("  idle CPU over %d s, A" % seconds, "%.2f %%" % cpu, "",
                *aim("0 %", cpu < 0.1))]
    if rescans:
        rows.append(row("  a sync (rescan) that finds nothing: median of %d" % len(rescans),
                        secs(median(rescans)), secs(median(floor_rescans)) + " (git add -A)",
                        "in proportion to what changed", None))
    else:
        rows.append(row("  a rescan that finds nothing", "failed (see the log)", "", "", False))
    rows.append(row("  a resume that finds nothing (%s): median of %d"
                    % ("pull, commit, push" if run.sync == "xmpp" else
                       "commit, push; syncmethod none: no pull", len(resumes)), secs(median(resumes)) if resumes else "failed",
                    secs(median(floor_rescans)) + " (git add -A)",
                    "in proportion to what changed", None if resumes else False))
    rows.append(row("  %d new files until all on B" % burst_files,
                    secs(arrived) if arrived else "lost", secs(floor_burst) +
                    " (write, add -A, commit, push, pull)", "", None if arrived else False,
                    "%d commits; A idle again after %s" % (commits, secs(settled) if settled
                                                            else "more than 900 s")))
    if peer:
        rows.append(row("  Syncthing (fsWatcherDelayS 1) at %d files: both started until "
                        "scanned and idle" % peer["files"], "", "", "", None,
                        st1=secs(peer["ready"])))
        rows.append(row("  Syncthing at %d files: one file changed until on B: median of %d"
                        % (peer["files"], len(peer["times"])), "", "", "", None,
                        st1=secs(median(peer["times"])) if peer["times"] else "lost"))
    return rows


SYNCTHING_HOME_FILES = 100_000  # where a Syncthing pair is practical on this machine


def syncthing_home(run, files, trials):
    """Syncthing's start (both folders holding the same `files` files: each scans them,
    then the two compare) until idle, and one-file propagation there."""
    def fill(folder):
        make_tree(folder, files, max(files // 100, 1))
    try:
        pair = SyncthingPair(run, "home", 1, fill=fill, timeout=1800)
    except RuntimeError as e:
        print("  ! Syncthing at %d files: %s" % (files, e))
        return {}
    times = syncthing_propagation(run, 1, trials, pair)
    return {"files": files, "ready": pair.ready, "times": times}


# --------------------------------------------------------------------------
# 6c. big files (issue 32): a new 1 GB file, a 1 MB edit inside a 50 MB file

# What the README asks of the remote for big files (git gives the other side of a push
# or pull none of the daemon's settings, even for a remote reached by a path).
BIG_SERVER = (("core.bigFileThreshold", "16m"), ("receive.unpackLimit", "1"))
BIG_CHUNK = 4 << 20


def write_random(path, size):
    """A new file of `size` random bytes; -> (offset, bytes) samples to recognise it by."""
    samples = []
    with open(path, "wb") as f:
        for offset in range(0, size, BIG_CHUNK):
            chunk = os.urandom(min(BIG_CHUNK, size - offset))
            f.write(chunk)
            if offset == 0 or offset + len(chunk) >= size or offset // BIG_CHUNK % 37 == 0:
                samples.append((offset, chunk[:65536]))
    return samples


def edit_random(path, offset, size):
    """`size` new random bytes written over `path` at `offset`; -> the samples."""
    data = os.urandom(size)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    return [(offset, data[:65536]), (offset + size - 65536, data[-65536:])]


def has(path, size, samples):
    """`path` is `size` bytes long and holds the samples (cheap enough to poll)."""
    try:
        if os.stat(path).st_size != size:
            return False
        with open(path, "rb") as f:
            for offset, data in samples:
                f.seek(offset)
                if f.read(len(data)) != data:
                    return False
        return True
    except OSError:
        return False


def git_store(folder):
    """Bytes of a git object store (a clone's .git/objects, or a bare repository's)."""
    objects = os.path.join(folder, ".git", "objects")
    return tree_bytes(objects if os.path.isdir(objects) else os.path.join(folder, "objects"))


def bigfile(run, sizes):
    """A new 1 GB file (moved into the folder once written), then a 1 MB edit inside a
    50 MB file, each from the move or the writer's close until B holds it: the real suite at the shipped defaults (the remote set as the README
    asks of a server), bare git at git's defaults (add, commit, push, pull in a second
    clone) and Syncthing (delay 1 s), interleaved."""
    rows = []
    for case, size, trials in (("new", sizes["big_new_mb"] << 20, sizes["big_new_trials"]),
                               ("edit", sizes["big_file_mb"] << 20, sizes["big_edit_trials"])):
        rows += bigfile_case(run, case, size, trials)
    return rows


def bigfile_case(run, case, size, trials):
    prefix = "big" + case
    remote = make_remote(os.path.join(run.base, prefix + ".git"))
    for key, value in BIG_SERVER:
        git("--git-dir", remote, "config", key, value)
    floor_remote = make_remote(os.path.join(run.base, prefix + "-floor.git"))
    c, d = (os.path.join(run.base, prefix + "-floor-" + n) for n in "cd")
    for path in (c, d):
        git("clone", "-q", floor_remote, path)
    a, b = start_pair(run, prefix, remote, PROFILES["defaults"])
    delays = a.delays()
    pair = SyncthingPair(run, prefix, 1) if run.peers else None
    a_events, b_events = Events(a), Events(b)
    name = "big.bin"
    places = {"ours": (a.path, b.path), "floor": (c, d)}
    if pair:
        places["st"] = (pair.a.folder, pair.b.folder)
    times = {key: [] for key in places}
    phases = {"A: close to committed": [], "A: committed to pushed": [],
              "B: A's push to pull started": [], "B: pull": []}
    floor_steps = {"git add": [], "git commit": [], "git push": [], "git pull (B)": []}

    def floor_sync(message):
        for key, args, cwd in (("git add", ("add", "--", name), c),
                               ("git commit", ("commit", "-q", "-m", message), c),
                               ("git push", ("push", "-q", "origin", "HEAD:main"), c),
                               ("git pull (B)", ("pull", "-q", "--no-rebase", "--no-edit",
                                                 "origin", "main"), d)):
            s0 = time.monotonic()
            git(*args, cwd=cwd)
            floor_steps[key].append(time.monotonic() - s0)

    def settle(key):
        if key == "ours":
            wait_for(lambda: a.settled() and b.settled(), 120, 0.05)
        elif key == "st":
            wait_for(pair.idle, 120, 0.1)

    if case == "edit":  # the 50 MB file everywhere first, not timed
        for key, (here, there) in places.items():
            samples = write_random(os.path.join(here, name), size)
            if key == "floor":
                floor_sync("the big file")
            if not wait_for(lambda: has(os.path.join(there, name), size, samples), 300, 0.05):
                raise RuntimeError("%s: the 50 MB file did not arrive within 300 s" % key)
            settle(key)
        for values in floor_steps.values():
            values.clear()
    stores = {"ours": (a.path, remote, b.path), "floor": (c, floor_remote, d)}
    before = {key: [git_store(p) for p in paths] for key, paths in stores.items()}
    for i in range(trials):
        for key, (here, there) in places.items():
            path = os.path.join(here, name)
            if case == "new":
                if os.path.exists(path):  # the last trial's file goes first, not timed
                    os.unlink(path)
                    if key == "floor":
                        git("rm", "-q", "--", name, cwd=c)
                        git("commit", "-q", "-m", "gone", cwd=c)
                        git("push", "-q", "origin", "HEAD:main", cwd=c)
                        git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main", cwd=d)
                    wait_for(lambda: not os.path.exists(os.path.join(there, name)), 120, 0.05)
                    settle(key)
                # Written beside the folder, then moved in: timed from the move, and no
                # tool sees (or commits) a half-written file.
                outside = os.path.join(run.base, "%s-%s.part" % (prefix, key))
                samples = write_random(outside, size)
                os.rename(outside, path)
            else:
                offset = (size // 2 + (i - trials // 2) * (3 << 20)) & ~4095
                samples = edit_random(path, offset, 1 << 20)
            wall, t0 = time.time(), time.monotonic()
            if key == "floor":
                floor_sync("trial %d" % i)
            if wait_for(lambda: has(os.path.join(there, name), size, samples), 600, 0.01):
                times[key].append(time.monotonic() - t0)
            else:
                print("  ! %s trial %d (%s): not on B within 600 s" % (case, i, key))
            if key == "ours":
                wait_for(lambda: b_events.first("pull-finished", wall), 30, 0.01)
                marks = [wall, a_events.first("committed", wall),
                         a_events.first("pushed", wall), b_events.first("pull-started", wall),
                         b_events.first("pull-finished", wall)]
                if None not in marks:
                    for phase, start, end in zip(phases, marks, marks[1:]):
                        phases[phase].append(end - start)
            settle(key)
            print("  %s trial %d %s: %s (load %s)" % (
                case, i, key, secs(times[key][-1] if len(times[key]) > i else None),
                open("/proc/loadavg").read().split()[0]), flush=True)
    grown = {key: [git_store(p) - b0 for p, b0 in zip(paths, before[key])]
             for key, paths in stores.items()}
    a_events.close()
    b_events.close()
    run.stop(a, b)
    if pair:
        pair.stop()

    mb = size >> 20
    label = ("bigfile: a new %d MB file, from its move in until on B" % mb if case == "new" else
             "bigfile: a 1 MB edit inside a %d MB file, from the close until on B" % mb)
    label += " (%s)" % describe(delays)
    mine = median(times["ours"])
    peer = {}
    if pair:
        peer = peer_cells({1: times["st"]}, mine)
    st = median(times.get("st") or [])
    rows = [row(label + ": median", secs(mine), secs(median(times["floor"])),
                "<= 2x Syncthing", (mine <= 2 * st) if (mine and st) else None,
                "%d trials" % len(times["ours"]), **peer)]
    for phase, values in phases.items():
        if values:
            rows.append(row("  of which " + phase, secs(median(values))))
    for step, values in floor_steps.items():
        if values:
            rows.append(row("  bare git: " + step, "", secs(median(values))))
    for key, what in (("ours", "autosync"), ("floor", "bare git")):
        rows.append(row("  history grown per %s, %s: A / remote / B" % (case, what),
                        " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown[key])
                        if key == "ours" else "",
                        " / ".join("%.0f MB" % (g / trials / 1e6) for g in grown[key])
                        if key == "floor" else ""))
    return rows

# --------------------------------------------------------------------------
# 7. idle CPU

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


def version(*cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
    except OSError:
        return "not installed"


def machine_description():
    load = open("/proc/loadavg").read().split()[:3]
    return [
        "machine: %s, %d cores (nproc), load %s" % (platform.platform(), len(os.sched_getaffinity(0)),
                                                   " ".join(load)),
        "python:  %s" % sys.version.split()[0],
        "git:     %s" % version("git", "--version"),
        "prosody: %s" % (version("dpkg-query", "-W", "-f", "${Version}", "prosody")
                         or "not installed"),
    ]


COLUMNS = (("name", "measurement"), ("ours", "autosync"), ("floor", "bare git"),
           ("st1", "Syncthing 1s"), ("st10", "Syncthing 10s"), ("ratio", "St best/ours"),
           ("aim", "aim"), ("met", "met"), ("note", "note"))


def row(name, ours="", floor="", aim="", met=None, note="", **peer):
    """One line of the table; `peer` holds Syncthing's cells (st1, st10, ratio)."""
    return dict(peer, name=name, ours=ours, floor=floor, aim=aim, met=met, note=note)


def print_table(rows, peers=True):
    shown = {True: "yes", False: "NO", None: ""}
    columns = [c for c in COLUMNS if peers or c[0] not in ("st1", "st10", "ratio")]
    table = [[title for _, title in columns]]
    for r in rows:
        if not isinstance(r, dict):
            r = row(*r)
        table.append([shown[r.get(key)] if key == "met" else str(r.get(key, ""))
                      for key, _ in columns])
    widths = [max(len(r[i]) for r in table) for i in range(len(columns) - 1)]
    for n, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        if n == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 4)


MEASUREMENTS = {"propagation": propagation, "burst": burst, "machines": many_machines,
                "slowwriter": slow_writer, "scale": scale, "onechange": onechange,
                "home": home, "bigfile": bigfile, "idle": idle}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (5 trials, 2,000 files, 10,000-file tree, 10 s idle)")
    p.add_argument("--only", choices=sorted(MEASUREMENTS), action="append",
                   help="run only this measurement (may be given more than once)")
    p.add_argument("--sync", choices=("xmpp", "hook"), default="xmpp",
                   help="how machines learn of a push: a private prosody (default), or the "
                        "bare repository's post-receive hook")
    p.add_argument("--no-peers", action="store_true",
                   help="do not run Syncthing beside us (its columns stay empty)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument("--trials", type=int, metavar="N",
                   help="propagation trials at each setting (full: 20, --quick: 3)")
    p.add_argument("--burst-trials", type=int, metavar="N",
                   help="burst runs at each setting (full: 3, --quick: 1), at the same size")
    p.add_argument("--onechange-files", type=int, metavar="N",
                   help="onechange's tree (full: 100,000, --quick: 10,000; the issue's aim is "
                        "at 1,000,000)")
    p.add_argument("--onechange-trials", type=int, metavar="N",
                   help="onechange's trials (full: 10, --quick: 3)")
    p.add_argument("--onechange-thin", action="store_true",
                   help="onechange: the suite's two machines are thin (a promisor remote, "
                        "blob:none), as `init --thin` makes them")
    p.add_argument("--home-files", type=int, metavar="N",
                   help="home's tree (full: 100,000, --quick: 10,000; the issue's aims are "
                        "at 1,000,000)")
    p.add_argument("--big-trials", type=int, metavar="N",
                   help="bigfile's trials of each case (full: 3 new, 5 edits; --quick: 1, 3)")
    p.add_argument("--git-config", action="append", metavar="KEY=VALUE", default=[],
                   help="onechange: a git setting given to the suite's machines (through "
                        "GIT_CONFIG_COUNT), to measure a candidate; may be repeated")
    p.add_argument("--setting", action="append", metavar="KEY=VALUE", default=[],
                   help="onechange: an [autosync] key written into both machines' config "
                        "(such as fsmonitor=yes); may be repeated")
    args = p.parse_args()
    sizes = dict(QUICK if args.quick else FULL)
    # Fewer runs at the same sizes, for a shared machine: the medians stay comparable.
    if args.trials:
        sizes["trials"] = args.trials
    if args.burst_trials:
        sizes["burst_trials"] = args.burst_trials
    if args.onechange_files:
        sizes["onechange_files"] = args.onechange_files
    if args.onechange_trials:
        sizes["onechange_trials"] = args.onechange_trials
    if args.home_files:
        sizes["home_files"] = args.home_files
    if args.big_trials:
        sizes["big_new_trials"] = sizes["big_edit_trials"] = args.big_trials
    sizes["onechange_thin"] = args.onechange_thin
    sizes["git_config"] = [tuple(kv.split("=", 1)) for kv in args.git_config]
    if any(len(kv) != 2 for kv in sizes["git_config"]):
        p.error("--git-config takes KEY=VALUE")
    sizes["settings"] = [tuple(kv.split("=", 1)) for kv in args.setting]
    if any(len(kv) != 2 for kv in sizes["settings"]):
        p.error("--setting takes KEY=VALUE")
    peers_missing = None if args.no_peers else syncthing_missing()

    base = tempfile.mkdtemp(prefix="asbench-")
    private_environment(base)
    print("\n".join(machine_description()))
    defaults = {key: autosync_config.KEYS["autosync"][key].default for key in DELAY_KEYS}
    print("sync:    %s; sizes: %s" % (
        "XMPP through a private prosody on 127.0.0.1 (STARTTLS)" if args.sync == "xmpp"
        else "the bare repository's post-receive hook (autosync-notify pushed)",
        ("quick" if args.quick else "full") + (
            " (%d propagation trials, %d burst runs)" % (sizes["trials"], sizes["burst_trials"])
            if args.trials or args.burst_trials else "")))
    print("delays:  readfrequency/pushdelay/maxwait; defaults = the product's (%s); lowest = "
          "%s (maxwait not set)" % (describe(defaults),
                                   ", ".join("%s %s s" % kv for kv in FAST.items())))
    if args.no_peers:
        print("peers:   Syncthing not run (--no-peers)")
    elif peers_missing:
        print("peers:   " + peers_missing + "; its columns are skipped")
    else:
        print("peers:   %s, two instances on 127.0.0.1, fsWatcherDelayS %s" % (
            version("syncthing", "--version").split(" (")[0],
            " and ".join(map(str, SYNCTHING_DELAYS))))
    print("folder:  %s" % base)
    print()

    run = Run(base, args.sync)
    run.peers = not (args.no_peers or peers_missing)
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
        # The table first: removing a 100,000-file tree takes a while.
        print()
        print_table(rows, peers=run.peers)
        print(flush=True)
        if args.keep:
            print("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
