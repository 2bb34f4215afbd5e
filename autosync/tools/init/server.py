"""The server's repository set for big files: stored and sent as they came.

The daemon's own git keeps a file over 16 MB as it is, never deflated or searched for
deltas (docs/behaviour.md); the remote keeps its own settings, which git passes it
none of. Without these two it deflates every big file again as it receives it, and
again as it sends it on (docs/benchmark.md: a new 1 GB file took twice as long). init
sets them where they are not set (a value of the user's stays), in the bare repository
for a path, over ssh for a server, and says so in one line."""
import os
import shlex
import subprocess

from autosync.core.retry import one_line
from autosync.tools.init.plan import say
from autosync.vcs.remote import BadRemote, SSH_OPTIONS, parse_remote, ssh_program

# The settings, and their values where the user set none.
SETTINGS = (("core.bigFileThreshold", "16m"), ("receive.unpackLimit", "1"))
TIMEOUT = 30.0  # seconds the server has to answer


def script(path):
    """What the server's login shell runs: each setting made where it is not set, then
    every value printed, one per line. The path quoted for sh (`~/` left to it)."""
    where = "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)
    lines = ["g() { git --git-dir=%s \"$@\"; }" % where,
             "g rev-parse --git-dir >/dev/null || exit 3"]
    for key, value in SETTINGS:
        lines.append("g config --local --get %s >/dev/null || g config --local %s %s || exit 4"
                     % (key, key, value))
    lines += ["g config --local --get %s" % key for key, _ in SETTINGS]
    return "; ".join(lines)


def big_files(plan):
    """Set the remote's repository for big files, and say what was done (or why not)."""
    try:
        remote = parse_remote(plan.remote, os.getcwd())
    except BadRemote:
        return  # https:// and the like: no shell there (hosted: their own settings)
    if remote[0] == "local":
        argv, shown = ["sh", "-c", script(remote[1])], remote[1]
    else:
        _, destination, port, path = remote
        argv = ssh_program(os.environ, os.getcwd()) + SSH_OPTIONS + \
            (["-p", str(port)] if port else []) + ["--", destination, script(path)]
        shown = path
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=TIMEOUT)
        values = proc.stdout.decode("utf-8", "replace").split()
        ok = proc.returncode == 0 and len(values) == len(SETTINGS)
        why = one_line(proc.stderr.decode("utf-8", "replace")) or "exit %d" % proc.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, values, why = False, [], one_line(str(e))
    settings = ", ".join("%s %s" % (key, value) for key, value in SETTINGS)
    if not ok:
        say("Big files: the remote's repository could not be set (%s); they are deflated "
            "again there at every push and pull until you run, on the server: %s" % (
                why, "; ".join("git -C %s config %s %s" % (shlex.quote(shown), k, v)
                               for k, v in SETTINGS)))
        return
    got = ", ".join("%s %s" % (key, value) for (key, _), value in zip(SETTINGS, values))
    if got == settings:
        say("Big files: the remote's repository stores and sends them as they came (%s)."
            % got)
    else:  # a value of the user's, kept
        say("Big files: the remote's repository keeps its own settings (%s; init would "
            "set %s)." % (got, settings))
