"""A remote's address, and the one ssh connection held to it: git's transport (as
git's connect.c is), used by the committer's git commands and by the ssh link's watch
(ssh/watch.py).

The address: parse_remote reads git's forms of it; ssh_text/ssh_program the ssh git
itself uses.

The held connection: every ssh the daemon starts for a remote (the watch, and
git's push, fetch and notes fetch through GIT_SSH_COMMAND, git_ssh_command)
goes through one connection, ssh's own multiplexing: a control socket in the
user's private runtime folder (checked before each use), its master an
`ssh -M -N` child of the daemon's own (connect(), made when the committer
starts and at every start of the watch, when none answers), which lives as
long as the process that made it: ended at its exit (end_masters), and by
PR_SET_PDEATHSIG if it is killed, so no connection outlives the daemon. Each
daemon (synced folder) holds its own (control_pattern). One login per remote
instead of one per command. The commands themselves only use it
(ControlMaster=no): one that finds no master connects by itself, and none
becomes a master, whose first session would keep that command's pipes open
until the server ended it (a killed command's reader would wait). Left alone
when the user's ssh config (`ssh -G`) or ssh command sets its own
ControlMaster/ControlPath, or when the ssh is not OpenSSH's. A socket whose
master is gone, or does not answer within CHECK_TIMEOUT (frozen), is removed
before a master is made (stale()), so it never blocks a command.

The committer's git environment (git_environment_for) is made here from it.
"""
import atexit
import ctypes
import fcntl
import os
import shlex
import signal
import subprocess
import threading

from autosync.core import paths
from autosync.vcs import largefiles
from autosync.vcs.git_environment import GitEnvironment

# Keep-alives: a dead connection is noticed within about 45 s; no password prompt ever.
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15",
               "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=20"]
CHECK_TIMEOUT = 3.0  # seconds a control socket's master has to answer `ssh -O check`
# What in an ssh command line means the user chose multiplexing themselves.
OWN_MUX = ("controlmaster", "controlpath", "controlpersist")
# The held connection's ciphers where this machine's CPU has AES instructions and the
# user chose none (`ssh -G` lists OpenSSH's default): the same ones, AES-GCM first. With
# AES-NI, aes128-gcm costs less CPU per GB than the default's first, chacha20-poly1305
# (big files through git-annex go through this connection; the figures:
# tests/benchmarks/JOURNAL.md, "Big files over ssh"). Without AES instructions chacha20
# is the faster one: left as it is.
DEFAULT_CIPHERS = ("chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,"
                   "aes128-gcm@openssh.com,aes256-gcm@openssh.com")
AES_FIRST = ("aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,"
             "aes128-ctr,aes192-ctr,aes256-ctr")


class BadRemote(ValueError):
    """A remote address no default watch command can be made for."""


def parse_remote(url, base="."):
    """("ssh", destination, port or None, path) or ("local", absolute path) of a git
    remote's address; BadRemote for another kind (https, git://, empty).

    Git's forms: `ssh://[user@]host[:port]/path` (`/~/path`: below the home),
    `[user@]host:path` (no slash before the first colon), `file:///path`, a path
    (relative ones from `base`, the working tree)."""
    url = url.strip()
    if not url:
        raise BadRemote("the remote has no address (remoteurlcmd printed nothing)")
    scheme, sep, rest = url.partition("://")
    if sep:
        scheme = scheme.lower()
        if scheme == "file":
            return "local", os.path.normpath(rest if rest.startswith("/") else "/" + rest)
        if scheme not in ("ssh", "git+ssh", "ssh+git"):
            raise BadRemote("%s: a %s:// remote cannot be watched over ssh" % (url, scheme))
        authority, slash, path = rest.partition("/")
        if not slash or not path:
            raise BadRemote("%s: no repository path in the address" % url)
        user, at, hostport = authority.rpartition("@")
        host, port = _host_port(hostport, url)
        path = "/" + path
        if path.startswith("/~"):
            path = path[1:]  # ~/repo or ~user/repo: the server's shell finds it
        return "ssh", (user + at + host), port, path
    head = url.split("/", 1)[0]
    if ":" in head and not url.startswith(("/", ".")):
        if head.startswith("["):  # [host]:path or [user@host:port]:path
            close = url.find("]:")
            if close < 0:
                raise BadRemote("%s: unclosed [ in the host" % url)
            destination, path = url[1:close], url[close + 2:]
        else:
            destination, _, path = url.partition(":")
        if not path:
            raise BadRemote("%s: no repository path in the address" % url)
        _check_host(destination.rpartition("@")[2], url)
        return "ssh", destination, None, path
    return "local", os.path.normpath(os.path.join(base, os.path.expanduser(url)))


def ssh_remote(url, base="."):
    """parse_remote's ("ssh", destination, port, path) for a remote over ssh; None for
    any other address, a bad one included."""
    try:
        remote = parse_remote(url, base)
    except BadRemote:
        return None
    return remote if remote[0] == "ssh" else None


def _host_port(hostport, url):
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port = hostport.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise BadRemote("%s: bad port %r" % (url, port))
    _check_host(host, url)
    return host, int(port) if port else None


def _check_host(host, url):
    # A host that starts with - would be an ssh option (git refuses it too).
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise BadRemote("%s: bad host name %r" % (url, host))


def ssh_text(env, cwd):
    """The ssh git itself uses, as a shell command line: $GIT_SSH_COMMAND,
    core.sshCommand, $GIT_SSH, or ssh."""
    if env.get("GIT_SSH_COMMAND"):
        return env["GIT_SSH_COMMAND"]
    configured = subprocess.run(["git", "config", "--get", "core.sshCommand"], cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL).stdout.decode("utf-8", "replace").strip()
    if configured:
        return configured
    return shlex.quote(env["GIT_SSH"]) if env.get("GIT_SSH") else "ssh"


def ssh_program(env, cwd):
    """The ssh git itself uses: $GIT_SSH_COMMAND, core.sshCommand, $GIT_SSH, or ssh."""
    return shlex.split(ssh_text(env, cwd))


def _own_mux(ssh):
    """Whether the ssh command line itself sets up multiplexing (-M, -S, -o Control...)."""
    for i, arg in enumerate(ssh[1:], 1):
        if arg in ("-M", "-S") or (arg.startswith("-S") and len(arg) > 2):
            return True
        option = arg[2:] if arg.startswith("-o") and len(arg) > 2 else \
            (ssh[i + 1] if arg == "-o" and i + 1 < len(ssh) else "")
        if option.replace("=", " ").split(" ")[0].lower() in OWN_MUX:
            return True
    return False


def own_mux_config(config):
    """Whether `ssh -G`'s {key: value} sets multiplexing up (the user's own)."""
    return config.get("controlmaster", "false") not in ("false", "no") or \
        config.get("controlpath", "none") != "none"


def plain_openssh(words):
    """Whether the ssh command line `words` is OpenSSH's ssh with no multiplexing of its
    own: the only one asked for its configuration (`ssh -G`) and given a held connection."""
    return bool(words) and os.path.basename(words[0]) == "ssh" and not _own_mux(words)


def _quietly(argv, timeout):
    """Run argv (its own process group, killed whole after `timeout`) -> (exit, stdout);
    exit is None when it timed out or could not run."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None, b""
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return None, b""
    return proc.returncode, out


def effective(ssh, destination, port=None):
    """{key: value} of `ssh -G` for destination: the configuration ssh would use, or {}."""
    code, out = _quietly(list(ssh) + ["-G"] + (["-p", str(port)] if port else []) +
                         ["--", destination], 10)
    if code != 0:
        return {}
    found = {}
    for line in out.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key.lower(), value)
    return found


def configuration(ssh, destination, port=None, words=None):
    """effective()'s {key: value} for destination, asked once (`ssh -G`) and only of
    OpenSSH's ssh with no multiplexing of its own (`words`: the command `ssh` runs, when
    that is a shell); {} for any other."""
    return effective(ssh, destination, port) if plain_openssh(words or ssh) else {}


# The control socket's name: 8 hex digits of the synced folder's id, "-", then %C
# expanded (a SHA-1 in hex); the master binds it first with "." and 16 random
# characters after it (OpenSSH's mux.c), then renames it.
CONTROL_NAME = 8 + 1 + 40 + 17


def control_folder():
    """The private folder of the held connections' sockets (paths.socket_folder): this
    user's alone, checked before every use (ssh does not check who listens on a control
    socket: one in a folder another user could enter gave that user our sessions), and
    short enough for a socket's path. NotPrivate when there is none."""
    return paths.socket_folder(CONTROL_NAME)


def control_pattern(folder=None, owner=None):
    """The held connections' ControlPath, in the private folder: `%C`, ssh's hash of this
    machine and the destination's host, port and user, is expanded by ssh for each
    connection, so a command given these options for another server (git's push to a
    second remote, git-annex's to a special remote) finds no socket and logs in itself;
    a fixed path sent it into the held connection, to the held connection's server.
    Before it, the id of the synced folder `owner`: each daemon holds a connection of
    its own, which ends with it, logged in with the key its folder's ssh uses (a
    restricted key serves one repository: another folder's sessions over it were
    refused)."""
    name = (paths.folder_id(owner)[:8] + "-" if owner else "ssh-") + "%C"
    return os.path.join((folder or control_folder()).replace("%", "%%"), name)


def held(ssh, destination, port=None, words=None, config=None, owner=None):
    """(options, control socket) making `ssh` (an argv prefix; `words`: the command it
    runs, when that is a shell) use the one held connection to destination; ([], None)
    when the user set multiplexing up (their ssh config or command) or the ssh is not
    OpenSSH's. `config`: configuration()'s for destination, when the caller has it;
    `owner`: the synced folder whose connection it is (control_pattern)."""
    config = configuration(ssh, destination, port, words) if config is None else config
    if not config or own_mux_config(config):
        return [], None
    try:
        folder = control_folder()
    except paths.NotPrivate:
        return [], None  # no folder of our own: every command logs in by itself
    options = ["-o", "ControlMaster=no", "-o", "ControlPath=" + control_pattern(folder, owner)]
    path = effective(list(ssh) + options[2:], destination, port).get("controlpath")
    if not path or path == "none":
        return [], None
    return options, path


def has_aes(cpuinfo="/proc/cpuinfo"):
    """Whether this machine's CPU has AES instructions (the `aes` flag of x86, the `aes`
    feature of ARM)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features") and "aes" in value.split():
                    return True
    except OSError:
        pass
    return False


def ciphers(config, aes=None):
    """["-o", "Ciphers=..."] for the held connection, from `ssh -G`'s {key: value}: AES_FIRST
    where the user chose no ciphers and the CPU has AES instructions, else []."""
    if config.get("ciphers") != DEFAULT_CIPHERS or not (has_aes() if aes is None else aes):
        return []
    return ["-o", "Ciphers=" + AES_FIRST]


# Looked up once, here: the child of a fork in a threaded program should load nothing.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the master's process: SIGTERM when the process that made it dies (even by
    SIGKILL), so no connection of ours outlives the daemon."""
    _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGTERM))


_OWN = {}  # control socket path -> the Master this process made


class Master:
    """The held connection's master: made by this process (`proc`, a child of ours that
    ends with us: at our exit, end_masters(); by PR_SET_PDEATHSIG if we are killed) or
    by another process of this daemon (`proc` None). Its maker holds the lock
    `PATH.lock` for as long as the master lives: one master per socket, even when the
    committer and the link start at once (the one that lost the race to bind the socket
    stayed logged in, a connection nobody used or ended)."""

    def __init__(self, path, proc=None, lock=None, check=None):
        self.path, self.proc, self.lock = path, proc, lock
        self.check = check  # `ssh -O check` of the socket (another process's master)
        self.pid = proc.pid if proc is not None else None
        self._guard = threading.Lock()

    def poll(self):
        """None while it logs in; 0 once it is up; else it failed."""
        if self.proc is not None:
            return 0 if os.path.exists(self.path) else self.proc.poll()
        if not _locked(self.path):
            return 1  # its maker gave up
        # (the socket may still be a frozen one its maker is about to remove)
        return 0 if os.path.exists(self.path) and self.check() else None

    def end(self):
        """End it, if this process made it: its connection, and with it its sessions and
        the server's side of them."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(CHECK_TIMEOUT)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self._release()

    def _ended(self):
        self.proc.wait()
        self._release()

    def _release(self):
        with self._guard:
            if _OWN.get(self.path) is self:
                del _OWN[self.path]
            if self.lock is not None:
                os.close(self.lock)
                self.lock = None


def _locked(path):
    """Whether a process of ours holds the master at `path` (its lock)."""
    try:
        fd = os.open(path + ".lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def end_masters():
    """End every master this process made (at its exit: no connection outlives it)."""
    for master in list(_OWN.values()):
        master.end()


def connect(ssh, destination, port, path, config=None):
    """Make the held connection's master unless one answers at `path` -> a Master to
    wait for (poll()) while it logs in, or None when it is up or cannot be made. The
    master is an `ssh -M -N` child of this process, ended with it; another process of
    this daemon making it (its lock) is waited for, not raced. A socket left behind or
    frozen is removed first (stale()). `config`: effective()'s for destination, when
    the caller has it (its ciphers)."""
    if not path:
        return None
    own = _OWN.get(path)
    if own is not None and own.proc.poll() is None:
        return None if os.path.exists(path) else own
    try:
        lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600)
    except OSError:
        return None
    def answers():
        return _quietly(list(ssh) + ["-o", "ControlPath=" + path.replace("%", "%%"), "-O",
                                     "check", "--", destination], CHECK_TIMEOUT)[0] == 0
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process of ours holds the master, or is making it
        os.close(lock)
        master = Master(path, check=answers)
        return None if master.poll() == 0 else master
    if os.path.exists(path) and not stale(ssh, destination, path):
        os.close(lock)  # a master nobody here made answers (an older version's)
        return None
    config = effective(ssh, destination, port) if config is None else config
    try:
        proc = subprocess.Popen(
            list(ssh) + SSH_OPTIONS + ciphers(config) +
            ["-o", "ControlMaster=yes", "-o", "ControlPath=" + path.replace("%", "%%"), "-N"] +
            (["-p", str(port)] if port else []) + ["--", destination],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_die_with_parent)
    except OSError:
        os.close(lock)
        return None
    master = _OWN[path] = Master(path, proc, lock)
    if not _OWN_AT_EXIT:
        _OWN_AT_EXIT.append(atexit.register(end_masters))
    threading.Thread(target=master._ended, name="ssh-master", daemon=True).start()
    return master


_OWN_AT_EXIT = []


def stale(ssh, destination, path, timeout=CHECK_TIMEOUT):
    """Remove the control socket `path` when its master does not answer (frozen, or its
    file left behind): the next ssh then makes a new connection instead of waiting.
    -> True when it was removed."""
    if not path or not os.path.exists(path):
        return False
    code, _ = _quietly(list(ssh) + ["-o", "ControlPath=" + path.replace("%", "%%"),
                                    "-O", "check", "--", destination], timeout)
    if code == 0:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return True


def let_go(ssh, destination, path):
    """End the held connection's master if this process made it, else ask it to take no
    new sessions (`ssh -O stop`): its sessions end on their own, the next ssh makes a
    new connection. For a connection that may be dead without knowing it (after a
    sleep), or that holds a login the server has changed its mind about (a refused
    watch). Never waits long."""
    own = _OWN.get(path)
    if own is not None:
        own.end()
        return
    if not path or not os.path.exists(path):
        return
    code, _ = _quietly(list(ssh) + ["-o", "ControlPath=" + path.replace("%", "%%"),
                                    "-O", "stop", "--", destination], CHECK_TIMEOUT)
    if code is None:
        stale(ssh, destination, path, timeout=0.1)


def git_ssh_command(url, base, env=None):
    """GIT_SSH_COMMAND for git's push, fetch and notes to the remote at `url`: the ssh git
    would use, with the held connection and keep-alives; None for a remote not over ssh
    or when nothing would be added (the user's own multiplexing, another ssh)."""
    env = os.environ if env is None else env
    remote = ssh_remote(url, base)
    if remote is None:
        return None
    text = ssh_text(env, base)
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    ssh = ["sh", "-c", text + ' "$@"', "ssh"]  # as git runs it: $HOME, ~ and quotes work
    config = configuration(ssh, remote[1], remote[2], words)  # read by held() and connect()
    options, path = held(ssh, remote[1], remote[2], words, config, owner=base)
    if not options:
        return None
    connect(ssh, remote[1], remote[2], path, config)
    # The user's line as it is (a shell runs it: $HOME, ~ and quotes keep their meaning),
    # then ours; keep-alives too: the connection may be made by git's ssh and outlive it.
    return text + " " + " ".join(map(shlex.quote, options + SSH_OPTIONS[2:]))


def held_ssh(folder, remote):
    """GIT_SSH_COMMAND holding one ssh connection to the remote (`remote(folder)`: its
    address, vcs/folder.py's remote_of), or None (not over ssh, or the user's own)."""
    url = remote(folder) if remote else ""
    return git_ssh_command(url, folder) if url else None


def git_environment_for(cfg, gitdir, excludes_file, remote):
    """The one GitEnvironment every git command of the committer runs with, made once at
    its start (vcs/git_environment.py): the excludes file it writes, the `largefiles`
    rule and its git-annex key, and in git (and git-annex) the one ssh connection held to
    the remote (push, fetch, notes; `remote`: vcs/folder.py's remote_of)."""
    ssh_command = held_ssh(cfg.path, remote) if gitdir else None
    return GitEnvironment(excludes=excludes_file.where if excludes_file else None,
                          largefiles=largefiles.rule_of(cfg),
                          annex_backend=largefiles.backend_of(cfg),
                          ssh_command=ssh_command,
                          annex_git_ssh=bool(ssh_command) and
                          largefiles.annex_through_git_ssh(cfg.path))
