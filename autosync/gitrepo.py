"""The few things the committer asks git directly, when the DVCS is git.

Configured commands cover the daily work for any DVCS; these cover what no
command string can describe: where the repository is, and exactly what the
next commit will record (for a commit message that names every file, also
when `startupcmd` found the changes by itself).
"""
import os
import re
import subprocess

from autosync.commands import environment

HOST_IN_MESSAGE = re.compile(r"autosync on (\S+?):")
ACTIONS = {"A": "added", "M": "modified", "T": "modified", "D": "removed"}


def git(folder, *args, check=True):
    """Run git in folder -> stdout bytes (None on failure when not check)."""
    proc = subprocess.run(("git",) + args, cwd=folder, env=environment(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode:
        if check:
            raise RuntimeError("git %s: %s" % (args[0], proc.stderr.decode(errors="replace")
                                               .strip().splitlines()[-1:]))
        return None
    return proc.stdout


def git_dir(folder):
    """The repository's metadata folder (.git), absolute; None if folder is not in git."""
    out = git(folder, "rev-parse", "--absolute-git-dir", check=False)
    return os.fsdecode(out.strip()) if out else None


def staged_changes(folder):
    """What the next commit records, as batch changes with paths relative to `folder`.

    None when git cannot tell (no commit yet, or an error)."""
    out = git(folder, "diff", "--cached", "--name-status", "-z", "-M", "--relative", check=False)
    if out is None:
        return None
    fields = [os.fsdecode(f) for f in out.split(b"\0")]
    changes, i = [], 0
    while i + 1 < len(fields) and fields[i]:
        status = fields[i][:1]
        if status in ("R", "C"):
            changes.append({"action": "moved" if status == "R" else "added",
                            "path": fields[i + 2], "src": fields[i + 1]})
            i += 3
        else:
            changes.append({"action": ACTIONS.get(status, "modified"), "path": fields[i + 1]})
            i += 2
    return changes


def head(folder):
    out = git(folder, "rev-parse", "-q", "--verify", "HEAD", check=False)
    return out.strip() if out else None


def pulled(folder, before, after):
    """What a pull brought, for the `pulled` event: files changed and the hosts they came from."""
    if not before or not after or before == after:
        return {"changed": before != after and after is not None, "files": [], "hosts": []}
    names = git(folder, "diff", "--name-only", "-z", "--relative", before, after, check=False)
    subjects = git(folder, "log", "--format=%s", b"%s..%s" % (before, after), check=False)
    files = [os.fsdecode(n) for n in (names or b"").split(b"\0") if n]
    hosts = []
    for subject in os.fsdecode(subjects or b"").splitlines():
        found = HOST_IN_MESSAGE.match(subject)
        if found and found.group(1) not in hosts:
            hosts.append(found.group(1))
    return {"changed": True, "files": files[:200], "count": len(files), "hosts": hosts}
