"""The bytes a killed guarded write had moved aside: found in its journal, kept.

The guarded writer (fs/guarded.py) writes each swap in flight down in a journal of its
own, and each temporary file in a plan before it is made. `leftover_writes` reads what
processes that died left there, before the committer (or a tool) writes again: what
history has is removed, anything else kept beside its path as a conflict copy. What
history has is asked of the caller (vcs/recovery.py hands git's checks in): this floor
knows no version control.
"""
import errno
import logging
import os
import re
import stat

from autosync.fs import guarded

log = logging.getLogger("autosync.recovery")  # the name its lines had before the move


def _alive(pid):
    return os.path.exists("/proc/%d" % pid)


TEMP_NAME = re.compile(rb"\.autosync-write\.[0-9]+\.[0-9]+~\Z")


def _private(where):
    """The journal folder is ours alone: a real folder, owned by us, mode 0700. A
    folder anyone else could write to (or a synced one, carried in from elsewhere)
    could name any file: its entries are not followed."""
    try:
        st = os.lstat(where)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        log.warning("%s is not a private folder of this user (mode 0700): its entries are "
                    "left alone", where)
        return False
    return True


def _inside_folder(path, top):
    """Is path (bytes, absolute) a temporary-file or file name directly in a real folder
    under top (bytes, ending in "/"), written plainly: no `..`, no `.`, no symlinked
    folder on the way?"""
    if not path.startswith(top) or b"/../" in path + b"/" or b"/./" in path + b"/" or \
            b"//" in path:
        return False
    folder = os.path.dirname(path)
    return os.path.realpath(folder) == folder and (folder + b"/").startswith(top)


def leftover_writes(root, in_history, copy_name, new_version=None):
    """Guarded writes cut off by a killed process (guarded.Journal, guarded.Plan).

    A swap's or a removal's entry: between its swap and its swap back, the user's bytes
    were under the temporary name. For each entry under `root` of a process no longer
    alive: a temporary file that holds the new version (its blob id is in the entry:
    `new_version(temp, oid)` says whether it holds that or a beginning of it), or a
    content `in_history(temp, path)` knows, is removed; any
    other content is kept beside its path, at `copy_name(path)` (absolute paths; a
    conflict copy's name), never over a file. A plan's temporary files that no entry
    names held pulled versions only, and are removed.

    Only entries in a private journal folder (ours, 0700) are followed, and only those
    whose paths are plain names inside `root`; anything else is one warning, and left
    alone. -> the paths of the copies kept."""
    where = guarded.journal_dir()
    if not _private(where):
        return []
    try:
        names = os.listdir(where)
    except OSError:
        return []
    top = os.fsencode(os.path.realpath(root)).rstrip(b"/") + b"/"
    kept, plans, named = [], [], set()
    for name in sorted(names):
        pid = name.split(".")[0]
        journal = os.path.join(where, name)
        if name.endswith(".plan"):
            if pid.isdigit() and not _alive(int(pid)):
                plans.append(journal)
            continue
        entry = guarded.read_journal(journal)
        if entry:
            named.add(entry[0])
        if not pid.isdigit() or _alive(int(pid)):
            continue
        if entry and not entry[0].startswith(top):
            continue  # another folder's: its own committer sees to it
        if entry and not (_inside_folder(entry[0], top) and _inside_folder(entry[1], top) and
                          os.path.dirname(entry[0]) == os.path.dirname(entry[1]) and
                          TEMP_NAME.match(os.path.basename(entry[0]))):
            log.warning("journal entry %s names paths it may not (outside %s, or not a "
                        "temporary file of ours): left alone", journal, root)
            continue
        if entry and not _keep_leftover(entry, in_history, copy_name, kept, new_version):
            continue  # could not be kept now: the entry stays for the next start
        named.discard(entry[0] if entry else None)
        os.unlink(journal)
    for plan in plans:
        temps = guarded.read_plan(plan)
        if temps and not temps[0].startswith(top):
            continue
        for temp in temps:
            if temp in named or not (_inside_folder(temp, top) and
                                     TEMP_NAME.match(os.path.basename(temp))):
                continue
            try:
                if stat.S_ISREG(os.lstat(temp).st_mode) or stat.S_ISLNK(os.lstat(temp).st_mode):
                    os.unlink(temp)
                    log.info("removed %s, a pulled version a cut-off write left", temp)
            except FileNotFoundError:
                pass
        os.unlink(plan)
    return kept


def _keep_leftover(entry, in_history, copy_name, kept, new_version):
    temp, path = os.fsdecode(entry[0]), os.fsdecode(entry[1])
    try:
        st = os.lstat(temp)
    except FileNotFoundError:
        return True  # the write had finished, or not begun
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return True  # not ours (a folder of that name would never be a temporary file)
    if entry[2] and stat.S_ISREG(st.st_mode) and new_version is not None and \
            new_version(temp, entry[2].decode()):
        os.unlink(temp)
        log.info("removed %s, the new version of a write that was cut off", temp)
        return True
    if in_history is not None and in_history(temp, path):
        os.unlink(temp)
        log.info("removed %s, left by a write that was cut off: its content is in history",
                 temp)
        return True
    copy = copy_name(path)
    try:
        if not guarded.put_where_nothing_is(guarded.AT_FDCWD, temp, guarded.AT_FDCWD, copy):
            raise FileExistsError(errno.EEXIST, "the copy's name is taken")
    except OSError as e:
        log.error("could not keep %s (left by a write that was cut off) as %s: %s; it "
                  "stays where it is", temp, copy, e.strerror)
        return False
    log.warning("kept bytes that a cut-off write had moved aside, which are in no "
                "version: %s", copy)
    kept.append(copy)
    return True
