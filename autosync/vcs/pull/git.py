"""git's pull done away from the working tree, so that it never overwrites a write it did not see.

`git pull` checks each file when its merge begins and writes the other
machine's version over it later: a write made in between is lost. When
pullcmd is a plain `git pull` (the default and the original's), the
committer pulls this way instead:

1. `git fetch` with pullcmd's remote and branch, if any (FETCH_HEAD names
   what a pull would merge);
2. the merge is made in objects only (`git merge-tree --write-tree`); a
   conflict keeps both versions by keep_both's rules (the newer one at
   the path, the other as a conflict copy), written into the merged tree;
3. every new path is shown to git as a checkout would add it to the index
   (verify_path: `.git` in any spelling, `..`, a symlinked .gitmodules, with
   the repository's core.protectNTFS/protectHFS): a tree git refuses is
   refused whole (Unsafe), before anything is written; a tree that holds one
   name twice, which git checks out, is checked out as git does, the version
   it leaves out kept as a conflict copy (settle_odd);
4. the working tree is brought to the result through guarded.Writer: every
   new version is first streamed from git into a complete temporary file
   beside its path, through the filters of the new tree's attributes, as git's
   checkout writes it (a .gitattributes the pull changes is written last); only when all are made is a file replaced, and only if it
   still holds exactly what HEAD holds and is not open for writing; one that
   changed keeps its bytes, and the pulled version becomes a conflict copy
   beside it. A version that cannot be written (a full disk, a folder it may
   not write, a file where a folder must go) stops the pull (Unwritten):
   HEAD and the index stay where they were, so that no commit of this
   machine takes the old bytes for its own change, and the pull is tried
   again;
5. only then do the index (the changed paths, gitlinks included) and HEAD
   move, and the post-merge hook runs, as after a `git pull`, if it was there
   before the pull and is not a file the pull wrote.

Where this differs from git's checkout: git writes file by file and stops at
the first failure with the index half-updated; here nothing moves unless
every file was written. A failure after the first replacement (rare: the
temporary files are all made first) leaves those files written and HEAD
unmoved: the next commit records them with the other machine's content, which
the next pull merges cleanly. A new submodule is an empty folder, as `git
pull` leaves it; its pointer moves in the index only.

A stop (GitPull.cancel, from the committer's SIGTERM) kills the fetch's process
group and ends the pull at the next step, Stopped, up to the moment the first file is
replaced or removed: nothing is written, HEAD stays, the next start pulls again. From
that moment on the pull runs to its end (its files are all made already), so that a
stop never leaves written files under an unmoved HEAD.

Any other pullcmd (a rebase, Mercurial, a script) stays a command.

Its parts, in this folder: odd.py (step 3's name held twice), write.py (steps 4 and
5's index), blobs.py (the new versions streamed from git), bigmerge.py (step 2's big
binary files, kept out of git's merge), common.py (what they share).
"""
import functools
import logging
import os
import shlex
import shutil
import time

from autosync.vcs import copyrules, thin
from autosync.vcs.pull import bigmerge, finish, odd
from autosync.vcs.commands import SHELL_CHARS, Cancel, CommandFailed, Template
from autosync.vcs.git_environment import PLAIN
from autosync.vcs.git import git, hash_open, no_index
from autosync.vcs.remote import BadRemote, parse_remote
from autosync.fs.guarded import Writer
from autosync.core.messages import merge_message
# (the parts: names of theirs that tests and the committer take from here too)
from autosync.vcs.pull.blobs import STREAM, Blobs
from autosync.vcs.pull.common import (ATTRIBUTES, GITLINK, Entry, PullFailed, Stop, Stopped,
                                      Unsafe, Unwritten, entry_count, is_rules, null,
                                      run_git)
from autosync.vcs.pull.write import Checkout

__all__ = ["GitPull", "PullFailed", "Unsafe", "Unwritten", "Stopped", "Blobs", "Entry",
           "plain_pull", "for_merge", "EMPTY"]

log = logging.getLogger("autosync.gitpull")

# Options of `git pull` that change nothing in what a merge of FETCH_HEAD does here.
PLAIN_OPTIONS = frozenset(("-q", "--quiet", "-v", "--verbose", "--no-rebase", "--no-edit",
                           "--edit", "--ff", "--no-ff", "--stat", "-n", "--no-stat",
                           "--progress", "--no-progress", "--no-verify", "--commit"))

def plain_pull(text):
    """pullcmd's text -> the arguments for `git fetch` when it is a plain `git pull`
    (options above, then at most a remote and refs); None for anything else."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) != 1 or SHELL_CHARS.intersection(lines[0]):
        return None
    try:
        words = shlex.split(lines[0])
    except ValueError:
        return None
    if words[:2] != ["git", "pull"]:
        return None
    options = [w for w in words[2:] if w.startswith("-")]
    if any(o not in PLAIN_OPTIONS for o in options):
        return None
    return [w for w in words[2:] if not w.startswith("-")]


EMPTY = "empty"  # for_merge: the remote has no branch at all yet


# The upload-pack a remote reached by a path runs with. It runs on this machine, a child
# of the pull, with the remote's settings only (git passes a local remote none of the
# daemon's), which at git's defaults send a big file from memory: from a pack through
# maps that all stay mapped (blobs.py, STREAM), below 512 MB whole, or as a delta the
# pull must then rebuild whole. These are the daemon's own, for this fetch alone.
LOCAL_UPLOAD_PACK = "git %s -c core.bigFileThreshold=16m upload-pack" % " ".join(STREAM)


def for_merge(gitdir):
    """The commit FETCH_HEAD says a pull merges; EMPTY when the fetch brought no branch
    at all (an empty remote: nothing to pull yet), None when it brought others only."""
    try:
        with open(os.path.join(gitdir, "FETCH_HEAD"), "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return EMPTY
    for line in lines:
        fields = line.split("\t")
        if len(fields) >= 2 and fields[1] == "":
            return fields[0]
    return None if any(line.strip() for line in lines) else EMPTY


class InObjects:
    """keep_both.Place for the merge in objects: a version is (mode, blob id), written
    as an index line of the merged tree; a name is taken in that tree or on disk."""

    def __init__(self, pull, path, head, theirs, taken, lines):
        self.pull, self.path, self.revs = pull, path, {"ours": head, "theirs": theirs}
        self.taken_names, self.lines = taken, lines

    def last_change(self, side, version):
        return finish.last_change(self.pull.folder, self.revs[side], self.path,
                                    gitenv=self.pull.gitenv)

    def taken(self, rel):
        return rel in self.taken_names or os.path.lexists(os.path.join(self.pull.folder, rel))

    def is_folder(self, rel):
        return False  # merge-tree moves a file out of a folder's way itself

    def holds(self, rel, version):
        return False

    def write(self, rel, version):
        self.taken_names.add(rel)
        self.lines.append("%s %s\t%s" % (version[0], version[1], rel))


class GitPull:
    """One folder's git pull, every write through the guarded writer (fs/guarded.py).
    `fetch_args`: from plain_pull(pullcmd); `gitenv`: the git_environment.GitEnvironment
    its git commands run with; `index_env`: -> variables for the index's update (the
    committer's fsmonitor setting, committer/fsmonitor.py)."""

    def __init__(self, folder, gitdir, host, fetch_args, gitenv=PLAIN, index_env=dict):
        self.gitdir, self.host, self.gitenv = gitdir, host, gitenv
        # git's paths are the whole working tree's, which may hold the synced folder.
        top = git(folder, "rev-parse", "--show-toplevel", check=False, gitenv=gitenv)
        self.folder = os.fsdecode(top.strip()) if top else folder
        self.fetch_args = fetch_args
        self.fetch = None  # a Template to run instead of fetch_command() (tests)
        self.writer = Writer(self.folder, confirm=self.hash_as_git)
        self.index_env = index_env
        # A stop: cancel.cancel() kills the fetch (its process group) and ends the pull at
        # the next stop_point(), up to the swap. From the first file replaced or removed
        # on, the pull runs to its end: its few renames and the index are quick, and a
        # pull cut there would leave files written and HEAD unmoved.
        self.cancel = Cancel()
        self.stop = Stop(self.cancel)
        # on_progress(made, total): the new versions written so far (the committer's
        # status, core/underway.py); told at each whole percent of a pull's writing.
        self.on_progress = None
        self.rules = None  # checkout_attributes: the new tree's .gitattributes, when changed

    def git(self, *args, env=None, data=None, check=True, cwd=None):
        return run_git(self.folder, self.gitenv, *args, env=env, data=data, check=check,
                       cwd=cwd)

    def hash_as_git(self, rel, fd):
        """The blob id git would store for the open file at rel (filters, line endings);
        the name goes to git on stdin (git.hash_open)."""
        return hash_open(self.folder, rel, fd, gitenv=self.gitenv)

    # --- the pull ---------------------------------------------------------------------

    def stop_point(self):
        """Stopped when the daemon stops and nothing of the pull is written yet."""
        self.stop.point()

    def run(self, timeout=None):
        """The pull (see run_pull); a stop ends it unwritten, Stopped."""
        self.stop.swapping = False
        self.began = time.time()  # a local edit older than this was made before the pull
        try:
            return self.run_pull(timeout)
        finally:
            self.stop.swapping = False

    def run_pull(self, timeout=None):
        """Fetch, merge, write. -> {"merged": copies in the merge commit, "beside": copies
        of files changed here meanwhile, "kept": paths that kept local bytes, "merge": the
        merge commit made here (None for a fast-forward)}; PullFailed (Unsafe, Unwritten)
        or CommandFailed (the fetch) when it could not be done: HEAD and the index are
        as they were then."""
        try:
            (self.fetch or self.fetch_command()).run(cwd=self.folder, timeout=timeout,
                                                     cancel=self.cancel)
        except CommandFailed:
            self.stop_point()  # killed by the stop: not a failure
            raise
        self.stop_point()
        theirs = for_merge(self.gitdir)
        if theirs is None:
            raise PullFailed("the remote has no branch this one follows: set it with git "
                             "branch --set-upstream-to=origin/BRANCH")
        if theirs == EMPTY:  # the first machine's first push is still to come
            return {"merged": [], "beside": [], "kept": [], "merge": None, "empty": True}
        head = self.rev("HEAD")
        if head == theirs or (head and self.is_ancestor(theirs, head)):
            return {"merged": [], "beside": [], "kept": [], "merge": None}
        theirs, copies = self.settle_odd(head, theirs)  # (a name twice: as git checks out)
        merge = None
        if head is None or self.is_ancestor(head, theirs):
            new, tree = theirs, self.rev(theirs + "^{tree}")
            merge = new if copies else None  # (settle_odd's commit, made here)
        else:
            tree, merged = self.merge(head, theirs)
            copies += merged
            new = None
        entries = self.diff(head, tree)
        self.refuse_unsafe(entries, theirs)  # before anything is written or made
        self.stop_point()
        if new is None:
            new = self.git("commit-tree", tree, "-p", head, "-p", theirs,   # message: stdin
                           data=os.fsencode(merge_message(self.host, copies))).stdout.decode().strip()
            merge = new
        try:  # a thin machine: every new content in one fetch, before anything is written
            thin.bring(self.folder, [e.new for e in entries if e.new_mode != GITLINK],
                       "the pulled files' contents", gitenv=self.gitenv)
        except thin.Unreachable as e:
            raise PullFailed(str(e)) from None
        self.stop_point()
        hook = self.hook_before()
        self.checkout_attributes(tree, entries)
        checkout = Checkout(self.folder, self.gitdir, self.host, self.gitenv, self.writer,
                            self.stop, self.began, getattr(self, "renames", {}),
                            functools.partial(Blobs, self), self.on_progress, self.index_env)
        try:
            kept, beside = checkout.write(entries, theirs)
        finally:
            self.drop_rules()
        checkout.move_index(entries)
        self.git("update-ref", "-m", "autosync: pull", "HEAD", new, head or "")
        if head:
            self.git("update-ref", "ORIG_HEAD", head)
        self.post_merge(hook, entries)
        return {"merged": copies, "beside": beside, "kept": kept, "merge": merge}

    def settle_odd(self, head, theirs):
        """-> (the commit to pull, [the copies kept]): odd.settle_odd."""
        return odd.settle_odd(self, head, theirs)

    def fetch_command(self):
        """`git fetch -q` with pullcmd's remote and refs. Without submodules (no
        .gitmodules, none cloned in .git/modules) it is told so: otherwise git reads the
        whole index to look for them (140 ms at 1,000,000 files), to fetch nothing. A
        remote reached by a path gets LOCAL_UPLOAD_PACK (local_upload_pack)."""
        words = ["git", "fetch", "-q"]
        if not (os.path.lexists(os.path.join(self.folder, ".gitmodules")) or
                os.path.isdir(os.path.join(self.gitdir, "modules"))):
            words.append("--no-recurse-submodules")
        if self.local_upload_pack():
            words.append("--upload-pack=" + LOCAL_UPLOAD_PACK)
        return Template("pullcmd", shlex.join(words + self.fetch_args), self.gitenv)

    def local_upload_pack(self):
        """Is the remote fetched from reached by a path (a disk, a share), and has the
        user chosen no upload-pack command for it? Its upload-pack then runs here, as a
        child of the pull."""
        name = self.fetch_args[:1]
        url = self.git("ls-remote", "--get-url", *name, check=False).stdout
        try:
            if parse_remote(os.fsdecode(url.strip()), self.folder)[0] != "local":
                return False
        except BadRemote:
            return False
        own = self.git("config", "--get-regexp", r"^remote\..*\.uploadpack$", check=False)
        return not own.stdout.strip()

    def refuse_unsafe(self, entries, theirs):
        """Unsafe when the new tree holds a path git itself would not check out (.git in
        any spelling git refuses, `..`, a symlinked .gitmodules; a file and a folder of
        one name that settle_odd could not settle): git is asked, by putting the new entries into an index of their own,
        where git checks each path as a checkout does (verify_path, with the
        repository's core.protectNTFS and core.protectHFS)."""
        added = [e for e in entries if not null(e.new)]
        if not added:
            return
        index = os.path.join(self.gitdir, "autosync-check-index")
        if os.path.lexists(index):
            os.unlink(index)
        try:
            proc = self.git("update-index", "-z", "--index-info", check=False,
                            env={"GIT_INDEX_FILE": index},
                            data=b"".join(b"%s %s\t%s\0" % (e.new_mode.encode(), e.new.encode(),
                                                            os.fsencode(e.path)) for e in added))
            # git leaves out a path it refuses ("Ignoring path ...") and goes on: the
            # index's count of entries (its header) says whether all were taken, and
            # only when not, the list says which.
            refused = []
            if entry_count(index) != len(added):
                taken = set(self.git("ls-files", "-z", env={"GIT_INDEX_FILE": index},
                                     check=False).stdout.split(b"\0")) \
                    if os.path.exists(index) else set()
                refused = [e.path for e in added if os.fsencode(e.path) not in taken] or \
                    ["(a path git left out)"]
        finally:
            for leftover in (index, index + ".lock"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)
        if refused or proc.returncode:
            words = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise Unsafe("the pulled commit %s holds %s git refuses to check out (%s): "
                         "nothing of it was written" % (
                             theirs[:12], "a path" if len(refused) < 2 else "paths",
                             ", ".join(repr(p) for p in refused[:3]) or
                             "; ".join(w.strip() for w in words[:3])))

    def hook_before(self):
        """The post-merge hook as it is before the pull writes anything: (path, identity)
        or None. It runs after the pull only if it is still that very file."""
        out = self.git("rev-parse", "--git-path", "hooks/post-merge", check=False)
        path = os.path.join(self.folder, os.fsdecode(out.stdout.strip())) \
            if out.returncode == 0 else None
        try:
            st = os.stat(path) if path else None
        except OSError:
            return None
        return (path, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)) if st else None

    def post_merge(self, hook, entries):
        """The repository's post-merge hook runs, as after `git pull` (its argument: 0,
        not a squash), if it was there before the pull and is not a file the pull wrote
        (core.hooksPath may point into the working tree). `git hook run` is git 2.36's;
        an older git runs none."""
        if hook is None:
            return
        path, identity = hook
        try:
            st = os.stat(path)
        except OSError:
            return
        real, top = os.path.realpath(path), os.path.realpath(self.folder) + "/"
        wrote = real.startswith(top) and any(
            os.path.realpath(os.path.join(self.folder, e.path)) == real for e in entries)
        if (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) != identity or wrote:
            log.warning("post-merge hook %s not run: it changed during the pull", path)
            return
        ran = self.git("hook", "run", "--ignore-missing", "post-merge", "--", "0", check=False)
        if ran.returncode:
            log.warning("post-merge hook: %s", ran.stderr.decode("utf-8", "replace").strip()
                        or "exit %d" % ran.returncode)

    def rev(self, name):
        proc = self.git("rev-parse", "-q", "--verify", name, check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def is_ancestor(self, a, b):
        return self.git("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    # --- the merge, in objects --------------------------------------------------------

    def merge(self, head, theirs):
        """-> (tree, copies): the merged tree, conflicts resolved by keeping both."""
        # Unrelated histories (two machines that both began on an empty remote, or a
        # folder that joined one with files of its own): merged like any other, both kept.
        if self.rev(head + "^{tree}") == self.rev(theirs + "^{tree}"):
            return self.rev(theirs + "^{tree}"), []   # (the same tree: nothing to merge)
        # Big binary files both sides changed: their conflicts known without git reading
        # them whole (bigmerge.py); git merges the rest, through small pack maps.
        merged, apart = bigmerge.set_apart(self, head, theirs)
        proc = self.git(*STREAM, "merge-tree", "--write-tree", "--allow-unrelated-histories",
                        "-z", head, merged, check=False)
        if proc.returncode not in (0, 1):
            raise PullFailed("git merge-tree: %s" % proc.stderr.decode("utf-8", "replace").strip())
        fields = proc.stdout.split(b"\0")
        tree, stages = fields[0].decode(), {}
        for field in fields[1:] if proc.returncode else ():
            if not field:
                break
            info, path = field.split(b"\t", 1)
            mode, oid, stage = info.decode().split()
            stages.setdefault(os.fsdecode(path), {})[int(stage)] = (mode, oid)
        stages.update(apart)
        if not stages:
            return tree, []
        return self.resolve(tree, stages, head, theirs)

    def resolve(self, tree, stages, head, theirs):
        """Keep both versions of each conflicted path by keep_both, as
        finish.resolve does in a working tree, written into the merged tree."""
        index = os.path.join(self.gitdir, "autosync-merge-index")
        env = {"GIT_INDEX_FILE": index}
        try:
            self.git("read-tree", tree, env=env)
            taken = set(self.git("ls-files", "-z", env=env).stdout.decode("utf-8", "surrogateescape")
                        .split("\0"))
            lines, copies, pairs = [], [], []
            for path, sides in sorted(stages.items()):
                ours, other = sides.get(2), sides.get(3)
                if ours is None and other is None:
                    lines.append("0 %s\t%s" % ("0" * len(tree), path))
                    continue
                made, written = finish.keep_every(
                    self.folder, path, ours, other, InObjects(self, path, head, theirs, taken,
                                                              lines), (head, theirs),
                    gitenv=self.gitenv)
                if not written:  # git's merge with markers was all there was (finish.py)
                    lines.append("0 %s\t%s" % ("0" * len(tree), path))
                copies += made
                pairs += [(path, rel) for rel in written if rel != path]
            self.git("update-index", "-z", "--index-info", env=env,
                     data=b"".join(os.fsencode(line) + b"\0" for line in lines))
            self.copy_rules_in_tree(pairs, env)
            return self.git("write-tree", env=env).stdout.decode().strip(), copies
        finally:
            if os.path.exists(index):
                os.unlink(index)

    def copy_rules_in_tree(self, pairs, env):
        """Each conflict copy [(original, copy)] of the merge is stored as its original
        (its blob) and gets its original's attributes (copyrules): the rule goes into
        the merged tree's .gitattributes beside it, so that this checkout and every
        other machine's write it through its original's smudge filter."""
        rules = copyrules.needed(self.folder, pairs, cached=True, env=env,
                                 gitenv=self.gitenv)
        if not rules:
            return
        # What each folder's .gitattributes is now: its folder's tree read (the names on
        # stdin, never on the command line).
        tree = self.git("write-tree", env=env).stdout.decode().strip()
        folders = sorted({os.path.dirname(rel) for rel in rules})
        out = self.git("cat-file", "--batch", data=b"".join(
            b"%s:%s\n" % (tree.encode(), os.fsencode(f)) if f else tree.encode() + b"\n"
            for f in folders)).stdout
        there, at = {}, 0
        for folder in folders:
            end = out.index(b"\n", at)
            header, at = out[at:end].split(), end + 1
            if len(header) != 3:
                continue
            body, at = out[at:at + int(header[2])], at + int(header[2]) + 1
            while body:
                info, _, body = body.partition(b"\0")
                raw, body = body[:len(tree) // 2], body[len(tree) // 2:]
                mode, _, name = info.partition(b" ")
                if name == copyrules.RULES.encode():
                    there[os.path.join(folder, copyrules.RULES)] = (
                        mode.decode().rjust(6, "0"), raw.hex())
        lines = []
        for rel, own in sorted(rules.items()):
            mode, oid = there.get(rel, ("100644", None))
            if mode not in ("100644", "100755"):  # (a link git does not read as rules)
                copyrules.in_info(self.gitdir, "", own)
                continue
            text = self.git("cat-file", "blob", oid).stdout if oid else b""
            new = self.git("hash-object", "-w", "--stdin", "--no-filters",
                           data=copyrules.with_rules(text, own)).stdout.decode().strip()
            lines.append(b"%s %s\t%s\0" % (mode.encode(), new.encode(), os.fsencode(rel)))
        if lines:
            self.git("update-index", "-z", "--index-info", env=env, data=b"".join(lines))

    def diff(self, head, tree):
        """The paths that differ between HEAD and the new tree, gitlinks included; a
        file that only changed its name (git's exact rename detection, the same mode)
        is a removal and an addition, paired in self.renames {new path: old path}."""
        base = head or self.git("hash-object", "-t", "tree", "--stdin", data=b"").stdout.decode().strip()
        out = self.git("diff-tree", "-r", "-z", "--find-renames=100%", base, tree,
                       env=no_index(self.gitdir)).stdout
        fields, entries = iter(out.split(b"\0")), []
        self.renames = {}
        for info in fields:
            if not info:
                break
            old_mode, new_mode, old, new, status = info[1:].decode().split(" ")
            path = os.fsdecode(next(fields))
            if status[:1] not in "RC":
                entries.append(Entry(old_mode, new_mode, old, new, path))
                continue
            to = os.fsdecode(next(fields))
            none = "0" * len(old)
            if status[:1] == "R":
                entries.append(Entry(old_mode, "000000", old, none, path))
            entries.append(Entry("000000", new_mode, none, new, to))
            if status == "R100" and old_mode == new_mode and GITLINK != old_mode and \
                    ATTRIBUTES not in (os.path.basename(path), os.path.basename(to)):
                self.renames[to] = path
        return entries

    # --- the working tree -------------------------------------------------------------

    def checkout_attributes(self, tree, entries):
        """git's checkout writes each file by the attributes of the tree it checks out
        (unpack-trees reads .gitattributes from the new index first: GIT_ATTR_CHECKOUT),
        so a pull that brings rules with the files they filter (git-crypt, LFS, eol)
        writes those files by the new rules, and one that removes the rules writes them
        without. git 2.39's cat-file --filters and check-attr read a working tree's
        files only (--attr-source is git 2.42's): when the pull changes a .gitattributes,
        the new tree's are put into a working tree of their own (self.rules, in the git
        dir; .lfsconfig too, which git-lfs's smudge reads there), and the commands that
        make the new versions run in it (rules_env). Without such a change, the folder's
        own files are the tree's. The folder's .gitattributes themselves are written
        last (write), so that every check of an old file is made by the old rules, as
        git checks against the old index."""
        self.drop_rules()
        if not any(is_rules(e.path) for e in entries):
            return
        listed = self.git("ls-tree", "-r", "-z", tree).stdout.split(b"\0")
        wanted = []
        for record in listed:
            info, _, name = record.partition(b"\t")
            path = os.fsdecode(name)
            parts = path.split("/")
            if info.split(b" ")[:2] in ([b"100644", b"blob"], [b"100755", b"blob"]) and \
                    (parts[-1] == ATTRIBUTES or path == ".lfsconfig") and \
                    not {"", ".", ".."}.intersection(parts) and \
                    ".git" not in (p.lower() for p in parts[:-1]):
                wanted.append((info.split(b" ")[2].decode(), path))
        rules = os.path.join(self.gitdir, "autosync-attributes")
        os.mkdir(rules, 0o700)
        self.rules = rules
        out = self.git("cat-file", "--batch",
                       data=b"".join(oid.encode() + b"\n" for oid, _ in wanted)).stdout
        at = 0
        for oid, path in wanted:
            end = out.index(b"\n", at)
            header, at = out[at:end].split(), end + 1
            if len(header) != 3:
                continue  # (missing: a thin machine's; git would read none either)
            size = int(header[2])
            content, at = out[at:at + size], at + size + 1
            full = os.path.join(rules, path)
            try:
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "xb") as f:
                    f.write(content)
            except OSError as err:  # (a crafted tree: a file where a folder is)
                log.warning("%s: not read for this pull's checkout (%s)", path,
                            getattr(err, "strerror", None) or err)

    def drop_rules(self):
        """The new tree's rules' working tree goes (one left by a killed pull too)."""
        rules = os.path.join(self.gitdir, "autosync-attributes")
        if os.path.lexists(rules):
            shutil.rmtree(rules, ignore_errors=True)
        self.rules = None

    def rules_env(self):
        """Variables for a command that reads attributes for the checkout: git pointed
        at the new tree's rules (checkout_attributes), or nothing."""
        return {"GIT_DIR": self.gitdir, "GIT_WORK_TREE": self.rules} if self.rules else {}

    def rules_cwd(self):
        """Where such a command runs (git reads .gitattributes below the current folder;
        a filter runs there too, as git runs it at the top of the working tree)."""
        return self.rules or self.folder

    def needs_filters(self, paths):
        """The paths whose checked-out bytes may not be the blob's (checkout_converts):
        only these are read through `cat-file --filters`, which holds a content whole;
        every other file is streamed as it is stored."""
        if not paths:
            return set()
        config = {}
        for line in self.git("config", "--get-regexp", r"^core\.(autocrlf|eol)$",
                             check=False).stdout.splitlines():
            key, space, value = line.decode("utf-8", "replace").partition(" ")
            config[key] = value if space else "true"   # (a key alone in a file is true)
        # The folder's own .gitattributes files say (git reads a file from the index
        # only when it is missing on disk: a deletion the next commit will carry), or
        # the new tree's, when the pull changes them (checkout_attributes).
        out = self.git("check-attr", "-z", "--stdin", *CHECKOUT_ATTRIBUTES,
                       data=b"\0".join(map(os.fsencode, paths)) + b"\0",
                       env={**no_index(self.gitdir), **self.rules_env()}, cwd=self.rules_cwd())
        fields, attributes = out.stdout.split(b"\0"), {}
        for path, name, value in zip(fields[0::3], fields[1::3], fields[2::3]):
            attributes.setdefault(os.fsdecode(path), {})[name.decode()] = value.decode(
                "utf-8", "replace")
        return {path for path in paths
                if checkout_converts(attributes.get(path, {}), config.get("core.autocrlf", ""),
                                     config.get("core.eol", ""))}


# The attributes by which git's checkout may write other bytes than a blob's (convert.c).
CHECKOUT_ATTRIBUTES = ("filter", "ident", "working-tree-encoding", "text", "crlf", "eol")
UNSET_VALUES = ("unspecified", "unset", "")   # (check-attr's words for no value)


def checkout_converts(attributes, autocrlf, eol):
    """May git's checkout of a path write other bytes than its blob's? {attribute: value
    as check-attr says it}, core.autocrlf and core.eol as configured ("" unset). git's
    own decision (convert.c, convert_attrs and output_eol, git 2.39): a filter, ident or
    working-tree-encoding may change anything; line endings change only when written
    as CRLF. `text`, `text=auto`, `eol=lf` and autocrlf=input write LF: the blob's bytes."""
    if any(attributes.get(name, "unspecified") not in UNSET_VALUES
           for name in ("filter", "ident", "working-tree-encoding")):
        return True
    autocrlf = autocrlf.lower()
    if autocrlf != "input":
        autocrlf = "true" if autocrlf not in ("", "false", "no", "off", "0") else "false"
    crlf_by_default = autocrlf == "true" or (autocrlf == "false" and eol.lower() == "crlf")
    action = None   # git's crlf_action: None (undefined), binary, text, auto, input, crlf
    for name in ("text", "crlf"):   # `crlf` is the older name, read when text says nothing
        value = attributes.get(name, "unspecified")
        action = {"set": "text", "unset": "binary", "input": "input", "auto": "auto"}.get(value)
        if action:
            break
    if action != "binary":
        wanted = attributes.get("eol")
        if wanted in ("lf", "crlf"):
            action = ("auto-" if action == "auto" else "") + {"lf": "input", "crlf": "crlf"}[wanted]
    if action is None:
        action = {"false": "binary", "true": "auto-crlf", "input": "auto-input"}[autocrlf]
    return action in ("crlf", "auto-crlf") or (action in ("text", "auto") and crlf_by_default)
