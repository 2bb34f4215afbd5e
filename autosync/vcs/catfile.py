"""git's own request for a blob as checked out at a path: `git cat-file --filters`, batched.

A git-only request, apart from the DVCS-agnostic runner (vcs/commands.py, which runs a
configured `git cat-file --filters %s:./%s` line with it); gitmerge and pullleftovers
read pulled versions with it. Not in git.py, which runs git through the runner's
environment: the runner needs this request too, and would import git.py back.
"""
import os


# A blob as checked out at a path (its smudge filters): the object and the path on stdin
# (read as %(rest)), never on the command line; git 2.39 gives the unfiltered size in
# --batch's header, so the output is the header (the path again) and the content and a
# newline, and the header is cut instead (filtered_request).
FILTERED = ["git", "cat-file", "--batch=%(rest)", "--filters", "-z"]


def filtered_request(oid, path):
    """(FILTERED's standard input, the header its output begins with) for the object
    `oid` (bytes or str) as checked out at `path`."""
    oid = oid.encode() if isinstance(oid, str) else oid
    return (oid + b" " + os.fsencode(path) + b"\0",
            os.fsencode(path).lstrip(b" \t\n\v\f\r") + b"\n")
