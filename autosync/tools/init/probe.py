"""Would the link work? Tried once before anything is written: the XMPP account's login
(with --account), else the remote's own watch (syncmethod = ssh)."""
import getpass
import os
import select
import subprocess
import sys

from autosync.core import config
from autosync.ssh import connection as sshremote
from autosync.tools.init.plan import Refused, say
from autosync.vcs.commands import environment

LOGIN_TIMEOUT = 20.0  # seconds the XMPP check may take
WATCH_PROBE = 5.0  # seconds the remote's watch (syncmethod = ssh) is tried for


def link(plan):
    if plan.args.account:
        account(plan)
    else:
        plan.watch_why = watch(plan)


def watch(plan):
    """Without an XMPP account: can the remote itself say when it moves (syncmethod =
    ssh: autosync-remote on the server, or here for a local path)? Tried once: a
    line, or the command still running after WATCH_PROBE seconds (an empty remote
    prints nothing yet), is yes. -> None, or why not (its own words); plan.watch_how
    says how it is watched."""
    here = os.getcwd()
    try:
        argv = sshremote.default_watch(plan.remote, here, sshremote.ssh_program(os.environ, here))
    except sshremote.BadRemote as e:
        return str(e)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=environment())
    except OSError as e:
        return "%s: %s" % (argv[0], e.strerror)
    plan.progress.show("Trying whether the remote can be watched (autosync-remote)...")
    try:
        if select.select([proc.stdout], [], [], WATCH_PROBE)[0] and \
                not proc.stdout.readline().strip():
            proc.wait(WATCH_PROBE)
            why = sshremote.why_it_ended(proc.returncode, proc.stderr.read())
            if over_ssh(plan.remote) and sshremote.cannot_watch(proc.returncode):
                plan.watch_how = why  # the link polls it instead (sshlink)
                return None
            return why
        proc.kill()
        proc.wait()
        os.set_blocking(proc.stderr.fileno(), False)  # what it said so far, no more
        if sshremote.SENT_NOTICE.encode() in (proc.stderr.read() or b""):
            plan.watch_how = "sent"
        return None
    finally:
        plan.progress.clear()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def over_ssh(remote):
    try:
        return sshremote.parse_remote(remote)[0] == "ssh"
    except sshremote.BadRemote:
        return False


def account(plan):
    a = plan.args
    secret = password(a)
    host, port = a.account.partition("@")[2], 5222
    if a.server:
        host, _, p = a.server.partition(":")
        port = int(p) if p else 5222
    plan.xmpp = config.Xmpp(username=a.account, password=secret, host=host, port=port,
                            fingerprint=a.fingerprint or "",
                            resource="autosync-init-%d" % os.getpid())
    login(plan)


def password(args):
    if args.password_file:
        try:
            with open(os.path.expanduser(args.password_file)) as f:
                text = f.readline().rstrip("\r\n")
        except OSError as e:
            raise Refused("cannot read --password-file %s: %s" % (args.password_file,
                                                                  e.strerror)) from None
    elif sys.stdin.isatty():
        text = getpass.getpass("Password of %s: " % args.account)
    else:
        raise Refused("no terminal to ask the password of %s on: give --password-file F"
                      % args.account)
    if not text:
        raise Refused("the password of %s is empty" % args.account)
    return text


def login(plan):
    """Log in once; an untrusted certificate is shown for the user to confirm."""
    from autosync.xmpp import session as xmpp_session
    x = plan.xmpp
    plan.progress.show("Logging in to %s:%s as %s..." % (x.host, x.port, x.username))
    try:
        session = xmpp_session.open_session(x, LOGIN_TIMEOUT, _Quiet())
    except xmpp_session.UntrustedServer as e:
        plan.progress.clear()
        if not e.fingerprint:
            raise Refused("XMPP: %s (its certificate could not be read)" % e) from None
        if not confirm_certificate(str(e), e.fingerprint):
            raise Refused("XMPP: the server's certificate was not trusted; if %s is your "
                          "server's, run again with --fingerprint %s"
                          % (e.fingerprint, e.fingerprint)) from None
        x.fingerprint = e.fingerprint
        return login(plan)
    except xmpp_session.LoginError as e:
        raise Refused("XMPP: %s; nothing touched" % e) from None
    finally:
        plan.progress.clear()
    session.close(goodbye=True)
    say("Logged in to %s:%s as %s: the account works%s." % (
        x.host, x.port, x.username,
        " (certificate pinned by its fingerprint)" if x.fingerprint else ""))


def confirm_certificate(why, fingerprint):
    if not sys.stdin.isatty():
        return False
    say("The XMPP server's certificate is not trusted by this machine (%s).\n"
        "Its SHA-256 fingerprint is\n    %s\nCompare it with the one the server shows "
        "(on the server: openssl x509 -noout -fingerprint -sha256 -in CERTIFICATE)."
        % (why, fingerprint))
    answer = input("Trust exactly this certificate? [y/N] ").strip().lower()
    return answer in ("y", "yes")


class _Quiet:
    """The session's handler for the one check login: nothing is processed."""

    def on_presence(self, jid, type):
        pass

    def on_message(self, jid, type, body):
        pass

    def on_pong(self, ping_id):
        return False
