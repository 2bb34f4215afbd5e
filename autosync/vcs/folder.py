"""Is the synced folder still the one we started on?

`Folder`: a folder that was deleted, unmounted or replaced by another folder, or that
lost its DVCS metadata, must not be committed: every file would look deleted. Another
clone of the same remote put in its place (`rm -rf`, then `git clone`) is taken on,
once the clone is complete. Asked by the watcher (before it sends) and the committer
(before it commits).
"""
import logging
import os
import subprocess

from autosync.vcs import git
from autosync.vcs.commands import CommandFailed, environment
from autosync.vcs.git_environment import PLAIN
from autosync.core.paths import find_marker

log = logging.getLogger("autosync.recovery")  # the name its lines had before the split


def _identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def remote_of(template):
    """A Folder's `remote`: remoteurlcmd (a commands.Template) run in a folder -> its
    output, "" when it fails; None when there is no such command."""
    if template is None or template.empty:
        return None

    def remote(path):
        try:
            return template.output(cwd=path, timeout=10)
        except (CommandFailed, OSError):
            return ""
    return remote


def _git_dir(marker):
    """The git metadata folder a `.git` marker stands for (a folder, or a file naming it)."""
    if os.path.isdir(marker):
        return marker
    try:
        with open(marker) as f:
            line = f.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(os.path.dirname(marker), line[len("gitdir:"):].strip())


def _being_made(folder, marker, gitenv=PLAIN):
    """A git clone or checkout at work: its index locked, or a commit checked out and no
    index written yet (a clone between its fetch and its checkout: a commit then would
    record every file as deleted)."""
    if os.path.basename(marker) != ".git":
        return False
    gitdir = _git_dir(marker)
    if gitdir is None:
        return True  # a .git file being written
    if git.index_locked(gitdir):
        return True
    if os.path.exists(os.path.join(gitdir, "index")):
        return False
    head = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=folder,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, env=environment(gitenv=gitenv))
    return head.returncode == 0


GONE = ("the synced folder %s is gone (moved away, deleted or unmounted): nothing is "
        "committed until it is back; syncing starts again by itself then")


class Folder:
    """The synced folder as it was at start-up; `problem()` says what changed since.

    `remote(path)` says which remote a folder's repository syncs with (see
    remote_of): a folder put in place of ours is taken on when it is another
    clone of that remote. Without it only our own folder (moved away and back)
    is. `set_away()` is for whoever knows better (the watcher): while the
    folder is away that is the problem, and when it is back the folder is
    looked at in full, remote included, since a folder made anew may get the
    old one's inode number."""

    def __init__(self, path, remote=None, gitenv=PLAIN):
        self.path, self.gitenv = path, gitenv
        self.remote = remote
        self.identity = _identity(path)
        self.marker = find_marker(path)
        self.url = self.url_of(path)
        self.away = None
        self.doubt = False  # it was away: the same inode number proves nothing

    def url_of(self, path):
        return (self.remote(path) or "").strip() if self.remote is not None else ""

    def set_away(self, problem):
        """The folder is away (`problem` says so), or back (None)."""
        self.away = problem
        self.doubt = self.doubt or bool(problem)

    def examine(self):
        """-> (verdict, line): "ours" (the folder we started on, or another clone of the
        same remote, taken on from now on), "away" (not there, without its metadata, or
        being made: look again later), "foreign" (another folder: never ours)."""
        try:
            identity = _identity(self.path)
        except OSError:
            return "away", GONE % self.path
        same = identity == self.identity
        if same and not self.doubt:
            if self.marker is None or not os.path.lexists(self.marker):
                return "away", "the repository metadata %s is gone" % (self.marker
                                                                       or "(none found)")
            return "ours", None
        replaced = "the synced folder %s was replaced by another folder" % self.path
        if not os.path.isdir(self.path):
            return "foreign", replaced + " (it is not a folder now)"
        marker = find_marker(self.path)
        if marker is None:
            try:
                empty = not os.listdir(self.path)
            except OSError:
                empty = True
            if empty:  # an unmounted disk's mount point, or a clone about to begin
                return "away", GONE % self.path
            return "foreign", replaced + ", one that holds no repository"
        if _being_made(self.path, marker, self.gitenv):
            return "away", ("a new folder at %s is being made (a clone or a checkout at "
                            "work): waiting for it" % self.path)
        url = self.url_of(self.path)
        if not (same and url == self.url) and (not self.url or url != self.url):
            return "foreign", "%s, %s" % (replaced, (
                "not a clone of %s (its remote: %s)" % (self.url, url or "none")
                if self.url else "and ours had no remote to compare it with"))
        if not same:
            log.warning("the synced folder %s is another clone of %s now: syncing it",
                        self.path, self.url)
        self.identity, self.marker, self.doubt = identity, marker, False
        return "ours", None

    def problem(self):
        """None while it is safe to commit, else one line saying why not."""
        if self.away:
            return self.away
        verdict, line = self.examine()
        return None if verdict == "ours" else line
