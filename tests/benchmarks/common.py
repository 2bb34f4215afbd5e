"""The shared machinery of the benchmark: the product's machines on real clones, the runs
that hold them, Syncthing beside them, timing and the output's rows and table.
Each measurement is a module beside this one; tests/benchmark.py is the entry point."""
import io
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, ROOT)   # the product under test: this checkout
sys.path.insert(0, TESTS)  # prosody.py, sshd.py

from autosync.core import config as autosync_config, protocol  # noqa: E402
from prosody import free_port  # noqa: E402


# --------------------------------------------------------------------------
# settings

FULL = dict(trials=20, burst_files=10_000, burst_trials=3, tree_files=100_000,
            tree_folders=10_000, idle_seconds=60, tree_idle_seconds=20, machines=8,
            many_trials=20, slow_seconds=15, onechange_files=100_000, onechange_trials=10,
            home_files=100_000, big_new_mb=1024, big_file_mb=50, big_new_trials=3,
            big_edit_trials=5, annexscan_files=(10_000, 100_000), annexscan_trials=5)
QUICK = dict(trials=3, burst_files=2_000, burst_trials=1, tree_files=10_000,
             tree_folders=1_000, idle_seconds=10, tree_idle_seconds=5, machines=8,
             many_trials=3, slow_seconds=15, onechange_files=10_000, onechange_trials=3,
             home_files=10_000, big_new_mb=1024, big_file_mb=50, big_new_trials=1,
             big_edit_trials=3, annexscan_files=(10_000,), annexscan_trials=3)

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


def resident(root):
    """kB of resident memory (VmRSS, a process's maps of files included) of `root` and
    its descendants, as they are now."""
    total = 0
    for pid in process_tree(root):
        try:
            with open("/proc/%d/status" % pid) as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except OSError:
            continue
    return total


class PeakMemory:
    """The highest resident(root) from start() to stop(), sampled by a thread every
    `interval` s: every process the suite starts meanwhile counts (git's, ssh, a local
    remote's upload-pack), as the pull's test counts them
    (tests/integration/test_gitpull.py)."""

    def __init__(self, root, interval=0.01):
        self.root, self.interval = root, interval
        self.idle = self.peak = 0
        self.done = threading.Event()
        self.thread = None

    def start(self):
        self.idle = self.peak = resident(self.root)
        self.thread = threading.Thread(target=self.sample, name="peak-memory", daemon=True)
        self.thread.start()
        return self

    def sample(self):
        while not self.done.wait(self.interval):
            self.peak = max(self.peak, resident(self.root))

    def stop(self):
        """-> (idle kB, peak kB)."""
        self.done.set()
        self.thread.join()
        return self.idle, self.peak


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


def describe(delays):
    """readfrequency/pushdelay/maxwait, as the table's labels show them."""
    # readfrequency not set: the batch closes when its files are closed ("on close").
    return "/".join("on close" if delays[key] in (None, "") else "%g" % delays[key]
                    for key in DELAY_KEYS) + " s"


def start_pair(run, prefix, remote, settings, via=None, thin=False, prepare=None):
    """Two started machines on `remote`, ready and (XMPP) seeing each other, or (via
    "ssh") each watching the remote; thin machines with `thin`; prepare(machine), if
    given, is called for each (A first) after its clone, before any starts."""
    a = run.machine(prefix + "-a", remote, settings, via, thin)
    b = run.machine(prefix + "-b", remote, settings, via, thin)
    for m in (a, b) if prepare else ():
        prepare(m)
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


# --------------------------------------------------------------------------
# trees of many files

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


def tree_bytes(folder):
    total = 0
    for root, _, names in os.walk(folder):
        total += sum(os.lstat(os.path.join(root, n)).st_size for n in names)
    return total


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


# --------------------------------------------------------------------------
# Syncthing, the peer: two instances on loopback sharing one folder

SYNCTHING_DELAYS = (1, 10)  # fsWatcherDelayS: its fastest, and its default
SYNCTHING_INSTALL = "Syncthing not found (install it with `apt-get install -y syncthing`)"


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
