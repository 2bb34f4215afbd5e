"""The guarded writer: every write the product itself makes into the synced folder.

A pull, a restore or a settle must never destroy a byte that is not in
history, whatever the user does at the same moment. So a path is written
only when what is on disk is exactly what the caller expects (the version in
the last commit, say), and the check holds up to the instant of the write:

* the new content goes into a temporary file in the same folder, named like
  editor junk so that the watcher never syncs it;
* the file on disk is opened and a read lease is taken on it (fcntl
  F_SETLEASE): the kernel refuses it while anyone has the file open for
  writing (such a file counts as changed), and from then on blocks anyone
  who opens it for writing, and tells us, until the lease is let go;
* its content is compared with the expected one (bytes, or a git blob id);
* the temporary file and the path swap places in one step (renameat2
  RENAME_EXCHANGE), then the old inode is looked at again under its
  temporary name: if it is not the inode that was checked (an editor renamed
  its own file over the path meanwhile) or someone asked to write to it
  during the check, the two swap back and the path keeps the user's bytes;
* a new file is only ever linked in where nothing is (RENAME_NOREPLACE).

Between the swap and the swap back, the user's bytes live under the temporary
name. So that a crash there loses nothing, each swap or remove is first written down
in a journal of its own (`$XDG_STATE_HOME/autosync/writing/PID.N`: the
temporary path and the path, NUL-separated) and the entry removed after;
`leftovers.leftover_writes` finds the entries of processes that died and keeps
what their temporary files hold.

Folders are entered one at a time with O_NOFOLLOW, never through a symbolic
link: a path whose folders include one, or a file where a folder should be,
is refused with a one-line `Refused`. Nothing outside the root is written.

`put` and `remove` answer True when they wrote, False when the path kept
what the user had (the caller keeps the other version elsewhere, e.g. as a
conflict copy). `checked`, when set, is called with the path between the
check and the swap: tests write there to prove the guard holds.
"""
import collections
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import itertools
import logging
import os
import signal
import stat

from autosync.core import paths

log = logging.getLogger("autosync.guarded")

F_SETLEASE, F_GETLEASE, F_SETSIG = 1024, 1025, 10  # <linux/fcntl.h>
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_FDCWD = -100
LINK, EXECUTABLE = "120000", "100755"
CHUNK = 1 << 20
TEMP = ".autosync-write.%d.%d~"  # "~": editor junk, which the watcher and git leave out

_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
_counter = itertools.count()


def journal_dir():
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "autosync", "writing")


class Journal:
    """One swap or removal in flight: where its temporary file is, for which path, and
    the blob id of the new version it held before the swap ("" for a removal). Written
    only once the temporary file is complete: an entry never names a partial one."""

    def __init__(self, dfd, temp, name, oid=""):
        self.path, self.dfd, self.temp = None, dfd, temp
        folder = os.readlink("/proc/self/fd/%d" % dfd)  # the folder as entered, no link
        entry = os.fsencode(os.path.join(folder, temp)) + b"\0" + \
            os.fsencode(os.path.join(folder, name)) + b"\0" + oid.encode() + b"\0"
        path = os.path.join(journal_folder(), "%d.%d" % (os.getpid(), next(_counter)))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, entry)
        finally:
            os.close(fd)
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """The entry goes once the temporary file has (a failure that left it keeps
        the entry, for recovery)."""
        try:
            os.lstat(self.temp, dir_fd=self.dfd)
            return
        except FileNotFoundError:
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class Plan:
    """The temporary files a writer has made and not yet swapped in or removed, listed
    before each is made (`PID.N.plan`: absolute paths, NUL-terminated), so that a
    killed write leaves none behind: they hold pulled versions only, which are in
    history, and recovery removes the ones no Journal entry names."""

    def __init__(self):
        self.fd, self.path, self.open = None, None, 0

    def add(self, folder_fd, temp):
        if self.fd is None:
            self.path = os.path.join(journal_folder(), "%d.%d.plan" % (os.getpid(), next(_counter)))
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                              os.O_APPEND, 0o600)
        folder = os.readlink("/proc/self/fd/%d" % folder_fd)
        os.write(self.fd, os.fsencode(os.path.join(folder, temp)) + b"\0")
        self.open += 1

    def done(self):
        """One listed temporary file is gone; the list goes with the last."""
        self.open -= 1
        if self.open <= 0 and self.fd is not None:
            os.close(self.fd)
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.fd, self.path, self.open = None, None, 0


def journal_folder():
    """The journal's folder, made private (0700) if it is not there, and checked: this
    user's alone (paths.NotPrivate, an OSError, else)."""
    return paths.private_folder(journal_dir())


def read_journal(path):
    """A journal's entry -> (temporary path, path, new blob id or b"") as bytes, or None
    if unreadable (an entry of an older version has no blob id)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            parts = f.read(1 << 16).split(b"\0")
    except OSError:
        return None
    if len(parts) not in (3, 4) or parts[-1] or not (parts[0] and parts[1]):
        return None
    return parts[0], parts[1], parts[2] if len(parts) == 4 else b""


def read_plan(path):
    """A plan's temporary paths (bytes); [] if unreadable."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            return [p for p in f.read().split(b"\0") if p]
    except OSError:
        return []


class Refused(Exception):
    """The path cannot be written safely; str() is one line saying why."""


class Expect:
    """What must be at a path for it to be replaced: `mode` (git's: 100644, 100755,
    120000) and either the bytes (`data`) or the git blob id (`oid`) of the content."""

    def __init__(self, mode, data=None, oid=None):
        self.mode, self.data, self.oid = mode, data, oid


def blob_id(size, chunks, length):
    """The git blob id of a content given as chunks; `length`: 40 (SHA-1) or 64 (SHA-256)."""
    h = hashlib.sha256() if length == 64 else hashlib.sha1()
    h.update(b"blob %d\0" % size)
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def put_where_nothing_is(src_fd, src, dst_fd, dst):
    """Give the file at src the name dst only if nothing has that name: renameat2
    RENAME_NOREPLACE, or where the file system lacks it a hard link (which never
    replaces either) and the old name removed. -> True done, False dst was taken."""
    try:
        rename(src_fd, src, dst_fd, dst, RENAME_NOREPLACE)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOSYS):
            raise
    try:
        os.link(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    os.unlink(src, dir_fd=src_fd)
    return True


def rename(src_fd, src, dst_fd, dst, flags):
    """renameat2(2); OSError on failure (EINVAL/ENOSYS where the file system lacks it)."""
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    if _renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Prepared(collections.namedtuple("Prepared", "rel temp")):
    """A new version waiting in its temporary file beside rel (Writer.prepare)."""


class Writer:
    """Writes into one folder (`root`), never outside it nor through a link.

    `confirm(rel, fd) -> blob id`, if given, hashes the open file at rel the way git
    would store it (clean filters, line endings) when the plain hash differs."""

    checked = None  # seam: called with rel after the check, before the swap
    swapped = None  # seam: called with rel after the swap, before it is looked at again

    def __init__(self, root, confirm=None):
        self.root = root
        self.confirm = confirm
        self.plan = Plan()

    # --- folders -----------------------------------------------------------------------

    def folder(self, rel, create=False):
        """An fd of the folder that holds rel, entered without following links;
        `create`: missing folders are made. Refused if one is a link or a file."""
        parts = [p for p in os.path.dirname(os.path.normpath(rel)).split("/") if p not in ("", ".")]
        if rel.startswith("/") or ".." in rel.split("/"):
            raise Refused("%s is outside the synced folder" % rel)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        done = []
        try:
            for part in parts:
                done.append(part)
                try:
                    new = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    new = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        st = os.lstat(part, dir_fd=fd)
                        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
                        raise Refused("%s is %s: nothing is written through it"
                                      % ("/".join(done), what)) from None
                    raise
                os.close(fd)
                fd = new
            return fd
        except BaseException:
            os.close(fd)
            raise

    # --- the check -------------------------------------------------------------------

    def _matches(self, rel, fd, expect):
        """Is the open regular file what `expect` says? Read in chunks, never whole."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or expect.mode == LINK \
                or bool(st.st_mode & 0o100) != (expect.mode == EXECUTABLE):
            return False
        if expect.data is not None:
            if st.st_size != len(expect.data):
                return False
            data = os.pread(fd, st.st_size + 1, 0)
            return data == expect.data
        h = hashlib.sha256() if len(expect.oid) == 64 else hashlib.sha1()
        h.update(b"blob %d\0" % st.st_size)
        offset = 0
        while offset < st.st_size:
            chunk = os.pread(fd, CHUNK, offset)
            if not chunk:
                break
            h.update(chunk)
            offset += len(chunk)
        if offset == st.st_size and h.hexdigest() == expect.oid:
            return True
        return self.confirm is not None and self.confirm(rel, fd) == expect.oid

    def _hold(self, dfd, name, rel, expect):
        """Open the path and take a read lease -> (fd, leased, stat) if it holds `expect`,
        else None (fd None for a link). A file open for writing anywhere counts as changed."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as e:
            if e.errno != errno.ELOOP:
                return None  # gone, or unreadable: not what we expect
            try:  # a symbolic link: compare where it points
                st = os.lstat(name, dir_fd=dfd)
                same = expect.mode == LINK and \
                    self._link_matches(os.readlink(name, dir_fd=dfd), expect)
            except OSError:
                return None
            return (None, False, st) if same else None
        leased = False
        try:
            fcntl.fcntl(fd, F_SETSIG, signal.SIGURG)  # ignored by default: no handler needed
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_RDLCK)
            leased = True
        except OSError as e:
            if e.errno == errno.EAGAIN:  # someone has it open for writing
                os.close(fd)
                return None
            # EACCES (another user's file, no CAP_LEASE), EINVAL (a file system without
            # leases): the content and inode checks still hold
        try:
            if self._matches(rel, fd, expect):
                return fd, leased, os.fstat(fd)
        except OSError:
            pass
        self._let_go(fd, leased)
        return None

    def _link_matches(self, target, expect):
        target = os.fsencode(target)
        if expect.data is not None:
            return target == expect.data
        return blob_id(len(target), [target], len(expect.oid)) == expect.oid

    @staticmethod
    def _let_go(fd, leased):
        if fd is None:
            return
        if leased:
            try:
                fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
            except OSError:
                pass
        os.close(fd)

    @staticmethod
    def _still_ours(held, dfd, temp):
        """After the swap: is what went to `temp` the inode checked, with no writer
        waiting for it? (A link is never written in place, only replaced.)"""
        fd, leased, before = held
        try:
            now = os.lstat(temp, dir_fd=dfd)
        except OSError:
            return False
        if (now.st_ino, now.st_dev) != (before.st_ino, before.st_dev):
            return False
        return not leased or fcntl.fcntl(fd, F_GETLEASE) == fcntl.F_RDLCK

    def holds(self, rel, expect):
        """Does rel hold exactly `expect` now? (No link followed; False when unsure.)"""
        try:
            dfd = self.folder(rel)
        except (OSError, Refused):
            return False
        try:
            held = self._hold(dfd, os.path.basename(os.path.normpath(rel)), rel, expect)
        finally:
            os.close(dfd)
        if held is not None:
            self._let_go(*held[:2])
        return held is not None

    # --- writing -----------------------------------------------------------------------

    @staticmethod
    def _perms(mode, old):
        """The new file's permissions: the old file's, or the umask's; x wherever r
        for an executable."""
        perms = old & 0o777 if old is not None else 0o666 & ~UMASK
        return perms | (perms & 0o444) >> 2 if mode == EXECUTABLE else perms & ~0o111

    def prepare(self, rel, mode, source):
        """The new version of rel in a temporary file beside it, complete, nothing
        replaced yet. `source`: the bytes (a link's target for mode 120000), or a
        callable that writes the content into the fd it is given (streamed, never held
        whole). Missing folders are made. -> a Prepared for put_prepared or discard;
        Refused or OSError (no temporary file left behind) when it cannot be made."""
        dfd = self.folder(rel, create=True)
        name = os.path.basename(os.path.normpath(rel))
        temp = TEMP % (os.getpid(), next(_counter))
        try:
            try:
                st = os.lstat(name, dir_fd=dfd)
                old = st.st_mode if stat.S_ISREG(st.st_mode) else None
            except FileNotFoundError:
                old = None
            self.plan.add(dfd, temp)
            try:
                if mode == LINK:
                    os.symlink(source, temp, dir_fd=dfd)
                else:
                    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 0o600, dir_fd=dfd)
                    try:
                        if callable(source):
                            source(fd)
                        else:
                            view = memoryview(source)
                            while view:
                                view = view[os.write(fd, view):]
                        os.fchmod(fd, self._perms(mode, old))
                    finally:
                        os.close(fd)
            except BaseException:
                self._drop(dfd, temp)
                raise
        finally:
            os.close(dfd)
        return Prepared(rel, temp)

    def discard(self, prepared):
        """A prepared version that will not be put: its temporary file goes."""
        try:
            dfd = self.folder(prepared.rel)
        except (OSError, Refused):
            self.plan.done()
            return
        try:
            self._drop(dfd, prepared.temp)
        finally:
            os.close(dfd)

    def _drop(self, dfd, temp):
        try:
            os.unlink(temp, dir_fd=dfd)
        except FileNotFoundError:
            pass
        self.plan.done()

    def put(self, rel, mode, data, expect):
        """Write `data` (a link's target for mode 120000; or a callable that writes the
        content into an fd) at rel if what is there is `expect` (None: nothing may be
        there). -> True written, False kept as it was."""
        return self.put_prepared(self.prepare(rel, mode, data), expect)

    def put_prepared(self, prepared, expect, oid=""):
        """Put a prepared version at its path if what is there is `expect` (None: nothing
        may be there); `oid`: its blob id, for the journal. The temporary file goes,
        whatever happens. -> True written, False kept as it was."""
        rel, temp = prepared.rel, prepared.temp
        try:
            dfd = self.folder(rel, create=True)
        except BaseException:
            self.plan.done()
            raise
        name = os.path.basename(os.path.normpath(rel))
        try:
            if expect is not None:
                try:
                    os.lstat(name, dir_fd=dfd)
                except FileNotFoundError:
                    expect = None  # removed here meanwhile: the new version is a change kept
            # Only a swap can move the user's bytes aside; a new file's temporary one
            # holds the new version only (the plan lists it; no entry of its own).
            with Journal(dfd, temp, name, oid) if expect is not None else \
                    contextlib.nullcontext():
                try:
                    return self._swap_in(dfd, name, rel, temp, expect)
                finally:
                    self._drop(dfd, temp)
        finally:
            os.close(dfd)

    def _swap_in(self, dfd, name, rel, temp, expect):
        if expect is None:
            if self.checked:
                self.checked(rel)
            return put_where_nothing_is(dfd, temp, dfd, name)
        held = self._hold(dfd, name, rel, expect)
        if held is None:
            return False
        try:
            if self.checked:
                self.checked(rel)
            try:
                rename(dfd, temp, dfd, name, RENAME_EXCHANGE)
                if self.swapped:
                    self.swapped(rel)
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.ENOSYS):
                    raise
                _say_once("this file system cannot swap two files in one step: the pull's "
                          "check of each file is not atomic here")
                os.replace(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                return True
            if self._still_ours(held, dfd, temp):
                return True
            rename(dfd, temp, dfd, name, RENAME_EXCHANGE)  # back: the user's bytes stay
            return False
        finally:
            self._let_go(*held[:2])

    def move(self, src, dst, expect):
        """Rename the file at src to dst (made with missing folders) if src holds
        `expect` and nothing is at dst: one rename(2), so the file is under one name or
        the other at every moment. -> True moved, False left as it was."""
        name = os.path.basename(os.path.normpath(src))
        new = os.path.basename(os.path.normpath(dst))
        with self._two_folders(src, dst) as (sfd, dfd):
            held = self._hold(sfd, name, src, expect)
            if held is None:
                return False
            try:
                if self.checked:
                    self.checked(src)
                if not put_where_nothing_is(sfd, name, dfd, new):
                    return False
                if self._still_ours(held, dfd, new):
                    return True
                try:  # someone began writing it meanwhile: back, their bytes where they were
                    rename(dfd, new, sfd, name, RENAME_NOREPLACE)
                except OSError:
                    return True  # its name is taken again: it stays moved, nothing lost
                return False
            finally:
                self._let_go(*held[:2])

    def move_folder(self, src, dst):
        """Rename the folder src to dst whole, when src is a real folder (not a link)
        and nothing is at dst (missing folders above dst are made). Whatever is in it
        moves with it: a file being written is written at its new name. -> True moved,
        False left as it was."""
        name = os.path.basename(os.path.normpath(src))
        with self._two_folders(src, dst) as (sfd, dfd):
            try:
                if not stat.S_ISDIR(os.lstat(name, dir_fd=sfd).st_mode):
                    return False
            except FileNotFoundError:
                return False
            if self.checked:
                self.checked(src)
            try:
                rename(sfd, name, dfd, os.path.basename(os.path.normpath(dst)),
                       RENAME_NOREPLACE)
            except FileExistsError:
                return False
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS):
                    return False  # no renameat2 here: file by file instead
                raise
            return True

    @contextlib.contextmanager
    def _two_folders(self, src, dst):
        """The folders holding src and dst (dst's made if missing), opened the checked
        way (folder()), closed after."""
        sfd = self.folder(src)
        try:
            dfd = self.folder(dst, create=True)
        except BaseException:
            os.close(sfd)
            raise
        try:
            yield sfd, dfd
        finally:
            os.close(sfd)
            os.close(dfd)

    def remove(self, rel, expect):
        """Remove rel if it holds `expect`, and the folders that this empties (not the
        root). -> True removed (or already gone), False kept as it was."""
        try:
            dfd = self.folder(rel)
        except FileNotFoundError:
            return True
        name = os.path.basename(os.path.normpath(rel))
        try:
            if not os.path.lexists(os.path.join(self.root, rel)):
                return True
            held = self._hold(dfd, name, rel, expect)
            if held is None:
                return False
            temp = TEMP % (os.getpid(), next(_counter))
            journal = Journal(dfd, temp, name)
            try:
                if self.checked:
                    self.checked(rel)
                os.rename(name, temp, src_dir_fd=dfd, dst_dir_fd=dfd)  # temp: a fresh name
                if self.swapped:
                    self.swapped(rel)
                if not self._still_ours(held, dfd, temp):
                    try:
                        rename(dfd, temp, dfd, name, RENAME_NOREPLACE)
                    except FileExistsError:  # a new file took the name: keep both
                        rename(dfd, temp, dfd, name + " (kept by autosync)", RENAME_NOREPLACE)
                    return False
                os.unlink(temp, dir_fd=dfd)
            finally:
                self._let_go(*held[:2])
                journal.__exit__()
        finally:
            os.close(dfd)
        self.prune(rel)
        return True

    def prune(self, rel):
        """Remove the folders above rel that are empty now, up to (not) the root."""
        folder = os.path.dirname(os.path.normpath(rel))
        while folder not in ("", "."):
            try:
                os.rmdir(os.path.join(self.root, folder))
            except OSError:
                return
            folder = os.path.dirname(folder)


UMASK = os.umask(0o022)  # read once, at import: os.umask sets it for every thread
os.umask(UMASK)


_said = set()


def _say_once(text):
    if text not in _said:
        _said.add(text)
        log.warning("%s", text)
