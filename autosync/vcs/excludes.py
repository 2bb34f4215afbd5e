"""The excludes file: what git's own scans leave out, exactly as the watcher does.

The watcher never reports a path under `ignorepath`, an editor's temporary
file or a folder holding its own repository, but `startupcmd` (`git add -A`)
and every rescan find changes by themselves. For git the committer therefore
writes one excludes file (the user's own core.excludesFile, then ours) and
every git command it runs reads it (its GitEnvironment, vcs/git_environment.py), so nothing
in the user's repository or config is changed.
"""
import logging
import os

from autosync.vcs.git import git
from autosync.core.ignore import EDITOR_JUNK

log = logging.getLogger("autosync.excludes")

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


class Excludes:
    """The file at `where`, for the working tree whose metadata is `gitdir`."""

    def __init__(self, cfg, gitdir, where):
        self.where = where
        self.folder = cfg.path
        self.top = os.path.dirname(gitdir)
        # Read before ours takes the user's place in core.excludesFile.
        user = user_excludes(cfg.path).rstrip(b"\n")
        ours = [anchored(os.path.join(cfg.path, p), self.top) for p in cfg.ignorepath]
        self.fixed = (user + b"\n" if user else b"") + os.fsencode(
            "\n".join(ours + list(EDITOR_JUNK)) + "\n")
        self.nested = set()  # folders (relative to cfg.path) holding their own repository
        self.write()

    def leave_out(self, folders):
        """Keep these folders (nested repositories) out of git's scans from now on."""
        new = set(folders) - self.nested
        if new:
            self.nested |= new
            self.write()
        return sorted(new)

    def take_back(self, folders):
        """These folders are ordinary folders again (their own .git is gone)."""
        if self.nested & set(folders):
            self.nested -= set(folders)
            self.write()

    def ensure(self):
        """Before git scans: a file someone removed is written again, so losing it never
        un-ignores anything (git reads a missing excludes file as an empty one).
        -> True when it had to be written again."""
        if not os.path.exists(self.where):
            log.warning("%s was removed; written again before scanning", self.where)
            self.write()
            return True
        return False

    def remove(self):
        try:
            os.unlink(self.where)
        except FileNotFoundError:
            pass

    def write(self):
        lines = [anchored(os.path.join(self.folder, rel), self.top) + "/"
                 for rel in sorted(self.nested)]
        tmp = "%s.%d.tmp" % (self.where, os.getpid())
        with open(tmp, "wb") as f:
            f.write(self.fixed + os.fsencode("".join(l + "\n" for l in lines)))
        os.replace(tmp, self.where)  # a git running now reads the old file or the new one
