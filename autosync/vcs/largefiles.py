"""Large files through git-annex: the `largefiles` key, and `dvcs-autosync expire`.

`largefiles = 10mb` (off by default) makes every git command the daemon runs
see `annex.largefiles=largerthan=10mb` (git_environment.use_largefiles): git's
add then hands such files to git-annex's clean filter, so history keeps a
small pointer per version and the content travels with `git annex sync
--content`. It needs that set-up (docs/beyond-git.md, "Large files through
git-annex": `git annex init` on every machine and the remote, the example's
pushcmd and pullcmd); core/config.py refuses the key with other push and pull
commands, which would leave the content on this machine only.

`dvcs-autosync expire --older-than AGE` drops from the remote the content of
the annexed versions that were replaced (changed or removed) longer ago than
AGE, and that no current file and no newer version uses. It first says,
version by version, exactly what it will drop and what it keeps and why;
only with `--yes` does it drop. It never drops the last copy: a version is
dropped from the remote only while this machine holds it too (git-annex
checks that again as it drops), so old versions move off the server, not out
of existence; `git annex drop --unused` on the machines lets them go for good.
"""
import argparse
import collections
import json
import re
import subprocess
import sys
import time

from autosync.core import cli
from autosync.vcs import git_environment, sizes
from autosync.vcs.commands import environment

AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w|y)", re.I)
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
# An annexed file's pointer (unlocked) or link target (locked): the key is its last part.
POINTER = re.compile(rb"^(?:/annex/objects/|(?:\.\./)*\.git/annex/objects/(?:[^/]+/){3})"
                     rb"([A-Za-z0-9]+-[^/\s]+)\n?$")


def rule(size):
    """annex.largefiles for a `largefiles` size."""
    return "largerthan=%s" % size


def apply(cfg, log=None):
    """In the committer: every git command it runs from now on sees annex.largefiles."""
    size = getattr(cfg, "largefiles", "")
    git_environment.use_largefiles(rule(size) if size else None)
    if size and log is not None:
        proc = subprocess.run(["git", "config", "--get", "annex.uuid"], cwd=cfg.path,
                              env=environment(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if not proc.stdout.strip():
            log.warning("largefiles = %s, but %s has no annex (git annex init NAME, see "
                        "docs/beyond-git.md): files of any size go into git's history",
                        size, cfg.path)


# --- dvcs-autosync expire ------------------------------------------------------------------

class ExpireError(Exception):
    """str() is the one line said."""


def git(folder, *args, data=None):
    proc = subprocess.run(("git",) + args, cwd=folder, env=environment(), input=data,
                          stdin=None if data is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ExpireError("git %s: %s" % (args[0], said[-1] if said else
                                          "exit %d" % proc.returncode))
    return proc.stdout


def parse_age(text):
    match = AGE.fullmatch(text.strip())
    if not match:
        raise ExpireError("--older-than %r: expected an age such as 90d, 12w, 1y (s, m, h, d, "
                          "w, y)" % text)
    return float(match.group(1)) * AGE_UNITS[match.group(2).lower()]


def keys_of(folder, oids):
    """{blob id: annex key} of the blobs among `oids` that are annex pointers."""
    oids = sorted(set(oids))
    if not oids:
        return {}
    checked = git(folder, "cat-file", "--batch-check", data="".join(o + "\n" for o in oids)
                  .encode()).decode().splitlines()
    small = [line.split()[0] for line in checked
             if len(line.split()) == 3 and line.split()[1] == "blob" and int(line.split()[2]) < 1024]
    if not small:
        return {}
    out = git(folder, "cat-file", "--batch", data="".join(o + "\n" for o in small).encode())
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


Version = collections.namedtuple("Version", "key path replaced")


def replaced_versions(folder):
    """Every version of a path that a commit of HEAD's history replaced (changed or removed):
    (blob id, path, the replacing commit's time). Merges' own resolutions are left out
    (so never expired)."""
    out = git(folder, "log", "--no-merges", "--raw", "--no-abbrev", "--no-renames",
              "--format=commit %H %ct", "HEAD").decode("utf-8", "surrogateescape")
    found, when = [], None
    for line in out.splitlines():
        if line.startswith("commit "):
            when = float(line.split()[2])
        elif line.startswith(":"):
            meta, _, path = line.partition("\t")
            words = meta[1:].split()
            old, status = words[2], words[4]
            if status in ("M", "D", "T") and old.strip("0"):
                found.append((old, path, when))
    return found


def current_keys(folder):
    out = git(folder, "ls-tree", "-r", "HEAD").decode("utf-8", "surrogateescape")
    oids = [line.split()[2] for line in out.splitlines() if line.split()[1:2] == ["blob"]]
    return set(keys_of(folder, oids).values())


def whereis(folder, key):
    """(uuids holding the key, whether this repository holds it)."""
    proc = subprocess.run(["git", "annex", "whereis", "--json", "--key", key], cwd=folder,
                          env=environment(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        info = json.loads(proc.stdout.decode().splitlines()[0])
    except (ValueError, IndexError):
        return set(), False
    places = info.get("whereis") or []
    return {p.get("uuid") for p in places}, any(p.get("here") for p in places)


def key_size(key):
    match = re.match(r"[A-Za-z0-9]+-s(\d+)--", key)
    return int(match.group(1)) if match else None


def plan(folder, remote, remote_uuid, age, now=None):
    """-> (drops, kept): [(Version, size)] to drop from the remote, [(Version, why)] kept."""
    now = time.time() if now is None else now
    cutoff = now - age
    replaced = replaced_versions(folder)
    keys = keys_of(folder, [oid for oid, _, _ in replaced])
    keep = current_keys(folder)
    newest = {}  # key -> its latest replacement (a key may be several versions)
    paths = {}
    for oid, path, when in replaced:
        key = keys.get(oid)
        if key:
            newest[key] = max(newest.get(key, 0), when)
            paths.setdefault(key, path)
    drops, kept = [], []
    for key in sorted(newest, key=lambda k: (paths[k], newest[k])):
        version = Version(key, paths[key], newest[key])
        if key in keep or newest[key] >= cutoff:
            continue  # current, or replaced within AGE: not a candidate at all
        holders, here = whereis(folder, key)
        if remote_uuid not in holders:
            continue  # not on the remote (any more): nothing to drop
        if not here:
            kept.append((version, "this machine does not hold it, so the remote may hold "
                                  "the only copy"))
            continue
        drops.append((version, key_size(key)))
    return drops, kept


def describe(version, size, remote):
    return "%s as it was until %s (%s, %s)" % (version.path, cli.show_time(version.replaced),
                                             sizes.human(size) if size is not None else
                                             "size unknown", version.key)


def expire(cfg, age_text, yes, out=sys.stdout):
    folder = cfg.path
    age = parse_age(age_text)
    if not git(folder, "config", "--default", "", "--get", "annex.uuid").strip():
        raise ExpireError("%s is no git-annex repository (git annex init NAME; see "
                          "docs/beyond-git.md, Large files through git-annex)" % folder)
    remote = sizes.upstream_remote(folder)
    remote_uuid = git(folder, "config", "--default", "", "--get",
                      "remote.%s.annex-uuid" % remote).decode().strip()
    if not remote_uuid:
        raise ExpireError("the remote %s has no annex (git annex init on it, then git annex "
                          "sync); nothing to expire" % remote)
    drops, kept = plan(folder, remote, remote_uuid, age)
    verb = "dropping" if yes else "would drop"
    for version, size in drops:
        out.write("%s from %s: %s\n" % (verb, remote, describe(version, size, remote)))
    for version, why in kept:
        out.write("keeping on %s: %s: %s\n" % (remote, describe(version, key_size(version.key),
                                                               remote), why))
    total = sum(size or 0 for _, size in drops)
    if not drops:
        out.write("nothing to expire on %s: no annexed version replaced more than %s ago "
                  "that this machine also holds\n" % (remote, age_text))
        return 0
    if not yes:
        out.write("would free %s on %s (%d versions); nothing dropped: run again with --yes "
                  "to drop exactly these\n" % (sizes.human(total), remote, len(drops)))
        return 0
    failed = 0
    for version, size in drops:
        proc = subprocess.run(["git", "annex", "drop", "--quiet", "--from", remote, "--key",
                               version.key], cwd=folder, env=environment(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        if proc.returncode:
            failed += 1
            said = proc.stdout.decode("utf-8", "replace").strip().splitlines()
            out.write("not dropped: %s: %s\n" % (describe(version, size, remote),
                                                 said[-1] if said else "git-annex refused"))
    out.write("dropped %d versions (%s) from %s%s\n" % (
        len(drops) - failed, sizes.human(total), remote,
        "; %d refused by git-annex (above)" % failed if failed else ""))
    return 1 if failed else 0


def parse(argv):
    p = argparse.ArgumentParser(
        prog="dvcs-autosync expire",
        description="Drop from the remote the annexed content of versions replaced more than "
                    "AGE ago (git-annex; never the last copy). Says exactly what first.")
    p.add_argument("--older-than", metavar="AGE", required=True,
                   help="replaced longer ago than this: 90d, 12w, 1y (s, m, h, d, w, y)")
    p.add_argument("--yes", action="store_true",
                   help="drop them (without it: only say what would be dropped)")
    p.add_argument("--config", help="configuration file (default: ~/.autosync)")
    return p.parse_args(argv)


def main(argv):
    args = parse(list(argv)[1:])  # argv[0] is "expire"
    cfg = cli.load(args.config)
    try:
        return expire(cfg, args.older_than, args.yes)
    except ExpireError as e:
        print("dvcs-autosync expire: %s" % e, file=sys.stderr)
        return 1
