"""A remote's address, and the command that watches it (`watchcmd`).

Shared by autosync-sshlink, which runs the command for as long as the daemon
runs, and `dvcs-autosync init`, which tries it once to choose `syncmethod`.
"""
import os
import shlex
import subprocess
import sys

from autosync.core import commands

# Keep-alives: a dead connection is noticed within about 45 s; no password prompt ever.
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15",
               "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=20"]
# Run by the server's login shell: autosync-remote from PATH, or from ~/.local/bin,
# where `pip install --user` and pipx put it but which a non-interactive ssh
# session's PATH often lacks. The path is "$1": never parsed by a shell.
REMOTE_SCRIPT = 'PATH="$PATH:$HOME/.local/bin"; exec autosync-remote watch "$1"'
NOISE = ("Warning: Permanently added",)  # ssh's stderr lines that say nothing wrong


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


def ssh_program(env, cwd):
    """The ssh git itself uses: $GIT_SSH_COMMAND, core.sshCommand, $GIT_SSH, or ssh."""
    if env.get("GIT_SSH_COMMAND"):
        return shlex.split(env["GIT_SSH_COMMAND"])
    configured = subprocess.run(["git", "config", "--get", "core.sshCommand"], cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL).stdout.decode("utf-8", "replace").strip()
    if configured:
        return shlex.split(configured)
    return [env["GIT_SSH"]] if env.get("GIT_SSH") else ["ssh"]


def default_watch(url, base, ssh=("ssh",)):
    """argv watching the remote at `url`: over ssh, or here for a local path."""
    remote = parse_remote(url, base)
    if remote[0] == "local":
        return [sys.executable, "-m", "autosync.ssh.remote", "watch", remote[1]]
    _, destination, port, path = remote
    script = "sh -c %s autosync-remote %s" % (shlex.quote(REMOTE_SCRIPT), shlex.quote(path))
    return list(ssh) + SSH_OPTIONS + (["-p", str(port)] if port else []) + \
        ["--", destination, script]


def remote_path(url, base):
    """What watchcmd's %s stands for: the remote's path (as its server sees it)."""
    remote = parse_remote(url, base)
    return remote[1] if remote[0] == "local" else remote[3]


def watch_argv(cfg):
    """(argv, shown) of the watch command for this config."""
    url = commands.Template("remoteurlcmd", cfg.commands["remoteurlcmd"]).output(cwd=cfg.path)
    text = cfg.commands.get("watchcmd") or ""
    if text.strip():
        template = commands.Template("watchcmd", text)
        run = template._fill([remote_path(url, cfg.path)] if template.nargs else [])[0]
        return run.argv, run.shown
    argv = default_watch(url, cfg.path, ssh_program(os.environ, cfg.path))
    return argv, " ".join(map(commands.show, argv))


def why_it_ended(returncode, stderr):
    """The command's end in one line: its exit, and its own last words on stderr."""
    lines = [" ".join(l.split()) for l in stderr.decode("utf-8", "replace").splitlines()]
    said = [l for l in lines if l and not l.startswith(NOISE)][-3:]
    how = "killed by signal %d" % -returncode if returncode < 0 else "exit %d" % returncode
    return "the watch command ended (%s)%s" % (how, ": " + "; ".join(said) if said else "")
