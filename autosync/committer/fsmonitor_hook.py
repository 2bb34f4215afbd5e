"""git's fsmonitor hook (protocol version 2), answered from the committer's state file.

git runs it as `PYTHON -I -S committer/fsmonitor_hook.py STATE 2 TOKEN` (core.fsmonitor, given
by committer/fsmonitor.py to the committer's staging commands only) before it looks at the
working tree: it prints a new token and a NUL, then the paths that may have changed
since TOKEN, each NUL-ended, or `/` (look at everything). git skips the lstat() of
every other file in the index.

Deliberately standalone (stdlib only, no autosync import, no site packages): git
starts it for every command that reads the index, so its start-up is the cost.

STATE (written whole and renamed into place by fsmonitor.BatchJournal):
    autosync-fsmonitor 1\\n RUN\\n FLOOR SEQ BLIND\\n
then NUL-ended entries `SEQ:PATH` (the last batch that named PATH) or `*:PATH` (a
tracked file the watcher never reports: always named). A token is `autosync:RUN:SEQ`;
one of another run, below FLOOR (a rescan since) or above SEQ answers `/`, and so
does every token while BLIND is 1 (folders without a watch).
"""
import sys

MAGIC = b"autosync-fsmonitor 1"
NONE = b"autosync:none"  # the token when there is no state: never valid


def answer(state, token):
    """The hook's output (bytes) for `token` (bytes) given the state file's bytes (or None)."""
    try:
        magic, run, numbers, entries = state.split(b"\n", 3)
        floor, seq, blind = (int(n) for n in numbers.split())
    except (AttributeError, ValueError):
        return NONE + b"\0/\0"
    if magic != MAGIC:
        return NONE + b"\0/\0"
    new = b"autosync:%s:%d" % (run, seq)
    prefix, _, since = token.rpartition(b":")
    if blind or prefix != b"autosync:" + run or not since.isdigit() \
            or not floor <= int(since) <= seq:
        return new + b"\0/\0"
    since = int(since)
    out = [new]
    for entry in entries.split(b"\0"):
        when, _, path = entry.partition(b":")
        if path and (when == b"*" or int(when) > since):
            # A folder's name (a moved or removed folder) must end with "/" for git to
            # take everything below it; for a file the second form matches nothing.
            out += (path, path + b"/")
    return b"\0".join(out) + b"\0"


def main(argv):
    if len(argv) < 3 or argv[2] != "2":
        sys.stderr.write("autosync fsmonitor hook: only protocol version 2\n")
        return 1
    try:
        with open(argv[1], "rb") as f:
            state = f.read()
    except OSError:
        state = None
    token = argv[3].encode("utf-8", "surrogateescape") if len(argv) > 3 else b""
    sys.stdout.buffer.write(answer(state, token))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
