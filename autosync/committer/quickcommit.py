"""A commit built from the changed paths alone (issue 21: a change costs what changed).

`git add` and `git commit` each read, refresh and write the whole index: 88 MB
at 1,000,000 files, seconds per change. Here the commit is made without it:

  * the changed files are hashed by `git update-index --add` into a temporary index
    that holds only them (git's own rules: clean filters and attributes, the
    executable bit, symlinks, a repository inside refused), ignored ones refused
    as git add refuses them (`git check-ignore`);
  * the trees of only the folders that hold them are read (`cat-file --batch`),
    changed and written (`mktree`), up to the root;
  * `commit-tree -p HEAD`, then `update-ref HEAD NEW OLD` (compare-and-swap:
    a HEAD moved meanwhile is never overwritten).

The real index then lags HEAD for those paths. It is brought up to date (settle(),
`update-index --index-info` of the committed entries, the changed paths only; for
thousands of them, if nobody wrote the index since, `read-tree -m` of the commit)
as the committer's next step after the push, and before any other command of
the daemon that reads the index (Repository calls settle() first). The paths owed
are kept in a file in the git dir until then, so that a daemon killed meanwhile
settles them at its next start.

Only for the shipped command strings and plain repositories: anything else
(see QuickCommit.why_not) takes the usual path (committer/staging.py, then commitcmd),
which keeps the user's commands and setup meaning what they say.
"""
import logging
import os
import subprocess

from autosync.vcs import commands, git
from autosync.vcs.git_environment import PLAIN
from autosync.core.config import GIT_COMMANDS

log = logging.getLogger("autosync.quickcommit")

# The command strings whose meaning the quick path reproduces (the shipped ones).
SHIPPED = ("addcmd", "rmcmd", "modifycmd", "movecmd", "startupcmd", "statuscmd", "commitcmd")
# What `git commit` runs that `commit-tree` does not: any of them present, the usual path.
HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit")
# A commit or merge in progress of the user's (git commit would finish or record it).
IN_PROGRESS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply",
               "sequencer")
OWED = "autosync-index-owed"  # in the git dir: paths whose index entries lag HEAD
TEMP_INDEX = "autosync-quick-index"  # in the git dir: the temporary index of the changed files
TREE, GITLINK = "40000", "160000"
# The temporary index is git's own business only: no shared index, fsmonitor or cache
# files made in the git dir for it.
# From this many paths, a settle reads the commit's whole tree into the index when it may
# (settle()); fewer are updated one by one. (At 1,000,000 files: 2,000 paths one by one
# 1.5 s, the whole tree 1.5 s; at smaller sizes both are quick.)
WHOLE_TREE_FROM = 2000
TEMP_SETTINGS = ("-c", "core.splitIndex=false", "-c", "core.fsmonitor=false",
                 "-c", "core.untrackedCache=false")


class NotQuick(Exception):
    """The quick path cannot make this commit exactly as git add + git commit would."""


def cleanup(message):
    """git commit's default cleanup of a message given with -m/-F (`whitespace`):
    trailing blanks off each line, runs of blank lines made one, none at either end."""
    lines, blank = [], False
    for line in message.split("\n"):
        line = line.rstrip()
        if not line:
            blank = bool(lines)
            continue
        if blank:
            lines.append("")
        blank = False
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def truth(value):
    """A git boolean setting's value -> True, False, or None (not one)."""
    value = value.strip().lower()
    if value in ("", "false", "no", "off", "0"):
        return False
    if value in ("true", "yes", "on", "1"):
        return True
    try:
        return int(value) != 0
    except ValueError:
        return None


def run(folder, *args, data=None, env=None, check=True, gitenv=PLAIN):
    """git in `folder` with the daemon's settings -> stdout bytes; NotQuick on failure
    (check) or None."""
    proc = subprocess.run(("git",) + args, cwd=folder, env=commands.environment(env, gitenv),
                          input=data, stdin=subprocess.DEVNULL if data is None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        if check:
            raise NotQuick("git %s: %s" % (args[0], proc.stderr.decode(errors="replace").strip()))
        return None
    return proc.stdout


def ignored(folder, listed, env, gitenv=PLAIN):
    """Whether git ignores any of the NUL-ended paths `listed` (an index that holds none of
    them: as git add sees new files); NotQuick if git cannot say."""
    # (names, not pathspecs: it refuses the literal magic the daemon's git runs with)
    proc = subprocess.run(("git",) + TEMP_SETTINGS + ("check-ignore", "-z", "--stdin"),
                          cwd=folder, input=listed,
                          env=commands.environment(dict(env, GIT_LITERAL_PATHSPECS="0"), gitenv),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode not in (0, 1):
        raise NotQuick("git check-ignore: %s" % proc.stderr.decode(errors="replace").strip())
    return proc.returncode == 0


class Trees:
    """Tree objects read through one `git cat-file --batch` (object names on stdin), each
    parsed once: an id's content never changes, and settle() looks up thousands of paths
    through the same root (a 10,000-file batch under a 10,000-entry root was 127 s
    parsed again for each path, 2 s once)."""

    def __init__(self, folder, gitenv=PLAIN):
        self.parsed = {}  # tree id -> its entries
        self.proc = subprocess.Popen(("git", "cat-file", "--batch"), cwd=folder,
                                     env=commands.environment(gitenv=gitenv),
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def close(self):
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.proc.wait()

    def read(self, name):
        """-> (object id, type, content) of `name` (an id or HEAD); NotQuick if missing."""
        self.proc.stdin.write(name.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3:
            raise NotQuick("no object %s" % name)
        data = self.proc.stdout.read(int(header[2]) + 1)[:-1]
        return header[0].decode(), header[1].decode(), data

    def entries(self, oid):
        """A tree's entries: {name bytes: (mode, object id)}, a copy the caller may change."""
        return dict(self._known(oid))

    def _known(self, oid):
        if oid not in self.parsed:
            self.parsed[oid] = self._parse(oid)
        return self.parsed[oid]

    def _parse(self, oid):
        _, kind, data = self.read(oid)
        if kind != "tree":
            raise NotQuick("%s is no tree" % oid)
        width = len(oid) // 2  # the raw ids' length (SHA-1 or SHA-256)
        out, i = {}, 0
        while i < len(data):
            space, nul = data.index(b" ", i), data.index(b"\0", i)
            out[data[space + 1:nul]] = (data[i:space].decode(), data[nul + 1:nul + 1 + width].hex())
            i = nul + 1 + width
        return out

    def lookup(self, root, path):
        """(mode, id) of `path` (bytes) in the tree `root`, or None."""
        entry = (TREE, root)
        for name in path.split(b"/"):
            if entry[0] != TREE:
                return None
            entry = self._known(entry[1]).get(name)
            if entry is None:
                return None
        return entry


class QuickCommit:
    def __init__(self, folder, gitdir, cmd, at_top, gitenv=PLAIN):
        self.folder, self.gitdir, self.gitenv = folder, gitdir, gitenv
        # Exactly the shipped command strings, on a folder that is the whole working tree:
        # any other string is the user's and keeps its meaning (the usual path runs it).
        self.shipped = at_top and all(cmd[n].text == GIT_COMMANDS[n] for n in SHIPPED)
        self.clean = None  # (index file stat, HEAD) when the index was known to hold HEAD
        # (index file stat, commit) after a quick commit: that index holds its parent
        self.behind = None

    # --- when ---------------------------------------------------------------------------

    def why_not(self, changes):
        """Why this batch takes the usual path (a few words), or None: quick."""
        if not self.shipped:
            return "command strings not the shipped ones"
        if not changes:
            return "nothing in the batch"
        if any(os.path.lexists(os.path.join(self.gitdir, p)) for p in IN_PROGRESS):
            return "a merge, rebase or cherry-pick in progress"
        if git.index_locked(self.gitdir):
            # Another git is writing the index, maybe to commit: moving HEAD under it
            # would fail its commit. The usual path waits for the lock (or clears a
            # dead process's).
            return "another git holds the index lock"
        config = self.config()
        for key, unlike_git_add in (("commit.gpgsign", True), ("core.filemode", False),
                                    ("core.symlinks", False), ("core.sparsecheckout", True),
                                    ("core.ignorecase", True)):
            if key in config and truth(config[key]) == unlike_git_add:
                return "%s is %s" % (key, config[key])
        if config.get("commit.cleanup", "default") not in ("default", "whitespace"):
            return "commit.cleanup is set"
        # An annex of this repository (not an annex.* setting of ours for git-annex's
        # commands, vcs/git_environment.py, which every repository gets).
        if "annex.version" in config or "annex.uuid" in config or \
                any(k.startswith("filter.annex.") for k in config):
            return "git-annex (its filters look at the index)"
        if any(k.startswith("hook.") for k in config):
            return "hooks in git's config (a newer git runs them)"
        hooks = config.get("core.hookspath")
        hooks = os.path.join(self.folder, os.path.expanduser(hooks)) if hooks else \
            os.path.join(self.common_dir(), "hooks")
        for hook in HOOKS:
            path = os.path.join(hooks, hook)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return "a %s hook" % hook
        return None

    def common_dir(self):
        """The repository's shared git dir (a linked worktree's hooks are there)."""
        try:
            with open(os.path.join(self.gitdir, "commondir")) as f:
                return os.path.join(self.gitdir, f.read().strip())
        except OSError:
            return self.gitdir

    def config(self):
        """git's settings as this daemon's commands see them: {lower-case key: last value}."""
        out = run(self.folder, "config", "-z", "--list", check=False, gitenv=self.gitenv) or b""
        found = {}
        for entry in out.split(b"\0"):
            key, newline, value = os.fsdecode(entry).partition("\n")
            if key:
                found[key.lower()] = value if newline else "true"  # `[core] x`: x is true
        return found

    def index_holds_head(self, head):
        """Nothing staged but HEAD (git commit would record only our paths then): known
        from our own last write of the index, else asked (a whole-index read, no write)."""
        if self.clean == (git.index_stat(self.gitdir), head):
            return True
        return run(self.folder, "diff-index", "--cached", "--quiet", head, "--",
                   check=False, gitenv=self.gitenv) is not None

    # --- the commit ---------------------------------------------------------------------

    def commit(self, changes, message_of):
        """Commit the batch `changes` (prepared by committer/staging.py) without the index.

        message_of(listed) -> the commit message. -> (message, listed): committed;
        (None, []): nothing to commit; None: not made here (why logged), the usual
        path follows, which says any failure (a missing identity) as it always has."""
        why = self.why_not(changes)
        if why is None:
            try:
                return self.make(changes, message_of)
            except (NotQuick, OSError, ValueError) as e:
                why = str(e)
        log.debug("committed the usual way: %s", why)
        return None

    def make(self, changes, message_of):
        trees = Trees(self.folder, self.gitenv)
        try:
            head, kind, data = trees.read("HEAD")
            if kind != "commit":
                raise NotQuick("HEAD is no commit")
            base = git.index_stat(self.gitdir)  # before the look: a write after it shows
            if not self.index_holds_head(head):
                raise NotQuick("the index holds other staged changes")
            root = data.split(b"\n", 1)[0].split(b" ")[1].decode()
            # As committer/staging.py's commands stage them: a move's source and a removed path
            # leave the index (`git rm --cached`, even if a file is there again), then
            # what is added, modified or moved to is added.
            added = {c["path"] for c in changes if c["action"] != "removed"}
            paths = sorted(added | {c.get("src", c["path"]) for c in changes
                                    if c["action"] in ("removed", "moved")})
            entries = self.hash_files(sorted(added))
            new_root, owed = self.build(trees, root, paths, entries)
        finally:
            trees.close()
        if new_root == root:
            return None, []
        listed = git.raw_changes(run(self.folder, "diff-tree", "-r", "-z", "-M", "--raw",
                                     root, new_root, env=git.no_index(self.gitdir),
                                     gitenv=self.gitenv))
        message = message_of(listed)
        subject = message.split("\n", 1)[0]
        if not subject.startswith("autosync on "):
            # A description of the user's heads it: git commit's reflog line would show it
            # on update-ref's command line, which every local user can read.
            raise NotQuick("the subject is the user's text")
        new = run(self.folder, "commit-tree", "-p", head, "-F", "-", new_root,
                  data=cleanup(message).encode("utf-8", "surrogateescape"),
                  gitenv=self.gitenv).strip().decode()
        self.owe(owed)
        # git commit's reflog line (our subject: a host and counts, no paths)
        if run(self.folder, "update-ref", "-m", "commit: " + subject, "HEAD", new, head,
               check=False, gitenv=self.gitenv) is None:
            self.owe([])
            raise NotQuick("HEAD moved meanwhile")
        self.behind = (base, new)
        log.debug("committed %d paths from their folders' trees, the index untouched",
                  len(paths))
        return message, listed

    def hash_files(self, present):
        """{path: (mode, id)} of files to add, as `git add` stages them: written by git
        add into a temporary index that holds only them. NotQuick where it would not
        take one whole (a folder, a file gone, an ignored new file, a repository inside,
        a path beyond a symlink, an unreadable file): the usual path says so as always."""
        for path in present:
            parts = path.split("/")
            if path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts):
                raise NotQuick("an unusual path")
            full = os.path.join(self.folder, path)
            if not os.path.lexists(full) or (os.path.isdir(full) and not os.path.islink(full)):
                raise NotQuick("a folder in the batch, or a file gone since")
        if not present:
            return {}
        index = os.path.join(self.gitdir, TEMP_INDEX)
        env = {"GIT_INDEX_FILE": index}
        try:
            os.unlink(index)
        except FileNotFoundError:
            pass
        try:
            listed = b"".join(os.fsencode(p) + b"\0" for p in present)
            # git add refuses an ignored file; it also matches each file it finds with
            # every pathspec (10,000 paths: 3.3 s). update-index takes the paths as they
            # are (0.13 s) and hashes them as git add does: clean filters, attributes,
            # the executable bit, symlinks, no path beyond a symlink.
            if ignored(self.folder, listed, env, gitenv=self.gitenv):
                raise NotQuick("an ignored file in the batch")
            run(self.folder, *TEMP_SETTINGS, "update-index", "--add", "-z", "--stdin",
                data=listed, env=env, gitenv=self.gitenv)
            out = run(self.folder, "ls-files", "-s", "-z", env=env, gitenv=self.gitenv)
        finally:
            try:
                os.unlink(index)
            except FileNotFoundError:
                pass
        entries = {}
        for line in out.split(b"\0"):
            if line:
                info, path = line.split(b"\t", 1)
                mode, oid, stage = info.decode().split(" ")
                if mode == GITLINK or stage != "0":
                    raise NotQuick("a repository inside the folder")
                entries[os.fsdecode(path)] = (mode, oid)
        if set(entries) != set(present):
            raise NotQuick("git add staged other paths than the batch's")
        return entries

    def build(self, trees, root, paths, entries):
        """The new root tree: `root` with each path set to entries[path] or removed.
        -> (its id, the paths whose index entries now lag)."""
        folders = {}  # folder (bytes, "" the root) -> its entries, read when first needed
        owed = set(paths)

        def folder(rel):
            if rel not in folders:
                if rel == b"":
                    folders[rel] = trees.entries(root)
                else:
                    parent, _, name = rel.rpartition(b"/")
                    entry = folder(parent).get(name)
                    if entry is not None and entry[0] != TREE:
                        raise NotQuick("a file where a folder is now")
                    folders[rel] = trees.entries(entry[1]) if entry else {}
            return folders[rel]

        for path in paths:
            raw = os.fsencode(path)
            parent, _, name = raw.rpartition(b"/")
            old = folder(parent).get(name)
            if old is not None and old[0] == GITLINK:
                raise NotQuick("a submodule in the batch")
            if path in entries:
                if old is not None and old[0] == TREE:
                    raise NotQuick("a file where a folder was")
                folder(parent)[name] = entries[path]
            elif old is not None:
                del folder(parent)[name]
                if old[0] == TREE:  # a folder removed whole: each of its files lags
                    listing = run(self.folder, "ls-tree", "-r", "-z", "--name-only", old[1],
                                  gitenv=self.gitenv)
                    owed.update(path + "/" + os.fsdecode(n) for n in listing.split(b"\0") if n)
        writer = subprocess.Popen(("git", "mktree", "-z", "--batch"), cwd=self.folder,
                                  env=commands.environment(gitenv=self.gitenv),
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # Deepest first: a folder's new id goes into its parent; an empty one goes.
            for rel in sorted(folders, key=lambda r: r.count(b"/") + bool(r), reverse=True):
                listed = folders[rel]
                if rel and not listed:
                    parent, _, name = rel.rpartition(b"/")
                    folders[parent].pop(name, None)
                    continue
                kinds = {TREE: b"tree", GITLINK: b"commit"}
                writer.stdin.write(b"".join(
                    b"%s %s %s\t%s\0" % (mode.encode(), kinds.get(mode, b"blob"), oid.encode(), name)
                    for name, (mode, oid) in listed.items()) + b"\0")
                writer.stdin.flush()
                oid = writer.stdout.readline().strip().decode()
                if not oid:
                    raise NotQuick("git mktree: %s" % writer.stderr.read().decode(errors="replace"))
                if not rel:
                    return oid, sorted(owed)
                parent, _, name = rel.rpartition(b"/")
                folders[parent][name] = (TREE, oid)
        finally:
            writer.stdin.close()
            writer.wait()
            writer.stdout.close()
            writer.stderr.close()
        raise NotQuick("no root tree written")

    # --- the index, brought up to date lazily ---------------------------------------------

    def owe(self, paths):
        """Note (in the git dir) the paths whose index entries lag HEAD; [] clears."""
        where = os.path.join(self.gitdir, OWED)
        if not paths:
            try:
                os.unlink(where)
            except FileNotFoundError:
                pass
            return
        with open(where + ".new", "wb") as f:
            f.write(b"".join(os.fsencode(p) + b"\0" for p in paths))
        os.replace(where + ".new", where)

    def owed(self):
        try:
            with open(os.path.join(self.gitdir, OWED), "rb") as f:
                return [os.fsdecode(p) for p in f.read().split(b"\0") if p]
        except FileNotFoundError:
            return []

    def settle(self, settings=dict):
        """Bring the index up to date with HEAD for the paths owed, if any (the changed
        paths only: their entries set to HEAD's, those gone removed). -> True if the
        index was written. git refreshes their file times at its next `git status`.
        settings() -> more environment for update-index (git's fsmonitor: the index
        keeps its token), asked only when there is something to write."""
        paths = self.owed()
        if not paths:
            return False
        behind, self.behind = self.behind, None
        trees = Trees(self.folder, self.gitenv)
        try:
            head, kind, data = trees.read("HEAD")
            whole = (len(paths) >= WHOLE_TREE_FROM and behind is not None
                     and behind == (git.index_stat(self.gitdir), head))
            if not whole:
                root = data.split(b"\n", 1)[0].split(b" ")[1].decode()
                zero = "0" * len(root)
                removed, updated = [], []
                for path in paths:
                    raw = os.fsencode(path)
                    entry = trees.lookup(root, raw)
                    if entry is None or entry[0] == TREE:
                        removed.append(b"0 %s\t%s\0" % (zero.encode(), raw))
                    else:
                        updated.append(b"%s %s\t%s\0" % (entry[0].encode(), entry[1].encode(),
                                                          raw))
        finally:
            trees.close()
        if whole:
            # Nobody wrote the index since our commit: it holds the commit's parent.
            # Reading the commit's whole tree into it (keeping the file times of what did
            # not change) is what the update of each path does, and costs the same for
            # any number of them (at 1,000,000 files: 1.5 s; 10,000 paths one by one: 4.4 s).
            run(self.folder, "read-tree", "-m", head, env=settings(), gitenv=self.gitenv)
        else:
            run(self.folder, "update-index", "-z", "--index-info",
                data=b"".join(removed + updated), env=settings(),
                gitenv=self.gitenv)  # removals first
        self.owe([])
        self.clean = (git.index_stat(self.gitdir), head)
        return True

    def committed_usual_way(self, head):
        """A commit by `git commit` (of the whole index) left the index holding HEAD."""
        self.clean = (git.index_stat(self.gitdir), head)
