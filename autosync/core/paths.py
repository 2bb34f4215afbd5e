"""Where things are: the private runtime folder and its sockets, and what lies above a folder.

Every folder the suite puts a socket, a lock or a temporary file in is this user's
alone, checked before use (`private_folder`); none has a name another local user
could take first: without $XDG_RUNTIME_DIR the runtime folder is one of /tmp with a
name nobody can guess (`private_tmp`), remembered in the user's own state folder.

One walk from a folder up to the filesystem root (`upwards`) serves every
search upwards: a daemon's socket (`find_socket`, for autosync-notify run in
a subfolder), a working tree's DVCS metadata (`find_marker`, for config's
working-tree check and recovery's "is the repository still there").
"""
import errno
import fcntl
import hashlib
import os
import socket
import stat
import tempfile

# DVCS metadata names. One of them in a folder or above it makes a working tree;
# the order is the order in which find_marker looks for them in each folder.
REPOSITORY_MARKERS = (".git", ".hg", ".bzr", "_darcs", ".svn", ".fossil", ".fslckout", "_FOSSIL_")
# The same names as a set: a path with one of them among its parts is never synced.
METADATA = frozenset(REPOSITORY_MARKERS)


# What to do when no private runtime folder can be had: a fix no other user can turn
# against you (a folder of /tmp with a known name is one they could make first).
RUNTIME_FIX = ("set XDG_RUNTIME_DIR to a folder only you can enter (mode 0700; systemd's "
               "user sessions set it), or give yourself a HOME you can write")
SUN_PATH = 108  # bytes of a UNIX socket's path, its closing NUL included (Linux)


class NotPrivate(OSError):
    """A folder for sockets, locks or temporary files that is not this user's alone, or
    cannot be made: str() is one line naming it, what is wrong and a fix."""

    def __init__(self, text):
        super().__init__(errno.EPERM, text)

    def __str__(self):
        return self.strerror


def check_private(path, others=0o077):
    """`path` if it is a folder (not a link) of this user's whose mode gives others none of
    `others` (0o077: not even entering it); NotPrivate naming what is wrong, else."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise NotPrivate("%s: %s" % (path, e.strerror or e)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotPrivate("refusing %s: it is not a folder (a link or a file)" % path)
    if st.st_uid != os.getuid():
        raise NotPrivate("refusing the folder %s: it belongs to uid %d, not to you (uid %d)"
                         % (path, st.st_uid, os.getuid()))
    mode = stat.S_IMODE(st.st_mode)
    if mode & others:
        raise NotPrivate("refusing the folder %s: its mode is %04o, %s" % (
            path, mode, "others may enter it (it must be 0700)" if others & 0o011 else
            "others may write in it"))
    return path


def private_folder(path, others=0o077):
    """`path`, made (0700) when missing, checked (check_private) before anything is put
    in it; NotPrivate when it is another user's, open to others, or cannot be made."""
    try:
        os.makedirs(path, mode=0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise NotPrivate("cannot make the folder %s: %s" % (path, e.strerror or e)) from None
    return check_private(path, others)


def state_dir():
    """This user's own state folder of the suite ($XDG_STATE_HOME/autosync)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "autosync")


def _remembered(link):
    try:
        return check_private(os.readlink(link))
    except (OSError, ValueError):
        return None


def private_tmp():
    """A folder of /tmp that is this user's alone, with a name no one can guess
    (mkdtemp's): the same for every program of this user, since its name is remembered
    by a link in the user's state folder (state_dir()/runtime.HOST), which only the user can
    write. Made again when it is gone or not this user's own any more (/tmp cleaned,
    the name taken meanwhile). Short: a socket's path in it fits (SUN_PATH). NotPrivate
    (with RUNTIME_FIX) when there is no state folder to remember it in."""
    try:
        state = private_folder(state_dir(), others=0o022)
    except NotPrivate as e:
        raise NotPrivate("no private runtime folder: %s; %s" % (e, RUNTIME_FIX)) from None
    # One link per machine: a HOME shared by several (NFS) names each one's own /tmp.
    link = os.path.join(state, "runtime." + socket.gethostname().replace("/", "_"))
    found = _remembered(link)
    if found:
        return found
    try:
        fd = os.open(link + ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # two programs starting at once make one
            found = _remembered(link)
            if found:
                return found
            made = tempfile.mkdtemp(prefix="autosync-%d-" % os.getuid(), dir="/tmp")
            new = "%s.%d.new" % (link, os.getpid())
            os.symlink(made, new)
            os.replace(new, link)
            return made
        finally:
            os.close(fd)
    except OSError as e:
        raise NotPrivate("no private runtime folder: %s: %s; %s" % (
            link, e.strerror or e, RUNTIME_FIX)) from None


def runtime_dir():
    """The private directory that holds the sockets of this user's daemons:
    $XDG_RUNTIME_DIR/autosync (made and checked by whoever puts a socket there), or
    private_tmp()'s, made now. NotPrivate (an OSError) when there is none."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        return os.path.join(base, "autosync")
    return private_tmp()


def socket_folder(name_length):
    """A private folder (made, checked) where a socket's name of `name_length` bytes
    fits a UNIX socket's path: runtime_dir(), or private_tmp() when that is too deep
    or not private. NotPrivate when there is none."""
    try:
        folder = private_folder(runtime_dir())
        if len(os.fsencode(folder)) + 1 + name_length < SUN_PATH:
            return folder
    except NotPrivate:
        if not os.environ.get("XDG_RUNTIME_DIR"):
            raise
    return private_tmp()


def folder_id(folder):
    """16 hex digits that name `folder` (its real path) in the daemon's own files."""
    return hashlib.sha256(os.fsencode(os.path.realpath(folder))).hexdigest()[:16]


def socket_for(folder):
    """The default socket of the daemon that syncs `folder`."""
    return os.path.join(runtime_dir(), folder_id(folder) + ".sock")


def upwards(folder):
    """`folder`, then each folder above it, the root last (by name: links are not resolved)."""
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def find_socket(start):
    """The socket of a running daemon for `start` or a folder it lies in, or None."""
    try:
        runtime_dir()
    except NotPrivate:
        return None  # no private runtime folder: no daemon put its socket there
    for folder in upwards(os.path.realpath(start)):
        path = socket_for(folder)
        if os.path.exists(path):
            return path
    return None


def find_marker(folder):
    """The DVCS metadata (.git, .hg, ...) in `folder` or the nearest folder above, or None."""
    for current in upwards(folder):
        for marker in REPOSITORY_MARKERS:
            path = os.path.join(current, marker)
            if os.path.lexists(path):
                return path
    return None
