"""Long work under way in the committer: the status' `progress` field, and its words.

A first sync of a folder of many files (its first commit and push, or the first pull
of them onto another machine) takes minutes; `status` and the tray then say what the
committer is doing and, where it can be known, how far it is. The field is None while
nothing long runs; during a step on LONG files or more (or a rescan of a folder with
no commit yet) it is {"doing": STEP, "files": N or None, "done": N or None,
"since": epoch seconds}, and each change is published as the `progress` event (the
tray has no other way to hear of it), at most once per whole percent.

What "how far" honestly means, step by step:
  * adding (git add of a rescan, or of a batch: a command string the user may have
    changed, run as one process): the files it was given, when that is known (a
    batch), and since when; no count of those done: the command says nothing of them;
  * committing (commitcmd, or the quick commit of a batch): the files the commit
    records (known: git listed them) and since when;
  * pushing (pushcmd): the files the commits not pushed yet change (counted as they are
    made; at the first push after a start, one diff of the upstream and HEAD), and since
    when; git's own `--progress` is not read: pushcmd is a command string run whole
    (vcs/commands.py gives its output at its end), which may not even be git;
  * writing (the pull's new versions, written by vcs/pull/git.py's guarded writer, our
    own code): DONE of TOTAL files, counted as each is made complete.
"""

LONG = 1000  # files: a step on fewer is quick, and said by `state` alone
STEPS = ("adding", "committing", "pushing", "writing")


def text(progress, when=str):
    """'committing 3,000 files, since 10:42:05' (when: how a time is shown)."""
    files, done = progress.get("files"), progress.get("done")
    count = "{:,}".format(files) if files is not None else None
    doing = progress.get("doing")
    if doing == "adding":
        words = "adding the folder's files to the history" + (
            " (%s files)" % count if count else "")
    elif doing == "committing":
        words = "committing %s files" % count if count else "committing"
    elif doing == "pushing":
        words = "pushing %s files to the remote" % count if count else "pushing to the remote"
    elif doing == "writing":
        words = "writing the pulled files: %s of %s (%d%%)" % (
            "{:,}".format(done or 0), count, (done or 0) * 100 // files) if files else \
            "writing the pulled files"
    else:
        words = str(doing)
    since = progress.get("since")
    return words + (", since %s" % when(since) if since else "")
