"""How a command the daemon runs is told from the user's: AUTOSYNC_DAEMON=1 in its environment.

The one place that knows the variable (docs/internals.md, "Parts handed in"):
* set: commands.environment() adds it to every command the suite runs (git, the
  configured command strings), and so to whatever those start: the hooks git runs
  under them, git-annex, a shell line's programs;
* read by a hook: its first command HOOK_EXIT ends it at once under the daemon (the
  shipped hooks/post-commit: the daemon pushes its own commits itself);
  committer/fsmonitor.py gives git's fsmonitor only where every hook begins so;
* read by recovery (vcs/recovery.py): a command a killed committer started may still
  run when the next one starts; another process's environment can only be read in
  /proc/PID/environ (started_by_daemon).
"""
NAME = "AUTOSYNC_DAEMON"
VALUE = "1"
# A hook's first command that leaves the daemon's commands alone (hooks/post-commit's).
HOOK_EXIT = '[ -n "$%s" ] && exit 0' % NAME


def variables():
    """What commands.environment() adds to every command the suite runs."""
    return {NAME: VALUE}


def started_by_daemon(pid):
    """Does process `pid` carry the mark (a command some committer ran, or a process that
    command started)? False when its environment cannot be read (gone, not ours)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return False
    return ("%s=%s" % (NAME, VALUE)).encode() in entries
