"""The working-tree half of git's pull: the new tree's versions written through the
guarded writer (all made in temporary files first, then swapped in; a file changed
here keeps its bytes, the pulled version beside it), pulled renames done as renames,
submodules' folders, then the index moved (git.py's GitPull runs it)."""

import collections
import logging
import os
import re
import shutil
import stat

from autosync.vcs import copyrules
from autosync.vcs.pull import finish
from autosync.core.copies import copy_name, other_person
from autosync.vcs.git import git, hash_open, no_index
from autosync.fs.guarded import Expect, Refused
from autosync.vcs.pull.common import GITLINK, PullFailed, Unwritten, is_rules, null, run_git

log = logging.getLogger("autosync.gitpull")


class Checkout:
    """One pull's writing of the working tree at `folder`: `writer` the guarded writer,
    `stop` the pull's common.Stop, `began` the pull's start (time.time()), `renames`
    {new path: old path} of exact renames, `blobs(paths)` -> the Blobs that stream the
    new versions, `on_progress(made, total)` or None, `index_env()` -> variables for the
    index's update."""

    def __init__(self, folder, gitdir, host, gitenv, writer, stop, began, renames, blobs,
                 on_progress=None, index_env=dict):
        self.folder, self.gitdir, self.host, self.gitenv = folder, gitdir, host, gitenv
        self.writer, self.stop, self.began, self.renames = writer, stop, began, renames
        self.blobs, self.on_progress, self.index_env = blobs, on_progress, index_env
        self.to_write, self.made, self.told_percent = 0, 0, None

    def git(self, *args, **kwargs):
        return run_git(self.folder, self.gitenv, *args, **kwargs)

    def hash_as_git(self, rel, fd):
        """The blob id git would store for the open file at rel (git.hash_open)."""
        return hash_open(self.folder, rel, fd, gitenv=self.gitenv)

    def write(self, entries, theirs):
        """Bring the working tree to the new tree; -> (paths that kept local bytes,
        conflict copies written beside them). Unwritten when a new version could not be
        written: then HEAD and the index are not moved, so that no commit of this machine
        takes the old bytes for its own change.

        Every new version is first made complete in a temporary file beside its path
        (streamed from git); only when all are made is anything replaced or removed, so
        a full disk, a folder that cannot be written or a name the file system refuses
        leaves the folder as it was. A version whose folder a file of the old tree
        holds is made once that file is removed."""
        files = [e for e in entries if GITLINK not in (e.old_mode, e.new_mode)]
        renames = self.renames
        moving = set(renames.values())
        gone = {e.path for e in files if not null(e.old)}
        later = [e for e in files if not null(e.new) and blocked(e.path, gone)]
        waiting = {e.path for e in later}
        # (a .gitattributes that gives its name to a folder goes with the other removals)
        last = {e.path for e in files if is_rules(e.path) and not blocked_by(e.path, waiting)}
        first = [e for e in files if not null(e.new) and e.path not in waiting and
                 e.path not in renames]
        self.to_write, self.made, self.told_percent = \
            sum(1 for e in files if not null(e.new)), 0, None
        self.tell_progress()
        copies = []
        with self.blobs([e.path for e in files if not null(e.new)]) as blobs:
            prepared = {}
            try:
                blobs.ahead(first)
                self.prepare(first, blobs, prepared)
                self.stop.point()
                self.stop.swapping = True  # from here on, to the end (see GitPull.__init__)
                kept = []
                # Removals first (a file may give its name to a folder); a .gitattributes
                # last of all, removed or written: until then every file here is checked
                # by the rules it was written by (checkout_attributes).
                for e in files:
                    if null(e.new) and e.path not in moving and e.path not in last and \
                            not self.writer.remove(e.path, self.expect_old(e)):
                        kept.append(e.path)
                by_path = {e.path: e for e in files}
                unmoved = self.rename(renames, by_path, kept)
                self.prepare([e for e in later if e.path not in renames or e.path in unmoved] +
                             [by_path[p] for p in unmoved if p not in waiting],
                             blobs, prepared)
                for e in sorted((e for e in files if e.path in prepared or
                                 (null(e.new) and e.path in last)),
                                key=lambda e: (e.path in last, e.path)):
                    if null(e.new):
                        if not self.writer.remove(e.path, self.expect_old(e)):
                            kept.append(e.path)
                    elif not self.put(e, prepared.pop(e.path), blobs):
                        copy, local_stays = self.keep_beside(e, blobs, theirs)
                        copies.append(copy)
                        if local_stays:
                            kept.append(e.path)
            finally:
                for p in prepared.values():
                    self.writer.discard(p)
                self.copy_rules_in_folder(copies)  # (also when a write failed after one)
        self.gitlinks([e for e in entries if GITLINK in (e.old_mode, e.new_mode)])
        return sorted(kept), copies

    def rename(self, renames, by_path, kept):
        """Pulled renames done by renaming the file that is here (a folder whose files
        all moved, the folder whole), so that no file is ever under neither name. A file
        that changed here, or whose new name is taken, is not moved: its old name is
        removed the guarded way (kept if it changed) and its new one written.
        -> the new paths still to write."""
        done = set()
        for src, dst in self.folder_renames(renames):
            try:
                moved = self.writer.move_folder(src, dst)
            except (Refused, OSError):
                moved = False
            if moved:
                done.update(p for p, old in renames.items() if old.startswith(src + "/"))
        unmoved = []
        for dst, src in sorted(renames.items()):
            if dst in done:
                continue
            e = by_path[src]
            try:
                moved = self.writer.move(src, dst, self.expect_old(e))
            except (Refused, OSError):
                moved = False
            if not moved:
                if not self.writer.remove(src, self.expect_old(e)):
                    kept.append(src)
                unmoved.append(dst)
        return unmoved

    def folder_renames(self, renames):
        """[(old folder, new folder)] whose every file in HEAD moved, under the same
        name, into the new folder (outermost first)."""
        levels = collections.Counter()
        for dst, src in renames.items():
            s, d = src, dst
            while os.path.basename(s) == os.path.basename(d):
                s, d = os.path.dirname(s), os.path.dirname(d)
                if not s or not d or s == d:
                    break
                levels[(s, d)] += 1
        chosen = []
        for (s, d), count in sorted(levels.items(), key=lambda kv: kv[0][0].count("/")):
            if any(s.startswith(c + "/") for c, _ in chosen):
                continue
            listed = self.git("--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only",
                              "HEAD", "--", s + "/", env=no_index(self.gitdir)).stdout
            files = [os.fsdecode(p) for p in listed.split(b"\0") if p]
            if len(files) == count and all(renames.get(d + f[len(s):]) == f for f in files):
                chosen.append((s, d))
        return chosen

    def prepare(self, entries, blobs, prepared):
        """Each entry's new version in a temporary file beside its path."""
        for e in entries:
            self.stop.point()
            try:
                prepared[e.path] = self.writer.prepare(e.path, e.new_mode,
                                                       blobs.source(e.path, e.new, e.new_mode))
            except (Refused, OSError) as err:
                raise Unwritten(self.cannot(e.path, err)) from None
            self.made += 1
            self.tell_progress()

    def tell_progress(self):
        """on_progress(made, to write): how many of the pull's new versions are complete
        (in their temporary files), told when its whole percent changes."""
        if self.on_progress is None or not self.to_write:
            return
        percent = self.made * 100 // self.to_write
        if percent != self.told_percent:
            self.told_percent = percent
            self.on_progress(self.made, self.to_write)

    @staticmethod
    def expect_old(e):
        return None if null(e.old) else Expect(e.old_mode, oid=e.old)

    def put(self, e, prepared, blobs):
        """Swap a prepared version in. -> True when the path holds it now."""
        try:
            return self.writer.put_prepared(prepared, self.expect_old(e), e.new) or \
                self.writer.holds(e.path, Expect(e.new_mode, oid=e.new))
        except (Refused, OSError) as err:  # (holds: written before a pull that was killed)
            raise Unwritten(self.cannot(e.path, err)) from None

    @staticmethod
    def cannot(path, err):
        why = getattr(err, "strerror", None) or str(err)
        return "%s could not be written (%s): nothing of this pull is claimed as written " \
               "until it is" % (path, why)

    def keep_beside(self, e, blobs, theirs):
        """A file changed here that the pull would replace: both versions are kept.
        Changed while the pull ran (or as new as the pulled one), its bytes stay at the
        path and the pulled version goes beside it as a conflict copy. Changed before
        the pull began and not committed (an edit made while the daemon was stopped or
        paused) and older than the pulled version: the README's rule, as in a merge
        (keep_both): the newer at its place, the local one beside it.
        -> (the copy's {"path", "copy", "host"}, whether the local bytes stay at the path)"""
        stamp, _, host, author = finish.last_change(self.folder, theirs, e.path,
                                                    gitenv=self.gitenv)
        local = self.edited_before(e.path)
        if local is not None and local[0] < stamp:
            made = self.put_local_beside(e, blobs, *local)
            if made is not None:
                log.warning("conflict in %s: changed here before this pull and not committed "
                            "(made while the daemon was stopped or paused), and later on %s: "
                            "kept the newer (from %s), this machine's as %s",
                            e.path, host, host, made["copy"])
                return made, False
            local = None  # it changed meanwhile: being written now
        copy = copy_name(e.path, host, stamp, lambda n: not os.path.lexists(
            os.path.join(self.folder, n)), person=other_person(self.identity(), author))
        try:
            self.writer.put(copy, e.new_mode, blobs.source(e.path, e.new, e.new_mode), None)
        except (Refused, OSError) as err:  # the pulled version is in history all the same
            log.warning("conflict in %s: kept, but the pulled version (from %s) could not be "
                        "written beside it (%s); it is in history", e.path, host,
                        getattr(err, "strerror", None) or err)
        if local is None:
            log.warning("conflict in %s: changed here while the pull ran; kept, the pulled "
                        "version (from %s) as %s", e.path, host, copy)
        else:
            log.warning("conflict in %s: changed here before this pull and not committed "
                        "(made while the daemon was stopped or paused), and on %s before "
                        "it: kept the newer (this machine's), the pulled version as %s",
                        e.path, host, copy)
        return {"path": e.path, "copy": copy, "host": host}, True

    def identity(self):
        """`Name <email>` of this folder's git identity (whose the local edit is), or None."""
        out = git(self.folder, "var", "GIT_AUTHOR_IDENT", check=False, gitenv=self.gitenv)
        found = re.match(r"(.*?) <(.*?)>", os.fsdecode(out or b""))
        return "%s <%s>" % found.groups() if found else None

    def copy_rules_in_folder(self, copies):
        """Each conflict copy written beside a file changed here (the pulled version, or
        this machine's) gets its original's attributes before anything commits it
        (copyrules): the rule goes into the .gitattributes beside it, through the
        guarded writer, and is committed with it; where that file cannot be written,
        into info/attributes. Never is a copy of an encrypted file stored as cleartext."""
        pairs = [(c["path"], c["copy"]) for c in copies]
        if not pairs:
            return
        for rel, own in sorted(copyrules.needed(self.folder, pairs, env=no_index(self.gitdir),
                                                gitenv=self.gitenv).items()):
            if not self.put_rules(rel, own):
                copyrules.in_info(self.gitdir, "", own)

    def put_rules(self, rel, own):
        """The rules for `own` added to the .gitattributes at rel, only while it holds what
        was read (a few tries). -> True when written."""
        name = os.path.basename(rel)
        for _ in range(3):
            try:
                dfd = self.writer.folder(rel)
            except (Refused, OSError):
                return False
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
            except FileNotFoundError:
                old, mode = None, "100644"
            except OSError:  # a link: git reads no rules from it
                return False
            else:
                with open(fd, "rb") as f:
                    old = f.read()
                    mode = "100755" if os.fstat(f.fileno()).st_mode & 0o100 else "100644"
            finally:
                os.close(dfd)
            try:
                if self.writer.put(rel, mode, copyrules.with_rules(old or b"", own),
                                   None if old is None else Expect(mode, data=old)):
                    return True
            except (Refused, OSError):
                return False
        return False

    def edited_before(self, rel):
        """(mtime, mode) of the regular file at rel when it was last written before this
        pull began (its change, not committed, predates the pull); None when it was
        written since (or is not a regular file)."""
        try:
            st = os.lstat(os.path.join(self.folder, rel))
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_mtime >= self.began:
            return None
        return st.st_mtime, "100755" if st.st_mode & 0o100 else "100644"

    def put_local_beside(self, e, blobs, mtime, mode):
        """The local file moved to a conflict copy named for this machine (only if it
        still holds what it held when looked at: one rename), then the pulled version
        put at the path. -> the copy's {"path", "copy", "host"}; None when the file
        changed meanwhile (it is being written: it stays, the newest of all)."""
        full = os.path.join(self.folder, e.path)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            oid = self.hash_as_git(e.path, fd)
        finally:
            os.close(fd)
        if oid is None:
            return None
        copy = copy_name(e.path, self.host, mtime, lambda n: not os.path.lexists(
            os.path.join(self.folder, n)))
        try:
            if not self.writer.move(e.path, copy, Expect(mode, oid=oid)):
                return None
        except (Refused, OSError):
            return None
        try:
            put = self.writer.put(e.path, e.new_mode, blobs.source(e.path, e.new, e.new_mode),
                                  None)
        except (Refused, OSError):
            put = False
        if not put:  # a file made at the path meanwhile keeps it; the pulled one is in history
            log.warning("conflict in %s: the pulled version was not written (a file was made "
                        "there meanwhile); it is in history", e.path)
        return {"path": e.path, "copy": copy, "host": self.host}

    def gitlinks(self, entries):
        """Submodules as `git pull` leaves them: a new one an empty folder, a removed
        one's folder removed if empty; a moved pointer changes nothing on disk."""
        for e in entries:
            full = os.path.join(self.folder, e.path)
            if e.new_mode == GITLINK and not os.path.lexists(full):
                try:
                    fd = self.writer.folder(e.path + "/x", create=True)
                    os.close(fd)
                except (Refused, OSError) as err:
                    log.warning("submodule %s: its folder was not made (%s)", e.path,
                                getattr(err, "strerror", None) or err)
            elif e.old_mode == GITLINK and e.new_mode != GITLINK and os.path.isdir(full):
                try:
                    os.rmdir(full)
                except OSError:
                    pass  # a checked-out submodule stays, as git leaves it

    def move_index(self, entries):
        """The index takes the new tree's entries for the changed paths (their stat data
        is gone, so git looks at those files again); everything else keeps its cache."""
        index = os.path.join(self.gitdir, "index")
        lock = index + ".lock"
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise PullFailed("%s exists: another git command is running here" % lock) from None
        os.close(fd)
        temp = os.path.join(self.gitdir, "autosync-pull-index")
        try:
            if os.path.lexists(temp):  # (a pull killed here before)
                os.unlink(temp)
            if os.path.exists(index):
                try:  # git writes a new file and renames it: a link leaves the index as is
                    os.link(index, temp)
                except OSError:  # (a file system without hard links)
                    shutil.copyfile(index, temp)
            records = b"".join(b"%s %s\t%s\0" % ((e.new_mode if not null(e.new) else "0").encode(),
                                                 e.new.encode(), os.fsencode(e.path))
                               for e in entries)
            # (index_env: the fsmonitor setting, which keeps git's fsmonitor data in it)
            self.git("update-index", "-z", "--index-info",
                     env={**self.index_env(), "GIT_INDEX_FILE": temp}, data=records)
            os.replace(temp, index)
        finally:
            for leftover in (temp, lock):
                if os.path.exists(leftover):
                    os.unlink(leftover)



def blocked_by(path, waiting):
    """Does a path in `waiting` need path's name for a folder?"""
    return any(w.startswith(path + "/") for w in waiting)


def blocked(path, gone):
    """Is a folder of path a file the pull removes (its temporary file must wait)?"""
    parts = path.split("/")
    return any("/".join(parts[:i]) in gone for i in range(1, len(parts)))
