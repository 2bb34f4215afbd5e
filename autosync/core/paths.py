"""Where things are: the private runtime folder and its sockets, and what lies above a folder.

One walk from a folder up to the filesystem root (`upwards`) serves every
search upwards: a daemon's socket (`find_socket`, for autosync-notify run in
a subfolder), a working tree's DVCS metadata (`find_marker`, for config's
working-tree check and recovery's "is the repository still there").
"""
import hashlib
import os

# DVCS metadata names. One of them in a folder or above it makes a working tree;
# the order is the order in which find_marker looks for them in each folder.
REPOSITORY_MARKERS = (".git", ".hg", ".bzr", "_darcs", ".svn", ".fossil", ".fslckout", "_FOSSIL_")
# The same names as a set: a path with one of them among its parts is never synced.
METADATA = frozenset(REPOSITORY_MARKERS)


def runtime_dir():
    """The private directory that holds the sockets of this user's daemons."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        return os.path.join(base, "autosync")
    return "/tmp/autosync-%d" % os.getuid()


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
