"""The config file init writes (mode 0600, only what differs from the defaults), and
where the XMPP password is kept: the desktop's keyring, or the file."""
import os

from autosync.core import config
from autosync.core.config import ConfigError
from autosync.tools.init.plan import Refused, say


def tilde(path):
    """`path` with the home folder as ~, as a user writes it (config.load expands it)."""
    home = os.path.expanduser("~")
    if path == home:
        return "~"
    if path.startswith(home.rstrip("/") + "/"):
        return "~/" + path[len(home.rstrip("/")) + 1:]
    return path


def config_text(plan):
    lines = ["# Written by dvcs-autosync init; every key not here has its default",
             "# (README, Configuration).", "[autosync]", "path = %s" % tilde(plan.folder)]
    if plan.xmpp is None:
        # Without an account: the remote's own watch when it works, else nothing
        # announces pushes and the timer pull (pullinterval) brings them.
        lines.append("syncmethod = %s" % ("ssh" if plan.watch_why is None else "none"))
    else:
        x = plan.xmpp
        lines += ["[xmpp]", "username = %s" % x.username, "password = %s" % plan.password_kept]
        if x.host != x.username.partition("@")[2]:
            lines.append("host = %s" % x.host)
        if x.port != config.KEYS["xmpp"]["port"].default:
            lines.append("port = %d" % x.port)
        if x.fingerprint:
            lines.append("fingerprint = %s" % x.fingerprint)
    return "\n".join(lines) + "\n"


def keep_password(plan):
    """-> the config's [xmpp] password: `keyring` once the desktop's keyring keeps the
    password (where a Secret Service answers, without --password-in-file), else the
    password itself, as always."""
    from autosync.core import keyring
    x = plan.xmpp
    if not plan.args.password_in_file and keyring.available():
        try:
            keyring.store(x.username, x.password)
            say("The password of %s is kept in your keyring (Secret Service); the config "
                "file says password = keyring." % x.username)
            return config.KEYRING
        except keyring.KeyringError as e:
            say("Not kept in the keyring: %s; the password goes into the config file." % e)
    if x.password == config.KEYRING:
        raise Refused("a password that reads %r cannot be written into the config file, "
                      "where it names the keyring: no config written" % config.KEYRING)
    return x.password


def write_config(plan):
    if plan.xmpp is not None:
        plan.password_kept = keep_password(plan)
    os.makedirs(os.path.dirname(plan.config), mode=0o700, exist_ok=True)
    temp = "%s.%d.tmp" % (plan.config, os.getpid())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(fd, "w") as f:
            f.write(config_text(plan))
        # Read back as the daemon will: what it gets must be what was meant.
        cfg = config.load(temp, warn=False)
        if plan.xmpp and cfg.xmpp.password != plan.password_kept:
            raise Refused("the password cannot be written into %s as it is (leading or "
                          "trailing blanks?): nothing written" % plan.config)
        if plan.args.force:
            os.replace(temp, plan.config)
        else:
            os.link(temp, plan.config)  # never over a file made meanwhile
    except ConfigError as e:
        raise Refused("the config written does not read back: %s" % e) from None
    except FileExistsError:
        raise Refused("%s appeared meanwhile: not overwritten" % plan.config) from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    say("Wrote %s (mode 0600)." % plan.config)
