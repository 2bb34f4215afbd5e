"""autosync-committer: batches -> commits, pushes and pulls.

The only program of the suite that runs DVCS commands. It owns the control
socket (docs/protocol.md): the watcher sends it batches, the XMPP listener
asks it to pull, and everyone may subscribe to what it does.

One worker thread does all repository work, one thing at a time; socket
threads only queue work and wait for it.
"""
import logging
import os
import sys
import threading
import time

from autosync import cli, conflicts, excludes, git_environment, gitrepo, recovery
from autosync.commands import CommandFailed, Template
from autosync.protocol import Server

log = logging.getLogger("autosync.committer")

ACTIONS = ("added", "modified", "removed", "moved")
MESSAGE_LINES = 200  # files named in one commit message; the rest are counted
BACKOFF_MAX = 60.0  # the longest wait between retries of a failed push, pull or commit
PUSH_TRIES = 3  # pushes per round; between them a pull merges what the remote has
LEFTOVER_WAIT = 120.0  # seconds a killed committer's last command may take to finish
CONFLICTS_KEPT = 100  # conflict copies listed in the status


def backoff(failures, base=0.0):
    """Seconds to wait after the n-th failure in a row: doubling, capped."""
    return min(BACKOFF_MAX, base + 2 ** min(failures, 10))


def shown(path):
    """A path as one printable line (a newline in a name must not split a message)."""
    if path.isprintable():
        return path
    return ascii(path)


def why_not_staged(folder, path, error):
    """One line: the path and git's reason (a file we may not read, said plainly)."""
    full = os.path.join(folder, path)
    if os.path.lexists(full) and not os.path.islink(full) and not os.access(full, os.R_OK):
        return "%s (cannot be read: permission denied; give yourself read access)" % shown(path)
    lines = [l.strip() for l in (error.output or "").splitlines()
             if l.startswith(("error:", "fatal:"))]
    return "%s (%s)" % (shown(path), lines[0] if lines else error)


def arg(path):
    """A relative path as a command argument that no program takes for an option."""
    return "./" + path if path.startswith("-") else path


def commit_message(host, changes, note=None, context=None):
    counts = {a: 0 for a in ACTIONS}
    lines = []
    for change in changes:
        counts[change["action"]] += 1
        if change["action"] == "moved":
            lines.append("moved: %s (from %s)" % (shown(change["path"]), shown(change["src"])))
        else:
            lines.append("%s: %s" % (change["action"], shown(change["path"])))
    summary = ", ".join("%d %s" % (n, a) for a, n in counts.items() if n)
    head = "autosync on %s: %s" % (host, summary or note or "changes")
    if len(lines) > MESSAGE_LINES:
        lines[MESSAGE_LINES:] = ["... and %d more" % (len(lines) - MESSAGE_LINES)]
    body = ([note] if note and summary else []) + lines + ([context] if context else [])
    return head + ("\n\n" + "\n".join(body) if body else "")


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


class Pending:
    """Changes received from the watcher and not committed yet, one entry per path."""

    def __init__(self):
        self.changes = {}
        self.rescan = False

    def add(self, changes, rescan=False):
        for change in changes:
            old = self.changes.pop(change["path"], None)
            if old and old["action"] == "added" and change["action"] == "modified":
                change = old  # still new to the repository
            self.changes[change["path"]] = change
        self.rescan = self.rescan or rescan

    def take(self):
        changes, rescan = list(self.changes.values()), self.rescan
        self.changes, self.rescan = {}, False
        return changes, rescan

    def __bool__(self):
        return bool(self.changes) or self.rescan


def check_change(change):
    """Refuse a batch entry that is not what the protocol allows."""
    if not isinstance(change, dict) or change.get("action") not in ACTIONS:
        raise ValueError("each change needs an action among %s" % ", ".join(ACTIONS))
    for key in ("path", "src") if change["action"] == "moved" else ("path",):
        path = change.get(key)
        if not isinstance(path, str) or not path or os.path.isabs(path) \
                or ".." in path.split("/") or "\0" in path:
            raise ValueError("bad %s in change: %.100r" % (key, path))
    return {k: change[k] for k in ("action", "path", "src") if k in change}


class Committer:
    def __init__(self, cfg):
        self.cfg = cfg
        self.folder = cfg.path
        self.host = cfg.hostname
        self.cmd = {name: Template(name, text) for name, text in cfg.commands.items()}
        # Re-entrant: the signal handler may call stop() while this thread holds it.
        self.cond = threading.Condition(threading.RLock())
        self.pending = Pending()
        self.stopping = False
        self.wanted = {"pull": 0, "sync": 0}  # requests made, by kind
        self.done = {"pull": 0, "sync": 0}  # requests served
        self.results = {}
        self.push_at = None  # when the next push is due
        self.retry_at = {"commit": None, "pull": None}  # when a failed one is tried again
        self.failures = {"commit": 0, "pull": 0, "push": 0}  # in a row, for the backoff
        # What the folder was at start: a vanished or replaced one is never committed.
        self.where = recovery.Folder(self.folder)
        self.gitdir = gitrepo.git_dir(self.folder)  # None: not git, no built-in resolution
        self.blocked = None  # why nothing may be committed now, or None
        self.link_up = False  # the XMPP listener tells us when it is up
        self.next_timer_pull = time.monotonic() + cfg.pullinterval if cfg.pullinterval else None
        self.status = {"state": "starting", "path": self.folder, "host": self.host,
                       "last_commit": None, "last_push": None, "last_pull": None,
                       "unpushed": 0, "last_error": None, "conflicts": [],
                       "held_back": [], "nested_repositories": [],
                       "watch": None}  # the watcher's report while folders have no watch
        self.commit_error = None  # why the last commit left something out, or None
        self.server = Server(cfg.socket, self.handle)
        # Every git command we run (startupcmd above all) leaves out what the watcher does.
        self.excludes = None
        if self.gitdir:
            self.excludes = excludes.Excludes(cfg, self.gitdir, cfg.socket + ".exclude")
            git_environment.use_excludes(self.excludes.where)

    # --- requests, on socket threads -------------------------------------------------

    def handle(self, message, client):
        cmd = message.get("cmd")
        if cmd == "status":
            with self.cond:
                status = dict(self.status, pending=sorted(self.pending.changes))
            return {"ok": True, "status": status}
        if cmd == "batch":
            changes = message.get("changes", [])
            if not isinstance(changes, list):
                return {"ok": False, "error": "changes must be a list"}
            try:
                changes = [check_change(c) for c in changes]
            except ValueError as e:
                return {"ok": False, "error": str(e)}
            with self.cond:
                self.pending.add(changes, bool(message.get("rescan")))
                self.cond.notify_all()
            return {"ok": True, "queued": len(changes)}
        if cmd in ("sync", "pull"):
            return self.wait_for(cmd, message.get("timeout", 600))
        if cmd == "pushed":
            # Someone pushed: pass the word on (XMPP), and fetch it ourselves.
            self.publish("pushed", url=str(message.get("url") or ""), source="notify")
            with self.cond:
                self.wanted["pull"] += 1
                self.cond.notify_all()
            return {"ok": True}
        if cmd == "watch":
            return self.watch_reported(message)
        if cmd == "link":
            with self.cond:
                self.link_up = bool(message.get("up"))
                self.cond.notify_all()
            return {"ok": True}
        return {"ok": False, "error": "unknown cmd %.50r" % (cmd,)}

    def watch_reported(self, message):
        """The watcher says how many folders have no inotify watch, and what to do about it."""
        unwatched, problem = message.get("unwatched"), message.get("problem")
        if not isinstance(unwatched, int) or isinstance(unwatched, bool) or unwatched < 0 \
                or (unwatched and not isinstance(problem, str)):
            return {"ok": False, "error": "watch needs unwatched (a count) and, unless it is 0, "
                                          "problem (text)"}
        with self.cond:
            told = self.status["watch"]
            self.status["watch"] = {"unwatched": unwatched, "problem": problem} \
                if unwatched else None
        if unwatched and not told:  # a notification, once (the watcher has logged it)
            self.publish("failed", op="watch", error=problem)
        return {"ok": True}

    def wait_for(self, kind, timeout):
        """Ask the worker for a pull or a sync and wait until one that began after now ends."""
        with self.cond:
            self.wanted[kind] += 1
            ticket = self.wanted[kind]
            self.cond.notify_all()
            ok = self.cond.wait_for(lambda: self.done[kind] >= ticket or self.stopping,
                                    timeout=float(timeout))
            if not ok or self.done[kind] < ticket:
                return {"ok": False, "error": "%s did not finish in time" % kind}
            return dict(self.results[kind])

    def publish(self, name, **fields):
        fields.update(event=name, time=time.time())
        self.server.publish(fields)

    # --- the worker: all repository work happens here --------------------------------

    def run(self):
        self.server.start()
        self.startup()
        while True:
            with self.cond:
                self.cond.wait_for(self._has_work, timeout=self._sleep_time())
                if self.stopping and not self.pending:
                    break
            self.step()
        self.set_state("stopped")

    def _has_work(self):
        now = time.monotonic()
        return (bool(self.pending) or self.stopping
                or self.wanted["pull"] > self.done["pull"]
                or self.wanted["sync"] > self.done["sync"]
                or (self.push_at is not None and now >= self.push_at)
                or any(t is not None and now >= t for t in self.retry_at.values())
                or self._timer_pull_due(now))

    def _sleep_time(self):
        deadlines = [t for t in (self.push_at, self.next_timer_pull, *self.retry_at.values())
                     if t is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _timer_pull_due(self, now):
        # With XMPP up, announcements tell us when to pull; otherwise pull on a timer.
        return (self.next_timer_pull is not None and now >= self.next_timer_pull
                and (self.cfg.syncmethod != "xmpp" or not self.link_up))

    def step(self):
        with self.cond:
            changes, rescan = self.pending.take()
            pulls, syncs = self.wanted["pull"], self.wanted["sync"]
            now = time.monotonic()
            push_due = self.push_at is not None and now >= self.push_at
            timer_pull = self._timer_pull_due(now)
            retry = {op for op, t in self.retry_at.items() if t is not None and now >= t}
            for op in retry:
                self.retry_at[op] = None
        if changes or rescan or "commit" in retry:
            # A retry rescans: the changes of the failed attempt are still in the folder.
            self.commit(changes, rescan or "commit" in retry)
        if pulls > self.done["pull"] or timer_pull or "pull" in retry:
            result = self.pull()
            self.finish("pull", pulls, result)
        if syncs > self.done["sync"]:
            committed = self.commit([], rescan=True)
            error = self.commit_error
            pushed = self.push(force=True)
            if pushed is False:
                error = self.status["last_error"]
            self.finish("sync", syncs, {"ok": error is None, "committed": committed,
                                        "pushed": bool(pushed),
                                        **({"error": error} if error else {})})
        elif push_due:
            self.push()
        self.set_state("idle")

    def finish(self, kind, ticket, result):
        with self.cond:
            self.done[kind] = max(self.done[kind], ticket)
            self.results[kind] = result
            self.cond.notify_all()

    def set_state(self, state):
        with self.cond:
            self.status["state"] = state

    def fail(self, op, error, retry=None):
        """Report a failure; retry: "commit" or "pull", tried again after a backoff."""
        log.error("%s failed: %s", op, error)
        with self.cond:
            self.status["last_error"] = "%s: %s" % (op, error)
            if retry:
                self.failures[retry] += 1
                self.retry_at[retry] = time.monotonic() + backoff(self.failures[retry])
        self.publish("failed", op=op, error=str(error))

    def succeeded(self, op):
        with self.cond:
            self.failures[op] = 0

    def safe(self, op):
        """May the repository be touched? Says why not once, and checks again later."""
        problem = self.where.problem()
        if problem is None and self.gitdir and conflicts.rebasing(self.gitdir):
            problem = ("the repository is in the middle of a rebase: finish it (git rebase "
                       "--continue) or abort it (git rebase --abort); nothing is committed "
                       "until then")
        told, self.blocked = self.blocked, problem
        if problem is None:
            if told:
                log.warning("the repository is usable again: syncing resumes")
            return True
        if problem != told:
            self.fail(op, problem + "; not committing")
        with self.cond:
            self.retry_at["commit"] = time.monotonic() + 5.0  # look again
        return False

    def locked(self):
        return bool(self.gitdir) and os.path.lexists(os.path.join(self.gitdir, "index.lock"))

    def clear_lock(self):
        """Remove an index.lock that a killed git left behind (never a live one)."""
        if self.gitdir and self.where.marker:
            recovery.clear_stale_lock(os.path.join(self.gitdir, "index.lock"),
                                      os.path.dirname(self.where.marker))

    def startup(self):
        # A killed committer's last command may still run: let it finish first.
        leftovers = recovery.wait_for_leftovers(self.folder, LEFTOVER_WAIT)
        self.clear_lock()
        if leftovers is not None and self.gitdir:
            try:
                conflicts.undo_killed_pull(self.folder)
            except RuntimeError as e:
                log.error("%s", e)
        if self.cfg.syncmethod != "none":
            self.pull()
        self.commit([], rescan=True, note="changes found at start-up")
        self.push(force=True)
        self.set_state("idle")

    # --- the DVCS operations -----------------------------------------------------------

    def settle(self, changes):
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

    def stage(self, changes):
        """Run the add, remove and move commands for a batch; -> [(path, CommandFailed)]."""
        failed = []
        moves = [c for c in changes if c["action"] == "moved"]
        by_action = {a: [c["path"] for c in changes if c["action"] == a] for a in ACTIONS}
        for move in moves:
            try:
                self.cmd["movecmd"].run(arg(move["src"]), arg(move["path"]), cwd=self.folder)
            except CommandFailed as e:
                failed.append((move["path"], e))
        for name, action in (("rmcmd", "removed"), ("addcmd", "added"), ("modifycmd", "modified")):
            paths = by_action[action]
            if paths:
                failed += self.cmd[name].run_many([arg(p) for p in paths], cwd=self.folder)
        for path, error in failed:
            log.warning("%s", error)
        return failed

    def rescan(self):
        """Let the DVCS find every change itself; -> [(path, CommandFailed)] left out.

        git: folders holding their own repository are left out first; and when
        startupcmd fails over one bad path (git add -A stages nothing then), the
        changes git lists are staged path by path, so the rest still goes in."""
        if self.gitdir:
            self.note_nested(gitrepo.untracked_repositories(self.folder))
        try:
            self.cmd["startupcmd"].run(cwd=self.folder)
            return []
        except CommandFailed as e:
            if not self.gitdir:
                raise
            log.info("%s; staging path by path instead", e)
        removed, other = gitrepo.changed_paths(self.folder)
        return self.stage([{"action": "removed", "path": p} for p in removed]
                          + [{"action": "added", "path": p} for p in other])

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
        wanted = gitrepo.submodules(self.folder) if folders else set()
        new = self.excludes.leave_out([f for f in folders if f not in wanted])
        with self.cond:
            self.status["nested_repositories"] = sorted(self.excludes.nested)
        for folder in new:
            self.fail("nested-repository",
                      "%s holds a git repository of its own, so its files are not synced "
                      "(git cannot commit files inside another repository). To sync them: "
                      "make it a submodule (git submodule add URL %s), or remove %s/.git to "
                      "sync them as plain files, or sync it with a dvcs-autosync of its own"
                      % (shown(folder), shown(folder), shown(folder)))

    def drop_stale_nested(self):
        """Folders whose own .git went away are ordinary folders again."""
        gone = [f for f in self.excludes.nested
                if not os.path.lexists(os.path.join(self.folder, f, ".git"))]
        if gone:
            self.excludes.take_back(gone)
            log.info("now synced as plain folders: %s", ", ".join(map(shown, gone)))
            with self.cond:
                self.status["nested_repositories"] = sorted(self.excludes.nested)

    def unstage_gitlinks(self):
        """The last line of defence: a repository staged as a gitlink that .gitmodules does
        not declare (it appeared between our scan and git's) is taken out again."""
        staged = gitrepo.staged_changes(self.folder) or []
        links = [c["path"] for c in staged if c.get("gitlink") and c["action"] != "removed"]
        unwanted = sorted(set(links) - gitrepo.submodules(self.folder)) if links else []
        if unwanted:
            gitrepo.git(self.folder, "reset", "-q", "--", *unwanted)
            self.note_nested(unwanted)

    def commit(self, changes, rescan=False, note=None):
        """Stage and commit one batch; True if a commit was made."""
        self.set_state("committing")
        if not self.safe("commit"):
            return False
        # Never stage over a merge that stopped (killed mid-pull): that would commit markers.
        if self.gitdir and not self.merge_cleared():
            return False
        self.clear_lock()
        self.commit_error = None
        if self.excludes:
            self.drop_stale_nested()
        changes, nested = self.in_nested_repository(self.settle(changes))
        if nested:
            self.note_nested(nested)
        try:
            held = self.stage(changes)
            if held or rescan:
                # Something went wrong path by path, or events were missed:
                # let the DVCS find every change itself.
                held = self.rescan()
            if self.gitdir:
                self.unstage_gitlinks()
            if self.cmd["statuscmd"].run(cwd=self.folder, check=False).returncode == 0:
                self.hold_back(held)
                return False  # nothing to commit
            listed = self.listed(changes)
            message = commit_message(self.host, listed, note or (rescan and "rescan"),
                                     self.context())
            self.cmd["commitcmd"].run(message, cwd=self.folder)
        except (CommandFailed, RuntimeError) as e:
            # A lock in the way passes; other failures are not retried blindly (the
            # original's statuscmd makes "nothing to commit" fail) but found by the next rescan.
            lock = self.locked() or "index.lock" in (getattr(e, "output", "") or "")
            self.fail("commit", e, retry="commit" if lock else None)
            self.commit_error = self.status["last_error"]
            return False
        if not self.hold_back(held):
            self.succeeded("commit")
        self.committed(message, listed)
        return True

    def hold_back(self, held):
        """Paths that could not be staged stay out of the commit; the rest goes on.

        Said once per set of paths (status, log, a notification), then looked at
        again after a backoff: a file that becomes readable is committed then
        (sooner, when the watcher sees its mode change). -> True if any."""
        paths = sorted({path for path, _ in held})
        with self.cond:
            told, self.status["held_back"] = self.status["held_back"], paths[:CONFLICTS_KEPT]
        if not paths:
            if told:
                log.warning("committed what was left out before: %s", ", ".join(map(shown, told)))
            return False
        error = "left out of the commit, the rest is committed: %s" % "; ".join(
            why_not_staged(self.folder, path, e) for path, e in held[:10])
        if paths[:CONFLICTS_KEPT] != told:
            self.fail("commit", error, retry="commit")
        else:
            with self.cond:  # already said: only look again later
                self.failures["commit"] += 1
                self.retry_at["commit"] = time.monotonic() + backoff(self.failures["commit"])
                self.status["last_error"] = "commit: " + error
        self.commit_error = "commit: " + error
        return True

    def listed(self, changes):
        """The files this commit records, for its message: git says exactly (a rescan
        included); otherwise the batch, a moved folder file by file."""
        staged = gitrepo.staged_changes(self.folder) if self.gitdir else None
        return staged if staged is not None else expand_moves(self.folder, changes)

    def committed(self, message, listed):
        with self.cond:
            self.status["last_commit"] = {"time": time.time(), "message": message.split("\n")[0]}
            self.status["unpushed"] += 1
            self.push_at = time.monotonic() + self.cfg.pushdelay
        log.info("%s", message.split("\n")[0])
        self.publish("committed", message=message, changes=listed[:MESSAGE_LINES],
                     count=len(listed), host=self.host)

    def merge_cleared(self):
        """No merge is left half-done (git): finish a stopped one, undo an interrupted one."""
        if conflicts.merging(self.gitdir):
            return self.finish_merge()
        try:
            conflicts.undo_interrupted_merge(self.folder)
        except RuntimeError as e:
            self.fail("merge", e, retry="commit")
            return False
        return True

    def finish_merge(self):
        """A merge stopped on conflicts: keep both versions of each file and commit it."""
        try:
            copies = conflicts.resolve(self.folder)
            lines = ["conflict: %s (other version kept as %s)" % (shown(c["path"]), shown(c["copy"]))
                     for c in copies]
            message = "autosync on %s: merged%s" % (
                self.host, ", %d conflicts" % len(copies) if copies else "")
            message += "\n\n" + "\n".join(lines) if lines else ""
            self.cmd["commitcmd"].run(message, cwd=self.folder)
        except (CommandFailed, RuntimeError, OSError) as e:
            self.fail("merge", e, retry="commit")
            return False
        self.committed(message, [{"action": "added", "path": c["copy"]} for c in copies])
        for c in copies:
            with self.cond:
                self.status["conflicts"] = (self.status["conflicts"] + [c["copy"]])[-CONFLICTS_KEPT:]
            self.publish("conflict", **c)
        return True

    def context(self):
        """The output of contextcmd (off unless configured), for the commit message."""
        template = self.cmd.get("contextcmd")
        if template is None or template.empty:
            return None
        try:
            return template.output(cwd=self.folder, timeout=10) or None
        except CommandFailed as e:
            log.warning("%s", e)
            return None

    def push(self, force=False):
        """Push now; True if pushed, None if there was nothing to push, False on failure."""
        with self.cond:
            self.push_at = None
            if not self.status["unpushed"] and not force:
                return None
        if not self.safe("push"):
            return False
        for attempt in range(1, PUSH_TRIES + 1):
            self.set_state("pushing")
            try:
                self.cmd["pushcmd"].run(cwd=self.folder)
                break
            except CommandFailed as e:
                error = e
            # Rejected because the remote moved on (merge and try again), or unreachable
            # (then the pull fails too): never a force push.
            if attempt == PUSH_TRIES or not self.pull()["ok"]:
                self.fail("push", error)
                with self.cond:
                    self.failures["push"] += 1
                    self.push_at = time.monotonic() + backoff(self.failures["push"],
                                                              self.cfg.pushdelay)
                return False
        self.succeeded("push")
        url = self.remote_url()
        with self.cond:
            self.push_at = None
            self.status["unpushed"] = 0
            self.status["last_push"] = {"time": time.time(), "url": url}
            self.status["last_error"] = self.commit_error  # a file still left out stays said
        self.publish("pushed", url=url, source="committer")
        return True

    def run_pull(self):
        """pullcmd, then the merge finished if it stopped on conflicts; True if all went well."""
        for attempt in (1, 2):
            self.set_state("pulling")
            try:
                self.cmd["pullcmd"].run(cwd=self.folder)
                error = None
            except CommandFailed as e:
                error = e
            if self.gitdir and conflicts.merging(self.gitdir):
                return self.finish_merge()
            if error is None:
                self.succeeded("pull")
                return True
            # Local changes the merge would overwrite: commit them and try once more.
            if attempt == 1 and self.commit([], rescan=True, note="changes made before a pull"):
                continue
            self.fail("pull", error, retry="pull")
            return False

    def remote_url(self):
        try:
            return self.cmd["remoteurlcmd"].output(cwd=self.folder)
        except CommandFailed as e:
            log.warning("%s", e)
            return ""

    def pull(self):
        """Pull now; -> the reply to a pull request."""
        if not self.safe("pull"):
            return {"ok": False, "pulled": False, "error": self.blocked}
        with self.cond:
            if self.cfg.pullinterval:
                self.next_timer_pull = time.monotonic() + self.cfg.pullinterval
        self.publish("pull-started")
        before = gitrepo.head(self.folder) if self.gitdir else None
        ok = self.run_pull()
        self.publish("pull-finished", ok=ok)
        with self.cond:
            self.status["last_pull"] = {"time": time.time(), "ok": ok}
        if ok:
            # git can say what came in; for another DVCS the event says only that it ran.
            news = gitrepo.pulled(self.folder, before, gitrepo.head(self.folder)) \
                if self.gitdir else {}
            self.publish("pulled", **news)
            with self.cond:
                if self.status["unpushed"]:
                    self.push_at = time.monotonic()  # a merge may wait to go out too
        # conservative: the watcher ignored events during the pull; it asks for the
        # rescan once it has read every event up to pull-finished (a rescan here
        # could run before an edit made the instant the pull ended). With no
        # watcher connected, the rescan at its start does the same.
        result = {"ok": ok, "pulled": ok}
        if not ok:
            result["error"] = self.status["last_error"]
        return result

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()


def main(argv=None):
    cfg = cli.start("autosync-committer", __doc__, argv)
    try:
        committer = Committer(cfg)
    except OSError as e:
        cli.die("autosync-committer: %s" % (e.strerror or e))
    worker = threading.Thread(target=committer.run, name="worker", daemon=True)
    worker.start()
    cli.wait_for_signal(lambda: not worker.is_alive())
    committer.stop()
    worker.join(4.0)  # finish the commit in flight, within the supervisor's patience
    committer.publish("stopping")
    committer.server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
