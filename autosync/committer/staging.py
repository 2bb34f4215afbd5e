"""What goes into the next commit: a batch's changes staged, or the folder rescanned.

Also what must stay out of it, said once each: a path that cannot be staged
(an unreadable file; in a Mercurial folder, a name hg refuses) is held back
while the rest goes in, and a folder that holds a git repository of its own
is left out of every scan (git would record an empty link to it, or fail the
whole scan). Reports through the committer's reporter (see
committer/repository/).
"""
import logging
import os
import subprocess

from autosync.vcs import git
from autosync.vcs.commands import CommandFailed, environment
from autosync.vcs.git_environment import PLAIN
from autosync.core.messages import ACTIONS, printable
from autosync.core.paths import find_marker

log = logging.getLogger("autosync.staging")

LISTED = 100  # paths kept in a status list
# From this many paths in a batch on, a folder whose every file is among them is staged
# as one path: git matches each file against every pathspec, so `git add -A -- 10,000
# paths` costs it ten times what the 100 folders holding them cost.
COLLAPSE_FROM = 100


def arg(path):
    """A relative path as a command argument that no program takes for an option."""
    return "./" + path if path.startswith("-") else path


class Unrecordable(Exception):
    """A name Mercurial refuses to record: one such name aborts a whole `hg add` or
    `hg addremove` ("'\\n' and '\\r' disallowed in filenames"), so it never reaches hg."""
    output = ""

    def __init__(self):
        super().__init__("Mercurial cannot record a name with a newline or a carriage "
                         "return: rename the file to have it synced")


def hg_refuses(path):
    return "\n" in path or "\r" in path


def hg_status(folder, *which):
    """[(letter, name)] of `hg status` for `which` (-u: unknown, -d: missing) in the
    folder (names relative to it), NUL-ended (a name with a newline is one name); None
    when hg fails."""
    proc = subprocess.run(["hg", "status", "-0", *which, "--", "."], cwd=folder,
                          env=environment({"HGPLAIN": "1"}), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        return None
    return [(entry[:1], entry[2:]) for entry in
            proc.stdout.decode("utf-8", "surrogateescape").split("\0") if entry]


def why_not_staged(folder, path, error):
    """One line: the path and git's reason (a file we may not read, said plainly)."""
    full = os.path.join(folder, path)
    if os.path.lexists(full) and not os.path.islink(full) and not os.access(full, os.R_OK):
        return "%s (cannot be read: permission denied; give yourself read access)" % printable(path)
    lines = [l.strip() for l in (error.output or "").splitlines()
             if l.startswith(("error:", "fatal:"))]
    return "%s (%s)" % (printable(path), lines[0] if lines else error)


def expand_moves(folder, changes):
    """A moved directory stands for every file in it: list them, for the message."""
    out = []
    for change in changes:
        dst = os.path.join(folder, change["path"])
        if change["action"] == "moved" and os.path.isdir(dst) and not os.path.islink(dst):
            for root, dirs, files in os.walk(dst):
                dirs.sort()
                for name in sorted(files):
                    rel = os.path.relpath(os.path.join(root, name), dst)
                    out.append({"action": "moved",
                                "path": os.path.join(change["path"], rel),
                                "src": os.path.join(change["src"], rel)})
        else:
            out.append(change)
    return out


class Staging:
    def __init__(self, folder, cmd, gitdir, excludes, report, gitenv=PLAIN):
        self.folder, self.cmd, self.gitdir, self.gitenv = folder, cmd, gitdir, gitenv
        self.excludes = excludes  # excludes.Excludes for git, else None
        self.report = report
        self.held = []  # paths held back by the last commit
        self.error = None  # why the last commit left something out, or None
        # Mercurial: names it refuses (hg_refuses) seen in the folder, held back while
        # they are there, whatever a batch names.
        marker = find_marker(folder) if gitdir is None else None
        self.hg = bool(marker) and os.path.basename(marker) == ".hg"
        self.refused = set()

    def as_on_disk(self, changes):
        """What the batch means now: a path that is gone was removed, or never was."""
        out = []
        for change in changes:
            gone = not os.path.lexists(os.path.join(self.folder, change["path"]))
            if gone and change["action"] == "added":
                continue  # created and removed within the batch
            if gone and change["action"] == "modified":
                change = {"action": "removed", "path": change["path"]}
            if gone and change["action"] == "moved":
                change = {"action": "removed", "path": change["src"]}  # moved, then deleted
            out.append(change)
        return out

    def prepare(self, changes):
        """The batch as it can be staged: settled, nested repositories split off."""
        if self.excludes:
            self.excludes.ensure()
            self.drop_stale_nested()
        changes, nested = self.in_nested_repository(self.as_on_disk(changes))
        if nested:
            self.note_nested(nested)
        return changes

    def excludes_lost(self):
        """Was the excludes file gone after the staging commands ran (written again now)?
        Then git may have staged what it ignores: removed between prepare()'s check and
        a command, it left git without it (seen: a key under ignorepath committed)."""
        return bool(self.excludes) and self.excludes.ensure()

    def rescan_finds_all(self):
        """Does rescan() stage every change by itself (git's startupcmd), so that staging
        the batch's paths first is work done twice?"""
        return bool(self.gitdir) and not self.cmd["startupcmd"].empty

    def stage(self, changes, moves_only=False):
        """Run the add, remove and move commands for a batch; -> [(path, CommandFailed)].

        moves_only: a rescan follows and stages the rest (see rescan_finds_all)."""
        failed, refused = [], []
        if self.hg:  # (said once, by hold_back)
            changes, refused = self.without_refused(changes)
        by_action = {a: [c["path"] for c in changes if c["action"] == a] for a in ACTIONS}
        for move in (c for c in changes if c["action"] == "moved"):
            failed += self.move(move)
        if moves_only:
            return failed + refused
        if self.cmd["addcmd"].text == self.cmd["modifycmd"].text:
            # One command for both (git's default): one run, and whole folders collapse.
            by_action["added"] += by_action.pop("modified")
            by_action["modified"] = []
        files, by_action["added"] = by_action["added"], self.collapse_folders(by_action["added"])
        by_action["removed"] = self.recorded(by_action["removed"])
        for name, action in (("rmcmd", "removed"), ("addcmd", "added"), ("modifycmd", "modified")):
            paths = by_action[action]
            if paths:
                failed += self.cmd[name].run_many([arg(p) for p in paths], cwd=self.folder)
        if len(files) != len(by_action["added"]):
            failed = self.unfold(failed, files)
        for path, error in failed:
            log.warning("%s", error)
        return failed + refused

    def without_refused(self, changes):
        """Mercurial: the changes hg can record, and [(path, Unrecordable)] for names it
        refuses (a removal of one has nothing to record: hg never had it)."""
        kept, refused = [], []
        for change in changes:
            path, src = change["path"], change.get("src")
            if src is not None and hg_refuses(src):
                change = {"action": "added", "path": path}  # hg never had the old name
            if not hg_refuses(path):
                kept.append(change)
                continue
            if change["action"] != "removed":
                refused.append((path, Unrecordable()))
            if src is not None and not hg_refuses(src):
                kept.append({"action": "removed", "path": src})
        self.refused.update(path for path, _ in refused)
        return kept, refused

    def recorded(self, removed):
        """The removed paths that git records (in the index or HEAD, as a file or a
        folder): a removal of any other has nothing to stage, and rmcmd is not run for it.
        Such are the paths a pull has just removed (the watcher names them after it), or
        a file made and removed between two commits: a `git rm %s` of the user's would
        fail on each ("did not match any files"). Asked of git on stdin, no lock taken."""
        if not self.gitdir or not removed:
            return removed
        asked = [p for p in removed if "\n" not in p]   # (a name with a newline: kept)
        data = b"".join(b":%s\nHEAD:%s\n" % (os.fsencode(p), os.fsencode(p)) for p in asked)
        out = git.git(self.folder, "cat-file", "--batch-check", data=data, check=False,
                      gitenv=self.gitenv)
        if out is None:
            return removed
        answers = out.split(b"\n")
        if len(answers) < 2 * len(asked):
            return removed
        gone = {p for i, p in enumerate(asked) if answers[2 * i].endswith(b" missing")
                and answers[2 * i + 1].endswith(b" missing")}
        if gone:
            log.debug("rmcmd not run for %d path(s) git does not record (removed by a pull, "
                      "or never committed)", len(gone))
        return [p for p in removed if p not in gone]

    def move(self, move):
        """movecmd for one move; a folder that movecmd cannot take whole (a `git rm %s` /
        `git add %s` of the user's refuses one without -r; the original's own runs as the
        shipped one, config.ORIGINAL_GIT_COMMANDS) is moved file by file."""
        try:
            self.cmd["movecmd"].run(arg(move["src"]), arg(move["path"]), cwd=self.folder)
            return []
        except CommandFailed as e:
            files = expand_moves(self.folder, [move])
            if files == [move]:
                return [(move["path"], e)]
            log.debug("movecmd did not take the folder %s whole; moving its %d files one by "
                      "one", printable(move["path"]), len(files))
        failed = []
        for one in files:
            try:
                self.cmd["movecmd"].run(arg(one["src"]), arg(one["path"]), cwd=self.folder)
            except CommandFailed as e:
                failed.append((one["path"], e))
        return failed

    def collapse_folders(self, paths):
        """Many paths, git, addcmd a plain `git add ... %s`: a folder all of whose files
        are among them is staged as one
        path instead (adding it adds exactly them; what the excludes file leaves out
        stays out). A folder holding anything else (a file not listed, an ignored or
        empty folder, a repository) is never collapsed: it would stage that too."""
        if not (self.gitdir and self.cmd["addcmd"].git_add) or len(paths) < COLLAPSE_FROM:
            return paths
        listed = set(paths)
        folders = {os.path.dirname(p) for p in paths} - {""}
        for folder in list(folders):
            while os.path.dirname(folder) and os.path.dirname(folder) not in folders:
                folder = os.path.dirname(folder)
                folders.add(folder)
        whole = set()

        def all_listed(folder):
            with os.scandir(os.path.join(self.folder, folder)) as entries:
                for entry in entries:
                    rel = folder + "/" + entry.name
                    if rel not in (whole if entry.is_dir(follow_symlinks=False) else listed):
                        return False
            return True

        for folder in sorted(folders, key=lambda f: f.count("/"), reverse=True):  # deepest first
            try:
                if all_listed(folder):
                    whole.add(folder)
            except OSError:
                pass  # gone or unreadable: its paths go as they are
        out = set()
        for path in paths:
            top = path
            parent = os.path.dirname(path)
            while parent:
                if parent in whole:
                    top = parent
                parent = os.path.dirname(parent)
            out.add(top)
        return sorted(out)

    def unfold(self, failed, files):
        """A collapsed folder that failed is staged again file by file (in halves), so
        that the rest goes in and the file that cannot be staged is the one named."""
        out = []
        for path, error in failed:
            rel = path[2:] if path.startswith("./-") else path  # as arg() gave it
            inside = [f for f in files if f.startswith(rel + "/")] if rel not in files else []
            out += self.cmd["addcmd"].run_many([arg(f) for f in inside], cwd=self.folder) \
                if inside else [(path, error)]
        return out

    def rescan(self):
        """Let the DVCS find every change itself; -> [(path, CommandFailed)] left out.

        git: folders holding their own repository are left out first; and when
        startupcmd fails over one bad path (git add -A stages nothing then), the
        changes git lists are staged path by path, so the rest still goes in."""
        if self.gitdir:  # the excludes file is in place: prepare() saw to it
            self.note_nested(git.untracked_repositories(self.folder, gitenv=self.gitenv))
        try:
            self.cmd["startupcmd"].run(cwd=self.folder)
            return []
        except CommandFailed as e:
            if self.hg:
                return self.rescan_hg(e)
            if not self.gitdir:
                raise
            log.info("%s; staging path by path instead", e)
        removed, other = git.changed_paths(self.folder, gitenv=self.gitenv)
        return self.stage([{"action": "removed", "path": p} for p in removed]
                          + [{"action": "added", "path": p} for p in other])

    def rescan_hg(self, error):
        """startupcmd failed in a Mercurial folder: if a name hg refuses is what stopped
        it (`hg addremove` aborts on one), every other change hg lists is staged by
        addcmd and rmcmd, and that name is held back; else the failure stands."""
        listed = hg_status(self.folder, "-u", "-d")
        if listed is None or not any(hg_refuses(name) for _, name in listed):
            raise error
        log.info("%s; staging path by path instead", error)
        return self.stage([{"action": "removed" if letter == "!" else "added", "path": name}
                           for letter, name in listed])

    def in_nested_repository(self, changes):
        """Split off changes inside a folder that holds its own repository (git only):
        git would drop them silently, or fail the whole scan. -> (kept, those folders)."""
        if not self.gitdir:
            return changes, []
        known = {}  # folder -> holds a repository

        def repository_at(rel):
            parts = rel.split("/")
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder not in known:
                    # A symlink is an entry (git records the link), never a repository
                    # to look into: a link to ".." would look like one.
                    path = os.path.join(self.folder, folder)
                    known[folder] = (not os.path.islink(path)
                                     and os.path.lexists(os.path.join(path, ".git")))
                if known[folder]:
                    return folder
            return None

        kept, found = [], set()
        for change in changes:
            repos = {repository_at(change[k]) for k in ("path", "src") if k in change} - {None}
            if repos:
                found |= repos
            else:
                kept.append(change)
        return kept, sorted(found)

    def note_nested(self, folders):
        """Keep these repositories inside the folder out of every commit; say so once each."""
        wanted = git.submodules(self.folder, gitenv=self.gitenv) if folders else set()
        new = self.excludes.leave_out([f for f in folders if f not in wanted])
        self.report.status(nested_repositories=sorted(self.excludes.nested))
        for folder in new:
            self.report.failed(
                "nested-repository",
                "%s holds a git repository of its own, so its files are not synced (git "
                "cannot commit files inside another repository). To sync them: make it a "
                "submodule (git submodule add URL %s), or remove %s/.git to sync them as plain "
                "files, or sync it with a dvcs-autosync of its own"
                % (printable(folder), printable(folder), printable(folder)))

    def drop_stale_nested(self):
        """Folders whose own .git went away are ordinary folders again."""
        gone = [f for f in self.excludes.nested
                if not os.path.lexists(os.path.join(self.folder, f, ".git"))]
        if gone:
            self.excludes.take_back(gone)
            log.info("now synced as plain folders: %s", ", ".join(map(printable, gone)))
            self.report.status(nested_repositories=sorted(self.excludes.nested))

    def unstage_gitlinks(self, staged):
        """The last line of defence: a repository staged as a gitlink that .gitmodules does
        not declare (it appeared between our scan and git's) is taken out again.
        `staged`: git.staged_changes, read by the caller. -> True if any was."""
        links = [c["path"] for c in staged or () if c.get("gitlink") and c["action"] != "removed"]
        unwanted = sorted(set(links) - git.submodules(self.folder,
                                                      gitenv=self.gitenv)) if links else []
        if unwanted:
            git.git(self.folder, "reset", "-q", "--", paths=unwanted, gitenv=self.gitenv)
            self.note_nested(unwanted)
        return bool(unwanted)

    def hold_back(self, held):
        """Paths that could not be staged stay out of the commit; the rest goes on.

        Said once per set of paths (status, log, a notification), then looked at
        again after a backoff: a file that becomes readable is committed then
        (sooner, when the watcher sees its mode change). A name Mercurial refuses stays
        held while it is in the folder, with no retry (renamed, it is a batch). -> True
        if any."""
        self.refused = {p for p in self.refused
                        if os.path.lexists(os.path.join(self.folder, p))}
        named = {path for path, _ in held}
        held = list(held) + [(p, Unrecordable()) for p in sorted(self.refused - named)]
        paths = sorted({path for path, _ in held})[:LISTED]
        told, self.held = self.held, paths
        self.report.status(held_back=paths)
        if not paths:
            self.error = None
            if told:
                log.warning("committed what was left out before: %s",
                            ", ".join(map(printable, told)))
            return False
        self.error = "commit: left out of the commit, the rest is committed: %s" % "; ".join(
            why_not_staged(self.folder, path, e) for path, e in held[:10])
        # Said once; after that only looked at again later.
        retry = None if all(isinstance(e, Unrecordable) for _, e in held) else "commit"
        self.report.failed("commit", self.error.partition(": ")[2], retry=retry,
                           quiet=paths == told)
        return True
