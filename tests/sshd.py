"""A private OpenSSH server on 127.0.0.1 for the tests of `syncmethod = ssh`.

Everything in one temporary folder: the server's host key, its config
(AuthorizedKeysFile there, no PAM, its pidfile), the client's key, its own
known_hosts and ssh config. Nothing is written under the real $HOME: the
client is told its files with `ssh -F CONFIG` (`ssh_command`, given to git
and to the daemon as GIT_SSH_COMMAND). The server's sessions get a HOME of
their own in that folder (SetEnv), with `autosync-remote` (running this
checkout's code) in its `~/.local/bin`, where `pip install --user` puts it,
and a PATH without it, as a non-interactive ssh session has: so the tests
run the default watch command as it finds the program for a user install.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SSHD = "/usr/sbin/sshd"


def missing():
    """Why no sshd can run here, or None."""
    for program in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if not program or not os.path.exists(program):
            return "openssh-server and openssh-client are needed (apt-get install -y " \
                   "openssh-server; tests/install.sh installs them)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "autosync-test",
                    "-f", path], check=True, stdin=subprocess.DEVNULL)


def descendants(pid):
    """The PIDs of every process below `pid` (read from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents.setdefault(int(f.read().rpartition(")")[2].split()[1]), []).append(
                        int(entry))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def without_ours(folder, path="/usr/local/bin:/usr/bin:/bin"):
    """A folder of links to the programs on `path` (the first of each name), but none of
    ours (dvcs-autosync, autosync-*). -> folder."""
    os.makedirs(folder)
    for directory in path.split(":"):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            link = os.path.join(folder, name)
            if name == "dvcs-autosync" or name.startswith("autosync-") or \
                    os.path.lexists(link):
                continue
            os.symlink(os.path.join(directory, name), link)
    return folder


class Sshd:
    """sshd -D -e -f CONFIG on a free port of 127.0.0.1; start(), stop(), restart().

    `server`: what the server has besides sshd: "autosync-remote" (in ~/.local/bin),
    "python3" (git and python3, nothing of ours: not even on PYTHONPATH), or "git"
    (a PATH with sh and git only). `log_level`: sshd's LogLevel (DEBUG1 logs the ciphers
    each connection agreed on)."""

    def __init__(self, folder, server="autosync-remote", log_level="VERBOSE"):
        self.folder = str(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.port = free_port()
        self.user = __import__("pwd").getpwuid(os.getuid()).pw_name
        self.host_key = os.path.join(self.folder, "host_key")
        self.client_key = os.path.join(self.folder, "client_key")
        self.authorized = os.path.join(self.folder, "authorized_keys")
        self.known_hosts = os.path.join(self.folder, "known_hosts")
        self.client_config = os.path.join(self.folder, "ssh_config")
        self.config = os.path.join(self.folder, "sshd_config")
        self.log = os.path.join(self.folder, "sshd.log")
        self.home = os.path.join(self.folder, "home")  # the sessions' HOME
        self.bin = os.path.join(self.home, ".local", "bin")
        keygen(self.host_key)
        keygen(self.client_key)
        with open(self.host_key + ".pub") as f:
            host_public = f.read().split()
        with open(self.known_hosts, "w") as f:
            f.write("[127.0.0.1]:%d %s %s\n" % (self.port, host_public[0], host_public[1]))
        self.authorize(True)
        # The server's `autosync-remote`: this checkout's, with the test venv's Python.
        os.makedirs(self.bin)
        if server == "autosync-remote":
            launcher = os.path.join(self.bin, "autosync-remote")
            with open(launcher, "w") as f:
                f.write("#!/bin/sh\nexec %s -m autosync.ssh.remote \"$@\"\n" % sys.executable)
            os.chmod(launcher, 0o755)
        # The system's programs but ours: a dvcs-autosync installed on this machine (the
        # Debian package's /usr/bin/autosync-remote) is not the server's.
        env = "HOME=%s PATH=%s" % (self.home, without_ours(os.path.join(self.folder, "usr-bin")))
        if server == "autosync-remote":
            env += " PYTHONPATH=%s" % ROOT
        elif server == "git":  # a PATH with a shell and git, and nothing else
            only = os.path.join(self.folder, "only-git")
            os.makedirs(only)
            for program in ("sh", "git", "git-upload-pack", "git-receive-pack"):
                os.symlink(shutil.which(program), os.path.join(only, program))
            env = "HOME=%s PATH=%s" % (self.home, only)
        with open(self.config, "w") as f:
            f.write("\n".join([
                "Port %d" % self.port, "ListenAddress 127.0.0.1",
                "HostKey " + self.host_key, "PidFile " + os.path.join(self.folder, "sshd.pid"),
                "AuthorizedKeysFile " + self.authorized,
                "StrictModes no",            # the temporary folder is below /tmp (mode 1777)
                "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes", "PermitRootLogin prohibit-password",
                "LogLevel " + log_level,
                "SetEnv " + env,
                ""]))
        with open(self.client_config, "w") as f:
            f.write("\n".join([
                "Host *", "  IdentityFile " + self.client_key, "  IdentitiesOnly yes",
                "  UserKnownHostsFile " + self.known_hosts, "  StrictHostKeyChecking yes",
                "  GlobalKnownHostsFile /dev/null", "  User " + self.user,
                "  Port %d" % self.port, "  LogLevel ERROR", ""]))
        self.proc = None

    @property
    def ssh_command(self):
        """What GIT_SSH_COMMAND holds for this server's client (its own files only)."""
        return "ssh -F " + self.client_config

    def url(self, path):
        """An ssh:// address of `path` on this server."""
        return "ssh://%s@127.0.0.1:%d%s" % (self.user, self.port, path)

    def authorize(self, yes, options=""):
        """Let the client's key in (with authorized_keys `options`, e.g. a forced
        command), or not."""
        with open(self.client_key + ".pub") as f:
            key = f.read()
        with open(self.authorized, "w") as f:
            f.write(((options + " ") if options else "") + key if yes else "")

    @property
    def remote_program(self):
        """The server's autosync-remote, by its full path (not on the sessions' PATH)."""
        return os.path.join(self.bin, "autosync-remote")

    def start(self):
        if os.getuid() == 0:  # its privilege separation folder (root's sshd only)
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.logfile = open(self.log, "ab")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", self.config],
                                     stdin=subprocess.DEVNULL, stdout=self.logfile,
                                     stderr=self.logfile)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sshd exited with %d; see %s" % (self.proc.returncode, self.log))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen on port %d within 10 s" % self.port)

    def stop(self):
        """Stop the listener and every session it runs (as a restart of the service does)."""
        if self.proc is None:
            return
        # The sessions' own sshd processes outlive the listener: end them too, by PID.
        sessions = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        self.proc = None
        self.logfile.close()
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def restart(self):
        self.stop()
        return self.start()

    def logtext(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")
