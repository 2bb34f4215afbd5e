"""The checks that run before init writes anything: the config file, the options, the
folder, the remote. Each refuses in one line, with nothing touched."""
import os
import re
import shlex
import subprocess

from autosync.core import config, daemons
from autosync.tools.init import unit
from autosync.tools.init.plan import Refused
from autosync.vcs import git
from autosync.vcs.commands import environment

OTHER_DVCS = {".hg": "Mercurial", ".svn": "Subversion", ".bzr": "Bazaar", "_darcs": "darcs",
              ".pijul": "Pijul", ".jj": "Jujutsu"}


def config_file(plan):
    if os.path.isdir(plan.config):
        raise Refused("%s is a folder; --config names the config file to write" % plan.config)
    if os.path.lexists(plan.config) and not plan.args.force:
        raise Refused("%s exists: not overwritten (--force replaces it); nothing touched"
                      % plan.config)
    if os.path.lexists(plan.config):
        no_daemon(plan)


def no_daemon(plan):
    """--force over a config a daemon runs on (ours or the original): refused, with how
    to stop it. Moving the folder is: stop, `init --force REMOTE NEWFOLDER`, start."""
    pids = sorted(pid for pid, _, file in daemons.running()
                  if os.path.realpath(file) == os.path.realpath(plan.config))
    if not pids:
        return
    if os.path.exists(unit.path(plan)):
        how = "systemctl --user stop %s" % unit.name(plan)
    else:
        how = "kill %s" % " ".join(map(str, pids))
    raise Refused("dvcs-autosync runs on %s (PID %s): stop it first (%s), then run this "
                  "init again and start it; nothing touched"
                  % (plan.config, ", ".join(map(str, pids)), how))


def options(plan):
    a = plan.args
    if not a.account:
        for given, name in ((a.password_file, "--password-file"),
                            (a.fingerprint, "--fingerprint"), (a.server, "--server")):
            if given:
                raise Refused("%s is for the XMPP login: give --account USER@DOMAIN too" % name)
        return
    if not config.ADDRESS_RE.fullmatch(a.account):
        raise Refused("--account %r is not an XMPP address like user@example.org" % a.account)
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


def folder(plan):
    """plan.mode: "clone", "join" or "take"; Refused for anything else."""
    f = plan.folder
    if os.path.lexists(f) and not os.path.isdir(f):
        raise Refused("%s is a file, not a folder; nothing touched" % f)
    if not os.path.exists(f) or not os.listdir(f):
        plan.mode = "clone"
        return
    names = os.listdir(f)
    for marker, dvcs in OTHER_DVCS.items():
        if marker in names:
            raise Refused("%s holds a %s repository (%s): init sets up git only; nothing "
                          "touched" % (f, dvcs, marker))
    if ".git" not in names:
        plan.mode = "join"
        return
    top = git.git(f, "rev-parse", "--show-toplevel", check=False)
    if not top or os.path.realpath(os.fsdecode(top.strip())) != os.path.realpath(f):
        raise Refused("%s holds a .git that is not a working tree's; nothing touched" % f)
    url = git.git(f, "config", "--get", "remote.origin.url", check=False)
    if url is None:
        raise Refused("%s is a git repository with no remote origin, not a clone of %s; "
                      "nothing touched" % (f, plan.remote))
    url = os.fsdecode(url.strip())
    if not same_remote(url, plan.remote):
        raise Refused("%s is a clone of %s, not of %s; nothing touched" % (f, url, plan.remote))
    plan.mode = "take"


def remote(plan):
    """plan.empty: whether the remote has no branch yet; Refused if it cannot be read."""
    plan.progress.show("Reading the remote %s..." % plan.remote)
    try:
        out = git.git("/", "ls-remote", "--heads", plan.remote)
    except RuntimeError as e:
        raise Refused("cannot read the remote %s: %s; nothing touched" % (plan.remote, e)) \
            from None
    finally:
        plan.progress.clear()
    if plan.args.thin and not serves_partial_clones(plan.remote):
        where = plan.remote.rpartition(":")[2] if "://" not in plan.remote else "REPO"
        raise Refused("--thin: the remote %s does not serve partial clones; on the server "
                      "run git -C %s config uploadpack.allowFilter true (or leave out "
                      "--thin); nothing touched" % (plan.remote, shlex.quote(where)))
    plan.empty = not out.strip()


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
