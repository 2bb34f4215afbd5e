"""Fill the config's `%s` command templates and run them: the only place a shell appears.

A template holds one command per line; its `%s` are filled in order over all
lines, each with exactly one argument, whose text is never run or expanded:
* a plain line (no SHELL_CHARS, no leading `VAR=`) is split with shlex and run
  without a shell; a `%s` inside a longer token is replaced inside that token;
* a shell line runs as `/bin/sh -c LINE NAME ARGS...` with each `%s` turned into
  a positional parameter (`"${1}"`, adapted to the quotes around it), so the
  arguments never become part of the script at all.

Every local user can read every process's command line (/proc/PID/cmdline), so
a plain line of a form that can take its argument on standard input gets it
there, with the same meaning as on the command line (private forms):
* `git add|rm|checkout ... %s`, `%s` the last word: `--pathspec-from-file=-
  --pathspec-file-nul`, as many paths as there are in one process;
* `git commit ... -m %s` (also `-m"...%s..."`, `--message=`, `-am`): `-F -`;
  `hg commit ... -m %s`: `-l -`;
* `git log ... -- %s`: `--stdin`, then the path after a `--` line;
* `git ls-tree -r -z ... %s -- %s`: the revision's whole listing, cut to the path;
* `git cat-file --filters %s:./%s`: the object found with `--batch-check`, then
  its content with `--batch --filters`, both reading stdin;
* `hg add|remove|forget|cat|files|log ... %s`, `%s` last: `listfile0:/dev/stdin`.
Any other line (a shell line above all) gets its arguments on its command line.

hg reads a name as a pattern when it begins with a kind (`re:`, `glob:`, `set:`,
`listfile:`, `path:`...), on its command line and in a list alike: each name a plain
hg line gives it is made literal (hg_literal): `path:NAME` in a list, `./NAME` as a
whole argument after `--` (hg's rename takes no pattern for its destination).

Many paths for one template (run_many) go into as few runs as the line allows:
a private form gets them all on its standard input (one process, no argument
limit); any other line that can take many gets them as arguments, in chunks
under the argument limit.
"""
import contextlib
import functools
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from collections import namedtuple

from autosync.core.problems import REFUSED_BY_KEY
from autosync.vcs import daemon_identity
from autosync.vcs.catfile import FILTERED, filtered_request
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.commands")

# Any of these anywhere in a line (outside the %s) sends the line to /bin/sh.
SHELL_CHARS = frozenset("|&;<>()$`*?[]{}~!#\\")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")   # `VAR=value cmd` needs a shell too
_MARK = "\0"   # stands for %s while shlex splits a plain line: a config value cannot hold NUL
_REF = {None: '"%s"', '"': "%s", "'": "'\"%s\"'"}   # a parameter reference, by enclosing quote
_EDGE = " \t()|&;"   # what may stand around a whole-word %s ("" in _EDGE: line start/end)
CANCEL_POLL = 0.1   # seconds between looks at a cancelled command's end (_until_cancelled)
CHUNK_BYTES = 512 * 1024   # argv bytes per run_many run, well under the usual 2 MiB ARG_MAX
# git commands that read their pathspecs from standard input (git 2.26 on); git says 129
# for an option it does not know, and such a git gets the paths as arguments instead.
PATHSPEC_STDIN = frozenset(("add", "rm", "checkout"))
PATHSPEC_OPTIONS = ["--pathspec-from-file=-", "--pathspec-file-nul"]
UNKNOWN_OPTION = 129
# A commit message option -> the options that read the message from stdin instead.
MESSAGE_OPTIONS = {"git": ("-m", "--message", ["-F", "-"], "aqsnv"),   # -am: -a -m
                   "hg": ("-m", "--message", ["-l", "-"], "")}
OTHER_MESSAGE = frozenset(("-m", "--message", "-F", "--file", "-C", "-c", "--reuse-message",
                           "--reedit-message", "-l", "--logfile"))
HG_PATHS = frozenset(("add", "remove", "rm", "forget", "cat", "files", "log"))
HG_LIST = "listfile0:/dev/stdin"   # hg reads the NUL-ended patterns there, as given


def hg_literal(name, listed=False):
    """A name as hg reads it verbatim, never as a pattern (`hg help patterns`): in a
    listfile0 list each entry is a pattern of its own, `path:` makes it a path from the
    root; on the command line `./` (no pattern kind has a `/` or `.` in its name)."""
    if listed:
        return "path:" + name
    return name if name.startswith("./") else "./" + name
LS_TREE_OPTIONS = frozenset(("-r", "-z", "-l", "--long"))
# A failed command's lines that say why, kept in its error (at most ERROR_LINES).
WHY = ("fatal:", "error:", "hint:", "remote:", "abort:", "! [")
ERROR_LINES = 6
ERROR_WIDTH = 400   # characters of one kept line


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


def why(output, limit=ERROR_LINES):
    """The lines of a failed command's output that say why: git's `fatal:`, `error:`,
    `remote:`, a push's `! [rejected]`, hg's `abort:`, a `hint:` paragraph as one line,
    and a command git says to run (`  git config --global user.email ...`); at most
    `limit`, each cut to ERROR_WIDTH. The last non-blank line when none says why."""
    kept = []
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("hint:") and kept and kept[-1].startswith("hint:"):
            kept[-1] += " " + text[5:].strip()   # one sentence wrapped over lines
        elif text.startswith(WHY) or (line.startswith("  ") and text.startswith("git ")) or \
                REFUSED_BY_KEY in text:  # a restricted key's forced command, by name
            kept.append(text)
    if len(kept) > limit:   # the first ones name the failure; the last, what to do
        kept = kept[:limit - 1] + kept[-1:]
    kept = kept or [l.strip() for l in output.splitlines() if l.strip()][-1:]
    return [l if len(l) <= ERROR_WIDTH else l[:ERROR_WIDTH - 3] + "..." for l in kept]


class CommandFailed(Exception):
    """A command exited non-zero, could not start, or timed out. str() is one line:
    the command, then the lines of its output that say why (see why()), joined by " | "."""

    def __init__(self, name, command, returncode, output, reason=None):
        self.name, self.command, self.returncode, self.output = name, command, returncode, output
        self.why = why(output)
        message = f"{name} failed ({reason or f'exit {returncode}'}): {command}"
        super().__init__(message + (": " + " | ".join(self.why) if self.why else ""))


Result = namedtuple("Result", "returncode output")   # output: stdout+stderr of the lines run


def environment(extra=None, gitenv=PLAIN):
    """os.environ plus the suite's settings (git's among them, with what `gitenv`, a
    git_environment.GitEnvironment, adds), then `extra`."""
    env = dict(os.environ)
    env.pop("LANGUAGE", None)   # it would override LC_ALL for gettext (German `git status`)
    env.update(gitenv.variables(env))
    env.update(LC_ALL="C.UTF-8", GIT_LITERAL_PATHSPECS="1")
    env.update(daemon_identity.variables())  # hooks and recovery tell our commands by it
    env["PATH"] = with_our_programs(env.get("PATH", os.defpath))
    env.update(extra or {})
    return env


@functools.lru_cache(maxsize=None)
def our_programs():
    """The folder holding this installation's programs (autosync-notify): a venv's bin/,
    /usr/bin, ~/.local/bin; None when it cannot be told. Looked for once a process:
    every command the daemon runs asks."""
    candidates = [os.path.dirname(sys.executable)]
    try:
        candidates.append(sysconfig.get_path("scripts", "%s_user" % os.name))
    except KeyError:
        pass
    for folder in candidates:
        if folder and os.access(os.path.join(folder, "autosync-notify"), os.X_OK):
            return folder
    return None


def with_our_programs(path):
    """`path` with our programs' folder at its end when it lacks it: a git hook the
    daemon's push runs (hooks/post-receive on a local remote, post-commit) calls
    autosync-notify, which a venv or a systemd unit's short PATH does not hold."""
    ours = our_programs()
    if ours is None or ours in path.split(os.pathsep):
        return path
    return path + os.pathsep + ours if path else ours


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


# One process to run: stdin `data` (None: /dev/null); `post(rc, out, err, spawn)` makes the
# result from its stdout (spawn(argv, data) runs one more); `fallback`: the same with the
# arguments on the command line, for a git that does not know --pathspec-from-file.
Run = namedtuple("Run", "argv shown data post fallback", defaults=(None, None, None))


def _brief(text):
    """A message as shown in logs and errors: its first line, quoted."""
    first = text.split("\n", 1)[0]
    return show(first[:80]) + (" ..." if len(first) > 80 or "\n" in text else "")


def _nul_list(args):
    return b"".join(os.fsencode(a) + b"\0" for a in args)


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
        # A plain hg line: the token indexes of its whole %s after `--` (names, see hg_literal).
        self.hg_names = {i for i, a in enumerate(t) if a == _MARK and "--" in t[:i]} \
            if t and os.path.basename(t[0]) == "hg" else set()
        self.private = "pathspec" if self.stdin else self._private_form(t)

    def _private_form(self, t):
        """The private form (see the module's doc) this plain line has, or None."""
        if len(t) < 2 or self.nargs == 0:
            return None
        prog, sub = os.path.basename(t[0]), t[1]
        if prog == "hg" and sub in HG_PATHS and t[-1] == _MARK:
            return "hglist"
        if sub == "commit" and prog in MESSAGE_OPTIONS and self.nargs == 1 and self._message():
            return "message"
        if prog != "git":
            return None
        if sub == "log" and self.nargs == 1 and t[-2:] == ["--", _MARK]:
            return "log"
        if sub == "ls-tree" and self.nargs == 2 and t[-3:] == [_MARK, "--", _MARK] \
                and {"-r", "-z"} <= set(t[2:-3]) <= LS_TREE_OPTIONS:
            return "ls-tree"
        if t == ["git", "cat-file", "--filters", _MARK + ":./" + _MARK]:
            return "cat-file"
        return None

    def _message(self):
        """-> (index, tokens taken, value with the %s, flags kept) of the one message
        option (`-m V`, `-mV`, `--message=V`, `--message V`, git's `-am V`), or None when
        there is none with the %s, more than one, or another message source (-F, -C)."""
        t = self.tokens
        short, long, _, flags = MESSAGE_OPTIONS[os.path.basename(t[0])]
        found, i = [], 2
        while i < len(t) and t[i] != "--":
            tok = t[i]
            combined = re.fullmatch("-(%s)%s" % ("[%s]*" % flags if flags else "", short[1:]), tok)
            if (tok == long or combined) and i + 1 < len(t):
                found.append((i, 2, t[i + 1], ["-" + combined.group(1)]
                              if combined and combined.group(1) else []))
                i += 1
            elif tok.startswith(long + "="):
                found.append((i, 1, tok[len(long) + 1:], []))
            elif tok.startswith(short) and not tok.startswith("--"):
                found.append((i, 1, tok[len(short):], []))
            elif tok in OTHER_MESSAGE or tok.startswith(("--file=", "--logfile=", "-F")):
                return None
            i += 1
        return found[0] if len(found) == 1 and _MARK in found[0][2] else None

    def fill_stdin(self, args, fallback=True):
        """-> Run with every arg a NUL-ended path on stdin (private forms that take many);
        fallback: with the arguments form for an old git (run_many splits them itself)."""
        more = f" (and {len(args) - 1} more)" if len(args) > 1 else ""
        if self.private == "hglist":
            argv = self.tokens[:-1] + [HG_LIST]
        else:
            argv = self.tokens[:2] + PATHSPEC_OPTIONS + self.tokens[2:-1]   # options before `--`
        listed = [hg_literal(a, listed=True) for a in args] if self.private == "hglist" else args
        return Run(argv, " ".join(map(show, argv)) + " < " + show(listed[0]) + more,
                   _nul_list(listed), fallback=self.fill(args, many=True, private=False)
                   if fallback and self.private == "pathspec" else None)

    def fill_private(self, args):
        """-> Run with the args on stdin (see the module's doc), or None if they cannot."""
        kind, t = self.private, self.tokens
        if kind in ("pathspec", "hglist"):
            rest = iter(args[:-1])   # hg cat -r %s -- %s: the revision stays an argument
            run = self.fill_stdin(args[-1:])
            argv = [(hg_literal(next(rest)) if i in self.hg_names else next(rest))
                    if a == _MARK else a for i, a in enumerate(run.argv)]
            return run._replace(argv=argv, shown=" ".join(map(show, argv)) + " < "
                                + show(hg_literal(args[-1], True) if kind == "hglist"
                                       else args[-1]))
        if kind == "message":
            i, taken, value, flags = self._message()
            argv = t[:i] + flags + MESSAGE_OPTIONS[os.path.basename(t[0])][2] + t[i + taken:]
            text = value.replace(_MARK, args[0])
            return Run(argv, " ".join(map(show, argv)) + " < " + _brief(text), os.fsencode(text))
        if kind == "log" and "\n" not in args[0]:   # git reads paths there line by line
            argv = t[:-2] + ["--stdin"]
            return Run(argv, " ".join(map(show, argv)) + " < -- " + show(args[0]),
                       b"--\n" + os.fsencode(args[0]) + b"\n")
        if kind == "ls-tree":
            argv = [args[0] if a == _MARK else a for a in t[:-2]]
            return Run(argv, " ".join(map(show, argv)) + " (cut to " + show(args[1]) + ")",
                       post=_below(args[1]))
        if kind == "cat-file":
            name = os.fsencode(args[0] + ":./" + args[1])
            argv = ["git", "cat-file", "--batch-check=%(objectname) %(objecttype)", "-z"]
            return Run(argv, "git cat-file --filters < " + show(args[0] + ":./" + args[1]),
                       name + b"\0", post=_filtered(args[1]))
        return None

    def fill(self, args, many=False, private=True):
        """-> Run. many: all args go in the one %s (where self.many); private: on
        stdin where the line's form allows (see the module's doc)."""
        if private and self.private and not self.shell:
            run = self.fill_stdin(args) if many else self.fill_private(args)
            if run is not None:
                return run
        if many:
            argv = (["/bin/sh", "-c", self.script_many, self.name, *args] if self.shell
                    else [a for i, t in enumerate(self.tokens) for a in (
                        [hg_literal(n) for n in args] if i in self.hg_names
                        else args if t == _MARK else [t])])
            more = f" (and {len(args) - 1} more)" if len(args) > 1 else ""
            return Run(argv, self.fill(args[:1], private=False).shown + more)
        if self.shell:
            shown = "".join(_interleave(self.text.split("%s"), map(show, args)))
            return Run(["/bin/sh", "-c", self.script, self.name, *args], shown)
        it = iter(args)
        argv = [hg_literal(next(it)) if i in self.hg_names else
                "".join(_interleave(t.split(_MARK), it)) for i, t in enumerate(self.tokens)]
        return Run(argv, " ".join(map(show, argv)))


def _below(path):
    """post for ls-tree: keep the -z records of `path` and below it ("." is all), as
    `git ls-tree -r -z REV -- PATH` lists them (paths relative to the folder)."""
    rel = os.fsencode(os.path.normpath(path))

    def post(rc, out, err, spawn):
        if rc:
            return rc, out, err
        keep = b""
        for record in out.split(b"\0"):
            name = record.partition(b"\t")[2]
            if name and (rel == b"." or name == rel or name.startswith(rel + b"/")):
                keep += record + b"\0"
        return rc, keep, err
    return post


def _filtered(path):
    """post for cat-file: the object --batch-check found, read with --filters as checked
    out at `path` (its attributes), header cut; a missing one fails as git would."""

    def post(rc, out, err, spawn):
        fields = out.rstrip(b"\n").rsplit(b" ", 1)
        if rc or len(fields) != 2 or fields[1] != b"blob":
            what = "is not a file" if len(fields) == 2 and fields[1] != b"missing" else \
                "does not exist"
            return rc or 128, b"", err + b"fatal: %s %s there\n" % (os.fsencode(show(path)),
                                                                    what.encode())
        oid = fields[0]
        request, header = filtered_request(oid, path)
        rc, out, err2, _ = spawn(FILTERED, request)
        if rc or not out.startswith(header) or not out.endswith(b"\n"):
            return rc or 128, b"", err + err2 + b"fatal: could not read %s\n" % oid
        return 0, out[len(header):-1], err + err2
    return post


class Cancel:
    """Lets another thread (a stop, even from a signal handler) end the commands run with
    it: cancel() sends SIGTERM to the process group of each one running, and (`later`)
    of each one started after it. A command whose start began before cancel() is ended
    even when it is listed after (its child may run before the parent lists it: a
    command that has already said "started" must not outlive the stop). Without locks
    (a signal handler may run while the worker holds one): a command is listed before
    `cancels` is read, and cancel() counts itself before it reads the list, so either
    side sees the other."""

    def __init__(self, later=True):
        self.cancelled = False
        self.cancels = 0   # how many times cancel() was called
        self.later = later
        self.running = set()   # the process groups (= PIDs) of the commands running
        self.ended_by_us = set()   # those it sent SIGTERM

    def cancel(self):
        self.cancels += 1
        self.cancelled = True
        for pid in list(self.running):
            self._end(pid)

    def starting(self):
        """Before a command is spawned: the token its started() is given."""
        return self.cancels

    def started(self, pid, token=None):
        self.running.add(pid)
        if self.cancelled and (self.later or (token is not None and self.cancels != token)):
            self._end(pid)

    def _end(self, pid):
        self.ended_by_us.add(pid)
        _kill_group(pid, signal.SIGTERM)

    def ended(self, pid):
        self.running.discard(pid)
        self.ended_by_us.discard(pid)


def _kill_group(pid, sig):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _spawn(argv, cwd, env, timeout, split, data=None, cancel=None):
    """Run argv (data: its stdin, else none); -> (returncode, stdout, stderr, timed_out).
    Output is combined unless split. cancel: a Cancel that may end it."""
    token = cancel.starting() if cancel is not None else None
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if split else subprocess.STDOUT,
                                start_new_session=True)   # its own process group, for the kill
    except OSError as e:   # like the shell: 127 not found, 126 cannot run (E2BIG, EACCES, ...)
        code = 127 if isinstance(e, FileNotFoundError) else 126
        return code, b"", f"{e.filename or argv[0]}: {e.strerror}".encode(), False
    if cancel is not None:
        cancel.started(proc.pid, token)
    try:
        if cancel is None:
            out, err = proc.communicate(data, timeout=timeout)
        else:
            out, err = _until_cancelled(proc, data, timeout, cancel)
        return proc.returncode, out, err or b"", False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)   # the whole group: `sh -c` children too
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:   # a daemonised grandchild still holds the pipe
            out, err = b"", b""
        return proc.returncode, out or b"", err or b"", True
    finally:
        if cancel is not None:
            cancel.ended(proc.pid)


def _until_cancelled(proc, data, timeout, cancel):
    """proc.communicate(), except that the output of a cancelled command is not waited
    for once it has exited: a process outside its group may hold its pipes (ssh's held
    connection is handed the stdio of each ssh that uses it, until the server's side
    of that session ends). -> (stdout, stderr); a cancelled one's: empty."""
    deadline = None if timeout is None else time.monotonic() + timeout
    first = True
    while True:
        wait = CANCEL_POLL if deadline is None else \
            max(0.0, min(CANCEL_POLL, deadline - time.monotonic()))
        try:
            return proc.communicate(data if first else None, timeout=wait)
        except subprocess.TimeoutExpired:
            first = False
            if deadline is not None and time.monotonic() >= deadline:
                raise
            if proc.pid in cancel.ended_by_us and proc.poll() is not None:
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                return b"", b""


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
    """A config value such as addcmd: `name` is its key, for messages; `gitenv`: the
    git_environment.GitEnvironment its commands run with."""

    def __init__(self, name, text, gitenv=PLAIN):
        self.name, self.text, self.gitenv = name, text, gitenv
        self.lines = [_Line(name, l.strip()) for l in text.split("\n") if l.strip()]
        self.nargs = sum(l.nargs for l in self.lines)
        self.empty = not self.lines
        self.many = self.nargs == 1 and any(l.many for l in self.lines)
        # A plain `git add ... %s`: a folder given to it stages exactly the files in it.
        self.git_add = len(self.lines) == 1 and self.lines[0].git == "add"

    def run(self, *args, cwd, check=True, timeout=None, env=None, cancel=None):
        """Fill the %s with args and run; env: variables added to environment();
        cancel: a Cancel that may end it (it then fails, killed by SIGTERM)."""
        return self._run(self._fill(args), cwd, check, timeout, environment(env, self.gitenv),
                         cancel=cancel)[0]

    def output(self, *args, cwd, timeout=None, env=None):
        """stdout (only) of the last command, decoded like a file name, trailing newlines cut."""
        return os.fsdecode(self.output_bytes(*args, cwd=cwd, timeout=timeout, env=env)).rstrip("\n")

    def output_bytes(self, *args, cwd, timeout=None, env=None):
        """stdout (only) of the last command, byte for byte (a file's content)."""
        return self._run(self._fill(args), cwd, True, timeout, environment(env, self.gitenv),
                         split=True)[1]

    def run_many(self, paths, cwd, timeout=None, env=None):
        """Run for every path, many paths per run where the template allows.

        -> [(path, CommandFailed)] for the paths that failed. A template that
        cannot take many runs once per path, the path filling every %s."""
        paths, env, failed = [os.fsdecode(p) for p in paths], environment(env, self.gitenv), []
        if self.empty or not paths:
            return []
        if self.nargs == 0:
            raise ValueError(f"{self.name} has no %s to put paths in")
        if not self.many:
            return self._one_by_one(paths, cwd, timeout, env)
        line = next(l for l in self.lines if l.nargs)
        if line.private in ("pathspec", "hglist"):
            try:
                return self._halves(paths, cwd, timeout, env, stdin=True)
            except _NoStdin:
                line.private = None   # an older git: arguments from now on
        fixed = sum(_arg_bytes(a) for a in line.fill(["x"], private=False).argv)
        for chunk in _chunks(paths, env, fixed):
            failed += self._halves(chunk, cwd, timeout, env)
        return failed

    def _halves(self, paths, cwd, timeout, env, stdin=False):
        """Run for all paths at once; on failure split them in two and try each half, so
        that a bad path does not fail the others and costs a few runs, not one per path."""
        filled = [l.fill([]) if not l.nargs else l.fill_stdin(paths, fallback=False) if stdin
                  else l.fill(paths, many=True, private=False) for l in self.lines]
        try:
            self._run(filled, cwd, True, timeout, env)
            return []
        except CommandFailed as e:
            if stdin and e.returncode == UNKNOWN_OPTION and "pathspec-from-file" in e.output:
                raise _NoStdin() from e
            if len(paths) == 1:
                return [(paths[0], e)]
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

    def _run(self, filled, cwd, check, timeout, env, split=False, cancel=None):
        """Run filled lines in order up to the first failure -> (Result, last stdout if split).

        A timeout raises even with check=False: there is no exit status to report."""
        rc, outputs, out = 0, [], b""
        for i, run in enumerate(filled):
            last = split and i == len(filled) - 1
            rc, out, err, timed_out = self._spawn(run, cwd, env, timeout, last, cancel)
            if rc == UNKNOWN_OPTION and run.fallback and b"pathspec-from-file" in err + out:
                run = run.fallback   # a git before 2.26
                rc, out, err, timed_out = self._spawn(run, cwd, env, timeout, last, cancel)
            text = (err + out).decode("utf-8", errors="replace")   # err is empty unless split
            outputs.append(text)
            if timed_out:
                raise CommandFailed(self.name, run.shown, rc, text, f"timed out after {timeout:g} s")
            if rc and check:
                raise CommandFailed(self.name, run.shown, rc, text)
            if rc:
                break
        return Result(rc, "".join(outputs)), out

    def _spawn(self, run, cwd, env, timeout, split, cancel=None):
        log.debug("%s: %s", self.name, run.shown)
        if run.post is None:
            return _spawn(run.argv, cwd, env, timeout, split, run.data, cancel)
        rc, out, err, timed_out = _spawn(run.argv, cwd, env, timeout, True, run.data, cancel)
        if timed_out:
            return rc, out, err, timed_out
        rc, out, err = run.post(rc, out, err, lambda argv, data: _spawn(
            argv, cwd, env, timeout, True, data))
        return (rc, out, err, False) if split else (rc, err + out, b"", False)
