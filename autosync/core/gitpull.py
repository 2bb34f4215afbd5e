"""git's pull done away from the working tree, so that it never overwrites a write it did not see.

`git pull` checks each file when its merge begins and writes the other
machine's version over it later: a write made in between is lost. When
pullcmd is a plain `git pull` (the default and the original's), the
committer pulls this way instead:

1. `git fetch` with pullcmd's remote and branch, if any (FETCH_HEAD names
   what a pull would merge);
2. the merge is made in objects only (`git merge-tree --write-tree`); a
   conflict keeps both versions by copies.keep_both's rules (the newer one at
   the path, the other as a conflict copy), written into the merged tree;
3. the working tree is brought to the result path by path through
   guarded.Writer: a file is replaced only if it still holds exactly what
   HEAD holds, and not open for writing; one that changed keeps its bytes,
   and the pulled version becomes a conflict copy beside it;
4. only then do the index (the changed paths) and HEAD move, and the
   post-merge hook runs, as after a `git pull`.

Any other pullcmd (a rebase, Mercurial, a script) stays a command.
"""
import collections
import logging
import os
import shlex
import shutil
import subprocess

from autosync.core import gitmerge, thin
from autosync.core.copies import copy_name, keep_both
from autosync.core.commands import SHELL_CHARS, Template, environment
from autosync.core.git import git, hash_file, no_index
from autosync.core.guarded import Expect, Refused, Writer
from autosync.core.messages import merge_message

log = logging.getLogger("autosync.gitpull")

# Options of `git pull` that change nothing in what a merge of FETCH_HEAD does here.
PLAIN_OPTIONS = frozenset(("-q", "--quiet", "-v", "--verbose", "--no-rebase", "--no-edit",
                           "--edit", "--ff", "--no-ff", "--stat", "-n", "--no-stat",
                           "--progress", "--no-progress", "--no-verify", "--commit"))
GITLINK = "160000"
Entry = collections.namedtuple("Entry", "old_mode new_mode old new path")


class PullFailed(Exception):
    """str() says why, in one line or git's own lines."""


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
    """copies.Place for the merge in objects: a version is (mode, blob id), written
    as an index line of the merged tree; a name is taken in that tree or on disk."""

    def __init__(self, pull, path, head, theirs, taken, lines):
        self.pull, self.path, self.revs = pull, path, {"ours": head, "theirs": theirs}
        self.taken_names, self.lines = taken, lines

    def last_change(self, side, version):
        return gitmerge.last_change(self.pull.folder, self.revs[side], self.path)

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
    """One folder's guarded pull. `fetch_args`: from plain_pull(pullcmd)."""

    def __init__(self, folder, gitdir, host, fetch_args):
        self.gitdir, self.host = gitdir, host
        # git's paths are the whole working tree's, which may hold the synced folder.
        top = git(folder, "rev-parse", "--show-toplevel", check=False)
        self.folder = os.fsdecode(top.strip()) if top else folder
        self.fetch_args = fetch_args
        self.fetch = None  # a Template to run instead of fetch_command() (tests)
        self.writer = Writer(self.folder, confirm=self.hash_as_git)
        self.index_env = dict  # -> variables for the index's update (fsmonitor.attach)

    def git(self, *args, env=None, data=None, check=True):
        proc = subprocess.run(("git",) + args, cwd=self.folder, env=environment(env),
                              input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=None if data is not None else subprocess.DEVNULL)
        if proc.returncode and check:
            raise PullFailed("git %s: %s" % (args[0], proc.stderr.decode("utf-8", "replace")
                                             .strip() or "exit %d" % proc.returncode))
        return proc

    def hash_as_git(self, rel, data):
        """The blob id git would store for this content at rel (filters, line endings);
        the name goes to git on stdin (gitrepo.hash_file)."""
        return hash_file(self.folder, rel, data)

    # --- the pull ---------------------------------------------------------------------

    def run(self, timeout=None):
        """Fetch, merge, write. -> {"merged": copies in the merge commit, "beside": copies
        of files changed here meanwhile, "kept": paths that kept local bytes, "merge": the
        merge commit made here (None for a fast-forward)}; PullFailed or
        CommandFailed (the fetch) when it could not be done; nothing is written then."""
        (self.fetch or self.fetch_command()).run(cwd=self.folder, timeout=timeout)
        theirs = for_merge(self.gitdir)
        if theirs is None:
            raise PullFailed("the remote has no branch this one follows: set it with git "
                             "branch --set-upstream-to=origin/BRANCH")
        if theirs == EMPTY:  # the first machine's first push is still to come
            return {"merged": [], "beside": [], "kept": [], "merge": None, "empty": True}
        head = self.rev("HEAD")
        if head == theirs or (head and self.is_ancestor(theirs, head)):
            return {"merged": [], "beside": [], "kept": [], "merge": None}
        copies, merge = [], None
        if head is None or self.is_ancestor(head, theirs):
            new, tree = theirs, self.rev(theirs + "^{tree}")
        else:
            tree, copies = self.merge(head, theirs)
            new = self.git("commit-tree", tree, "-p", head, "-p", theirs,   # message: stdin
                           data=os.fsencode(merge_message(self.host, copies))).stdout.decode().strip()
            merge = new
        entries = self.diff(head, tree)
        try:  # a thin machine: every new content in one fetch, before anything is written
            thin.bring(self.folder, [e.new for e in entries], "the pulled files' contents")
        except thin.Unreachable as e:
            raise PullFailed(str(e)) from None
        kept, beside = self.write(entries, theirs)
        self.move_index(entries)
        self.git("update-ref", "-m", "autosync: pull", "HEAD", new, head or "")
        if head:
            self.git("update-ref", "ORIG_HEAD", head)
        self.post_merge()
        return {"merged": copies, "beside": beside, "kept": kept, "merge": merge}

    def fetch_command(self):
        """`git fetch -q` with pullcmd's remote and refs. Without submodules (no
        .gitmodules, none cloned in .git/modules) it is told so: otherwise git reads the
        whole index to look for them (140 ms at 1,000,000 files), to fetch nothing."""
        words = ["git", "fetch", "-q"]
        if not (os.path.lexists(os.path.join(self.folder, ".gitmodules")) or
                os.path.isdir(os.path.join(self.gitdir, "modules"))):
            words.append("--no-recurse-submodules")
        return Template("pullcmd", shlex.join(words + self.fetch_args))

    def post_merge(self):
        """The repository's post-merge hook runs, as after `git pull` (its argument: 0,
        not a squash). `git hook run` is git 2.36's; an older git runs none."""
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
        """Keep both versions of each conflicted path by copies.keep_both, as
        gitmerge.resolve does in a working tree, written into the merged tree."""
        index = os.path.join(self.gitdir, "autosync-merge-index")
        env = {"GIT_INDEX_FILE": index}
        try:
            self.git("read-tree", tree, env=env)
            taken = set(self.git("ls-files", "-z", env=env).stdout.decode("utf-8", "surrogateescape")
                        .split("\0"))
            lines, copies = [], []
            for path, sides in sorted(stages.items()):
                ours, other = sides.get(2), sides.get(3)
                if ours is None and other is None:
                    lines.append("0 %s\t%s" % ("0" * len(tree), path))
                    continue
                copy, _ = keep_both(path, ours, other, InObjects(self, path, head, theirs,
                                                                    taken, lines))
                copies += [copy] if copy else []
            self.git("update-index", "--index-info", env=env,
                     data=os.fsencode("\n".join(lines) + "\n"))
            return self.git("write-tree", env=env).stdout.decode().strip(), copies
        finally:
            if os.path.exists(index):
                os.unlink(index)

    def diff(self, head, tree):
        """The paths that differ between HEAD and the new tree, gitlinks left out."""
        base = head or self.git("hash-object", "-t", "tree", "--stdin", data=b"").stdout.decode().strip()
        out = self.git("diff-tree", "-r", "-z", "--no-renames", base, tree,
                       env=no_index(self.gitdir)).stdout
        fields, entries = out.split(b"\0"), []
        for info, path in zip(fields[0::2], fields[1::2]):
            if not info:
                break
            old_mode, new_mode, old, new, _ = info[1:].decode().split(" ")
            if GITLINK not in (old_mode, new_mode):
                entries.append(Entry(old_mode, new_mode, old, new, os.fsdecode(path)))
        return entries

    # --- the working tree -------------------------------------------------------------

    def contents(self, entries):
        """{blob id: bytes as checked out} of the new versions, read in one run of git."""
        wanted = [e for e in entries if not null(e.new)]
        filtered = self.needs_filters([e.path for e in wanted])
        found = {}
        if wanted:
            plain = sorted({e.new for e in wanted if e.path not in filtered})
            out = self.git("cat-file", "--batch", data="".join(o + "\n" for o in plain).encode())
            data, at = out.stdout, 0
            for oid in plain:
                header_end = data.index(b"\n", at)
                size = int(data[at:header_end].split()[2])
                found[oid] = data[header_end + 1:header_end + 1 + size]
                at = header_end + 1 + size + 1
        by_path = {e.path: found.get(e.new) for e in wanted if e.path not in filtered}
        for e in wanted:
            if e.path in filtered:
                by_path[e.path] = self.filtered(e.new, e.path)
        return by_path

    def filtered(self, oid, path):
        """A blob as checked out at path. The path goes on stdin (`--batch` with
        --filters takes "OID PATH" as %(rest)); one object per run, since git 2.39's
        header gives the unfiltered size: the header (the path) is cut instead."""
        out = self.git("cat-file", "--batch=%(rest)", "--filters", "-z",
                       data=b"%s %s\0" % (oid.encode(), os.fsencode(path))).stdout
        header = os.fsencode(path).lstrip(b" \t\n\v\f\r") + b"\n"
        if not out.startswith(header) or not out.endswith(b"\n"):
            raise PullFailed("git cat-file: could not read %s for %s" % (oid, path))
        return out[len(header):-1]

    def needs_filters(self, paths):
        """The paths whose checked-out bytes are not the blob's: attributes or autocrlf."""
        if not paths:
            return set()
        crlf = self.git("config", "--get", "core.autocrlf", check=False).stdout.strip().lower()
        if crlf in (b"true", b"input"):
            return set(paths)
        # The folder's own .gitattributes files say (git reads a file from the index
        # only when it is missing on disk: a deletion the next commit will carry).
        out = self.git("check-attr", "-z", "--stdin", "filter", "text", "eol", "ident",
                       "working-tree-encoding", data=b"\0".join(map(os.fsencode, paths)) + b"\0",
                       env=no_index(self.gitdir))
        fields, found = out.stdout.split(b"\0"), set()
        for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3]):
            if value not in (b"unspecified", b"unset", b""):
                found.add(os.fsdecode(path))
        return found

    def write(self, entries, theirs):
        """Bring the working tree to the new tree; -> (paths that kept local bytes,
        conflict copies written beside them)."""
        data = self.contents(entries)
        kept, copies = [], []
        # Removals first: a file may give its name to a folder.
        for e in sorted(entries, key=lambda e: (not null(e.new), e.path)):
            expect = None if null(e.old) else Expect(e.old_mode, oid=e.old)
            try:
                if null(e.new):
                    done = self.writer.remove(e.path, expect)
                else:
                    done = self.writer.put(e.path, e.new_mode, data[e.path], expect) or \
                        self.writer.holds(e.path, Expect(e.new_mode, data=data[e.path]))
                    if not done:  # (holds: written before a pull that was killed)
                        copies.append(self.keep_beside(e, data[e.path], theirs))
            except (Refused, OSError) as err:
                log.warning("%s: the pulled version was not written (%s); it is in history",
                            e.path, getattr(err, "strerror", None) or err)
                done = False
            if not done:
                kept.append(e.path)
        return kept, copies

    def keep_beside(self, e, data, theirs):
        """A file changed here while the pull ran keeps its bytes; the pulled version
        goes beside it as a conflict copy (the local change is the newer one)."""
        stamp, _, host = gitmerge.last_change(self.folder, theirs, e.path)
        copy = copy_name(e.path, host, stamp, lambda n: not os.path.lexists(
            os.path.join(self.folder, n)))
        self.writer.put(copy, e.new_mode, data, None)
        log.warning("conflict in %s: changed here while the pull ran; kept, the pulled version "
                    "(from %s) as %s", e.path, host, copy)
        return {"path": e.path, "copy": copy, "host": host}

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
            lines = ["%s %s\t%s" % ((e.new_mode, e.new, e.path) if not null(e.new) else
                                    ("0", e.new, e.path)) for e in entries]
            # (index_env: the fsmonitor setting, which keeps git's fsmonitor data in it)
            self.git("update-index", "--index-info", env={**self.index_env(),
                                                          "GIT_INDEX_FILE": temp},
                     data=os.fsencode("\n".join(lines) + "\n"))
            os.replace(temp, index)
        finally:
            for leftover in (temp, lock):
                if os.path.exists(leftover):
                    os.unlink(leftover)


