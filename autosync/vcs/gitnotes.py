"""Descriptions of commits already pushed: git notes that travel with the branch.

A pushed commit is never rewritten, so a description the user gives for it
(`describe` naming that commit) goes into a note on it, in refs/notes/autosync.
The configured push and pull commands move branches only, and are the user's;
the notes ref travels by itself, with plain git, to and from the remote the
branch follows:

  * pushed right after a note is added (a refusal because another machine
    added one meanwhile: fetched, merged, pushed again), and after the next
    successful push when the remote was away;
  * fetched after every pull into refs/notes/autosync-fetched and merged into
    refs/notes/autosync (`cat_sort_uniq`: texts from several machines for one
    commit are all kept, never a conflict).

`dvcs-autosync log` shows a commit's notes beside its own text. Only when the
DVCS is git; another DVCS's descriptions of pushed commits go on the next commit.
"""
import logging
import os

from autosync.vcs import thin
from autosync.vcs.git import git
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.gitnotes")

REF = "refs/notes/autosync"
FETCHED = "refs/notes/autosync-fetched"
PUSH_TRIES = 3


def remote(folder, gitenv=PLAIN):
    """The remote the checked-out branch follows (origin when it says none)."""
    branch = git(folder, "symbolic-ref", "-q", "--short", "HEAD", check=False, gitenv=gitenv)
    if branch:
        name = git(folder, "config", "--get", "branch.%s.remote" % os.fsdecode(branch.strip()),
                   check=False, gitenv=gitenv)
        if name and name.strip() and name.strip() != b".":
            return os.fsdecode(name.strip())
    return "origin"


def add(folder, rev, text, gitenv=PLAIN):
    """Add `text` to the note of commit `rev`, which must be in HEAD's history.
    -> the commit's subject, or None when there is no such commit here."""
    if git(folder, "merge-base", "--is-ancestor", rev, "HEAD", check=False,
           gitenv=gitenv) is None:
        return None
    # The text on stdin: a command line is every local user's to read.
    git(folder, "notes", "--ref", REF, "append", "-F", "-", rev, data=text.encode() + b"\n",
        gitenv=gitenv)
    subject = git(folder, "log", "-1", "--format=%s", rev, check=False, gitenv=gitenv) or b""
    return subject.decode("utf-8", "replace").strip()


def push(folder, gitenv=PLAIN):
    """Send the notes to the remote; True if it has them now."""
    where = remote(folder, gitenv=gitenv)
    for attempt in range(PUSH_TRIES):
        if git(folder, "push", "-q", where, "%s:%s" % (REF, REF), check=False,
               gitenv=gitenv) is not None:
            return True
        fetch(folder)  # refused: another machine's notes first, then again
    log.warning("the descriptions (git notes %s) could not be pushed to %s; they go with "
                "the next push", REF, where)
    return False


def fetch(folder, gitenv=PLAIN):
    """Bring the remote's notes in and merge them with ours; quiet when it has none."""
    where = remote(folder, gitenv=gitenv)
    got = git(folder, "fetch", "-q", "--no-write-fetch-head", where, "+%s:%s" % (REF, FETCHED),
              check=False, gitenv=gitenv)
    if got is None:
        return  # no notes on the remote yet (or it is away: the pull said so)
    theirs = git(folder, "rev-parse", "-q", "--verify", FETCHED, check=False, gitenv=gitenv)
    ours = git(folder, "rev-parse", "-q", "--verify", REF, check=False, gitenv=gitenv)
    if not theirs or theirs == ours:
        return
    try:  # a thin machine: the notes' texts now, so that `log` reads them offline
        thin.bring_below(folder, [FETCHED], [REF] if ours else [], "the descriptions",
                         gitenv=gitenv)
    except thin.Unreachable as e:
        log.warning("%s; they are merged at the next pull", e)
        return
    if not ours:
        git(folder, "update-ref", REF, theirs.strip().decode(), gitenv=gitenv)
    elif git(folder, "merge-base", "--is-ancestor", FETCHED, REF, check=False,
             gitenv=gitenv) is None:
        git(folder, "notes", "--ref", REF, "merge", "-q", "-s", "cat_sort_uniq", FETCHED,
            gitenv=gitenv)


def texts(folder, gitenv=PLAIN):
    """{commit id: its notes as one line} for every commit with a note."""
    out = git(folder, "notes", "--ref", REF, "list", check=False, gitenv=gitenv) or b""
    pairs = [line.split() for line in out.decode().splitlines() if line.strip()]
    if not pairs:
        return {}
    batch = git(folder, "cat-file", "--batch",
                data="".join(note + "\n" for note, _ in pairs).encode(), gitenv=gitenv)
    found, at = {}, 0
    for note, commit in pairs:
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        body = batch[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
        at = header_end + 1 + size + 1
        found[commit] = "; ".join(line.strip() for line in body.splitlines() if line.strip())
    return found
