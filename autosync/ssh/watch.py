"""The command that watches a remote (`watchcmd`): made for a config (watch_argv, a
WatchCommand), judged when it ends (why_it_ended, cannot_watch), and tried once (probe).

Run by autosync-sshlink for as long as the daemon runs; tried once by `dvcs-autosync
init` to choose `syncmethod` (probe, the one function a tool may ask of this
program). The address and the held ssh connection under it are git's transport
(vcs/remote.py).
"""
import os
import select
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from autosync.core import problems
from autosync.vcs import commands
from autosync.vcs.git_environment import GitEnvironment
from autosync.vcs.remote import SSH_OPTIONS, BadRemote, configuration, connect, \
    git_ssh_command, held, let_go, own_mux_config, parse_remote, ssh_program, ssh_remote

POLL = 10.0  # seconds between `git ls-remote`s of a server that cannot watch (remote.poll)

# Run by the server's login shell: autosync-remote from PATH, or from ~/.local/bin,
# where `pip install --user` and pipx put it but which a non-interactive ssh
# session's PATH often lacks; without it, the watch itself (autosync/ssh/remote.py,
# "$2": compressed, base64; "$3" unpacks it) run by the server's python3. The path is
# "$1": never parsed by a shell.
REMOTE_SCRIPT = ('PATH="$PATH:$HOME/.local/bin"; '
                 'if command -v autosync-remote >/dev/null 2>&1; then '
                 'exec autosync-remote watch "$1"; fi; '
                 'if command -v python3 >/dev/null 2>&1; then echo "%s" >&2; '
                 'exec python3 -c "$3" "$2" watch "$1"; fi; '
                 'echo "autosync-remote: not found on the server, nor python3" >&2; exit 127'
                 ) % ("autosync-remote: not found on the server: its python3 runs the watch "
                      "sent over ssh")
SENT_NOTICE = "its python3 runs the watch sent over ssh"
# python3's program: the watch, out of its argument (left out of sys.argv before it runs).
BOOT = "import base64,sys,zlib;exec(zlib.decompress(base64.b64decode(sys.argv.pop(1))))"
SENT = "(the watch program)"  # what the log shows in place of the program sent
NOISE = ("Warning: Permanently added",)  # ssh's stderr lines that say nothing wrong


def default_watch(url, base, ssh=("ssh",), held=()):
    """argv watching the remote at `url`: over ssh (`held`: held()'s options), or here
    for a local path."""
    remote = parse_remote(url, base)
    if remote[0] == "local":
        return [sys.executable, "-m", "autosync.ssh.remote", "watch", remote[1]]
    _, destination, port, path = remote
    return list(ssh) + SSH_OPTIONS + list(held) + (["-p", str(port)] if port else []) + \
        ["--", destination, remote_command(path)]


def watch_program():
    """autosync/ssh/remote.py, compressed and in base64: one word on any shell."""
    import base64
    import zlib
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "ssh", "remote.py"), "rb") as f:
        return base64.b64encode(zlib.compress(f.read(), 9)).decode("ascii")


def remote_command(path, program=None):
    """What the server's login shell runs to watch `path` (REMOTE_SCRIPT)."""
    return "sh -c %s autosync-remote %s %s %s" % (
        shlex.quote(REMOTE_SCRIPT), shlex.quote(path), program or watch_program(),
        shlex.quote(BOOT))


# What a restricted key's forced command says when it refuses a command (autosync-remote
# serve's words begin the same way): status names the forced command by these words.
REFUSED_BY_KEY = problems.REFUSED_BY_KEY
# The forced command of a restricted key for a server with nothing of ours installed
# (forced_line): plain sh runs the client's command only when its SHA-256 is one of the
# allowed commands' (this repository's git-upload-pack and git-receive-pack, as git
# spells them, and the watch command this version sends), byte for byte; sha256sum is
# coreutils'. No path or word of the client's is ever parsed by a shell before that.
FORCED_SCRIPT = ('c=$SSH_ORIGINAL_COMMAND; case $(printf %%s "$c" | sha256sum) in %s) '
                 'exec sh -c "$c";; esac; echo "error: autosync: %s one repository (refused by '
                 'the forced command of its line in authorized_keys)" >&2; exit 1')


def git_command(service, path):
    """The command git's ssh transport sends for `service` (git-upload-pack,
    git-receive-pack) of `path`: the path in single quotes, ' and ! quoted as git's
    sq_quote_buf does."""
    quoted = "".join("'\\%s'" % c if c in "'!" else c for c in path)
    return "%s '%s'" % (service, quoted)


def forced_line(url, base="."):
    """The authorized_keys options that let a key only fetch, push and watch the
    repository at `url` on a server with nothing of ours installed (FORCED_SCRIPT run by
    the server's sh), or None for a remote not over ssh. The watch allowed is this
    version's: after an upgrade its line is printed again (until then the link polls
    the remote with git ls-remote, which the line allows)."""
    remote = ssh_remote(url, base)
    if remote is None:
        return None
    import hashlib
    path = remote[3]
    allowed = [git_command("git-upload-pack", path), git_command("git-receive-pack", path),
               remote_command(path)]
    script = FORCED_SCRIPT % ("|".join(hashlib.sha256(c.encode()).hexdigest() + "*"
                                       for c in allowed), REFUSED_BY_KEY)
    # The login shell runs it: one single-quoted word for sh (the script holds no '), and
    # sshd's only escape, \", for the quotes inside.
    return 'command="sh -c \'%s\'",restrict' % script.replace('"', '\\"')


def remote_path(url, base):
    """What watchcmd's %s stands for: the remote's path (as its server sees it)."""
    remote = parse_remote(url, base)
    return remote[1] if remote[0] == "local" else remote[3]


def cannot_watch(returncode):
    """Whether a watch command that ended before its first line with `returncode` means a
    server that cannot run the watch (a hosted git without a shell, no python3: its own
    exit) rather than ssh failing (255: no connection, a refused login) or a kill."""
    return returncode is not None and 0 < returncode != 255


def poll_command(url, base):
    """(argv, shown, env) polling the remote at `url` here with git ls-remote
    (autosync-remote poll), through the held connection."""
    argv = [sys.executable, "-m", "autosync.ssh.remote", "poll", url]
    gitenv = GitEnvironment(ssh_command=git_ssh_command(url, base))
    return argv, " ".join(map(commands.show, argv)), commands.environment(gitenv=gitenv)


@dataclass
class WatchCommand:
    """The watch command for a config (watch_argv), and what the link needs around it."""
    argv: list
    shown: str  # the command, for the log
    release: Optional[Callable] = None  # lets the held connection go (let_go); None: none held
    poll: Optional[Callable] = None  # -> poll_command's (argv, shown, env), for a server
    #                                    that cannot run the watch; None: not over ssh
    master: object = None  # connect()'s Master making the held connection, to wait for
    #                        before the watch starts, or None
    held: object = None  # its control socket, False when none could be had (a login per
    #                      command), None where the user's own multiplexing or a watchcmd
    #                      is used


def watch_argv(cfg):
    """The WatchCommand of this config: its watchcmd, else the default watch of its remote."""
    url = commands.Template("remoteurlcmd", cfg.commands["remoteurlcmd"]).output(cwd=cfg.path)
    text = cfg.commands.get("watchcmd") or ""
    if text.strip():
        template = commands.Template("watchcmd", text)
        run = template._fill([remote_path(url, cfg.path)] if template.nargs else [])[0]
        return WatchCommand(run.argv, run.shown)
    ssh, options, release, poll, master = ssh_program(os.environ, cfg.path), [], None, None, None
    control = None
    remote = parse_remote(url, cfg.path)
    if remote[0] == "ssh":
        config = configuration(ssh, remote[1], remote[2])  # read by held() and connect()
        options, path = held(ssh, remote[1], remote[2], config=config, owner=cfg.path)
        control = path or (False if config and not own_mux_config(config) else None)
        if path:
            master = connect(ssh, remote[1], remote[2], path, config)
            release = lambda: let_go(ssh, remote[1], path)  # noqa: E731
        poll = lambda: poll_command(url, cfg.path)  # noqa: E731
    argv = default_watch(url, cfg.path, ssh, options)
    return WatchCommand(argv, shown(argv), release, poll, master, control)


def shown(argv):
    """A watch command for the log: the program it sends over left out."""
    return " ".join(map(commands.show, argv)).replace(watch_program(), SENT)


def why_it_ended(returncode, stderr):
    """The command's end in one line: its exit, and its own last words on stderr."""
    lines = [" ".join(l.split()) for l in stderr.decode("utf-8", "replace").splitlines()]
    said = [l for l in lines if l and not l.startswith(NOISE)][-3:]
    how = "killed by signal %d" % -returncode if returncode < 0 else "exit %d" % returncode
    return "the watch command ended (%s)%s" % (how, ": " + "; ".join(said) if said else "")


WATCH_PROBE = 5.0  # seconds probe() tries the watch for


@dataclass
class WatchVerdict:
    """Would the ssh link work for a remote (probe())? `why`: None when it would, else
    why not (the command's own words); `how`: None (autosync-remote on the server),
    "sent" (the server's python3 runs the watch sent over ssh: `notice`), or why the
    server cannot run the watch (the link then polls the remote every `every` seconds);
    `forced`: the authorized_keys line letting a key only fetch, push and watch this
    repository on a server with nothing of ours installed (forced_line), or None."""
    why: Optional[str] = "not tried"
    how: Optional[str] = None
    forced: Optional[str] = None
    every: float = POLL
    notice: str = SENT_NOTICE


def probe(remote, folder, seconds=WATCH_PROBE, run=True):
    """Would the ssh link work for `remote` (an address; a relative path from `folder`)?
    Its watch tried once (autosync-remote on the server, or here for a local path): a
    line, or the command still running after `seconds` (an empty remote prints nothing
    yet), is yes. -> WatchVerdict. run=False: not tried (`why` says so), only what the address
    tells (`forced`)."""
    verdict = WatchVerdict(forced=forced_line(remote, folder))
    if not run:
        return verdict
    try:
        argv = default_watch(remote, folder, ssh_program(os.environ, folder))
    except BadRemote as e:
        verdict.why = str(e)
        return verdict
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=commands.environment())
    except OSError as e:
        verdict.why = "%s: %s" % (argv[0], e.strerror)
        return verdict
    try:
        if select.select([proc.stdout], [], [], seconds)[0] and \
                not proc.stdout.readline().strip():
            proc.wait(seconds)
            why = why_it_ended(proc.returncode, proc.stderr.read())
            if _over_ssh(remote) and cannot_watch(proc.returncode):
                verdict.why, verdict.how = None, why  # the link polls it instead (sshlink)
            else:
                verdict.why = why
            return verdict
        proc.kill()
        proc.wait()
        os.set_blocking(proc.stderr.fileno(), False)  # what it said so far, no more
        verdict.why = None
        if SENT_NOTICE.encode() in (proc.stderr.read() or b""):
            verdict.how = "sent"
        return verdict
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _over_ssh(remote):
    return ssh_remote(remote) is not None
