"""autosync-remote: the server's side of `syncmethod = ssh`.

    autosync-remote watch REPO
    autosync-remote serve REPO
    autosync-remote poll URL

prints one line per branch movement of the git repository REPO (bare or
not): `REF REVISION` (a removed branch: REVISION is forty zeros). First the
current state of every branch, then every change, each line flushed at once.
The daemon on each machine keeps one of these running over ssh
(autosync/ssh/link.py) and pulls when a line names a revision it lacks.

It waits on inotify (the repository's refs/, recursively, and the folder
holding packed-refs), never on a timer, so an idle watch costs no CPU. (One
exception: a repository on a network filesystem (NFS, SMB, sshfs, ...),
watched from a client that mounts it, where inotify never hears of other
clients' writes: there it also reads the refs every NETWORK_POLL seconds,
and says so once on stderr.) It
ends when the reader goes away: a write that fails (EPIPE), or stdout
reported hung up or in error by poll() while nothing moves, so a dropped
ssh connection never leaves it behind on the server. Needs only Python, git
and this package (pyinotify) on the server.

`serve REPO` is for a key that may do nothing else: in the server's
authorized_keys, `command="autosync-remote serve REPO",restrict` before the
key. sshd then runs it whatever the client asked, the client's command in
SSH_ORIGINAL_COMMAND; it runs only git's fetch and push (git-upload-pack,
git-receive-pack), git-annex's own commands (git-annex-shell, held to REPO)
and the watch of REPO, with REPO as written there (never a path the client
gave), and refuses anything else with one line: a shell, another repository,
any other command or option.
"""
import errno
import os
import re
import select
import shlex
import shutil
import subprocess
import sys

ZERO = "0" * 40
# How every refusal of a restricted key begins (NotAllowed's, and the plain sh forced
# command's of ssh/watch.py): status names the forced command by these words.
REFUSED_BY_KEY = "this key may only sync"
USAGE = "usage: autosync-remote watch REPO | autosync-remote serve REPO | " \
        "autosync-remote poll URL"
# What a key restricted with `serve` may run: git's two ends of a fetch and a push.
GIT_SERVICES = {"git-upload-pack": "upload-pack", "git-receive-pack": "receive-pack"}
# And git-annex's (a folder with `largefiles`): the commands of git-annex-shell that
# git-annex (6.20180312 and later) sends, each with the number of words it takes after
# the directory. configlist reads the repository's annex settings (its UUID; with the
# field autoinit=1 it makes the annex of a repository that has none); p2pstdio moves,
# checks, locks and drops content in git-annex's P2P protocol (its word: the UUID of
# the repository that asks); notifychanges tells git-annex's remotedaemon of ref moves.
# The rest are refused: the older command-per-key forms (inannex, lockcontent, dropkey,
# and sendkey and recvkey, which run rsync's server with options from the client),
# gcryptsetup, and what git-annex-shell would hand to git-shell.
ANNEX_SHELL = "git-annex-shell"
ANNEX_COMMANDS = {"configlist": 0, "notifychanges": 0, "p2pstdio": 1}
# The fields git-annex sends between two `--` after them, and the values git-annex-shell
# itself accepts (it ignores other fields, and reads words after the second `--` as
# options for rsync).
ANNEX_FIELDS = {"autoinit": re.compile(r"1?\Z"),
                "remoteuuid": re.compile(r"[0-9A-Za-z-]*\Z")}
ANNEX_UUID = re.compile(r"[0-9A-Za-z][0-9A-Za-z-]{0,99}\Z")  # never an option
# The only option the client may give besides --uuid (git-annex sends it when run with it).
ANNEX_OPTIONS = ("--debug",)
NETWORK_POLL = 2.0  # seconds between reads of the refs on a network filesystem
POLL = 10.0  # seconds between `git ls-remote`s of `poll` (a server that cannot watch); the
# same as ssh.watch.POLL (this file also runs alone on a server: test_remote checks)
# Filesystems whose files other machines change without this kernel knowing (no inotify).
NETWORK_FS = frozenset(("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "afs", "lustre",
                        "ncpfs", "coda", "gfs2", "ocfs2", "glusterfs", "davfs"))


def filesystem(path, mountinfo="/proc/self/mountinfo"):
    """The type of the filesystem `path` is on (as /proc/self/mountinfo names it), or None."""
    path = os.path.realpath(path)
    best, kind = "", None
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields, _, rest = line.partition(" - ")
                fields = fields.split()
                if len(fields) < 5 or not rest:
                    continue
                # Blanks and backslashes in mount points are written as octal escapes.
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):  # the last, deepest mount wins
                    best, kind = point, rest.split()[0]
    except OSError:
        return None
    return kind


def on_network(kind):
    return bool(kind) and (kind in NETWORK_FS or kind.startswith("fuse"))


class NotARepository(Exception):
    pass


def git_dir(repo):
    """The git directory of `repo` (a bare repository, or a working tree's .git)."""
    repo = os.path.abspath(os.path.expanduser(repo))
    for candidate in (repo, os.path.join(repo, ".git")):
        if os.path.isdir(os.path.join(candidate, "refs")) \
                and os.path.isfile(os.path.join(candidate, "HEAD")):
            return candidate
    raise NotARepository("%s is not a git repository (no refs/ and HEAD in it or in its .git)"
                         % repo)


def branches(gitdir):
    """{ref: revision} of every branch, as git reads them (loose and packed alike)."""
    out = subprocess.run(["git", "--git-dir", gitdir, "for-each-ref",
                          "--format=%(refname) %(objectname)", "refs/heads"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         check=True).stdout
    found = {}
    for line in os.fsdecode(out).splitlines():
        ref, _, rev = line.rpartition(" ")
        if ref:
            found[ref] = rev
    return found


def changes(old, new):
    """The lines `REF REVISION` that take `old` to `new`, in a stable order."""
    lines = ["%s %s" % (ref, rev) for ref, rev in sorted(new.items()) if old.get(ref) != rev]
    return lines + ["%s %s" % (ref, ZERO) for ref in sorted(old) if ref not in new]


class LibcWatch:
    """The same as Watch with the C library's inotify (ctypes) and nothing else: for
    this file sent to a server's python3 that has neither this package nor pyinotify
    (watch.py's watch command does so when autosync-remote is not there)."""
    MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800  # every change
    # (IN_MODIFY ATTRIB CLOSE_WRITE MOVED_FROM MOVED_TO CREATE DELETE DELETE_SELF MOVE_SELF)

    def __init__(self, gitdir):
        import ctypes
        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1: %s" % os.strerror(ctypes.get_errno()))
        self.gitdir, self.refs = gitdir, os.path.join(gitdir, "refs")
        try:
            self._add(gitdir)
            self._add_tree()
        except OSError:
            os.close(self.fd)
            raise

    def _add(self, folder):
        if self.libc.inotify_add_watch(self.fd, os.fsencode(folder), self.MASK) < 0:
            code = self.ctypes.get_errno()
            raise OSError(code, "no inotify watch for %s: %s" % (folder, os.strerror(code)))

    def _add_tree(self):
        """refs/ and every folder below it (adding a watched folder again changes nothing)."""
        for folder, _, _ in os.walk(self.refs):
            try:
                self._add(folder)
            except OSError as e:
                if e.errno != errno.ENOENT:  # a folder gone since the walk: nothing to watch
                    raise

    def fileno(self):
        return self.fd

    def drain(self):
        while True:
            try:
                if not os.read(self.fd, 65536):
                    break
            except BlockingIOError:
                break
        self._add_tree()  # a branch name with a new folder in it (feature/x)

    def close(self):
        os.close(self.fd)


class Watch:
    """inotify on the refs of one git directory; fileno() turns readable on a change."""

    def __new__(cls, gitdir):
        try:
            import autosync.core.inotify  # noqa: F401 (needs pyinotify too)
        except ImportError:  # this file alone, sent to the server's python3
            return LibcWatch(gitdir)
        return super().__new__(cls)

    def __init__(self, gitdir):
        from autosync.core.inotify import Inotify
        self.inotify = Inotify(lambda event: None, lambda path: None, lambda path: False)
        # refs/ with every folder below it (new ones too: pyinotify's auto_add), and
        # the git directory itself, not recursively, where packed-refs is replaced.
        refs = os.path.join(gitdir, "refs")
        if not self.inotify.watch(refs, True) or not self.inotify.watch(gitdir, False):
            self.inotify.close()
            raise OSError(errno.ENOSPC, "no inotify watch left for %s" % gitdir)

    def fileno(self):
        return self.inotify.fileno()

    def drain(self):
        self.inotify.drain()

    def close(self):
        self.inotify.close()


def watch(repo, out=None):
    """Print the branches of `repo`, then each movement, until `out` is closed. -> exit code."""
    out = out if out is not None else sys.stdout
    gitdir = git_dir(repo)
    watcher = Watch(gitdir)  # before the first read: nothing moves unseen in between
    kind = filesystem(gitdir)
    timeout = None
    if on_network(kind):
        timeout = NETWORK_POLL * 1000
        print("autosync-remote: %s is on a network filesystem (%s), where other machines' "
              "pushes make no inotify event: reading its refs every %g s as well"
              % (gitdir, kind, NETWORK_POLL), file=sys.stderr, flush=True)
    try:
        state = {}
        poller = select.poll()
        poller.register(watcher.fileno(), select.POLLIN)
        # Events 0: poll still reports POLLHUP and POLLERR, i.e. the reader has gone.
        poller.register(out.fileno(), 0)
        while True:
            new = branches(gitdir)
            lines = changes(state, new)
            state = new
            if lines:
                out.write("".join(line + "\n" for line in lines))
                out.flush()
            ready = poller.poll(timeout)
            if any(fd == out.fileno() for fd, _ in ready):
                return 0
            watcher.drain()
    finally:
        watcher.close()


class NotAllowed(Exception):
    """What a restricted key asked for is not allowed; str() says what, in one line."""


def asked(original, repo, home=None):
    """What the client's command (SSH_ORIGINAL_COMMAND) asks of the repository `repo`:
    ("upload-pack" | "receive-pack" | "watch" | "annex" | "true"); NotAllowed for anything
    else. The path the client names must be `repo` itself (as the server's git would find
    it). "annex" is a git-annex-shell command (annex_arguments() says which); "true" is
    what git-annex's ssh runs to open the connection it shares, and runs nothing."""
    if original is None:
        raise NotAllowed("this key may only sync %s: no shell" % repo)
    try:
        words = shlex.split(original)
    except ValueError:
        raise NotAllowed("this key may only sync %s: not a command of git's, git-annex's or "
                         "the watch" % repo)
    from autosync.ssh.watch import REMOTE_SCRIPT
    if len(words) == 2 and words[0] in GIT_SERVICES:  # what git sends: git-upload-pack 'PATH'
        what, path = GIT_SERVICES[words[0]], words[1]
    elif len(words) in (5, 7) and words[:4] == ["sh", "-c", REMOTE_SCRIPT, "autosync-remote"]:
        what, path = "watch", words[4]  # the watch the link sends (watch.py): ours is run
    elif len(words) == 3 and words[:2] == ["autosync-remote", "watch"]:  # a watchcmd's
        what, path = "watch", words[2]
    elif words and words[0] == ANNEX_SHELL:
        annex_arguments(words, repo, home)
        return "annex"
    elif words == ["true"]:
        return "true"
    else:
        raise NotAllowed("this key may only sync %s: %s is not a command of git's, "
                         "git-annex's or the watch"
                         % (repo, (words or [""])[0][:40] or "an empty command"))
    if not same_repository(path, repo, home):
        raise NotAllowed("this key may only sync %s, not %s" % (repo, path[:200]))
    return what


def annex_arguments(words, repo, home=None):
    """The arguments to run git-annex-shell with for the client's command `words` (shlex's
    words of `git-annex-shell 'CMD' 'DIR' [WORD] [--debug] [--uuid UUID] [-- FIELD=VALUE...
    --]`, as git-annex sends it): its command, `repo` as written for the served
    repository (never the client's path), then what the client gave, each word checked;
    NotAllowed for any other command, directory, option or field."""
    def refused(why):
        return NotAllowed("this key may only sync %s: git-annex-shell %s" % (repo, why))
    if len(words) < 2 or words[1] not in ANNEX_COMMANDS:
        raise refused("%s is not a command it runs here (only %s)" % (
            (words[1:2] or ["without a command"])[0][:40] or "''", ", ".join(ANNEX_COMMANDS)))
    if len(words) < 3:
        raise refused("%s without a directory" % words[1])
    command, directory, rest = words[1], words[2], words[3:]
    if not same_repository(annex_path(directory), repo, home):
        raise NotAllowed("this key may only sync %s, not %s" % (repo, directory[:200]))
    fields = []
    if "--" in rest:  # the fields, last: -- autoinit=1 remoteuuid=UUID --
        start = rest.index("--")
        block, rest = rest[start + 1:], rest[:start]
        if not block or block[-1] != "--" or "--" in block[:-1]:
            raise refused("%s: words after its fields" % command)
        fields = block[:-1]
        for field in fields:
            name, _, value = field.partition("=")
            if name not in ANNEX_FIELDS or "=" not in field or not ANNEX_FIELDS[name].match(value):
                raise refused("%s: the field %s is not one git-annex sends" % (command,
                                                                                field[:40]))
    params, options = [], []
    while rest:
        word = rest.pop(0)
        if word in ANNEX_OPTIONS:
            options.append(word)
        elif word == "--uuid" and rest and ANNEX_UUID.match(rest[0]):
            options += [word, rest.pop(0)]
        elif word.startswith("--uuid=") and ANNEX_UUID.match(word[len("--uuid="):]):
            options.append(word)
        elif word.startswith("-") or not ANNEX_UUID.match(word):
            raise refused("%s: %s is not an argument it takes here" % (command, word[:40]))
        else:
            params.append(word)
    if len(params) != ANNEX_COMMANDS[command]:
        raise refused("%s takes %d word(s) after the directory, not %d" % (
            command, ANNEX_COMMANDS[command], len(params)))
    served = os.path.abspath(os.path.expanduser(repo))
    return [command, served] + params + options + (["--"] + fields + ["--"] if fields else [])


def annex_path(directory):
    """The path git-annex-shell's `directory` names, as git finds one: git-annex writes
    ssh://HOST/~/PATH as /~/PATH (and /~USER/PATH), which git-annex-shell reads below that
    home."""
    return directory[1:] if directory.startswith("/~") else directory


def same_repository(path, repo, home=None):
    """Whether the client's `path` names the repository `repo` (as git finds it: below
    the home when relative; PATH, PATH.git, PATH/.git)."""
    home = home or os.path.expanduser("~")
    path = os.path.expanduser(path) if path.startswith("~") else path
    path = os.path.join(home, path)
    try:
        mine = os.path.realpath(git_dir(repo))
    except NotARepository:
        return False
    for candidate in (path, path + ".git"):
        try:
            if os.path.realpath(git_dir(candidate)) == mine:
                return True
        except NotARepository:
            continue
    return False


def serve(repo, original=None):
    """The forced command of a restricted key: run what the client asked of `repo` or
    refuse it. -> an exit code (when it does not exec git or git-annex-shell)."""
    original = os.environ.get("SSH_ORIGINAL_COMMAND") if original is None else original
    what = asked(original, repo)
    if what == "watch":
        return watch(repo)
    if what == "true":
        return 0
    sys.stdout.flush()
    if what == "annex":
        arguments = annex_arguments(shlex.split(original), repo)
        program = shutil.which(ANNEX_SHELL)
        if program is None:
            print("autosync-remote: git-annex-shell is not installed on this server (not on "
                  "PATH %s): install git-annex here to sync the annexed files of %s"
                  % (os.environ.get("PATH", ""), repo), file=sys.stderr)
            return 1
        os.execve(program, [ANNEX_SHELL] + arguments, annex_environment(arguments[1]))
    os.execvp("git", ["git", what, git_dir(repo)])


def annex_environment(served, environ=None):
    """git-annex-shell's environment: held to the one repository `served` and to its own
    commands (never git-shell's). GIT_ANNEX_SHELL_READONLY or _APPENDONLY, when the
    forced command sets them, are passed on: those only forbid more. The client's words
    reach it only as the arguments checked, not in SSH_ORIGINAL_COMMAND."""
    env = dict(os.environ if environ is None else environ)
    env.pop("SSH_ORIGINAL_COMMAND", None)
    env.update(GIT_ANNEX_SHELL_DIRECTORY=served, GIT_ANNEX_SHELL_LIMITED="1")
    return env


def poll(url, interval=POLL, out=None):
    """`autosync-remote poll URL`, run on the client for a server that cannot run the
    watch (a hosted git, a server without python3): the same lines as watch, from `git
    ls-remote` every `interval` seconds, until `out` is closed. -> exit code."""
    out = out if out is not None else sys.stdout
    poller = select.poll()
    poller.register(out.fileno(), 0)  # POLLHUP and POLLERR only: the reader has gone
    state = {}
    while True:
        proc = subprocess.run(["git", "ls-remote", "--heads", "--", url], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            said = [" ".join(l.split()) for l in os.fsdecode(proc.stderr).splitlines() if l.strip()]
            # A restricted key's refusal first (its forced command's words), then git's end.
            said = [l for l in said if REFUSED_BY_KEY in l][:1] + said[-3:]
            print("autosync-remote: git ls-remote failed: %s" % "; ".join(said),
                  file=sys.stderr)
            return 1
        new = {}
        for line in os.fsdecode(proc.stdout).splitlines():
            rev, _, ref = line.partition("\t")
            if ref:
                new[ref] = rev
        lines = changes(state, new)
        state = new
        if lines:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
        if poller.poll(interval * 1000):
            return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["-h"], ["--help"]):
        print(USAGE + "\n\n" + __doc__.split("\n\n", 2)[2].rstrip())  # the usage once
        return 0
    if len(argv) != 2 or argv[0] not in ("watch", "serve", "poll"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if argv[0] == "serve":
            return serve(argv[1])
        if argv[0] == "poll":
            return poll(argv[1])
        return watch(argv[1])
    except NotAllowed as e:
        print("autosync-remote: %s" % e, file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away mid-write: the normal end. Python would complain once more
        # when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except NotARepository as e:
        print("autosync-remote: %s" % e, file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print("autosync-remote: git for-each-ref failed: %s"
              % " ".join(os.fsdecode(e.stderr or b"").split()), file=sys.stderr)
        return 1
    except OSError as e:
        print("autosync-remote: %s" % (e.strerror or e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
