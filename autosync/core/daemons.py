"""Which dvcs-autosync daemons of this user run, on which config, syncing which folder:
ours and the original (a Python script named dvcs-autosync, which makes no socket),
read from each process's command line, working folder, HOME and environment in /proc.
The supervisor refuses to start beside one that syncs its folder; init tells about the
original and refuses to rewrite the config a daemon runs on."""
import os

from autosync.core import config, ini


def running(commands=()):
    """(PID, command line, config file) of each dvcs-autosync of this user running now
    (ours or the original; not a subcommand such as status), this process aside."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (os.getpid(), os.getppid()):
            continue
        pid = int(name)
        try:
            if os.stat("/proc/%d" % pid).st_uid != os.getuid():
                continue
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = [os.fsdecode(a) for a in f.read().split(b"\0")][:-1]
        except OSError:
            continue
        file = config_of(pid, args, commands)
        if file is not None:
            yield pid, args, file


def synced_folder(pid, args, file):
    """The folder the daemon `pid` syncs (None when its config cannot tell). The original
    reads ~/.autosync (of its HOME) after the file it is given, so that a path there
    overrides the file's: it syncs ~/.autosync's folder whatever config it was given."""
    env = environ_of(pid)
    path = folder_of(file, env)
    if is_original(args, "/proc/%d/cwd" % pid, "/proc/%d/exe" % pid):
        default = os.path.join(env.get("HOME") or "/", ".autosync")
        if os.path.realpath(default) != os.path.realpath(file) and os.path.isfile(default):
            path = folder_of(default, env) or path
    return path


def is_original(args, cwd=".", exe=None):
    """Whether a command line is the original dvcs-autosync's: a Python running a script
    named dvcs-autosync that is not ours. Told by what runs, never by the name the
    interpreter was called by (a venv's bin/python, which pip writes into our launcher's
    shebang when run as `venv/bin/python -m pip`, is a Python 3): a Python 2 (`exe`, the
    process's /proc/PID/exe, says which binary runs) runs only the original; under
    any other Python the script says which (ours imports autosync: the launcher pip or
    Debian writes, or bin/dvcs-autosync), and a script that cannot be read is not said
    to be the original. `cwd`: the process's working folder, for a script named by a
    relative path."""
    words = [a for a in args[1:] if not a.startswith("-")][:1]
    if not args or not os.path.basename(args[0]).startswith("python") or not words or \
            os.path.basename(words[0]) != "dvcs-autosync":
        return False
    if _python2(args[0], exe):
        return True
    try:
        with open(os.path.join(cwd, words[0]), "rb") as f:
            text = f.read(1 << 16)
    except OSError:
        return False  # cannot tell: not said to be the original
    return b"autosync.supervisor" not in text and b"from autosync" not in text


def _python2(called, exe):
    """Whether the interpreter is a Python 2: by the binary that runs (`exe`, a link
    such as /proc/PID/exe), else by a name that says its version (python2, python2.7)."""
    name = os.path.basename(called)
    if exe is not None:
        try:
            name = os.path.basename(os.readlink(exe))  # the kernel's link: resolved
        except OSError:
            pass  # gone, or not a link: its name is all there is
    return name.startswith("python2")


def environ_of(pid):
    """{name: value} of another process's environment ({} when it cannot be read)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            pairs = [v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v]
    except OSError:
        return {}
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


def folder_of(file, env):
    """The folder a config file names (its path) as the process with environment `env`
    reads it (`~` is its HOME, `$VARS` its own), or None: only that key is read, since
    another daemon's file need not be one we would accept as a whole (the original's)."""
    try:
        sections = ini.parse(file, ini.read_text(file), [], secret=("xmpp",))
        value = sections["autosync"]["path"]
    except Exception:  # whatever another file holds, it never stops ours
        return None
    value = value[0] if isinstance(value, tuple) else value
    value = "\n".join(value) if isinstance(value, list) else str(value)
    return config._expand(value.strip(), os.path.dirname(file), env)


def config_of(pid, args, commands=()):
    """The config file a dvcs-autosync command line runs on (absolute), or None when it
    is not one (or runs one of `commands`, the subcommands such as log or status)."""
    for i, arg in enumerate(args):
        if os.path.basename(arg) == "dvcs-autosync" or (
                arg == "autosync.supervisor" and i and args[i - 1] == "-m"):
            rest = args[i + 1:]
            break
    else:
        return None
    file, words = None, list(rest)
    while words:
        word = words.pop(0)
        if word == "--config" and words:
            file = words.pop(0)
        elif word.startswith("--config="):
            file = word.split("=", 1)[1]
        elif not word.startswith("-") and file is None:
            if word in commands:
                return None
            file = word
    try:
        if file is None:  # the default: ~/.autosync of that process's HOME
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            file = os.path.join(os.fsdecode(env.get(b"HOME", b"")) or "/", ".autosync")
        elif not file.startswith("/"):
            file = os.path.join(os.readlink("/proc/%d/cwd" % pid), os.path.expanduser(file))
    except OSError:
        return None
    return os.path.expanduser(file)
