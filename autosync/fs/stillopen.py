"""Which files some process holds open for writing: asked of the kernel, not the clock.

A file still being written must not become a version (issue 32): half of it would
reach every machine and stay in every history. Whether anyone has it open for
writing is asked in two ways:

* a read lease (fcntl F_SETLEASE F_RDLCK), taken and let go at once: the kernel
  refuses it (EAGAIN) while any process, of any user, has the file open for writing;
  it needs the file to be ours (or CAP_LEASE) and a file system that has leases;
* where a lease cannot be taken (EACCES: another user's file; EINVAL: no leases
  there), the open files of every process we may look at (/proc/PID/fd, and the
  access mode in /proc/PID/fdinfo/FD): it sees our own user's writers (all of them
  as root), which are the ones a home folder has.

A symbolic link, a folder or a path that is gone is never open for writing.
"""
import errno
import fcntl
import os
import signal
import stat

F_SETLEASE, F_SETSIG = 1024, 10  # <linux/fcntl.h> (as fs/guarded.py)
WRITING = (os.O_WRONLY, os.O_RDWR)


def lease_says(path):
    """True: open for writing; False: not; None: no lease could be taken (ask /proc)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        # gone, a link (ELOOP), unreadable (EACCES: /proc may still tell), a FIFO (ENXIO)
        return None if e.errno == errno.EACCES else False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        # The kernel signals a lease's holder when someone opens the file meanwhile:
        # SIGURG, ignored by default (SIGIO, the default, would end the process).
        fcntl.fcntl(fd, F_SETSIG, signal.SIGURG)
        try:
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_RDLCK)
        except OSError as e:
            return True if e.errno == errno.EAGAIN else None
        try:
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
        except OSError:
            pass
        return False
    finally:
        os.close(fd)


def proc_writers(proc="/proc"):
    """{(st_dev, st_ino)} of the regular files open for writing in any process whose
    open files we may read."""
    found = set()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        fds = os.path.join(proc, pid, "fd")
        try:
            names = os.listdir(fds)
        except OSError:
            continue  # another user's process, or gone
        for fd in names:
            try:
                with open(os.path.join(proc, pid, "fdinfo", fd), "rb") as f:
                    info = f.read(200)
                flags = int(info.split(b"flags:", 1)[1].split()[0], 8)
                if flags & os.O_ACCMODE not in WRITING:
                    continue
                st = os.stat(os.path.join(fds, fd))  # follows the fd to its file
            except (OSError, IndexError, ValueError):
                continue
            if stat.S_ISREG(st.st_mode):
                found.add((st.st_dev, st.st_ino))
    return found


def held_open(folder, paths, lease=lease_says, writers=proc_writers):
    """The paths (relative to `folder`) that some process holds open for writing."""
    held, unsure = set(), []
    for rel in paths:
        answer = lease(os.path.join(folder, rel))
        if answer:
            held.add(rel)
        elif answer is None:
            unsure.append(rel)
    if unsure:
        open_now = writers()
        for rel in unsure:
            try:
                st = os.lstat(os.path.join(folder, rel))  # a link is never written through
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in open_now:
                held.add(rel)
    return held
