"""Large files through git-annex: the `largefiles` key, and what `dvcs-autosync expire` does.

`largefiles = 10mb` (off by default) makes every git command the daemon runs
see `annex.largefiles=largerthan=10mb` (rule_of, the committer's GitEnvironment): git's
add then hands such files to git-annex's clean filter, so history keeps a
small pointer per version and the content travels with `git annex sync
--content`. It needs that set-up (docs/beyond-git.md, "Large files through
git-annex": `git annex init` on every machine and the remote, the example's
pushcmd and pullcmd); core/config.py refuses the key with other push and pull
commands, which would leave the content on this machine only.

After each push and pull the committer drops this machine's copies of annexed
versions that no current file uses and that git-annex verifies the remote holds
(Trimmer), then pushes the git-annex branch if it holds news (what this machine
got and dropped): a machine keeps about one copy of each big file.

`dvcs-autosync expire [--older-than AGE]` (tools/expire.py, the command and what it says;
AGE defaults to the `largefileskeep` key, which the committer's upkeep also applies at
each run) lets versions older than the rule go for good, from the remote and here:
expiring() finds them (plan()), dropping() drops them; describe() names a version for
the command and the upkeep's log. The rule is plan()'s docstring: never a file's current
version on any branch here or on the remote, never one another machine has got neither
of nor a later version of the same file (location logs), never the only copy of one that
never left this machine.
"""
import collections
import hashlib
import os
import re
import subprocess
import time

from autosync.core import cli
from autosync.core.config import AGE_EXPECTED, parse_age
from autosync.core.messages import printable
from autosync.vcs import sizes
from autosync.vcs.commands import environment
from autosync.vcs.git_environment import PLAIN

# An annexed file's pointer (unlocked) or link target (locked): the key is its last part.
POINTER = re.compile(rb"^(?:/annex/objects/|(?:\.\./)*\.git/annex/objects/(?:[^/]+/){3})"
                     rb"([A-Za-z0-9]+-[^/\s]+)\n?$")


def rule(size):
    """annex.largefiles for a `largefiles` size."""
    return "largerthan=%s" % size


# The key git-annex makes of a big file, unless the user chose one (annex.backend in git's
# config, or .gitattributes, which git-annex puts first anyway). Its hash is computed up
# to 3 times per version (the add; the copy to the remote and the other machine's get,
# each checked): BLAKE2b is as strong as git-annex's default SHA-256 and about twice as
# fast (tests/benchmarks/JOURNAL.md, "Big files through git-annex"). Older git-annex
# (before 6.20170228) cannot read such keys; the README asks for 8 or later.
BACKEND = "BLAKE2B256E"


def rule_of(cfg):
    """annex.largefiles for the committer's git commands (its GitEnvironment's
    `largefiles`), or None when the key is not set."""
    size = getattr(cfg, "largefiles", "")
    return rule(size) if size else None


def backend_of(cfg):
    """annex.backend for the committer's git commands (its GitEnvironment's
    `annex_backend`): BACKEND with `largefiles` set, None where the user chose one (asked
    with the user's own settings) or without the key."""
    if not getattr(cfg, "largefiles", ""):
        return None
    proc = subprocess.run(["git", "config", "--get", "annex.backend"], cwd=cfg.path,
                          env=environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    return None if proc.stdout.strip() else BACKEND


def annex_through_git_ssh(folder):
    """Whether git-annex may reach the remote through git's ssh (GIT_ANNEX_USE_GIT_SSH=1,
    the committer's GitEnvironment `annex_git_ssh`), which the daemon points at its held
    connection: git-annex's own ssh logs in again for every push and pull (it stops its
    cached connection when the command ends), a login's time each (the figures:
    tests/benchmarks/JOURNAL.md, "Big files over ssh"). Not where the user gave git-annex
    ssh options of their own (remote.NAME.annex-ssh-options), which git-annex ignores
    with git's ssh. A remote on another ssh server takes git's ssh too: the held
    connection's control socket is per destination (vcs/remote.py, control_pattern),
    so that remote's ssh finds none and logs in by itself."""
    proc = subprocess.run(["git", "config", "--name-only", "--get-regexp",
                           r"^remote\..*\.annex-ssh-options$"], cwd=folder,
                          env=environment(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return not proc.stdout.strip()


def warn_without_annex(cfg, log):
    """With `largefiles` set in a folder without an annex: say so once, at the start."""
    size = getattr(cfg, "largefiles", "")
    if size:
        proc = subprocess.run(["git", "config", "--get", "annex.uuid"], cwd=cfg.path,
                              env=environment(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if not proc.stdout.strip():
            log.warning("largefiles = %s, but %s has no annex (git annex init NAME, see "
                        "docs/beyond-git.md): files of any size go into git's history",
                        size, cfg.path)


# --- what this repository holds, uses, and what the location log says ----------------------

class ExpireError(Exception):
    """str() is the one line said."""


def git(folder, *args, data=None, gitenv=PLAIN):
    proc = subprocess.run(("git",) + args, cwd=folder, env=environment(gitenv=gitenv),
                          input=data,
                          stdin=None if data is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ExpireError("git %s: %s" % (args[0], said[-1] if said else
                                          "exit %d" % proc.returncode))
    return proc.stdout


def annex_uuid(folder, remote=None, gitenv=PLAIN):
    name = "remote.%s.annex-uuid" % remote if remote else "annex.uuid"
    return git(folder, "config", "--default", "", "--get", name, gitenv=gitenv).decode().strip()


def keys_of(folder, oids, gitenv=PLAIN):
    """{blob id: annex key} of the blobs among `oids` that are annex pointers."""
    oids = sorted(set(oids))
    if not oids:
        return {}
    checked = git(folder, "cat-file", "--batch-check", data="".join(o + "\n" for o in oids)
                  .encode(), gitenv=gitenv).decode().splitlines()
    small = [line.split()[0] for line in checked
             if len(line.split()) == 3 and line.split()[1] == "blob" and int(line.split()[2]) < 1024]
    if not small:
        return {}
    out = git(folder, "cat-file", "--batch", data="".join(o + "\n" for o in small).encode(),
              gitenv=gitenv)
    found, at = {}, 0
    for oid in small:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        body = out[end + 1:end + 1 + size]
        at = end + 1 + size + 1
        match = POINTER.match(body)
        if match:
            found[oid] = match.group(1).decode()
    return found


def branch_tips(folder, gitenv=PLAIN):
    """{ref: commit} of HEAD, the local and remote-tracking branches and tags, git-annex's own
    branches left out."""
    out = git(folder, "for-each-ref", "--format=%(objectname) %(refname)",
              "refs/heads", "refs/remotes", "refs/tags",
              gitenv=gitenv).decode("utf-8", "surrogateescape")
    tips = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines()
            if not line.endswith("git-annex") and not line.endswith("/HEAD")}
    head = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD^{commit}"], cwd=folder,
                          env=environment(gitenv=gitenv), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode().strip()
    if head:
        tips["HEAD"] = head
    return tips


def used_keys(folder, gitenv=PLAIN):
    """The annex keys some current file uses: in the index, or in the tree of HEAD, of a
    local branch or of a remote-tracking one (the remote's synced/* included: a machine
    that has not merged yet), git-annex's own branches left out."""
    commits = set(branch_tips(folder, gitenv=gitenv).values())
    oids = set()
    if commits:
        trees = git(folder, "rev-parse", *("%s^{tree}" % c for c in sorted(commits)),
                    gitenv=gitenv)
        for tree in sorted(set(trees.decode().split())):
            for entry in git(folder, "ls-tree", "-r", "-z", tree, gitenv=gitenv).split(b"\0"):
                words = entry.split(b"\t", 1)[0].split()
                if len(words) == 3 and words[1] == b"blob":
                    oids.add(words[2].decode())
    for entry in git(folder, "ls-files", "-s", "-z", gitenv=gitenv).split(b"\0"):
        words = entry.split(b"\t", 1)[0].split()
        if len(words) == 3:
            oids.add(words[1].decode())
    return set(keys_of(folder, oids, gitenv=gitenv).values())


def local_keys(folder, gitenv=PLAIN):
    """The keys whose content this repository holds (.git/annex/objects/xx/yy/KEY/KEY)."""
    objects = os.path.join(folder, git(folder, "rev-parse", "--git-path", "annex/objects",
                                       gitenv=gitenv)
                           .decode().strip())
    found = set()
    for root, _, names in os.walk(objects):
        name = os.path.basename(root)
        if name in names:
            found.add(name)
    return found


def log_path(key):
    """Where git-annex's location log of a key lives in the git-annex branch."""
    digest = hashlib.md5(key.encode()).hexdigest()
    return "%s/%s/%s.log" % (digest[:3], digest[3:6], key)


def locations(folder, keys, gitenv=PLAIN):
    """{key: {uuid: holds it now}} from the git-annex branch's location logs: a uuid with
    a line has had the content (1: holds it, 0: dropped it since); one without never had it."""
    keys = sorted(set(keys))
    if not keys:
        return {}
    out = git(folder, "cat-file", "--batch", data="".join(
        "git-annex:%s\n" % log_path(k) for k in keys).encode(), gitenv=gitenv)
    found, at = {}, 0
    for key in keys:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        found[key] = {}
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        for line in out[at:at + size].decode("utf-8", "replace").splitlines():
            words = line.split()
            if len(words) == 3 and words[1] in ("0", "1"):
                found[key][words[2]] = words[1] == "1"
        at += size + 1
    return found


def branch_file(folder, name, gitenv=PLAIN):
    proc = subprocess.run(["git", "cat-file", "blob", "git-annex:" + name], cwd=folder,
                          env=environment(gitenv=gitenv), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""


def machines(folder, skip, gitenv=PLAIN):
    """{uuid: description} of the other repositories git-annex knows (uuid.log), leaving
    out `skip`, those marked dead (`git annex dead NAME`) and special remotes (storage,
    not machines)."""
    dead = {line.split()[0] for line in branch_file(folder, "trust.log",
                                                    gitenv=gitenv).splitlines()
            if len(line.split()) >= 2 and line.split()[1] == "X"}
    special = {line.split()[0] for line in branch_file(folder, "remote.log",
                                                       gitenv=gitenv).splitlines()
               if line.split()}
    found = {}
    for line in branch_file(folder, "uuid.log", gitenv=gitenv).splitlines():
        words = line.split()
        if not words or words[0] in skip or words[0] in dead or words[0] in special:
            continue
        if words[0].startswith("00000000-0000-0000-0000-"):
            continue  # git-annex's built-in web and bittorrent
        found[words[0]] = " ".join(w for w in words[1:] if not w.startswith("timestamp="))
    return found


def drop(folder, key, remote=None, force=False, gitenv=PLAIN):
    """git annex drop of one key, here or from `remote` -> (ok, what git-annex said)."""
    argv = ["git", "annex", "drop", "--quiet", "--key", key]
    argv += ["--from", remote] if remote else []
    argv += ["--force"] if force else []
    proc = subprocess.run(argv, cwd=folder, env=environment(gitenv=gitenv),
                          stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    return proc.returncode == 0, said[-1] if said else ""


def bring(folder, oids, gitenv=PLAIN):
    """Before a restore reads old versions: the content of those that are annex pointers
    and not held here (the automatic drop let them go) got from where git-annex finds
    them. -> the keys it could not get (expired, or their holders unreachable)."""
    if not annex_uuid(folder, gitenv=gitenv):
        return []
    wanted = set(keys_of(folder, oids, gitenv=gitenv).values()) - local_keys(folder,
                                                                             gitenv=gitenv)
    missing = []
    for key in sorted(wanted):
        proc = subprocess.run(["git", "annex", "get", "--quiet", "--key", key], cwd=folder,
                              env=environment(gitenv=gitenv), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if proc.returncode:
            missing.append(key)
    return missing


# --- the automatic drop after a push or a pull -------------------------------------------

class Trimmer:
    """With `largefiles` set, a machine keeps about one copy of each big file: after a push
    or a pull, the content of annexed versions that no current file uses any more is
    dropped here, each only where git-annex verifies that a copy is elsewhere (the
    remote's; numcopies, never --force). A version that reached no other repository
    stays until it does (or `expire` lets it go)."""

    def __init__(self, folder, gitenv=PLAIN):
        self.folder, self.gitenv = folder, gitenv
        self.seen = None  # ({ref: commit}, the keys held) at the last look

    def due(self):
        """Cheap: has a version arrived here, or has a branch (HEAD, or the remote's as last
        fetched or pushed) moved past an annexed one since the last look?"""
        held = local_keys(self.folder, gitenv=self.gitenv)
        tips = branch_tips(self.folder, gitenv=self.gitenv)
        last, self.seen = self.seen, (tips, held)
        if last is None or held - last[1]:
            return bool(held)
        if not held:
            return False
        old = []
        for ref, commit in tips.items():
            before = last[0].get(ref)
            if before and before != commit:
                out = git(self.folder, "diff-tree", "-r", "--no-renames", "--raw", "--no-abbrev",
                          before, commit, gitenv=self.gitenv).decode("utf-8", "surrogateescape")
                old += [line[1:].split()[2] for line in out.splitlines() if line.startswith(":")]
        return bool(keys_of(self.folder, [o for o in old if o.strip("0")], gitenv=self.gitenv))

    def tell(self):
        """Push the git-annex branch when it holds what the remote's lacks: what this
        machine got and dropped (`expire` on the others waits for what it got). Its
        pullcmd (`git annex sync --no-push`) never pushes, and a machine that only
        receives would never say. -> True if pushed."""
        if not annex_uuid(self.folder, gitenv=self.gitenv):
            return False  # no annex here (largefiles warned at the start): nothing to tell
        remote = sizes.upstream_remote(self.folder, gitenv=self.gitenv)
        theirs = "refs/remotes/%s/git-annex" % remote
        known = subprocess.run(["git", "rev-parse", "-q", "--verify", theirs], cwd=self.folder,
                               env=environment(gitenv=self.gitenv), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).returncode == 0
        ahead = git(self.folder, "rev-list", "--count", theirs + "..refs/heads/git-annex",
                    gitenv=self.gitenv) \
            if known else b"1"
        if not int(ahead):
            return False
        # The git-annex branch alone, fetched, merged (git-annex's union merge) and pushed.
        git(self.folder, "annex", "sync", "--quiet", "--only-annex", "--no-content",
            "--no-commit", remote, gitenv=self.gitenv)
        return True

    def run(self):
        """-> [(key, size)] dropped here."""
        if not annex_uuid(self.folder, gitenv=self.gitenv) or not self.due():
            return []
        spare = local_keys(self.folder, gitenv=self.gitenv) - used_keys(self.folder,
                                                                        gitenv=self.gitenv)
        dropped = []
        for key in sorted(spare):
            ok, _ = drop(self.folder, key, gitenv=self.gitenv)
            if ok:
                dropped.append((key, key_size(key)))
        if dropped:
            self.seen = (self.seen[0], local_keys(self.folder, gitenv=self.gitenv))
        return dropped


# --- dvcs-autosync expire ------------------------------------------------------------------

Version = collections.namedtuple("Version", "key path replaced")


def history(folder, remote, gitenv=PLAIN):
    """-> (replaced, added). replaced: every version that a commit of HEAD's history or
    of the remote's branches replaced (changed or removed): (blob id, path, the
    replacing commit's time); added: {path: [(time, blob id)]}, each version a commit
    put there. Merges' own resolutions are left out (so never expired)."""
    out = git(folder, "log", "--no-merges", "--raw", "--no-abbrev", "--no-renames",
              "--format=commit %H %ct", "HEAD", "--exclude=*git-annex", "--remotes=%s" % remote,
              "--", gitenv=gitenv).decode("utf-8", "surrogateescape")
    replaced, added, when = [], collections.defaultdict(list), None
    for line in out.splitlines():
        if line.startswith("commit "):
            when = float(line.split()[2])
        elif line.startswith(":"):
            meta, _, path = line.partition("\t")
            words = meta[1:].split()
            old, new, status = words[2], words[3], words[4]
            if status in ("M", "D", "T") and old.strip("0"):
                replaced.append((old, path, when))
            if new.strip("0"):
                added[path].append((when, new))
    return replaced, added


def key_size(key):
    match = re.match(r"[A-Za-z0-9]+-s(\d+)--", key)
    return int(match.group(1)) if match else None


def plan(folder, remote, remote_uuid, age, now=None, gitenv=PLAIN):
    """-> (drops, kept): [(Version, size, places)] to drop, places a subset of
    ("remote", "here"); [(Version, why)] kept although older than `age`.

    A version is dropped when all of these hold:
      * a commit replaced it (changed or removed it) longer than `age` ago, and it is
        the current version of no file: not in the index, HEAD, a local branch or any
        branch the remote has (synced/* included, fetched first);
      * the remote or this machine holds it, and if only this machine does, another
        repository holds it too (the only copy of a version that never left this
        machine, made while it was offline, say, is kept);
      * every other machine git-annex knows (uuid.log, less dead repositories and
        special remotes) has got it or a later version of the same file: its uuid has a
        line, 1 or 0, in the location log of this version or of one that a commit put
        at the same path since. A machine that dropped a copy still "has got" it; one
        with no line for it or for anything newer at that path lacks it and may still
        be catching up, so the version stays until it has moved past it. A file whose
        last change removed it (or made it too small for the annex) waits for nobody:
        what a machine gets of that is the removal, which needs no content.
    It may then be the last copy: it goes for good (that is the user's rule)."""
    now = time.time() if now is None else now
    cutoff = now - age
    here_uuid = annex_uuid(folder, gitenv=gitenv)
    replaced, added = history(folder, remote, gitenv=gitenv)
    keys = keys_of(folder, [oid for oid, _, _ in replaced] +
                   [oid for versions in added.values() for _, oid in versions], gitenv=gitenv)
    used = used_keys(folder, gitenv=gitenv)
    newest, places = {}, collections.defaultdict(list)
    for oid, path, when in replaced:
        key = keys.get(oid)
        if key:
            newest[key] = max(newest.get(key, 0), when)
            places[key].append((path, when))
    candidates = [k for k in newest if k not in used and newest[k] < cutoff]
    # (a commit's time is in seconds: a version added in the second that replaced it is
    # not "later" than itself; it made a removed file wait for every machine)
    later = {key: {keys[oid] for path, when in places[key] for t, oid in added.get(path, ())
                   if t >= when and oid in keys and keys[oid] != key} for key in candidates}
    logs = locations(folder, set(candidates).union(*later.values()), gitenv=gitenv)
    held = local_keys(folder, gitenv=gitenv)
    others = machines(folder, {here_uuid, remote_uuid}, gitenv=gitenv)
    drops, kept = [], []
    for key in sorted(candidates, key=lambda k: (places[k][0][0], newest[k], k)):
        version = Version(key, places[key][0][0], newest[key])
        where = tuple(p for p, holds in (("remote", logs[key].get(remote_uuid)),
                                        ("here", key in held)) if holds)
        if not where:
            continue  # on neither: nothing to drop
        if where == ("here",) and not any(holds for uuid, holds in logs[key].items()
                                          if uuid != here_uuid):
            kept.append((version, "only this machine has it (it never reached %s)" % remote))
            continue
        behind = sorted(name or uuid for uuid, name in others.items()
                        if later[key] and uuid not in logs[key]
                        and not any(uuid in logs.get(k, {}) for k in later[key]))
        if behind:
            kept.append((version, "%s has got neither this version nor a later one of the "
                                  "file yet" % ", ".join(behind)))
            continue
        drops.append((version, key_size(key), where))
    return drops, kept


def describe(version, size):
    return "%s as it was until %s (%s, %s)" % (printable(version.path),
                                             cli.show_time(version.replaced),
                                             sizes.human(size) if size is not None else
                                             "size unknown", printable(version.key))


def placed(where, remote):
    return " and ".join(remote if p == "remote" else "here" for p in where)


def freed(drops, remote):
    total = {p: sum(size or 0 for _, size, where in drops if p in where)
             for p in ("remote", "here")}
    return ", ".join("%s %s" % (sizes.human(total[p]), "on %s" % remote if p == "remote"
                                else "here") for p in ("remote", "here") if total[p])


class _NoProgress:
    """No progress shown (the upkeep's expire, a report to a file)."""

    def show(self, text):
        pass

    def files(self, doing, done, total, size, total_size=None, unit="files"):
        pass

    def clear(self):
        pass


Expiry = collections.namedtuple("Expiry", "folder remote age drops kept")


def expiring(cfg, age_text, now=None, progress=None, gitenv=PLAIN):
    """What expire would drop now: the checks (ExpireError, one line), the remote's
    branches and git-annex's logs fetched, then plan() -> Expiry (age: the age as given,
    or the largefileskeep key's). progress: what it is doing meanwhile
    (tools/progress.Progress on a terminal)."""
    progress = progress or _NoProgress()
    folder = cfg.path
    if age_text is None:
        age_text = getattr(cfg, "largefileskeep", "")
        if not age_text:
            raise ExpireError("no age: give --older-than AGE, or set largefileskeep in "
                              "[autosync]")
    try:
        age = parse_age(age_text)
    except ValueError:
        raise ExpireError("--older-than %r: expected %s" % (age_text, AGE_EXPECTED)) from None
    if not annex_uuid(folder, gitenv=gitenv):
        raise ExpireError("%s is no git-annex repository (git annex init NAME; see "
                          "docs/beyond-git.md, Large files through git-annex)" % folder)
    remote = sizes.upstream_remote(folder, gitenv=gitenv)
    remote_uuid = annex_uuid(folder, remote, gitenv=gitenv)
    if not remote_uuid:
        raise ExpireError("the remote %s has no annex (git annex init on it, then git annex "
                          "sync); nothing to expire" % remote)
    # The remote's branches and location logs as they are now: git-annex merges the
    # fetched git-annex branch into its own as a command that reads it starts (`info`;
    # not `git annex merge`, which would merge the remote's branches into the folder).
    progress.show("Fetching %s..." % remote)
    git(folder, "fetch", "--quiet", remote, gitenv=gitenv)
    progress.show("Reading where git-annex knows the versions are...")
    git(folder, "annex", "info", "--fast", "--quiet", gitenv=gitenv)
    progress.show("Reading the history of the annexed files...")
    drops, kept = plan(folder, remote, remote_uuid, age, now, gitenv=gitenv)
    progress.clear()
    return Expiry(folder, remote, age_text, drops, kept)


def dropping(expiry, progress=None, gitenv=PLAIN):
    """Drop an Expiry's drops, from each place that holds them, how far shown on
    progress; yields (version, size, place, what git-annex said) for each drop refused."""
    progress = progress or _NoProgress()
    drops = expiry.drops
    total, freeing = sum(size or 0 for _, size, _ in drops), 0
    for count, (version, size, where) in enumerate(drops):
        progress.files("Dropping", count, len(drops), freeing, total, unit="versions")
        freeing += size or 0
        for p in where:  # --force: it may be the last copy, which the rule lets go
            ok, said = drop(expiry.folder, version.key,
                            expiry.remote if p == "remote" else None, force=True,
                            gitenv=gitenv)
            if not ok:
                progress.clear()
                yield version, size, p, said
    progress.files("Dropping", len(drops), len(drops), freeing, total, unit="versions")
    progress.clear()
