"""Would the link work? Tried once before anything is written: the XMPP account's login
(with --account), else the remote's own watch (syncmethod = ssh)."""
import getpass
import os
import sys

from autosync.core import config
from autosync.ssh.watch import probe as watch_probe
from autosync.tools.init.plan import Refused, say

LOGIN_TIMEOUT = 20.0  # seconds the XMPP check may take
WATCH_PROBE = 5.0  # seconds the remote's watch (syncmethod = ssh) is tried for


def link(plan):
    if plan.args.account:
        account(plan)
    else:
        plan.watch_why = watch(plan)


def watch(plan):
    """Without an XMPP account: can the remote itself say when it moves (syncmethod =
    ssh: autosync-remote on the server, or here for a local path)? Tried once, for
    WATCH_PROBE seconds, by the ssh link's own probe (ssh/watch.py). -> None, or why not
    (its own words); plan.watch_how says how it is watched."""
    plan.progress.show("Trying whether the remote can be watched (autosync-remote)...")
    try:
        verdict = watch_probe(plan.remote, os.getcwd(), WATCH_PROBE)
    finally:
        plan.progress.clear()
    if verdict.how is not None:
        plan.watch_how = verdict.how
    return verdict.why


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
    """Log in once (the XMPP link's own probe, xmpp/session.py); an untrusted certificate
    is shown for the user to confirm."""
    from autosync.xmpp.session import probe as login_probe  # xmpppy: only with --account
    x = plan.xmpp
    plan.progress.show("Logging in to %s:%s as %s..." % (x.host, x.port, x.username))
    try:
        verdict = login_probe(x, LOGIN_TIMEOUT)
    finally:
        plan.progress.clear()
    if verdict.untrusted:
        if not verdict.fingerprint:
            raise Refused("XMPP: %s (its certificate could not be read)" % verdict.why)
        if not confirm_certificate(verdict.why, verdict.fingerprint):
            raise Refused("XMPP: the server's certificate was not trusted; if %s is your "
                          "server's, run again with --fingerprint %s"
                          % (verdict.fingerprint, verdict.fingerprint))
        x.fingerprint = verdict.fingerprint
        return login(plan)
    if verdict.why is not None:
        raise Refused("XMPP: %s; nothing touched" % verdict.why)
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
