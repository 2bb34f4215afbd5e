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
"""
import collections
import logging
import os
import shlex
import shutil
import stat
import subprocess
import threading
import time

from autosync.vcs import copyrules, thin
from autosync.vcs.pull import finish
from autosync.core.copies import copy_name
from autosync.vcs.commands import SHELL_CHARS, Cancel, CommandFailed, Template, environment
from autosync.vcs.git_environment import PLAIN
from autosync.vcs.git import git, hash_open, no_index
from autosync.fs.guarded import Expect, Refused, Writer
from autosync.core.messages import host_of, merge_message, printable

log = logging.getLogger("autosync.gitpull")

# Options of `git pull` that change nothing in what a merge of FETCH_HEAD does here.
PLAIN_OPTIONS = frozenset(("-q", "--quiet", "-v", "--verbose", "--no-rebase", "--no-edit",
                           "--edit", "--ff", "--no-ff", "--stat", "-n", "--no-stat",
                           "--progress", "--no-progress", "--no-verify", "--commit"))
GITLINK = "160000"
ATTRIBUTES = ".gitattributes"
Entry = collections.namedtuple("Entry", "old_mode new_mode old new path")


class PullFailed(Exception):
    """str() says why, in one line or git's own lines; `problem`: its name in status."""
    problem = "pull"


class Unsafe(PullFailed):
    """The pulled tree holds a path git would not check out: nothing of it is written."""
    problem = "unsafe"


class Unwritten(PullFailed):
    """A pulled version could not be written: HEAD and the index were not moved."""
    problem = "unwritten"


class Stopped(PullFailed):
    """The daemon stops (GitPull.cancel): the pull ended before it wrote anything, its
    fetch killed; nothing failed, and the next start pulls again."""


def null(oid):
    """No object: what diff-tree says of a side that has no file (SHA-1 or SHA-256)."""
    return not oid.strip("0")


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
        self.swapping = False
        # on_progress(made, total): the new versions written so far (the committer's
        # status, core/underway.py); told at each whole percent of a pull's writing.
        self.on_progress = None
        self.to_write, self.made, self.told_percent = 0, 0, None
        self.rules = None  # checkout_attributes: the new tree's .gitattributes, when changed

    def git(self, *args, env=None, data=None, check=True, cwd=None):
        proc = subprocess.run(("git",) + args, cwd=cwd or self.folder,
                              env=environment(env, self.gitenv),
                              input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=None if data is not None else subprocess.DEVNULL)
        if proc.returncode and check:
            raise PullFailed("git %s: %s" % (args[0], proc.stderr.decode("utf-8", "replace")
                                             .strip() or "exit %d" % proc.returncode))
        return proc

    def hash_as_git(self, rel, fd):
        """The blob id git would store for the open file at rel (filters, line endings);
        the name goes to git on stdin (git.hash_open)."""
        return hash_open(self.folder, rel, fd, gitenv=self.gitenv)

    # --- the pull ---------------------------------------------------------------------

    def stop_point(self):
        """Stopped when the daemon stops and nothing of the pull is written yet."""
        if self.cancel.cancelled and not self.swapping:
            raise Stopped("the daemon is stopping")

    def run(self, timeout=None):
        """The pull (see run_pull); a stop ends it unwritten, Stopped."""
        self.swapping = False
        self.began = time.time()  # a local edit older than this was made before the pull
        try:
            return self.run_pull(timeout)
        finally:
            self.swapping = False

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
        try:
            kept, beside = self.write(entries, theirs)
        finally:
            self.drop_rules()
        self.move_index(entries)
        self.git("update-ref", "-m", "autosync: pull", "HEAD", new, head or "")
        if head:
            self.git("update-ref", "ORIG_HEAD", head)
        self.post_merge(hook, entries)
        return {"merged": copies, "beside": beside, "kept": kept, "merge": merge}

    def settle_odd(self, head, theirs):
        """A pulled tree that holds one name twice in a folder (two entries `a`, or a file
        `x` beside a folder `x`), which git's own tools never write but `git clone` and
        `git pull` check out all the same: git's index takes the later entry (a folder's
        files replace the file of its name), and so is it here, instead of a refusal
        that would stop every pull and push. The version git leaves out is kept as a
        conflict copy (named for the pulled commit's host and time, so every machine
        that settles it makes the same tree), in a commit on top of the pulled one,
        which this machine pushes. Only the trees HEAD lacks are read to find out; a
        tree that also holds a path git refuses is left to refuse_unsafe.
        -> (the commit to pull, [the copies kept])"""
        base = head or self.git("hash-object", "-t", "tree", "--stdin", data=b"").stdout.decode().strip()
        tree = self.rev(theirs + "^{tree}")
        out = self.git("diff-tree", "-r", "-t", "-z", "--no-renames", base, theirs,
                       env=no_index(self.gitdir)).stdout.split(b"\0")
        trees = [tree] + [info.split(b" ")[3].decode() for info in out[0::2]
                          if info.startswith(b":") and info.split(b" ")[1] == b"040000"]
        listed = self.git("cat-file", "--batch", data=b"".join(
            t.encode() + b"\n" for t in trees)).stdout
        at, odd = 0, False
        for _ in trees:
            end = listed.index(b"\n", at)
            header, at = listed[at:end].split(), end + 1
            if len(header) != 3:
                continue  # (missing here: the checks after this one say so)
            body, at = listed[at:at + int(header[2])], at + int(header[2]) + 1
            names = []
            while body:
                info, _, body = body.partition(b"\0")
                names.append(info.partition(b" ")[2])
                body = body[len(tree) // 2:]
            odd = odd or len(names) != len(set(names))
        if not odd:
            return theirs, []
        effective, dropped, below = {}, [], collections.Counter()
        for record in self.git("ls-tree", "-r", "-z", tree).stdout.split(b"\0"):
            if not record:
                continue
            info, _, name = record.partition(b"\t")
            mode, _, oid = info.decode().split()
            path = os.fsdecode(name)
            folders = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
            gone = [p for p in [path] + folders if p in effective]
            if below[path]:
                gone += [p for p in effective if p.startswith(path + "/")]
            for p in gone:
                old_mode, old_oid = effective.pop(p)
                for i in range(1, p.count("/") + 1):
                    below["/".join(p.split("/")[:i])] -= 1
                if (p, old_mode, old_oid) != (path, mode, oid):
                    dropped.append((p, old_mode, old_oid))
            effective[path] = (mode, oid)
            for folder in folders:
                below[folder] += 1
        fields = self.git("log", "-1", "--format=%ct%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd"
                          "%x00%s", "--date=raw", theirs).stdout.decode("utf-8", "surrogateescape")
        stamp, *who, subject = fields.rstrip("\n").split("\0", 7)
        stamp, host = int(stamp), host_of(subject) or who[0]

        def free(name):
            parts = name.split("/")
            return name not in effective and not below[name] and not any(
                "/".join(parts[:i]) in effective for i in range(1, len(parts)))
        copies, pairs = [], []
        for path, mode, oid in dropped:
            if mode == GITLINK:
                log.warning("the pulled commit %s holds %s twice: the other submodule pointer "
                            "is in history only", theirs[:12], printable(path))
                continue
            parts = path.split("/")
            cut = next((i for i in range(1, len(parts)) if "/".join(parts[:i]) in effective),
                       None)   # (its folder is a file now: the copy goes beside that file)
            name = path if cut is None else "/".join(parts[:cut]) + " - " + " - ".join(parts[cut:])
            copy = copy_name(name, host, stamp, free, clock=time.gmtime)
            effective[copy] = (mode, oid)
            copies.append({"path": path, "copy": copy, "host": host})
            pairs.append((path, copy))
        index = os.path.join(self.gitdir, "autosync-odd-index")
        env = {"GIT_INDEX_FILE": index}
        try:
            if os.path.lexists(index):
                os.unlink(index)
            self.git("update-index", "-z", "--index-info", env=env, check=False, data=b"".join(
                b"%s %s\t%s\0" % (m.encode(), o.encode(), os.fsencode(p))
                for p, (m, o) in effective.items()))
            if entry_count(index) != len(effective):
                return theirs, []   # a path git refuses besides: refuse_unsafe says which
            self.copy_rules_in_tree(pairs, env)
            settled = self.git("write-tree", env=env).stdout.decode().strip()
        finally:
            for leftover in (index, index + ".lock"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)
        lines = ["conflict: %s (other version kept as %s)" % (printable(c["path"]),
                                                            printable(c["copy"]))
                 for c in copies]
        message = "autosync on %s: checked out as git does, %d versions kept (the pulled " \
            "tree held a name twice)" % (host, len(copies)) + \
            ("\n\n" + "\n".join(lines) if lines else "")
        log.warning("the pulled commit %s holds a name twice in a folder (%s): written as git "
                    "checks it out, the version it leaves out kept as %s", theirs[:12],
                    ", ".join(printable(c["path"]) for c in copies[:3]) or "the same version",
                    ", ".join(printable(c["copy"]) for c in copies[:3]) or "nothing")
        # Every machine that settles this commit makes this very commit (the pulled one's
        # host, people and times; copies named in UTC; unsigned): no two settlings of it
        # ever meet in a merge whose base is the odd tree, which git's merge misreads.
        names = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
                 "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE")
        return self.git("commit-tree", "--no-gpg-sign", settled, "-p", theirs,
                        env=dict(zip(names, who)), data=os.fsencode(message)
                        ).stdout.decode().strip(), copies

    def fetch_command(self):
        """`git fetch -q` with pullcmd's remote and refs. Without submodules (no
        .gitmodules, none cloned in .git/modules) it is told so: otherwise git reads the
        whole index to look for them (140 ms at 1,000,000 files), to fetch nothing."""
        words = ["git", "fetch", "-q"]
        if not (os.path.lexists(os.path.join(self.folder, ".gitmodules")) or
                os.path.isdir(os.path.join(self.gitdir, "modules"))):
            words.append("--no-recurse-submodules")
        return Template("pullcmd", shlex.join(words + self.fetch_args), self.gitenv)

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
        proc = self.git("merge-tree", "--write-tree", "--allow-unrelated-histories", "-z",
                        head, theirs, check=False)
        if proc.returncode not in (0, 1):
            raise PullFailed("git merge-tree: %s" % proc.stderr.decode("utf-8", "replace").strip())
        fields = proc.stdout.split(b"\0")
        tree, stages = fields[0].decode(), {}
        for field in fields[1:]:
            if not field:
                break
            info, path = field.split(b"\t", 1)
            mode, oid, stage = info.decode().split()
            stages.setdefault(os.fsdecode(path), {})[int(stage)] = (mode, oid)
        if proc.returncode == 0 or not stages:
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
        """The paths whose checked-out bytes are not the blob's: attributes or autocrlf."""
        if not paths:
            return set()
        crlf = self.git("config", "--get", "core.autocrlf", check=False).stdout.strip().lower()
        if crlf in (b"true", b"input"):
            return set(paths)
        # The folder's own .gitattributes files say (git reads a file from the index
        # only when it is missing on disk: a deletion the next commit will carry), or
        # the new tree's, when the pull changes them (checkout_attributes).
        out = self.git("check-attr", "-z", "--stdin", "filter", "text", "eol", "ident",
                       "working-tree-encoding", data=b"\0".join(map(os.fsencode, paths)) + b"\0",
                       env={**no_index(self.gitdir), **self.rules_env()}, cwd=self.rules_cwd())
        fields, found = out.stdout.split(b"\0"), set()
        for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3]):
            if value not in (b"unspecified", b"unset", b""):
                found.add(os.fsdecode(path))
        return found

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
        renames = getattr(self, "renames", {})
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
        with Blobs(self, [e.path for e in files if not null(e.new)]) as blobs:
            prepared = {}
            try:
                blobs.ahead(first)
                self.prepare(first, blobs, prepared)
                self.stop_point()
                self.swapping = True  # from here on, to the end (see __init__)
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
            self.stop_point()
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
        stamp, _, host = finish.last_change(self.folder, theirs, e.path, gitenv=self.gitenv)
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
            os.path.join(self.folder, n)))
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


def entry_count(index):
    """The number of entries an index file holds (its header: "DIRC", version, count)."""
    try:
        with open(index, "rb") as f:
            header = f.read(12)
    except FileNotFoundError:
        return 0
    return int.from_bytes(header[8:12], "big") if header[:4] == b"DIRC" else -1


def is_rules(path):
    """Is path a .gitattributes file (written after every other file of a pull)?"""
    return os.path.basename(path) == ATTRIBUTES


def blocked_by(path, waiting):
    """Does a path in `waiting` need path's name for a folder?"""
    return any(w.startswith(path + "/") for w in waiting)


def blocked(path, gone):
    """Is a folder of path a file the pull removes (its temporary file must wait)?"""
    parts = path.split("/")
    return any("/".join(parts[:i]) in gone for i in range(1, len(parts)))


class Blobs:
    """The new versions, streamed from git into the guarded writer's temporary files:
    `git cat-file --batch` for plain contents, read object by object in chunks;
    `cat-file --filters` per path whose checkout filters or line endings apply. No
    content is ever held whole (a pull of a 2 GB file stays small).

    The contents asked for in a known order (`ahead`) are all requested at once, by a
    thread, and read as they come: a question and its answer per object would wait on
    the scheduler twice per file (10,000 files: 3 times slower on a loaded machine).
    Anything else is asked of a second cat-file, one object at a time."""

    def __init__(self, pull, paths):
        self.pull = pull
        self.filtered = pull.needs_filters(paths)
        self.procs = {}   # "ahead" / "asked" -> its cat-file
        self.queue = collections.deque()   # the blob ids "ahead" will answer, in order

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for proc in self.procs.values():
            if proc.returncode is None and self.queue:
                proc.kill()   # (answers nobody will read: a pull that failed)
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            proc.wait()

    def cat_file(self):
        return subprocess.Popen(("git", "cat-file", "--batch"), cwd=self.pull.folder,
                                env=environment(gitenv=self.pull.gitenv), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def ahead(self, entries):
        """The new versions of `entries` will be asked for in this order: request them."""
        oids = [e.new for e in entries if e.path not in self.filtered or e.new_mode == "120000"]
        if not oids or "ahead" in self.procs:
            return
        proc = self.procs["ahead"] = self.cat_file()
        self.queue.extend(oids)

        def ask():
            try:
                for oid in oids:
                    proc.stdin.write(oid.encode() + b"\n")
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass  # killed: the pull failed
        threading.Thread(target=ask, name="cat-file-requests", daemon=True).start()

    def source(self, path, oid, mode):
        """What the writer's prepare() takes: a link's target as bytes, else a callable
        that streams the content into an fd."""
        if mode == "120000":
            chunks = []
            self.plain(oid, chunks.append)
            return b"".join(chunks)
        if path in self.filtered:
            return lambda fd: self.with_filters(oid, path, fd)
        return lambda fd: self.plain(oid, lambda chunk: write_all(fd, chunk))

    def plain(self, oid, out):
        if self.queue and self.queue[0] == oid:
            self.queue.popleft()
            proc = self.procs["ahead"]
        else:
            if "asked" not in self.procs:
                self.procs["asked"] = self.cat_file()
            proc = self.procs["asked"]
            proc.stdin.write(oid.encode() + b"\n")
            proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise PullFailed("git cat-file: %s is missing" % oid)
        left = int(header[2])
        while left:
            self.pull.stop_point()  # (a big file's content: the stop need not wait for it)
            chunk = proc.stdout.read(min(left, CHUNK))
            if not chunk:
                raise PullFailed("git cat-file: %s was cut short" % oid)
            out(chunk)
            left -= len(chunk)
        proc.stdout.read(1)  # the newline after each object

    def with_filters(self, oid, path, fd):
        """A blob as checked out at path. The path goes on stdin (`--batch` with
        --filters takes "OID PATH" as %(rest)); one object per run, since git 2.39's
        header gives the unfiltered size: the header (the path) is skipped instead,
        and the newline git puts after the content held back."""
        proc = subprocess.Popen(("git", "cat-file", "--batch=%(rest)", "--filters", "-z"),
                                cwd=self.pull.rules_cwd(),
                                env=environment(self.pull.rules_env(), gitenv=self.pull.gitenv),
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            proc.stdin.write(b"%s %s\0" % (oid.encode(), os.fsencode(path)))
            proc.stdin.close()
            header = os.fsencode(path).lstrip(b" \t\n\v\f\r") + b"\n"
            if proc.stdout.read(len(header)) != header:
                raise PullFailed("git cat-file: could not read %s for %s" % (oid, path))
            held = b""
            while True:
                self.pull.stop_point()
                chunk = proc.stdout.read(CHUNK)
                if not chunk:
                    break
                write_all(fd, held)
                held = chunk
            if not held.endswith(b"\n"):
                raise PullFailed("git cat-file: could not read %s for %s" % (oid, path))
            write_all(fd, held[:-1])
        finally:
            proc.stdout.close()
            proc.wait()


CHUNK = 1 << 20


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
