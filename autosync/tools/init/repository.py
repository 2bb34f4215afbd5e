"""The folder made a working tree of the remote, through git and the daemon's own pull:
cloned, joined (its files committed, then merged, none lost) or taken as it is; an
identity where git has none; the first commit and push of an empty remote."""
import os
import pwd
import re
import shlex
import shutil
import tempfile

from autosync.core.config import Config
from autosync.core.messages import commit_message, printable
from autosync.tools import progress
from autosync.tools.init.plan import say
from autosync.vcs import excludes, git, thin
from autosync.vcs.pull.git import GitPull, PullFailed
from autosync.vcs.git_environment import PLAIN, GitEnvironment

# A line of git's own progress ("Receiving objects:  45% (900/2000), 1.2 MiB | ...").
GIT_PROGRESS = re.compile(r"^(?:remote: )?[A-Z][a-z]+(?: [a-z]+)*: +\d")


def run_git(cwd, *args, gitenv=PLAIN):
    """git with the suite's settings; RuntimeError with git's own lines when it fails."""
    return git.git(cwd, *args, gitenv=gitenv)


def bring_in(plan):
    if plan.mode == "clone":
        clone(plan)
    elif plan.mode == "join":
        join(plan)
    else:
        say("%s is a clone of %s already: taken as it is%s." % (
            plan.folder, plan.remote, " (--thin applies to new clones only: this one keeps "
            "the history it has)" if plan.args.thin and not thin.promisor(plan.folder)
            else ""))


def clone(plan):
    parent = os.path.dirname(plan.folder)
    os.makedirs(parent, exist_ok=True)
    git_progress(plan, parent, "Cloning", "clone", "-q", *thin_options(plan), "--",
                 plan.remote, plan.folder)
    say("Cloned %s into %s%s." % (plan.remote, plan.folder, thin_words(plan)))


def thin_options(plan):
    # --no-local: a clone from a local path copies the objects and ignores --filter.
    return ["--filter=blob:none", "--no-local"] if plan.args.thin else []


def thin_words(plan):
    return (", thin: the current files only; old versions are fetched from the remote "
            "when log, restore or a conflict needs them") if plan.args.thin else ""


def join(plan):
    """The folder's files become a working tree of the remote, none lost."""
    gitdir = os.path.join(plan.folder, ".git")
    # A clone without a checkout gives origin, the branch the remote's HEAD names (even
    # while the remote is empty) and its upstream; only its .git is taken.
    temp = tempfile.mkdtemp(prefix=".autosync-init-", dir=plan.folder)
    try:
        git_progress(plan, temp, "Fetching the remote's history", "clone", "-q",
                     "--no-checkout", *thin_options(plan), "--", plan.remote, "repo")
        os.rename(os.path.join(temp, "repo", ".git"), gitdir)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    try:
        # No index: the folder's files are all new to this repository's first commit,
        # which has no parent (the remote's history is merged after it).
        if os.path.exists(os.path.join(gitdir, "index")):
            os.unlink(os.path.join(gitdir, "index"))
        branch = os.fsdecode(run_git(plan.folder, "symbolic-ref", "HEAD").strip())
        if not plan.empty:
            run_git(plan.folder, "update-ref", "-d", branch)
        identity(plan)
        committed = commit_all(plan, "the files this folder held before it joined")
    except BaseException:
        # Nothing committed yet: the folder is left as it was found.
        shutil.rmtree(gitdir, ignore_errors=True)
        raise
    say("%s joined %s: %s%s." % (plan.folder, plan.remote,
                                 "its files committed" if committed else "no files to commit",
                                 thin_words(plan)))
    if plan.empty:
        return
    plan.progress.show("Merging this folder's files with the remote's...")
    try:
        result = GitPull(plan.folder, gitdir, plan.host, []).run()
    except (PullFailed, RuntimeError, OSError) as e:
        plan.progress.clear()
        # The folder's files are committed: the daemon's pull merges them later.
        say("Not merged with %s yet: %s; dvcs-autosync merges when it starts (both "
            "versions kept)." % (plan.remote, e))
        return
    plan.progress.clear()
    for c in result["merged"] + result["beside"]:
        say("  %s is in both with other content: both kept, the other version as %s"
            % (printable(c["path"]), printable(c["copy"])))
    for path in result["kept"]:
        say("  %s kept as it is here; the remote's version is in history" % printable(path))
    if committed or result["merge"]:
        push(plan)


def commit_all(plan, note):
    """Commit everything the daemon would sync (its excludes: editors' files, nested
    repositories left out); -> whether there was anything."""
    gitdir = git.git_dir(plan.folder)
    cfg = Config(path=plan.folder)
    made = excludes.Excludes(cfg, gitdir, os.path.join(gitdir, "autosync-init-exclude"))
    gitenv = GitEnvironment(excludes=made.where)  # these commands only
    try:
        made.leave_out(git.untracked_repositories(plan.folder, gitenv=gitenv))
        if plan.progress.on:
            add_all(plan, gitenv)
        else:
            run_git(plan.folder, "add", "-A", gitenv=gitenv)
        changes = git.staged_changes(plan.folder, gitenv=gitenv) or []
        if not changes:
            return False
        plan.progress.show("Committing %s files..." % "{:,}".format(len(changes)))
        git.git(plan.folder, "commit", "-q", "-F", "-",
                data=os.fsencode(commit_message(plan.host, changes, note=note)),
                gitenv=gitenv)
        return True
    finally:
        plan.progress.clear()
        made.remove()


def add_all(plan, gitenv):
    """`git add -A` counted on the terminal: the files it will add (and their bytes)
    listed first, then each one git names as it adds it (--verbose)."""
    listed = run_git(plan.folder, "ls-files", "-z", "--others", "--modified",
                     "--exclude-standard", gitenv=gitenv)
    size = {}
    for name in os.fsdecode(listed).split("\0"):
        if name:
            try:
                size[name] = os.lstat(os.path.join(plan.folder, name)).st_size
            except OSError:
                size[name] = 0
    total, total_size = len(size), sum(size.values())
    done = [0, 0]

    def added(line):
        if line.startswith("add '") and line.endswith("'"):
            done[0] += 1
            done[1] += size.get(line[5:-1], 0)
            plan.progress.files("Adding the files", min(done[0], total), total,
                                min(done[1], total_size), total_size)
    try:
        progress.run(plan.folder, ["add", "-A", "--verbose"], on_out=added, gitenv=gitenv)
    finally:
        plan.progress.clear()


def git_progress(plan, folder, doing, *args):
    """run_git(folder, *args) for a clone or a push, with git's own progress shown on
    the terminal after `doing`."""
    if not plan.progress.on:
        return run_git(folder, *args)
    args = [args[0], "--progress"] + [a for a in args[1:] if a != "-q"]

    def said(line):
        if GIT_PROGRESS.match(line):
            plan.progress.show("%s: %s" % (doing, line.strip()))
    try:
        return progress.run(folder, args, on_err=said)
    finally:
        plan.progress.clear()


def first_commit(plan):
    """The remote is empty: the first commit (the folder's files, or none) goes out, so
    the next machine clones a branch and nobody waits."""
    if not plan.empty or plan.mode == "take":
        return
    if git.head(plan.folder) is None:
        if not commit_all(plan, "the first commit"):
            git.git(plan.folder, "commit", "-q", "--allow-empty", "-F", "-",
                    data=os.fsencode("autosync on %s: the synced folder begins" % plan.host))
    if push(plan):
        say("The remote was empty: made the first commit and pushed it.")


def push(plan):
    branch = os.fsdecode(run_git(plan.folder, "symbolic-ref", "--short", "HEAD").strip())
    try:
        git_progress(plan, plan.folder, "Pushing", "push", "-q", "-u", "origin", branch)
        return True
    except RuntimeError as e:
        # Committed here; the daemon pushes (merging first if the remote moved on).
        say("Not pushed yet: %s; dvcs-autosync pushes when it starts." % e)
        return False


def identity(plan):
    """git refuses to commit without a name and an address: one for this repository."""
    missing = [key for key in ("user.name", "user.email")
               if not git.git(plan.folder, "config", "--get", key, check=False)]
    if not missing:
        return
    entry = pwd.getpwuid(os.getuid())
    values = {"user.name": entry.pw_gecos.split(",")[0].strip() or entry.pw_name,
              "user.email": "%s@%s" % (entry.pw_name, plan.host)}
    for key in missing:
        run_git(plan.folder, "config", key, values[key])
    say("git had no identity here: set %s for this repository (change with git -C %s "
        "config user.name/user.email)." % (" and ".join("%s %s" % (k, shlex.quote(values[k]))
                                                        for k in missing),
                                           shlex.quote(plan.folder)))
