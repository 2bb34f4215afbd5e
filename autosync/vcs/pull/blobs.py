"""The new versions of git's pull, streamed from git into the guarded writer's
temporary files (Blobs), through the checkout's filters where they apply."""

import collections
import os
import subprocess
import threading

from autosync.vcs.commands import environment
from autosync.vcs.pull.common import PullFailed


class Blobs:
    """The new versions, streamed from git into the guarded writer's temporary files:
    `git cat-file --batch` for plain contents, read object by object in chunks, git
    streaming each big one (STREAM); `cat-file --filters` per path whose checkout filters
    or line endings apply, which git reads whole (as its own checkout does for a filter).

    The contents asked for in a known order (`ahead`) are all requested at once, by a
    thread, and read as they come: a question and its answer per object would wait on
    the scheduler twice per file (10,000 files: 3 times slower on a loaded machine).
    Anything else is asked of a second cat-file, one object at a time."""

    def __init__(self, pull, paths):
        self.pull = pull
        self.filtered = pull.needs_filters(paths)
        self.procs = {}   # "ahead" / "asked" -> its cat-file
        self.queue = collections.deque()   # the blob ids "ahead" will answer, in order

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for proc in self.procs.values():
            if proc.returncode is None and self.queue:
                proc.kill()   # (answers nobody will read: a pull that failed)
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            proc.wait()

    def cat_file(self):
        return subprocess.Popen(("git",) + STREAM + ("cat-file", "--batch"), cwd=self.pull.folder,
                                env=environment(gitenv=self.pull.gitenv), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def ahead(self, entries):
        """The new versions of `entries` will be asked for in this order: request them."""
        oids = [e.new for e in entries if e.path not in self.filtered or e.new_mode == "120000"]
        if not oids or "ahead" in self.procs:
            return
        proc = self.procs["ahead"] = self.cat_file()
        self.queue.extend(oids)

        def ask():
            try:
                for oid in oids:
                    proc.stdin.write(oid.encode() + b"\n")
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass  # killed: the pull failed
        threading.Thread(target=ask, name="cat-file-requests", daemon=True).start()

    def source(self, path, oid, mode):
        """What the writer's prepare() takes: a link's target as bytes, else a callable
        that streams the content into an fd."""
        if mode == "120000":
            chunks = []
            self.plain(oid, chunks.append)
            return b"".join(chunks)
        if path in self.filtered:
            return lambda fd: self.with_filters(oid, path, fd)
        return lambda fd: self.plain(oid, lambda chunk: write_all(fd, chunk))

    def plain(self, oid, out):
        if self.queue and self.queue[0] == oid:
            self.queue.popleft()
            proc = self.procs["ahead"]
        else:
            if "asked" not in self.procs:
                self.procs["asked"] = self.cat_file()
            proc = self.procs["asked"]
            proc.stdin.write(oid.encode() + b"\n")
            proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise PullFailed("git cat-file: %s is missing" % oid)
        left = int(header[2])
        while left:
            self.pull.stop_point()  # (a big file's content: the stop need not wait for it)
            chunk = proc.stdout.read(min(left, CHUNK))
            if not chunk:
                raise PullFailed("git cat-file: %s was cut short" % oid)
            out(chunk)
            left -= len(chunk)
        proc.stdout.read(1)  # the newline after each object

    def with_filters(self, oid, path, fd):
        """A blob as checked out at path. The path goes on stdin (`--batch` with
        --filters takes "OID PATH" as %(rest)); one object per run, since git 2.39's
        header gives the unfiltered size: the header (the path) is skipped instead,
        and the newline git puts after the content held back."""
        proc = subprocess.Popen(("git",) + STREAM + ("cat-file", "--batch=%(rest)", "--filters",
                                                  "-z"),
                                cwd=self.pull.rules_cwd(),
                                env=environment(self.pull.rules_env(), gitenv=self.pull.gitenv),
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            proc.stdin.write(b"%s %s\0" % (oid.encode(), os.fsencode(path)))
            proc.stdin.close()
            header = os.fsencode(path).lstrip(b" \t\n\v\f\r") + b"\n"
            if proc.stdout.read(len(header)) != header:
                raise PullFailed("git cat-file: could not read %s for %s" % (oid, path))
            held = b""
            while True:
                self.pull.stop_point()
                chunk = proc.stdout.read(CHUNK)
                if not chunk:
                    break
                write_all(fd, held)
                held = chunk
            if not held.endswith(b"\n"):
                raise PullFailed("git cat-file: could not read %s for %s" % (oid, path))
            write_all(fd, held[:-1])
        finally:
            proc.stdout.close()
            proc.wait()


CHUNK = 1 << 20

# How git streams a big blob out of a pack (docs/large-folders.md, "A big file's pull"):
# it reads an undeltified blob above core.bigFileThreshold (16 MB, git_environment) in
# chunks, but through the pack's memory maps, windows of up to 1 GiB that all stay mapped
# (core.packedGitLimit: 32 TiB on 64 bits): every page read stays in cat-file's resident
# memory, a 1 GB pull's cat-file held 1 GB. Windows of 16 MB, at most 32 MB mapped (git's
# 32-bit defaults are 32 MB and 256 MB): an old window is unmapped as the next is mapped.
STREAM = ("-c", "core.packedGitWindowSize=16m", "-c", "core.packedGitLimit=32m")


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
