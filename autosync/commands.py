"""Fill the config's `%s` command templates and run them: the only place a shell appears.

A template holds one command per line; its `%s` are filled in order over all
lines, each with exactly one argument, whose text is never run or expanded:
* a plain line (no SHELL_CHARS, no leading `VAR=`) is split with shlex and run
  without a shell; a `%s` inside a longer token is replaced inside that token;
* a shell line runs as `/bin/sh -c LINE NAME ARGS...` with each `%s` turned into
  a positional parameter (`"${1}"`, adapted to the quotes around it), so the
  arguments never become part of the script at all.

Many paths for one template (run_many) go into as few runs as the line allows:
a plain `git add|rm ... %s` line, its `%s` the last word, gets them all on its
standard input (`--pathspec-from-file=- --pathspec-file-nul`: one process, no
argument limit, same meaning as the paths on the command line); any other line
that can take many gets them as arguments, in chunks under the argument limit.
"""
import contextlib
import logging
import os
import re
import shlex
import signal
import subprocess
from collections import namedtuple

from autosync import git_environment

log = logging.getLogger("autosync.commands")

# Any of these anywhere in a line (outside the %s) sends the line to /bin/sh.
SHELL_CHARS = frozenset("|&;<>()$`*?[]{}~!#\\")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")   # `VAR=value cmd` needs a shell too
_MARK = "\0"   # stands for %s while shlex splits a plain line: a config value cannot hold NUL
_REF = {None: '"%s"', '"': "%s", "'": "'\"%s\"'"}   # a parameter reference, by enclosing quote
_EDGE = " \t()|&;"   # what may stand around a whole-word %s ("" in _EDGE: line start/end)
CHUNK_BYTES = 512 * 1024   # argv bytes per run_many run, well under the usual 2 MiB ARG_MAX
# git commands that read their pathspecs from standard input (git 2.26 on); git says 129
# for an option it does not know, and such a git gets the paths as arguments instead.
PATHSPEC_STDIN = frozenset(("add", "rm"))
PATHSPEC_OPTIONS = ["--pathspec-from-file=-", "--pathspec-file-nul"]
UNKNOWN_OPTION = 129


class _NoStdin(Exception):
    """This git cannot read pathspecs from stdin."""


REMOTE_LINES = 5  # lines of a remote's own words kept in a failure's message
REMOTE_CHARS = 400  # and at most this much of them


def remote_said(output):
    """A remote's reason for refusing, from a push's or pull's output, as one line ("" if
    it gave none): its own words (git and Mercurial print them as `remote: ...`) and git's
    verdict per branch (` ! [remote rejected] main -> main (pre-receive hook declined)`).
    Without them a refusal shows only git's last line, "failed to push some refs"."""
    said = []
    for line in output.splitlines():
        line = " ".join(line.split())  # git pads `remote:` lines with blanks
        if line.startswith("remote:"):
            line = line[len("remote:"):].strip()
        elif not (line.startswith("! [") and "rejected]" in line):
            continue
        if line and line not in said:
            said.append(line)
    text = "; ".join(said[:REMOTE_LINES])
    return text if len(text) <= REMOTE_CHARS else text[:REMOTE_CHARS - 3] + "..."


class CommandFailed(Exception):
    """A command exited non-zero, could not start, or timed out. str() is one line: what
    ran, what a remote said (remote_said) and the output's last line."""

    def __init__(self, name, command, returncode, output, reason=None):
        self.name, self.command, self.returncode, self.output = name, command, returncode, output
        last = next((l.strip() for l in reversed(output.splitlines()) if l.strip()), "")
        said = remote_said(output)
        message = f"{name} failed ({reason or f'exit {returncode}'}): {command}"
        if said:
            message += f": the remote said: {said}"
            if remote_said(last):
                last = ""  # said already
        super().__init__(message + (f"; {last}" if said and last else f": {last}" if last else ""))


Result = namedtuple("Result", "returncode output")   # output: stdout+stderr of the lines run


def environment(extra=None):
    """os.environ plus the suite's settings (git's among them), then `extra`."""
    env = dict(os.environ)
    env.pop("LANGUAGE", None)   # it would override LC_ALL for gettext (German `git status`)
    env.update(git_environment.variables(env))
    env.update(LC_ALL="C.UTF-8", GIT_LITERAL_PATHSPECS="1", AUTOSYNC_DAEMON="1")
    env.update(extra or {})
    return env


def show(arg):
    """Quote one argument for messages: pasteable into bash, and always on one line."""
    if arg.isprintable():   # False for newlines, control characters and undecodable bytes
        return shlex.quote(arg)
    return "$'" + "".join(map(_escape, arg)) + "'"


def _escape(ch):
    if "\udc80" <= ch <= "\udcff":   # a byte that was not UTF-8 (surrogateescape)
        return "\\x%02x" % (ord(ch) - 0xDC00)
    if not ch.isprintable():
        return ch.encode("unicode_escape").decode("ascii")
    return "\\" + ch if ch in "\\'" else ch


def _shell_script(line, many):
    """Turn each %s of a shell line into a positional parameter reference.

    Tracks only '...', "..." and backslashes (a backslash before a %s is
    dropped); a %s nested deeper, as in "$(x %s)", may be word-split, but its
    text is still never run.  With `many`, a lone %s that is a whole word
    outside quotes becomes "$@".  Returns (script, can_take_many)."""
    out, quote, i, n, whole = [], None, 0, 0, False
    while i < len(line):
        if line.startswith("%s", i):
            n += 1
            whole = quote is None and line[i - 1:i] in _EDGE and line[i + 2:i + 3] in _EDGE
            out.append(_REF[quote] % ("$@" if many and whole else "${%d}" % n))
            i += 2
        elif line[i] == "\\" and quote != "'":
            before_ref = line.startswith("%s", i + 1)
            out.append("" if before_ref else line[i:i + 2])
            i += 1 if before_ref else 2
        else:
            if line[i] in "'\"" and quote in (None, line[i]):
                quote = None if quote else line[i]
            out.append(line[i])
            i += 1
    return "".join(out), n == 1 and whole


def _interleave(parts, args):
    """parts[0], next arg, parts[1], next arg, ... parts[-1]"""
    yield parts[0]
    for part in parts[1:]:
        yield next(args)
        yield part


class _Line:
    """One command of a template, parsed once."""

    def __init__(self, name, text):
        self.name, self.text, self.nargs = name, text, text.count("%s")
        self.shell = bool(SHELL_CHARS.intersection(text)) or bool(_ASSIGNMENT.match(text))
        if self.shell:
            self.script, self.many = _shell_script(text, many=False)
            if self.many:
                self.script_many = _shell_script(text, many=True)[0]
        else:
            self.tokens = shlex.split(text.replace("%s", _MARK))   # ValueError: bad quotes
            self.many = self.nargs == 1 and _MARK in self.tokens
        t = getattr(self, "tokens", [])
        self.git = t[1] if (self.many and len(t) > 2 and os.path.basename(t[0]) == "git"
                            and t[-1] == _MARK) else None   # `git SUBCOMMAND ... %s`
        self.stdin = self.git in PATHSPEC_STDIN

    def fill_stdin(self, args):
        """-> (argv, command as shown, stdin): every arg a NUL-ended pathspec on stdin."""
        argv = self.tokens[:2] + PATHSPEC_OPTIONS + self.tokens[2:-1]   # options before `--`
        more = f" (and {len(args) - 1} more)" if len(args) > 1 else ""
        return argv, " ".join(map(show, argv)) + " < " + show(args[0]) + more, \
            b"".join(os.fsencode(a) + b"\0" for a in args)

    def fill(self, args, many=False):
        """-> (argv, command as shown). many: all args go in the one %s (where self.many)."""
        if many:
            argv = (["/bin/sh", "-c", self.script_many, self.name, *args] if self.shell
                    else [a for t in self.tokens for a in (args if t == _MARK else [t])])
            more = f" (and {len(args) - 1} more)" if len(args) > 1 else ""
            return argv, self.fill(args[:1])[1] + more
        if self.shell:
            shown = "".join(_interleave(self.text.split("%s"), map(show, args)))
            return ["/bin/sh", "-c", self.script, self.name, *args], shown
        it = iter(args)
        argv = ["".join(_interleave(t.split(_MARK), it)) for t in self.tokens]
        return argv, " ".join(map(show, argv))


def _spawn(argv, cwd, env, timeout, split, data=None):
    """Run argv (data: its stdin, else none); -> (returncode, stdout, stderr, timed_out).
    Output is combined unless split."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if split else subprocess.STDOUT,
                                start_new_session=True)   # its own process group, for the kill
    except OSError as e:   # like the shell: 127 not found, 126 cannot run (E2BIG, EACCES, ...)
        code = 127 if isinstance(e, FileNotFoundError) else 126
        return code, b"", f"{e.filename or argv[0]}: {e.strerror}".encode(), False
    try:
        out, err = proc.communicate(data, timeout=timeout)
        return proc.returncode, out, err or b"", False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)   # the whole group: `sh -c` children too
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:   # a daemonised grandchild still holds the pipe
            out, err = b"", b""
        return proc.returncode, out or b"", err or b"", True


def _arg_bytes(s):
    return len(os.fsencode(s)) + 1 + 8   # the string, its NUL, its pointer


def _chunks(paths, env, fixed):
    """Split paths so that each run's argv + environment stays far below ARG_MAX."""
    room = os.sysconf("SC_ARG_MAX") - sum(_arg_bytes(k + "=" + v) for k, v in env.items())
    limit = max(min(CHUNK_BYTES, room // 2) - fixed, 4096)
    chunk, size = [], 0
    for p in paths:
        if chunk and size + _arg_bytes(p) > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(p)
        size += _arg_bytes(p)
    if chunk:
        yield chunk


class Template:
    """A config value such as addcmd: `name` is its key, for messages."""

    def __init__(self, name, text):
        self.name, self.text = name, text
        self.lines = [_Line(name, l.strip()) for l in text.split("\n") if l.strip()]
        self.nargs = sum(l.nargs for l in self.lines)
        self.empty = not self.lines
        self.many = self.nargs == 1 and any(l.many for l in self.lines)
        # A plain `git add ... %s`: a folder given to it stages exactly the files in it.
        self.git_add = len(self.lines) == 1 and self.lines[0].git == "add"

    def run(self, *args, cwd, check=True, timeout=None, env=None):
        """Fill the %s with args and run; env: variables added to environment()."""
        return self._run(self._fill(args), cwd, check, timeout, environment(env))[0]

    def output(self, *args, cwd, timeout=None, env=None):
        """stdout (only) of the last command, decoded like a file name, trailing newlines cut."""
        return os.fsdecode(self.output_bytes(*args, cwd=cwd, timeout=timeout, env=env)).rstrip("\n")

    def output_bytes(self, *args, cwd, timeout=None, env=None):
        """stdout (only) of the last command, byte for byte (a file's content)."""
        return self._run(self._fill(args), cwd, True, timeout, environment(env), split=True)[1]

    def run_many(self, paths, cwd, timeout=None, env=None):
        """Run for every path, many paths per run where the template allows.

        -> [(path, CommandFailed)] for the paths that failed. A template that
        cannot take many runs once per path, the path filling every %s."""
        paths, env, failed = [os.fsdecode(p) for p in paths], environment(env), []
        if self.empty or not paths:
            return []
        if self.nargs == 0:
            raise ValueError(f"{self.name} has no %s to put paths in")
        if not self.many:
            return self._one_by_one(paths, cwd, timeout, env)
        line = next(l for l in self.lines if l.nargs)
        if line.stdin:
            try:
                return self._halves(paths, cwd, timeout, env, stdin=True)
            except _NoStdin:
                line.stdin = False   # an older git: arguments from now on
        fixed = sum(_arg_bytes(a) for a in line.fill(["x"])[0])
        for chunk in _chunks(paths, env, fixed):
            failed += self._halves(chunk, cwd, timeout, env)
        return failed

    def _halves(self, paths, cwd, timeout, env, stdin=False):
        """Run for all paths at once; on failure split them in two and try each half, so
        that a bad path does not fail the others and costs a few runs, not one per path."""
        filled = [(l.fill_stdin(paths) if stdin else l.fill(paths, many=True)) if l.nargs
                  else l.fill([]) for l in self.lines]
        try:
            self._run(filled, cwd, True, timeout, env)
            return []
        except CommandFailed as e:
            if stdin and e.returncode == UNKNOWN_OPTION and "pathspec-from-file" in e.output:
                raise _NoStdin() from e
            if len(paths) == 1:
                # Said as the path runs alone: on the command line, as the user wrote it.
                return self._one_by_one(paths, cwd, timeout, env) if stdin else [(paths[0], e)]
            half = len(paths) // 2
            return (self._halves(paths[:half], cwd, timeout, env, stdin)
                    + self._halves(paths[half:], cwd, timeout, env, stdin))

    def _one_by_one(self, paths, cwd, timeout, env):
        failed = []
        for p in paths:
            try:
                self._run(self._fill([p] * self.nargs), cwd, True, timeout, env)
            except CommandFailed as e:
                failed.append((p, e))
        return failed

    def _fill(self, args):
        args = [os.fsdecode(a) for a in args]
        if len(args) != self.nargs:
            raise ValueError(f"{self.name} takes {self.nargs} argument(s), got {len(args)}")
        it = iter(args)
        return [l.fill([next(it) for _ in range(l.nargs)]) for l in self.lines]

    def _run(self, filled, cwd, check, timeout, env, split=False):
        """Run filled lines in order up to the first failure -> (Result, last stdout if split).

        A timeout raises even with check=False: there is no exit status to report."""
        rc, outputs, out = 0, [], b""
        for i, (argv, shown, *data) in enumerate(filled):
            log.debug("%s: %s", self.name, shown)
            last = split and i == len(filled) - 1
            rc, out, err, timed_out = _spawn(argv, cwd, env, timeout, last, *data)
            text = (err + out).decode("utf-8", errors="replace")   # err is empty unless split
            outputs.append(text)
            if timed_out:
                raise CommandFailed(self.name, shown, rc, text, f"timed out after {timeout:g} s")
            if rc and check:
                raise CommandFailed(self.name, shown, rc, text)
            if rc:
                break
        return Result(rc, "".join(outputs)), out
