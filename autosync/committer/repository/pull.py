"""A pull: which engine runs it, what is said of it, what it brought.

The engine is chosen once (engine()): a plain `git pull` is vcs/pull/git.py's GitPull
(`git_pull`), which never overwrites a write it did not see; any other pullcmd runs as
a command, a merge it stopped on conflicts finished (Index.finish_merge), the files a
failed one left put back or kept out of commits (Leftovers, vcs/pullleftovers.py).
What the pull brought is told: the `pulled` event, conflict copies merged here or on
another machine (merged_elsewhere, Index.announce), descriptions (git notes).

Handed the State, the Index and `commit`: local changes the pullcmd's merge would
overwrite are committed before it is tried once more.
"""
import logging
import os
import time

from autosync.core import underway
from autosync.core.copies import copy_name, read_copy_name
from autosync.core.messages import MERGED_COPY, host_of, unquoted
from autosync.fs import guarded
from autosync.vcs import copyrules, git, gitnotes, pullleftovers, recovery
from autosync.vcs.commands import SHELL_CHARS, CommandFailed, Template
from autosync.vcs.pull import finish, hg
from autosync.vcs.pull.git import GitPull, PullFailed, Stopped, plain_pull

log = logging.getLogger("autosync.repository")


def engine(folder, gitdir, host, pullcmd, gitenv, fsmonitor):
    """The GitPull that does a plain `git pull` (vcs/pull/git.py), or None: pullcmd runs."""
    fetch = plain_pull(pullcmd.text) if gitdir else None
    return None if fetch is None else \
        GitPull(folder, gitdir, host, fetch, gitenv,
                index_env=fsmonitor.env if fsmonitor else dict)


class Leftovers:
    """git: files a failed pullcmd of the user's left that could not be put back
    (vcs/pullleftovers.py): out of every commit until a pull succeeds or the file changes."""

    def __init__(self, state):
        self.state = state
        self.pull_leftovers = {}  # path -> its lstat then

    def pulled_leftovers(self, error):
        """git: after pullcmd failed, the files it left (vcs/pullleftovers.py) put back as
        HEAD has them, those that cannot be kept out of commits; -> the failure as said."""
        folder, gitenv = self.state.folder, self.state.gitenv
        if not self.state.gitdir:
            return error
        try:
            found = pullleftovers.find(folder, gitenv)
            kept = pullleftovers.put_back(folder, found, gitenv)
        except (OSError, RuntimeError, ValueError) as e:
            log.warning("what the failed pull left in the folder was not looked at: %s", e)
            return error
        if found:
            log.warning("the pull failed and had written %d file(s) of the remote's version "
                        "(whole or cut short): %d put back as the last commit has them%s",
                        len(found), len(found) - len(kept), "" if not kept else
                        "; kept out of every commit until a pull works: " +
                        ", ".join(sorted(kept)[:10]))
        self.pull_leftovers.update({rel: pullleftovers.signature(folder, rel)
                                    for rel in kept})
        if not self.pull_leftovers:
            return error
        return "%s; %d file(s) it left half-written are kept out of commits (%s)" % (
            error, len(self.pull_leftovers), ", ".join(sorted(self.pull_leftovers)[:3]))

    def kept(self):
        """The failed pull's files kept out of commits: those not changed since (a change
        since is the user's)."""
        for rel, seen in list(self.pull_leftovers.items()):
            if pullleftovers.signature(self.state.folder, rel) != seen:
                del self.pull_leftovers[rel]
        return set(self.pull_leftovers)


class Pull:
    def __init__(self, state, index, leftovers, cmd, commit):
        self.state, self.index, self.leftovers, self.cmd = state, index, leftovers, cmd
        self.report = state.report
        self.commit = commit
        self.git_pull = state.git_pull
        if self.git_pull is not None:
            self.git_pull.on_progress = lambda made, total: \
                state.underway("writing", total, made) if total >= underway.LONG else None

    def keep_leftover_writes(self):
        """Bytes a killed write of ours (a pull, restore or settle) had moved aside: gone
        if history has them, else kept as a conflict copy. -> the copies."""
        folder, gitenv, host = self.state.folder, self.state.gitenv, self.state.host
        in_history = None
        if self.state.gitdir:
            def in_history(temp, path):
                """Is the content of the file (a link's target) at temp a blob git has?
                Hashed by git as it reads the file (a link: here), never held whole."""
                if os.path.islink(temp):
                    target = os.fsencode(os.readlink(temp))
                    head = git.head(folder, gitenv=gitenv)
                    oid = guarded.blob_id(len(target), [target], len(head or
                                                                     "0" * 40)).encode()
                else:
                    oid = git.git(folder, "hash-object", "--no-filters", "--stdin-paths",
                                  data=os.fsencode(temp) + b"\n", check=False,
                                  gitenv=gitenv) \
                        if "\n" not in temp else None
                return bool(oid) and git.git(folder, "cat-file", "-e",
                                             oid.decode().strip(), check=False,
                                             gitenv=gitenv) is not None

        def copy(path):
            return copy_name(path, host, time.time(),
                             lambda name: not os.path.lexists(name))
        # A copy is a conflict copy by name: the rescan commits it, status counts it.
        kept = recovery.leftover_writes(folder, in_history, copy, gitenv=gitenv)
        if self.state.gitdir:  # stored through its original's filters (a rule of its own) first
            for full in kept:
                rel = os.path.relpath(full, folder)
                copyrules.keep(folder, read_copy_name(rel).path, rel, gitenv=gitenv)
        return kept

    def run_git_pull(self):
        """vcs/pull/git.py's pull; True if it went well."""
        self.report.state("pulling")
        self.keep_leftover_writes()  # a restore killed while the committer ran
        if not self.index.merge_cleared():  # a merge left half-done by hand or by a kill
            return False
        try:
            result = self.git_pull.run()
        except Stopped:  # cut short by the stop: nothing written, nothing failed
            log.info("pull not done: the daemon is stopping (the next start pulls)")
            return False
        except PullFailed as e:
            # A refused tree or a path not written is its own problem, with its own fix.
            self.report.failed(e.problem, e, retry="pull")
            return False
        except (CommandFailed, RuntimeError, OSError) as e:
            self.report.failed("pull", e, retry="pull")
            return False
        for problem in ("unsafe", "unwritten"):
            self.report.succeeded(problem)
        self.state.merged = result["merge"]
        self.index.index_mine()  # the git pull wrote the index with stage 0 entries only
        # An empty remote is where every sync begins: waited on, not a failure.
        self.report.status(waiting="the remote is empty: waiting for the first change"
                           if result.get("empty") else None)
        self.index.merge_committed(result["merged"], result["beside"])
        self.report.succeeded("pull")
        return True

    def run_pull(self):
        """pullcmd, then the merge finished if it stopped on conflicts; True if all went well."""
        if self.git_pull is not None:
            return self.run_git_pull()
        for attempt in (1, 2):
            self.report.state("pulling")
            try:
                output = self.cmd["pullcmd"].run(cwd=self.state.folder).output
                error = None
            except CommandFailed as e:
                error = e
            if error is not None and self.unrelated(error):
                # Two machines that began on an empty remote: merged like any other
                # divergence (both versions kept below), never refused again and again.
                try:
                    output = self.unrelated(error).run(cwd=self.state.folder).output
                    error = None
                except CommandFailed as e:
                    error = e
            if self.state.gitdir and finish.merging(self.state.gitdir):
                return self.index.finish_merge()
            if error is None:
                self.leftovers.pull_leftovers = {}
                # A pullcmd's helper (autosync-hgmerge) that merged and kept both versions.
                self.index.merge_committed(hg.reported(output))
                self.report.succeeded("pull")
                return True
            # What the failed pull wrote is its own, never a change of the user's.
            said = self.leftovers.pulled_leftovers(error)
            # Local changes the merge would overwrite: commit them and try once more.
            if attempt == 1 and self.commit([], rescan=True, note="changes made before a pull"):
                continue
            self.report.failed("pull", said, retry="pull")
            return False

    def unrelated(self, error):
        """pullcmd with --allow-unrelated-histories, when git refused to merge unrelated
        histories and pullcmd is one `git pull` line; else None."""
        text = self.cmd["pullcmd"].text.strip()
        if (self.state.gitdir and "unrelated histories" in str(error) and "\n" not in text
                and text.startswith("git pull") and not SHELL_CHARS.intersection(text)):
            return Template("pullcmd", text + " --allow-unrelated-histories", self.state.gitenv)
        return None

    def pull(self):
        """Pull now; -> the reply to a pull request."""
        state = self.state
        folder, gitenv = state.folder, state.gitenv
        if not state.safe("pull"):
            return {"ok": False, "pulled": False, "error": state.blocked}
        self.index.settle_index()
        self.report.event("pull-started")
        before = git.head(folder, gitenv=gitenv) if state.gitdir else None
        state.merged = None
        try:
            ok = self.run_pull()
        finally:
            state.underway(None)
        # guarded: every write the pull made went through vcs/pull/git.py's guarded writer
        # (no command of the user's ran): the watcher's events of the pull are a full
        # account of what changed, and it stages them instead of asking for a rescan.
        self.report.event("pull-finished", ok=ok, guarded=self.git_pull is not None)
        self.report.pulled(ok)
        if ok:
            # git can say what came in; for another DVCS the event says only that it ran.
            after = git.head(folder, gitenv=gitenv) if state.gitdir else None
            names = git.changed_names(folder, before, after,
                                      gitenv=gitenv) if state.gitdir else []
            news = git.pulled(folder, before, after, names,
                              gitenv=gitenv) if state.gitdir else {}
            if state.fsmonitor:
                state.fsmonitor.pulled(names)
            self.report.event("pulled", **news)
            elsewhere = self.merged_elsewhere(before, after)
            for c in elsewhere:
                log.warning("conflict in %s (merged on %s): both versions kept, the other "
                            "as %s", c["path"], c["host"], c["copy"])
            self.index.announce(elsewhere)
            if state.gitdir and not elsewhere and (after and not before or
                                                   any(map(read_copy_name, names))):
                self.index.count_conflicts()  # a copy pulled in, or settled on another machine
            if state.gitdir:  # descriptions of pushed commits, from every machine
                try:
                    gitnotes.fetch(folder, gitenv=gitenv)
                except RuntimeError as e:
                    log.warning("descriptions (git notes) not merged: %s", e)
        # conservative: the watcher set aside the events of the pull; once it has read
        # every event up to pull-finished it sends the paths they name (guarded) or asks
        # for a rescan (any other pullcmd): a rescan here could run before an edit made
        # the instant the pull ended. With no watcher connected, the rescan at its start
        # does the same.
        result = {"ok": ok, "pulled": ok}
        if not ok and self.git_pull is not None and self.git_pull.cancel.cancelled:
            result.update(stopping=True, error="the daemon is stopping before the pull was made")
        elif not ok:
            result["error"] = self.report.last_error()
        return result

    def merged_elsewhere(self, before, after):
        """Conflict copies that another machine's merges, pulled just now, kept: told here
        too (read back from their commit messages)."""
        if not (self.state.gitdir and before and after and before != after):
            return []
        out = git.git(self.state.folder, "log", "-z", "--format=%H%n%B",
                      b"%s..%s" % (before, after), check=False, gitenv=self.state.gitenv) or b""
        copies = []
        for message in os.fsdecode(out).split("\0"):
            rev, _, message = message.strip("\n").partition("\n")
            lines = message.split("\n")
            host = host_of(lines[0])
            if not host or rev == self.state.merged:
                continue  # the merge this pull made: its copies were told then
            for line in lines[1:]:
                found = MERGED_COPY.fullmatch(line)
                if found:  # (the names as printable() wrote them)
                    copies.append({"path": unquoted(found.group(1)),
                                   "copy": unquoted(found.group(2)),
                                   "host": host, "source": "pulled"})
        return copies
