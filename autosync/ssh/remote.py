"""autosync-remote: the server's side of `syncmethod = ssh`.

    autosync-remote watch REPO

prints one line per branch movement of the git repository REPO (bare or
not): `REF REVISION` (a removed branch: REVISION is forty zeros). First the
current state of every branch, then every change, each line flushed at once.
The daemon on each machine keeps one of these running over ssh
(autosync/ssh/link.py) and pulls when a line names a revision it lacks.

It waits on inotify (the repository's refs/, recursively, and the folder
holding packed-refs), never on a timer, so an idle watch costs no CPU. (One
exception: a repository on a network filesystem (NFS, SMB, sshfs, ...),
watched from a client that mounts it, where inotify never hears of other
clients' writes: there it also reads the refs every NETWORK_POLL seconds,
and says so once on stderr.) It
ends when the reader goes away: a write that fails (EPIPE), or stdout
reported hung up or in error by poll() while nothing moves, so a dropped
ssh connection never leaves it behind on the server. Needs only Python, git
and this package (pyinotify) on the server.
"""
import errno
import os
import re
import select
import subprocess
import sys

ZERO = "0" * 40
USAGE = "usage: autosync-remote watch REPO"
NETWORK_POLL = 2.0  # seconds between reads of the refs on a network filesystem
# Filesystems whose files other machines change without this kernel knowing (no inotify).
NETWORK_FS = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "afs", "lustre",
                        "ncpfs", "coda", "gfs2", "ocfs2", "glusterfs", "davfs"))


def filesystem(path, mountinfo="/proc/self/mountinfo"):
    """The type of the filesystem `path` is on (as /proc/self/mountinfo names it), or None."""
    path = os.path.realpath(path)
    best, kind = "", None
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields, _, rest = line.partition(" - ")
                fields = fields.split()
                if len(fields) < 5 or not rest:
                    continue
                # Blanks and backslashes in mount points are written as octal escapes.
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):  # the last, deepest mount wins
                    best, kind = point, rest.split()[0]
    except OSError:
        return None
    return kind


def on_network(kind):
    return bool(kind) and (kind in NETWORK_FS or kind.startswith("fuse"))


class NotARepository(Exception):
    pass


def git_dir(repo):
    """The git directory of `repo` (a bare repository, or a working tree's .git)."""
    repo = os.path.abspath(os.path.expanduser(repo))
    for candidate in (repo, os.path.join(repo, ".git")):
        if os.path.isdir(os.path.join(candidate, "refs")) \
                and os.path.isfile(os.path.join(candidate, "HEAD")):
            return candidate
    raise NotARepository("%s is not a git repository (no refs/ and HEAD in it or in its .git)"
                         % repo)


def branches(gitdir):
    """{ref: revision} of every branch, as git reads them (loose and packed alike)."""
    out = subprocess.run(["git", "--git-dir", gitdir, "for-each-ref",
                          "--format=%(refname) %(objectname)", "refs/heads"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         check=True).stdout
    found = {}
    for line in os.fsdecode(out).splitlines():
        ref, _, rev = line.rpartition(" ")
        if ref:
            found[ref] = rev
    return found


def changes(old, new):
    """The lines `REF REVISION` that take `old` to `new`, in a stable order."""
    lines = ["%s %s" % (ref, rev) for ref, rev in sorted(new.items()) if old.get(ref) != rev]
    return lines + ["%s %s" % (ref, ZERO) for ref in sorted(old) if ref not in new]


class Watch:
    """inotify on the refs of one git directory; fileno() turns readable on a change."""

    def __init__(self, gitdir):
        from autosync.core.inotify import Inotify
        self.inotify = Inotify(lambda event: None, lambda path: None, lambda path: False)
        # refs/ with every folder below it (new ones too: pyinotify's auto_add), and
        # the git directory itself, not recursively, where packed-refs is replaced.
        refs = os.path.join(gitdir, "refs")
        if not self.inotify.watch(refs, True) or not self.inotify.watch(gitdir, False):
            self.inotify.close()
            raise OSError(errno.ENOSPC, "no inotify watch left for %s" % gitdir)

    def fileno(self):
        return self.inotify.fileno()

    def drain(self):
        self.inotify.drain()

    def close(self):
        self.inotify.close()


def watch(repo, out=None):
    """Print the branches of `repo`, then each movement, until `out` is closed. -> exit code."""
    out = out if out is not None else sys.stdout
    gitdir = git_dir(repo)
    watcher = Watch(gitdir)  # before the first read: nothing moves unseen in between
    kind = filesystem(gitdir)
    timeout = None
    if on_network(kind):
        timeout = NETWORK_POLL * 1000
        print("autosync-remote: %s is on a network filesystem (%s), where other machines' "
              "pushes make no inotify event: reading its refs every %g s as well"
              % (gitdir, kind, NETWORK_POLL), file=sys.stderr, flush=True)
    try:
        state = {}
        poller = select.poll()
        poller.register(watcher.fileno(), select.POLLIN)
        # Events 0: poll still reports POLLHUP and POLLERR, i.e. the reader has gone.
        poller.register(out.fileno(), 0)
        while True:
            new = branches(gitdir)
            lines = changes(state, new)
            state = new
            if lines:
                out.write("".join(line + "\n" for line in lines))
                out.flush()
            ready = poller.poll(timeout)
            if any(fd == out.fileno() for fd, _ in ready):
                return 0
            watcher.drain()
    finally:
        watcher.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["-h"], ["--help"]):
        print(USAGE + "\n\n" + __doc__.split("\n\n", 2)[1])
        return 0
    if len(argv) != 2 or argv[0] != "watch":
        print(USAGE, file=sys.stderr)
        return 2
    try:
        return watch(argv[1])
    except BrokenPipeError:
        # The reader went away mid-write: the normal end. Python would complain once more
        # when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except NotARepository as e:
        print("autosync-remote: %s" % e, file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print("autosync-remote: git for-each-ref failed: %s"
              % " ".join(os.fsdecode(e.stderr or b"").split()), file=sys.stderr)
        return 1
    except OSError as e:
        print("autosync-remote: %s" % (e.strerror or e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
