"""What init says around its work: about an original dvcs-autosync set up here (first,
even when init then refuses), and its closing words: how to start, how pushes arrive,
the next machine's command, the restricted key's line."""
import os
import re
import shlex
import shutil
import subprocess

from autosync.core import config, daemons
from autosync.ssh.watch import probe as watch_probe
from autosync.tools.init.files import tilde
from autosync.tools.init.plan import say
from autosync.vcs.remote import ssh_remote

# The original dvcs-autosync's example statuscmd: a config holding it is the original's.
ORIGINAL_STATUSCMD = "nothing to commit"


def shell_words(words):
    """Words as one pasteable command line; a leading ~/ left open, so the shell expands it."""
    def one(w):
        if w.startswith("~/") and shlex.quote(w[2:]) == w[2:]:
            return w
        return shlex.quote(w)
    return " ".join(one(w) for w in words)


def start_command(plan):
    program = plan.program or "dvcs-autosync"
    if plan.program and shutil.which("dvcs-autosync") == plan.program:
        program = "dvcs-autosync"
    words = [program]
    if plan.config != config.default_path():
        words += ["--config", plan.config]
    return shell_words(words)


def closing(plan):
    watch = watch_probe(plan.remote, ".", run=False)  # what the ssh link says of itself
    if not plan.started:
        say("Start syncing with:\n    %s" % start_command(plan))
    if plan.xmpp is None and plan.watch_why is None and plan.watch_how not in (None, "sent"):
        say("Other machines' pushes arrive within %g s: the server cannot run the watch "
            "(%s), so the remote is polled with git ls-remote (syncmethod = ssh)."
            % (watch.every, plan.watch_how))
    elif plan.xmpp is None and plan.watch_why is None:
        say("Other machines' pushes arrive at once: the remote is watched "
            "(syncmethod = ssh, %s)." % ("autosync-remote" if plan.watch_how is None else
                                         "the server has no autosync-remote: " +
                                         watch.notice))
    elif plan.xmpp is None:
        say("Other machines' pushes are pulled every %g minutes (pullinterval): the "
            "remote cannot be watched (%s). Install autosync-remote on the server "
            "(docs/ssh.md) and set syncmethod = ssh, or give --account, for "
            "them to arrive at once."
            % (config.KEYS["autosync"]["pullinterval"].default / 60, plan.watch_why))
    args = plan.args
    words = ["dvcs-autosync", "init", plan.remote, tilde(plan.folder)]
    if plan.xmpp is not None:
        words += ["--account", plan.xmpp.username]
        if args.server:
            words += ["--server", args.server]
        if plan.xmpp.fingerprint:
            words += ["--fingerprint", plan.xmpp.fingerprint]
    if args.service:
        words.append("--service")
    if args.thin:
        words.append("--thin")
    if plan.config != config.default_path():
        words += ["--config", tilde(plan.config)]
    say("On the next machine run:\n    %s" % shell_words(words))
    installed = plan.watch_why is None and plan.watch_how is None
    line = key_line(plan.remote, installed)
    if line:
        say("To let a machine's key sync only this repository on the server, begin the "
            "key's line in the server's ~/.ssh/authorized_keys with\n    %s\n%s"
            % (line, "(the full path of autosync-remote if it is not on the PATH of an "
               "ssh session there)" if installed else
               "(it needs nothing of ours on the server: sh runs this version's watch "
               "and git's fetch and push of this repository, nothing else; print it "
               "again after an upgrade. Another folder on that server needs a key of "
               "its own, e.g. git -C FOLDER config core.sshCommand 'ssh -i KEY')"))
    if os.path.isabs(plan.remote):
        say("(with %s as that machine reaches it, e.g. server:%s over ssh)"
            % (plan.remote, plan.remote))


def about_the_original(plan):
    """The original dvcs-autosync set up here: its plain `git pull` stops for good at
    the first divergence (git 2.33.1 and later; 2.27 to 2.33.0 only warned) unless its
    clone says how to reconcile (pull.rebase false). Each original found is named,
    once per folder, and only where its clone does not say so already."""
    told = set()
    for what, where, folder in original_setups():
        if folder in told or (folder and merges_on_pull(folder)):
            continue
        told.add(folder)
        say("Found the original dvcs-autosync's %s %s. In its clone, run\n    git -C %s "
            "config pull.rebase false\nso that its git pull merges instead of stopping for "
            "good at the first divergence (README, Switching from the original)."
            % (what, where, shlex.quote(folder) if folder else "FOLDER"))


def merges_on_pull(folder):
    """Whether a plain `git pull` in the clone `folder` merges (or rebases) a divergence
    instead of stopping: its git config (any scope, as the original's git reads it) sets
    pull.rebase, or pull.ff to true or false (only `only` refuses)."""
    def get(key):
        try:
            return subprocess.run(["git", "-C", folder, "config", "--get", key],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return bool(get("pull.rebase")) or get("pull.ff").lower() in ("true", "false")


def key_line(remote, installed=True):
    """The authorized_keys options that let a key only sync `remote` (autosync-remote
    serve where the server has it, `installed`; else plain sh, the ssh link's
    forced_line), or None for a remote not over ssh."""
    if not installed:
        return watch_probe(remote, ".", run=False).forced
    parsed = ssh_remote(remote)
    if parsed is None:
        return None
    command = "autosync-remote serve " + shlex.quote(parsed[3])
    return 'command="%s",restrict' % command.replace('"', '\\"')  # sshd's only escape


def original_setups():
    """[(what, where, its folder or None)] for each way the original dvcs-autosync is set
    up for this user: its config ~/.autosync (its own example's statuscmd greps `git
    status`; init never writes [dvcs]), its pidfile (~/.autosync.pid) naming a running
    original, and every original running on any config (told by daemons.is_original)."""
    file = config.default_path()
    text = ""
    try:
        with open(file, errors="replace") as f:
            text = f.read()
    except OSError:
        pass
    folder = None
    match = re.search(r"^\s*path\s*[=:]\s*(.+?)\s*$", text, re.MULTILINE)
    if match:
        folder = os.path.expanduser(match.group(1))
    found = []
    if ORIGINAL_STATUSCMD in text:
        found.append(("config", file, folder))
    pid = original_running(file + ".pid")
    if pid:
        found.append(("pidfile", "%s (PID %d)" % (file + ".pid", pid), folder))
    for other, args, its_config in daemons.running():
        if other != pid and daemons.is_original(args, "/proc/%d/cwd" % other,
                                                "/proc/%d/exe" % other):
            found.append(("process", "(PID %d, config %s)" % (other, its_config),
                          daemons.synced_folder(other, args, its_config)))
    return found


def original_running(pidfile):
    """The PID a pidfile names when that process is the original dvcs-autosync
    (daemons.is_original), else None."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().split()[0])
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0") if a]
    except (OSError, ValueError, IndexError):
        return None
    return pid if daemons.is_original(args, "/proc/%d/cwd" % pid, "/proc/%d/exe" % pid) else None
