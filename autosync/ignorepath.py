"""Keeps `ignorepath` out of the repository when the DVCS itself scans (git).

The watcher never reports a path under `ignorepath`, but `startupcmd`
(`git add -A`) finds every change by itself, ignorepath included. For git,
the committer therefore runs its commands with one more excludes file: the
user's own (core.excludesFile) plus one anchored pattern per ignorepath
entry, passed through git's GIT_CONFIG_* environment variables, so nothing
in the user's repository or config is changed.
"""
import os

from autosync.gitrepo import git

SPECIAL = "\\*?[!# "


def anchored(path, top):
    """`path` as a gitignore pattern that matches only that path below `top`."""
    rel = os.path.relpath(path, top)
    return "/" + "".join("\\" + c if c in SPECIAL else c for c in rel)


def user_excludes(folder):
    """The text of the user's own excludes file, which ours must keep in force."""
    out = (git(folder, "config", "--path", "--get", "core.excludesFile", check=False)
           or b"").strip()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    name = os.fsdecode(out) if out else os.path.join(base, "git", "ignore")
    try:
        with open(name, "rb") as f:
            return f.read()
    except OSError:
        return b""


def git_environment(cfg, gitdir, where):
    """Environment variables for git commands; `where` is a file we may write. {} if none needed."""
    if not gitdir or not cfg.ignorepath:
        return {}
    top = os.path.dirname(gitdir)
    patterns = [anchored(os.path.join(cfg.path, p), top) for p in cfg.ignorepath]
    with open(where, "wb") as f:
        f.write(user_excludes(cfg.path).rstrip(b"\n") + b"\n")
        f.write(os.fsencode("\n".join(patterns) + "\n"))
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
    return {"GIT_CONFIG_COUNT": str(count + 1),
            "GIT_CONFIG_KEY_%d" % count: "core.excludesFile",
            "GIT_CONFIG_VALUE_%d" % count: where}
