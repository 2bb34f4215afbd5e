"""dvcs-autosync init REMOTE FOLDER: one command per machine brings a folder into sync.

FOLDER, whatever it holds now:
  missing or empty      cloned from REMOTE (an empty remote is fine);
  files, no repository  becomes a working tree of REMOTE without losing a file: its
                        files are committed as they are, then merged with what REMOTE
                        has by the daemon's own pull (vcs/gitpull.py), so a path in both
                        with other content keeps both versions (a conflict copy);
  a clone of REMOTE     taken as it is;
  anything else         refused in one line, nothing touched.

Everything that can refuse (the config file there already, the folder, the remote, the
XMPP login) is checked before anything is written. Then: a git identity for this
repository when git has none, the first commit and push when the remote is empty, the
config file (mode 0600, only what differs from the defaults), with --service the systemd
user unit, and the command for the next machine.
"""
import argparse
import functools
import getpass
import logging
import os
import pwd
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

from autosync.core import cli, config, daemons
from autosync.ssh import connection as sshremote
from autosync.vcs import excludes, git, gitpull, thin
from autosync.vcs.commands import environment
from autosync.vcs.git_environment import PLAIN, GitEnvironment
from autosync.core.config import Config, ConfigError
from autosync.core.messages import commit_message, escaped, printable
from autosync.ssh.connection import POLL
from autosync.tools import progress

log = logging.getLogger("autosync.init")

OTHER_DVCS = {".hg": "Mercurial", ".svn": "Subversion", ".bzr": "Bazaar", "_darcs": "darcs",
              ".pijul": "Pijul", ".jj": "Jujutsu"}
LOGIN_TIMEOUT = 20.0  # seconds the XMPP check may take
WATCH_PROBE = 5.0  # seconds the remote's watch (syncmethod = ssh) is tried for
# The original dvcs-autosync's example statuscmd: a config holding it is the original's.
ORIGINAL_STATUSCMD = "nothing to commit"
# A line of git's own progress ("Receiving objects:  45% (900/2000), 1.2 MiB | ...").
GIT_PROGRESS = re.compile(r"^(?:remote: )?[A-Z][a-z]+(?: [a-z]+)*: +\d")


class Refused(Exception):
    """init cannot go on; str() is the one line that says why."""


def parser():
    p = argparse.ArgumentParser(
        prog="dvcs-autosync init",
        description="Bring FOLDER into sync with the git repository REMOTE, whatever "
                    "FOLDER holds now, and write the config file.")
    p.add_argument("remote", metavar="REMOTE", help="the bare repository all machines share "
                   "(server:sync.git, ssh://..., or a path)")
    p.add_argument("folder", metavar="FOLDER", help="the folder to keep in sync")
    p.add_argument("--config", metavar="FILE", default=None,
                   help="the config file to write (default: ~/.autosync)")
    p.add_argument("--account", metavar="USER@DOMAIN",
                   help="the XMPP account all your machines log into")
    p.add_argument("--password-file", metavar="F",
                   help="read the account's password from F (its first line)")
    p.add_argument("--password-in-file", action="store_true",
                   help="keep the password in the config file even where a keyring (Secret "
                        "Service) answers, which keeps it otherwise")
    p.add_argument("--fingerprint", metavar="FP",
                   help="trust the XMPP server's certificate with this SHA-256 fingerprint")
    p.add_argument("--server", metavar="HOST[:PORT]",
                   help="the XMPP server, when it is not the account's domain on port 5222")
    p.add_argument("--service", action="store_true",
                   help="write the systemd user unit and enable it")
    p.add_argument("--thin", action="store_true",
                   help="keep the current files only: old versions stay on the remote and "
                        "are fetched when log, restore or a conflict needs them (a partial "
                        "clone, --filter=blob:none)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing config file (and unit)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    return p


def say(text):
    print(escaped(text), flush=True)


def main(argv):
    args = parser().parse_args(list(argv)[1:])  # argv[0] is "init"
    cli.log_to_stderr(logging.DEBUG if args.verbose else logging.WARNING,
                      "%(name)s: %(levelname)s %(message)s")
    try:
        return Init(args).run()
    except Refused as e:
        print(escaped("dvcs-autosync init: %s" % e), file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as e:  # git's own lines (git.git), or the system's
        print(escaped("dvcs-autosync init: %s" % (getattr(e, "strerror", None) and "%s: %s" % (
            printable(e.filename or ""), e.strerror) or e)), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dvcs-autosync init: interrupted", file=sys.stderr)
        return 130


def tilde(path):
    """`path` with the home folder as ~, as a user writes it (config.load expands it)."""
    home = os.path.expanduser("~")
    if path == home:
        return "~"
    if path.startswith(home.rstrip("/") + "/"):
        return "~/" + path[len(home.rstrip("/")) + 1:]
    return path


def shell_words(words):
    """Words as one pasteable command line; a leading ~/ left open, so the shell expands it."""
    def one(w):
        if w.startswith("~/") and shlex.quote(w[2:]) == w[2:]:
            return w
        return shlex.quote(w)
    return " ".join(one(w) for w in words)


def run_git(cwd, *args, gitenv=PLAIN):
    """git with the suite's settings; RuntimeError with git's own lines when it fails."""
    return git.git(cwd, *args, gitenv=gitenv)


def local_path(remote):
    """An existing local path as an absolute one (the config and the clone's origin then
    work from anywhere); a URL or `host:path` as it is."""
    expanded = os.path.expanduser(remote)
    if "://" not in remote and os.path.exists(expanded):
        return os.path.abspath(expanded)
    return remote


def same_remote(url, remote):
    def norm(u):
        u = u.strip()
        if u.startswith("file://"):
            u = u[len("file://"):]
        if "://" not in u and os.path.exists(os.path.expanduser(u)):
            return os.path.realpath(os.path.expanduser(u))
        return u.rstrip("/")
    a, b = norm(url), norm(remote)
    strip = lambda u: u[:-4] if u.endswith(".git") else u
    return a == b or strip(a) == strip(b)


def serves_partial_clones(remote):
    """Whether the remote's git answers a partial clone's filter (its uploadpack.allowFilter):
    the `filter` of its protocol v2 `fetch` capability, read from a ls-remote's trace. A
    server that does not would send every version of every file, with a warning only."""
    proc = subprocess.run(["git", "-c", "protocol.version=2", "ls-remote", "--heads", remote],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE,
                          env=environment({"GIT_TRACE_PACKET": "1"}))
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        # v2: "fetch=shallow ... filter"; v0 (an ssh server that drops GIT_PROTOCOL): the
        # capabilities after the first ref's NUL, "\\0multi_ack ... filter ...".
        match = re.search(r"< (?:fetch=|.*\\0)(.*)$", line)
        if match and "filter" in match.group(1).split():
            return True
    return False


def installed_program():
    """The absolute path of the dvcs-autosync that is running now (its launcher, the
    venv's, or the one on PATH), for the unit and the start command."""
    here = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    candidates = [here if os.path.basename(here) == "dvcs-autosync" else "",
                  os.path.join(os.path.dirname(sys.executable), "dvcs-autosync"),
                  shutil.which("dvcs-autosync") or ""]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


class Init:
    def __init__(self, args):
        self.args = args
        self.config = os.path.abspath(os.path.expanduser(args.config or config.default_path()))
        self.folder = os.path.abspath(os.path.expanduser(args.folder))
        self.remote = local_path(args.remote)
        self.host = socket.gethostname()
        self.xmpp = None  # config.Xmpp of a checked account
        self.password_kept = None  # the config's [xmpp] password: the password, or `keyring`
        self.watch_why = "not tried"  # None once the remote's watch worked (syncmethod ssh)
        self.watch_how = None  # None: autosync-remote; "sent": the server's python3;
        # or why the server cannot run the watch (then it is polled, still syncmethod ssh)
        self.program = installed_program()

    @functools.cached_property
    def progress(self):
        """What init is doing and how far, on the terminal (nothing elsewhere)."""
        return progress.Progress()

    # --- checks: nothing is written before all of them passed -------------------------

    def run(self):
        # First: worth knowing even when init refuses (an original's ~/.autosync is there).
        self.tell_about_the_original()
        self.check_config_file()
        self.check_options()
        mode = self.check_folder()
        empty = self.check_remote()
        if self.args.account:
            self.check_account()
        else:
            self.watch_why = self.check_watch()
        unit = self.check_unit() if self.args.service else None
        # From here on things are written.
        if mode == "clone":
            self.clone()
        elif mode == "join":
            self.join(empty)
        else:
            say("%s is a clone of %s already: taken as it is%s." % (
                self.folder, self.remote, " (--thin applies to new clones only: this one keeps "
                "the history it has)" if self.args.thin and not thin.promisor(self.folder)
                else ""))
        self.ensure_identity()
        if empty and mode != "take":
            self.first_commit()
        self.write_config()
        started = self.install_unit(unit) if unit else False
        self.closing_words(started)
        return 0

    def check_config_file(self):
        if os.path.isdir(self.config):
            raise Refused("%s is a folder; --config names the config file to write"
                          % self.config)
        if os.path.lexists(self.config) and not self.args.force:
            raise Refused("%s exists: not overwritten (--force replaces it); nothing touched"
                          % self.config)
        if os.path.lexists(self.config):
            self.check_no_daemon()

    def check_no_daemon(self):
        """--force over a config a daemon runs on (ours or the original): refused, with how
        to stop it. Moving the folder is: stop, `init --force REMOTE NEWFOLDER`, start."""
        pids = sorted(pid for pid, _, file in daemons.running()
                      if os.path.realpath(file) == os.path.realpath(self.config))
        if not pids:
            return
        if os.path.exists(self.unit_path()):
            how = "systemctl --user stop %s" % self.unit_name()
        else:
            how = "kill %s" % " ".join(map(str, pids))
        raise Refused("dvcs-autosync runs on %s (PID %s): stop it first (%s), then run this "
                      "init again and start it; nothing touched"
                      % (self.config, ", ".join(map(str, pids)), how))

    def check_options(self):
        a = self.args
        if not a.account:
            for given, name in ((a.password_file, "--password-file"),
                                (a.fingerprint, "--fingerprint"), (a.server, "--server")):
                if given:
                    raise Refused("%s is for the XMPP login: give --account USER@DOMAIN too"
                                  % name)
            return
        if not config.ADDRESS_RE.fullmatch(a.account):
            raise Refused("--account %r is not an XMPP address like user@example.org"
                          % a.account)
        if a.account in config.PLACEHOLDER_ACCOUNTS:
            raise Refused("--account %s is the example's placeholder: give your own account"
                          % a.account)
        if a.fingerprint:
            try:
                a.fingerprint = config.fingerprint(a.fingerprint)
            except Exception:
                raise Refused("--fingerprint %r: expected %s" % (a.fingerprint,
                                                                config.FINGERPRINT)) from None
        if a.server:
            host, _, port = a.server.rpartition(":") if ":" in a.server else (a.server, "", "")
            if not host or (port and not (port.isdigit() and 0 < int(port) < 65536)):
                raise Refused("--server %r: expected HOST or HOST:PORT" % a.server)

    def check_folder(self):
        """-> "clone", "join" or "take"; Refused for anything else."""
        f = self.folder
        if os.path.lexists(f) and not os.path.isdir(f):
            raise Refused("%s is a file, not a folder; nothing touched" % f)
        if not os.path.exists(f) or not os.listdir(f):
            return "clone"
        names = os.listdir(f)
        for marker, dvcs in OTHER_DVCS.items():
            if marker in names:
                raise Refused("%s holds a %s repository (%s): init sets up git only; nothing "
                              "touched" % (f, dvcs, marker))
        if ".git" not in names:
            return "join"
        top = git.git(f, "rev-parse", "--show-toplevel", check=False)
        if not top or os.path.realpath(os.fsdecode(top.strip())) != os.path.realpath(f):
            raise Refused("%s holds a .git that is not a working tree's; nothing touched" % f)
        url = git.git(f, "config", "--get", "remote.origin.url", check=False)
        if url is None:
            raise Refused("%s is a git repository with no remote origin, not a clone of %s; "
                          "nothing touched" % (f, self.remote))
        url = os.fsdecode(url.strip())
        if not same_remote(url, self.remote):
            raise Refused("%s is a clone of %s, not of %s; nothing touched" % (f, url, self.remote))
        return "take"

    def check_remote(self):
        """-> whether the remote is empty (no branch yet); Refused if it cannot be read."""
        self.progress.show("Reading the remote %s..." % self.remote)
        try:
            out = run_git("/", "ls-remote", "--heads", self.remote)
        except RuntimeError as e:
            raise Refused("cannot read the remote %s: %s; nothing touched" % (self.remote, e)) \
                from None
        finally:
            self.progress.clear()
        if self.args.thin and not serves_partial_clones(self.remote):
            where = self.remote.rpartition(":")[2] if "://" not in self.remote else "REPO"
            raise Refused("--thin: the remote %s does not serve partial clones; on the server "
                          "run git -C %s config uploadpack.allowFilter true (or leave out "
                          "--thin); nothing touched" % (self.remote, shlex.quote(where)))
        return not out.strip()

    def check_watch(self):
        """Without an XMPP account: can the remote itself say when it moves (syncmethod =
        ssh: autosync-remote on the server, or here for a local path)? Tried once: a
        line, or the command still running after WATCH_PROBE seconds (an empty remote
        prints nothing yet), is yes. -> None, or why not (its own words)."""
        here = os.getcwd()
        try:
            argv = sshremote.default_watch(self.remote, here, sshremote.ssh_program(os.environ, here))
        except sshremote.BadRemote as e:
            return str(e)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=environment())
        except OSError as e:
            return "%s: %s" % (argv[0], e.strerror)
        self.progress.show("Trying whether the remote can be watched (autosync-remote)...")
        try:
            if select.select([proc.stdout], [], [], WATCH_PROBE)[0] and \
                    not proc.stdout.readline().strip():
                proc.wait(WATCH_PROBE)
                why = sshremote.why_it_ended(proc.returncode, proc.stderr.read())
                if self.remote_over_ssh() and sshremote.cannot_watch(proc.returncode):
                    self.watch_how = why  # the link polls it instead (sshlink)
                    return None
                return why
            proc.kill()
            proc.wait()
            os.set_blocking(proc.stderr.fileno(), False)  # what it said so far, no more
            if sshremote.SENT_NOTICE.encode() in (proc.stderr.read() or b""):
                self.watch_how = "sent"
            return None
        finally:
            self.progress.clear()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def remote_over_ssh(self):
        try:
            return sshremote.parse_remote(self.remote)[0] == "ssh"
        except sshremote.BadRemote:
            return False

    def check_account(self):
        a = self.args
        password = self.password()
        host, port = a.account.partition("@")[2], 5222
        if a.server:
            host, _, p = a.server.partition(":")
            port = int(p) if p else 5222
        self.xmpp = config.Xmpp(username=a.account, password=password, host=host, port=port,
                                fingerprint=a.fingerprint or "",
                                resource="autosync-init-%d" % os.getpid())
        self.login()

    def password(self):
        if self.args.password_file:
            try:
                with open(os.path.expanduser(self.args.password_file)) as f:
                    text = f.readline().rstrip("\r\n")
            except OSError as e:
                raise Refused("cannot read --password-file %s: %s" % (self.args.password_file,
                                                                      e.strerror)) from None
        elif sys.stdin.isatty():
            text = getpass.getpass("Password of %s: " % self.args.account)
        else:
            raise Refused("no terminal to ask the password of %s on: give --password-file F"
                          % self.args.account)
        if not text:
            raise Refused("the password of %s is empty" % self.args.account)
        return text

    def login(self):
        """Log in once; an untrusted certificate is shown for the user to confirm."""
        from autosync.xmpp import session as xmpp_session
        self.progress.show("Logging in to %s:%s as %s..." % (self.xmpp.host, self.xmpp.port,
                                                              self.xmpp.username))
        try:
            session = xmpp_session.open_session(self.xmpp, LOGIN_TIMEOUT, _Quiet())
        except xmpp_session.UntrustedServer as e:
            self.progress.clear()
            if not e.fingerprint:
                raise Refused("XMPP: %s (its certificate could not be read)" % e) from None
            if not self.confirm_certificate(str(e), e.fingerprint):
                raise Refused("XMPP: the server's certificate was not trusted; if %s is your "
                              "server's, run again with --fingerprint %s"
                              % (e.fingerprint, e.fingerprint)) from None
            self.xmpp.fingerprint = e.fingerprint
            return self.login()
        except xmpp_session.LoginError as e:
            raise Refused("XMPP: %s; nothing touched" % e) from None
        finally:
            self.progress.clear()
        session.close(goodbye=True)
        say("Logged in to %s:%s as %s: the account works%s." % (
            self.xmpp.host, self.xmpp.port, self.xmpp.username,
            " (certificate pinned by its fingerprint)" if self.xmpp.fingerprint else ""))

    def confirm_certificate(self, why, fingerprint):
        if not sys.stdin.isatty():
            return False
        say("The XMPP server's certificate is not trusted by this machine (%s).\n"
            "Its SHA-256 fingerprint is\n    %s\nCompare it with the one the server shows "
            "(on the server: openssl x509 -noout -fingerprint -sha256 -in CERTIFICATE)."
            % (why, fingerprint))
        answer = input("Trust exactly this certificate? [y/N] ").strip().lower()
        return answer in ("y", "yes")

    # --- the folder ---------------------------------------------------------------------

    def clone(self):
        parent = os.path.dirname(self.folder)
        os.makedirs(parent, exist_ok=True)
        self.git_progress(parent, "Cloning", "clone", "-q", *self.thin_options(), "--",
                          self.remote, self.folder)
        say("Cloned %s into %s%s." % (self.remote, self.folder, self.thin_words()))

    def thin_options(self):
        # --no-local: a clone from a local path copies the objects and ignores --filter.
        return ["--filter=blob:none", "--no-local"] if self.args.thin else []

    def thin_words(self):
        return (", thin: the current files only; old versions are fetched from the remote "
                "when log, restore or a conflict needs them") if self.args.thin else ""

    def join(self, empty):
        """The folder's files become a working tree of the remote, none lost."""
        gitdir = os.path.join(self.folder, ".git")
        # A clone without a checkout gives origin, the branch the remote's HEAD names (even
        # while the remote is empty) and its upstream; only its .git is taken.
        temp = tempfile.mkdtemp(prefix=".autosync-init-", dir=self.folder)
        try:
            self.git_progress(temp, "Fetching the remote's history", "clone", "-q",
                              "--no-checkout", *self.thin_options(), "--", self.remote, "repo")
            os.rename(os.path.join(temp, "repo", ".git"), gitdir)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
        try:
            # No index: the folder's files are all new to this repository's first commit,
            # which has no parent (the remote's history is merged after it).
            if os.path.exists(os.path.join(gitdir, "index")):
                os.unlink(os.path.join(gitdir, "index"))
            branch = os.fsdecode(run_git(self.folder, "symbolic-ref", "HEAD").strip())
            if not empty:
                run_git(self.folder, "update-ref", "-d", branch)
            self.ensure_identity()
            committed = self.commit_all("the files this folder held before it joined")
        except BaseException:
            # Nothing committed yet: the folder is left as it was found.
            shutil.rmtree(gitdir, ignore_errors=True)
            raise
        say("%s joined %s: %s%s." % (self.folder, self.remote,
                                     "its files committed" if committed else "no files to commit",
                                     self.thin_words()))
        if empty:
            return
        self.progress.show("Merging this folder's files with the remote's...")
        try:
            result = gitpull.GitPull(self.folder, gitdir, self.host, []).run()
        except (gitpull.PullFailed, RuntimeError, OSError) as e:
            self.progress.clear()
            # The folder's files are committed: the daemon's pull merges them later.
            say("Not merged with %s yet: %s; dvcs-autosync merges when it starts (both "
                "versions kept)." % (self.remote, e))
            return
        self.progress.clear()
        for c in result["merged"] + result["beside"]:
            say("  %s is in both with other content: both kept, the other version as %s"
                % (printable(c["path"]), printable(c["copy"])))
        for path in result["kept"]:
            say("  %s kept as it is here; the remote's version is in history" % printable(path))
        if committed or result["merge"]:
            self.push()

    def commit_all(self, note):
        """Commit everything the daemon would sync (its excludes: editors' files, nested
        repositories left out); -> whether there was anything."""
        gitdir = git.git_dir(self.folder)
        cfg = Config(path=self.folder)
        made = excludes.Excludes(cfg, gitdir, os.path.join(gitdir, "autosync-init-exclude"))
        gitenv = GitEnvironment(excludes=made.where)  # these commands only
        try:
            made.leave_out(git.untracked_repositories(self.folder, gitenv=gitenv))
            if self.progress.on:
                self.add_all(gitenv)
            else:
                run_git(self.folder, "add", "-A", gitenv=gitenv)
            changes = git.staged_changes(self.folder, gitenv=gitenv) or []
            if not changes:
                return False
            self.progress.show("Committing %s files..." % "{:,}".format(len(changes)))
            git.git(self.folder, "commit", "-q", "-F", "-",
                    data=os.fsencode(commit_message(self.host, changes, note=note)),
                    gitenv=gitenv)
            return True
        finally:
            self.progress.clear()
            made.remove()

    def add_all(self, gitenv):
        """`git add -A` counted on the terminal: the files it will add (and their bytes)
        listed first, then each one git names as it adds it (--verbose)."""
        listed = run_git(self.folder, "ls-files", "-z", "--others", "--modified",
                         "--exclude-standard", gitenv=gitenv)
        size = {}
        for name in os.fsdecode(listed).split("\0"):
            if name:
                try:
                    size[name] = os.lstat(os.path.join(self.folder, name)).st_size
                except OSError:
                    size[name] = 0
        total, total_size = len(size), sum(size.values())
        done = [0, 0]

        def added(line):
            if line.startswith("add '") and line.endswith("'"):
                done[0] += 1
                done[1] += size.get(line[5:-1], 0)
                self.progress.files("Adding the files", min(done[0], total), total,
                                    min(done[1], total_size), total_size)
        try:
            progress.run(self.folder, ["add", "-A", "--verbose"], on_out=added, gitenv=gitenv)
        finally:
            self.progress.clear()

    def git_progress(self, folder, doing, *args):
        """run_git(folder, *args) for a clone or a push, with git's own progress shown on
        the terminal after `doing`."""
        if not self.progress.on:
            return run_git(folder, *args)
        args = [args[0], "--progress"] + [a for a in args[1:] if a != "-q"]

        def said(line):
            if GIT_PROGRESS.match(line):
                self.progress.show("%s: %s" % (doing, line.strip()))
        try:
            return progress.run(folder, args, on_err=said)
        finally:
            self.progress.clear()

    def first_commit(self):
        """The remote is empty: the first commit (the folder's files, or none) goes out, so
        the next machine clones a branch and nobody waits."""
        if git.head(self.folder) is None:
            if not self.commit_all("the first commit"):
                git.git(self.folder, "commit", "-q", "--allow-empty", "-F", "-",
                            data=os.fsencode("autosync on %s: the synced folder begins"
                                             % self.host))
        if self.push():
            say("The remote was empty: made the first commit and pushed it.")

    def push(self):
        branch = os.fsdecode(run_git(self.folder, "symbolic-ref", "--short", "HEAD").strip())
        try:
            self.git_progress(self.folder, "Pushing", "push", "-q", "-u", "origin", branch)
            return True
        except RuntimeError as e:
            # Committed here; the daemon pushes (merging first if the remote moved on).
            say("Not pushed yet: %s; dvcs-autosync pushes when it starts." % e)
            return False

    def ensure_identity(self):
        """git refuses to commit without a name and an address: one for this repository."""
        missing = [key for key in ("user.name", "user.email")
                   if not git.git(self.folder, "config", "--get", key, check=False)]
        if not missing:
            return
        entry = pwd.getpwuid(os.getuid())
        values = {"user.name": entry.pw_gecos.split(",")[0].strip() or entry.pw_name,
                  "user.email": "%s@%s" % (entry.pw_name, self.host)}
        for key in missing:
            run_git(self.folder, "config", key, values[key])
        say("git had no identity here: set %s for this repository (change with git -C %s "
            "config user.name/user.email)." % (" and ".join("%s %s" % (k, shlex.quote(values[k]))
                                                            for k in missing),
                                               shlex.quote(self.folder)))

    # --- the config file ------------------------------------------------------------------

    def config_text(self):
        lines = ["# Written by dvcs-autosync init; every key not here has its default",
                 "# (README, Configuration).", "[autosync]", "path = %s" % tilde(self.folder)]
        if self.xmpp is None:
            # Without an account: the remote's own watch when it works, else nothing
            # announces pushes and the timer pull (pullinterval) brings them.
            lines.append("syncmethod = %s" % ("ssh" if self.watch_why is None else "none"))
        else:
            x = self.xmpp
            lines += ["[xmpp]", "username = %s" % x.username,
                      "password = %s" % self.password_kept]
            if x.host != x.username.partition("@")[2]:
                lines.append("host = %s" % x.host)
            if x.port != config.KEYS["xmpp"]["port"].default:
                lines.append("port = %d" % x.port)
            if x.fingerprint:
                lines.append("fingerprint = %s" % x.fingerprint)
        return "\n".join(lines) + "\n"

    def keep_password(self):
        """-> the config's [xmpp] password: `keyring` once the desktop's keyring keeps the
        password (where a Secret Service answers, without --password-in-file), else the
        password itself, as always."""
        from autosync.core import keyring
        x = self.xmpp
        if not self.args.password_in_file and keyring.available():
            try:
                keyring.store(x.username, x.password)
                say("The password of %s is kept in your keyring (Secret Service); the config "
                    "file says password = keyring." % x.username)
                return config.KEYRING
            except keyring.KeyringError as e:
                say("Not kept in the keyring: %s; the password goes into the config file."
                    % e)
        if x.password == config.KEYRING:
            raise Refused("a password that reads %r cannot be written into the config file, "
                          "where it names the keyring: no config written" % config.KEYRING)
        return x.password

    def write_config(self):
        if self.xmpp is not None:
            self.password_kept = self.keep_password()
        folder = os.path.dirname(self.config)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        temp = "%s.%d.tmp" % (self.config, os.getpid())
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with open(fd, "w") as f:
                f.write(self.config_text())
            # Read back as the daemon will: what it gets must be what was meant.
            cfg = config.load(temp, warn=False)
            if self.xmpp and cfg.xmpp.password != self.password_kept:
                raise Refused("the password cannot be written into %s as it is (leading or "
                              "trailing blanks?): nothing written" % self.config)
            if self.args.force:
                os.replace(temp, self.config)
            else:
                os.link(temp, self.config)  # never over a file made meanwhile
        except ConfigError as e:
            raise Refused("the config written does not read back: %s" % e) from None
        except FileExistsError:
            raise Refused("%s appeared meanwhile: not overwritten" % self.config) from None
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
        say("Wrote %s (mode 0600)." % self.config)

    # --- the service ------------------------------------------------------------------------

    def unit_name(self):
        if self.config == config.default_path():
            return "dvcs-autosync.service"
        slug = re.sub(r"[^A-Za-z0-9_.-]", "-", os.path.basename(self.config)).strip(".-")
        return "dvcs-autosync-%s.service" % (slug or "config")

    def unit_path(self):
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        return os.path.join(base, "systemd", "user", self.unit_name())

    def unit_text(self):
        def arg(value):  # one word of ExecStart: systemd's quoting and specifiers
            value = value.replace("%", "%%").replace("$", "$$")
            return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
        return "\n".join([
            "# Written by dvcs-autosync init for %s (see docs/service.md)." % tilde(self.config),
            "[Unit]",
            "Description=dvcs-autosync: keep %s in sync" % tilde(self.folder).replace("%", "%%"),
            "",
            "[Service]",
            "Type=simple",
            "ExecStart=%s %s" % (arg(self.program), arg(self.config)),
            "KillMode=mixed",
            "TimeoutStopSec=10",
            "Restart=on-failure",
            "RestartSec=5",
            "# 2: a config error, 78: the folder was replaced, 127: the program is gone.",
            "RestartPreventExitStatus=2 78 127",
            "SyslogIdentifier=dvcs-autosync",
            "",
            "[Install]",
            "WantedBy=default.target", ""])

    def check_unit(self):
        if self.program is None:
            raise Refused("--service: no installed dvcs-autosync found (install it first: "
                          "README, Install); nothing touched")
        path = self.unit_path()
        if os.path.lexists(path) and not self.args.force:
            with open(path) as f:
                if f.read() != self.unit_text():
                    raise Refused("%s exists: not overwritten (--force replaces it); nothing "
                                  "touched" % path)
        return path

    def install_unit(self, path):
        """Write the unit; enable and start it where a user manager answers. -> started."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = "%s.%d.tmp" % (path, os.getpid())
        with open(temp, "w") as f:
            f.write(self.unit_text())
        os.replace(temp, path)
        say("Wrote the systemd user unit %s." % path)
        if not self.user_manager():
            say("No systemd user manager answers here (systemctl --user), so it is not "
                "enabled.")
            return False
        for step in (["daemon-reload"], ["enable", "--now", self.unit_name()]):
            proc = subprocess.run(["systemctl", "--user"] + step, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
            if proc.returncode:
                say("systemctl --user %s failed: %s" % (" ".join(step), proc.stdout.strip()))
                return False
        say("Enabled and started %s: syncing runs now and at every login (journalctl "
            "--user -u %s shows its log)." % (self.unit_name(), self.unit_name()))
        return True

    @staticmethod
    def user_manager():
        if not shutil.which("systemctl"):
            return False
        try:
            return subprocess.run(["systemctl", "--user", "show-environment"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    # --- words ------------------------------------------------------------------------------

    def start_command(self):
        program = self.program or "dvcs-autosync"
        if self.program and shutil.which("dvcs-autosync") == self.program:
            program = "dvcs-autosync"
        words = [program]
        if self.config != config.default_path():
            words += ["--config", self.config]
        return shell_words(words)

    def closing_words(self, started):
        if not started:
            say("Start syncing with:\n    %s" % self.start_command())
        if self.xmpp is None and self.watch_why is None and self.watch_how not in (None, "sent"):
            say("Other machines' pushes arrive within %g s: the server cannot run the watch "
                "(%s), so the remote is polled with git ls-remote (syncmethod = ssh)."
                % (POLL, self.watch_how))
        elif self.xmpp is None and self.watch_why is None:
            say("Other machines' pushes arrive at once: the remote is watched "
                "(syncmethod = ssh, %s)." % ("autosync-remote" if self.watch_how is None else
                                             "the server has no autosync-remote: " +
                                             sshremote.SENT_NOTICE))
        elif self.xmpp is None:
            say("Other machines' pushes are pulled every %g minutes (pullinterval): the "
                "remote cannot be watched (%s). Install autosync-remote on the server "
                "(README, Without XMPP) and set syncmethod = ssh, or give --account, for "
                "them to arrive at once."
                % (config.KEYS["autosync"]["pullinterval"].default / 60, self.watch_why))
        words = ["dvcs-autosync", "init", self.remote, tilde(self.folder)]
        if self.xmpp is not None:
            words += ["--account", self.xmpp.username]
            if self.args.server:
                words += ["--server", self.args.server]
            if self.xmpp.fingerprint:
                words += ["--fingerprint", self.xmpp.fingerprint]
        if self.args.service:
            words.append("--service")
        if self.args.thin:
            words.append("--thin")
        if self.config != config.default_path():
            words += ["--config", tilde(self.config)]
        say("On the next machine run:\n    %s" % shell_words(words))
        line = key_line(self.remote)
        if line:
            say("To let a machine's key sync only this repository on the server, begin the "
                "key's line in the server's ~/.ssh/authorized_keys with\n    %s\n(the full "
                "path of autosync-remote if it is not on the PATH of an ssh session there)"
                % line)
        if os.path.isabs(self.remote):
            say("(with %s as that machine reaches it, e.g. server:%s over ssh)"
                % (self.remote, self.remote))

    def tell_about_the_original(self):
        """The original dvcs-autosync set up here: its `git pull` stops for good at the
        first divergence (git 2.27 and later) unless its clone says pull.rebase false."""
        found = original_setup()
        if found:
            what, where, folder = found
            say("Found the original dvcs-autosync's %s %s. In its clone, run\n    git -C %s "
                "config pull.rebase false\nso that its git pull merges instead of stopping for "
                "good at the first divergence (README, Switching from the original)."
                % (what, where, shlex.quote(folder) if folder else "FOLDER"))


class _Quiet:
    """The session's handler for the one check login: nothing is processed."""

    def on_presence(self, jid, type):
        pass

    def on_message(self, jid, type, body):
        pass

    def on_pong(self, ping_id):
        return False


def key_line(remote):
    """The authorized_keys options that let a key only sync `remote` (autosync-remote
    serve), or None for a remote not over ssh."""
    try:
        parsed = sshremote.parse_remote(remote)
    except sshremote.BadRemote:
        return None
    if parsed[0] != "ssh":
        return None
    command = "autosync-remote serve " + shlex.quote(parsed[3])
    return 'command="%s",restrict' % command.replace('"', '\\"')  # sshd's only escape


def original_setup():
    """(what, where, its folder or None) when the original dvcs-autosync is set up for
    this user: its config ~/.autosync (its own example's statuscmd greps `git status`;
    init never writes [dvcs]), its pidfile (~/.autosync.pid) naming a running original,
    or an original running on any config (python, python2 or python3 dvcs-autosync)."""
    file = config.default_path()
    text = ""
    try:
        with open(file, errors="replace") as f:
            text = f.read()
    except OSError:
        pass
    folder = None
    match = re.search(r"^\s*path\s*[=:]\s*(.+?)\s*$", text, re.MULTILINE)
    if match:
        folder = os.path.expanduser(match.group(1))
    if ORIGINAL_STATUSCMD in text:
        return "config", file, folder
    pid = original_running(file + ".pid")
    if pid:
        return "pidfile", "%s (PID %d)" % (file + ".pid", pid), folder
    for pid, args, its_config in daemons.running():
        if daemons.is_original(args, "/proc/%d/cwd" % pid):
            return "process", "(PID %d, config %s)" % (pid, its_config), \
                daemons.synced_folder(pid, args, its_config)
    return None


def original_running(pidfile):
    """The PID a pidfile names when that process is the original dvcs-autosync
    (daemons.is_original), else None."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().split()[0])
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0") if a]
    except (OSError, ValueError, IndexError):
        return None
    return pid if daemons.is_original(args, "/proc/%d/cwd" % pid) else None
