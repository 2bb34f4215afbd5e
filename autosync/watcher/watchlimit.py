"""When inotify watches run out: say so once, with the fix, and poll what has no watch.

inotify needs one watch per folder, out of a budget per user
(fs.inotify.max_user_watches; in a user namespace also user.max_inotify_watches).
A folder the kernel refused a watch (ENOSPC) raises no event, so the watcher
looks at it every POLL_EVERY seconds, and tries to watch it again each time,
until it has a watch.
"""
import os
import stat

POLL_EVERY = 2.0  # seconds between looks at (and new tries to watch) unwatched folders
SYSCTL = "fs.inotify.max_user_watches"
LIMIT_FILES = ("/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches")


def current_limit():
    """The watches this user may hold: the smaller of the limits that apply, or None."""
    values = []
    for name in LIMIT_FILES:
        try:
            with open(name) as f:
                values.append(int(f.read()))
        except (OSError, ValueError):
            pass
    return min(values) if values else None


def suggested_limit(folders, limit):
    """The tree's folders twice over (room to grow), and at least the limit plus the
    tree (other programs hold watches too), rounded up to a multiple of 1024."""
    need = max(2 * folders, (limit or 0) + folders)
    return -(-need // 1024) * 1024


def problem_text(unwatched, folders, limit):
    value = suggested_limit(folders, limit)
    return ("inotify watches ran out (limit %s): %d of %d folders have no watch and are "
            "polled every %g s instead; raise the limit with 'sudo sysctl %s=%d', and put "
            "'%s = %d' in /etc/sysctl.d/90-autosync.conf to keep it after a reboot"
            % (limit if limit is not None else "unknown", unwatched, folders, POLL_EVERY,
               SYSCTL, value, SYSCTL, value))


def _signature(entry):
    """What changes when a file's content or mode does (lstat: a link is an entry)."""
    st = entry.stat(follow_symlinks=False)
    return (stat.S_IFMT(st.st_mode), st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def look(folder, excluded):
    """{name: signature} of what a folder holds now, ignored entries left out."""
    found = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not excluded(entry.path, entry.is_dir(follow_symlinks=False)):
                    try:
                        found[entry.name] = _signature(entry)
                    except OSError:
                        pass  # gone meanwhile
    except OSError:
        pass  # gone, or unreadable: nothing to sync there
    return found


class Unwatched:
    """The folders the kernel gave no watch, and what each held at the last look."""

    def __init__(self, root, excluded):
        self.root = root
        self.excluded = excluded  # (abs path, isdir) -> True if never synced nor watched
        self.tops = set()  # folders refused a watch; those below them have none either
        self.looks = {}  # folder -> look() at the last poll

    def failed(self, path):
        """The kernel refused `path` a watch for lack of watches."""
        parent = path
        while True:
            if parent in self.tops:
                return  # already below a folder we poll
            if parent == self.root or os.path.dirname(parent) == parent:
                break
            parent = os.path.dirname(parent)
        self.tops.add(path)

    def folders(self, watched):
        """Every folder without a watch: the refused ones and those below them."""
        found = set()
        for top in list(self.tops):
            below = []
            stack = [top] if os.path.isdir(top) and not os.path.islink(top) else []
            while stack:
                folder = stack.pop()
                if folder not in watched:
                    below.append(folder)
                try:
                    with os.scandir(folder) as entries:
                        stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)
                                  and not self.excluded(e.path, True)]
                except OSError:
                    pass
            if below:
                found.update(below)
            else:
                self.tops.discard(top)  # all watched again, or gone
        return found

    def poll(self, watched, add_watch, known):
        """Try to watch each unwatched folder again, and compare it with the last look.

        watched: the folders that have a watch; add_watch(folder) -> True once it has
        one; known(folder) -> the names the watcher's tree holds there.
        Returns (changed paths as (abs path, isdir), folders still without a watch)."""
        changed = []
        still = 0
        folders = self.folders(watched)
        for folder in folders:
            has_watch = add_watch(folder)
            # Looked at after the new watch is in place: nothing falls in between.
            now = look(folder, self.excluded)
            old = self.looks.get(folder)
            if old is None:
                # First look: every file there, and every file the tree thought was.
                for name in set(known(folder)) | {n for n, s in now.items()
                                                  if not stat.S_ISDIR(s[0])}:
                    changed.append((os.path.join(folder, name), False))
            else:
                for name in old.keys() | now.keys():
                    before, after = old.get(name), now.get(name)
                    if before == after:
                        continue
                    if before and after and stat.S_ISDIR(before[0]) and stat.S_ISDIR(after[0]):
                        continue  # a folder's own times: its own look covers its content
                    isdir = stat.S_ISDIR((after or before)[0])
                    changed.append((os.path.join(folder, name), isdir))
            if has_watch:
                self.looks.pop(folder, None)
            else:
                self.looks[folder] = now
                still += 1
        for folder in list(self.looks):
            if folder not in folders:
                del self.looks[folder]
        return changed, still
