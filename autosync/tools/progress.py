"""What long work is doing and how far it got, on one line of a terminal.

On a terminal (the stream's isatty()) the line is written again in place (carriage
return, erase to the end of the line) as the work goes on, and erased when the work
is done, so the lasting lines around it stay as they are. Anywhere else (a file, a
pipe, the journal) nothing at all is written: no partial lines to read past.

A count of files is shown again only when its whole percent changes (at most 101
writes a step, however many files), so a fast step costs the terminal nothing.
`run()` runs git with its own progress (`--progress`, `add --verbose`) read as it
comes, for init's clone, add and push.
"""
import os
import selectors
import shutil
import subprocess
import sys

from autosync.core.messages import escaped
from autosync.vcs import sizes
from autosync.vcs.commands import environment, why
from autosync.vcs.git_environment import PLAIN


class Progress:
    def __init__(self, out=None):
        self.out = out if out is not None else sys.stdout
        try:
            self.on = self.out.isatty()
        except (AttributeError, ValueError):
            self.on = False
        self.shown = ""
        self.percent = None

    def show(self, text):
        """`text` as the line's new state (on a terminal). A remote's words in it (git's
        progress lines) act on nothing: escaped as messages.printable writes names."""
        text = escaped(text).replace("\n", " ")
        if not self.on or text == self.shown:
            return
        width = max(20, shutil.get_terminal_size().columns - 1)
        self.out.write("\r\033[K" + text[:width])
        self.out.flush()
        self.shown = text

    def files(self, doing, done, total, size, total_size=None, unit="files"):
        """`doing`: DONE of TOTAL files (or other `unit`s; SIZE of TOTAL_SIZE, or SIZE so
        far when the total is not known beforehand), when its percent changed."""
        percent = done * 100 // total if total else 100
        if percent == self.percent:
            return
        self.percent = percent
        self.show("%s: %s of %s %s (%s)" % (
            doing, "{:,}".format(done), "{:,}".format(total), unit,
            "%s so far" % sizes.human(size) if total_size is None else
            "%s of %s" % (sizes.human(size), sizes.human(total_size))))

    def clear(self):
        """The work is done: the line erased, for the next lasting line."""
        if self.on and self.shown:
            self.out.write("\r\033[K")
            self.out.flush()
        self.shown = ""
        self.percent = None


def run(folder, args, on_out=None, on_err=None, gitenv=PLAIN):
    """git ARGS in folder, each line of its output given as it comes (on_out(text) for
    stdout, on_err(text) for stderr; a progress line ends in a carriage return, and
    counts as a line too). -> stdout bytes; RuntimeError("git SUBCOMMAND: why") as
    vcs/git.py's git() raises when it fails. gitenv: vcs/git_environment.py's."""
    proc = subprocess.Popen(("git",) + tuple(args), cwd=folder, env=environment(gitenv=gitenv),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    kept = {proc.stdout: [], proc.stderr: []}
    calls = {proc.stdout: on_out, proc.stderr: on_err}
    rest = {proc.stdout: b"", proc.stderr: b""}
    with selectors.DefaultSelector() as selector:
        for stream in kept:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                stream = key.fileobj
                data = os.read(stream.fileno(), 65536)
                if not data:
                    selector.unregister(stream)
                    data, rest[stream] = rest[stream], b""
                    lines = [data] if data else []
                else:
                    kept[stream].append(data)
                    lines = (rest[stream] + data).replace(b"\r", b"\n").split(b"\n")
                    rest[stream] = lines.pop()
                for line in lines:
                    if line and calls[stream]:
                        calls[stream](os.fsdecode(line))
    proc.stdout.close()
    proc.stderr.close()
    if proc.wait():
        said = " | ".join(why(b"".join(kept[proc.stderr]).decode(errors="replace")))
        raise RuntimeError("git %s: %s" % (args[0], said or "exit %d" % proc.returncode))
    return b"".join(kept[proc.stdout])
