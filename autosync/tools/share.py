"""dvcs-autosync share FOLDER [--with NAME --key FILE]: what to do to keep FOLDER
together with another person (docs/sharing.md).

It changes nothing: it says, in a few lines a person can follow, what to do on the
server that holds the folder's repository (the one both push to: one server account,
each person's key allowed that repository and nothing else, with the restricted-key
line init prints: tools/init/words.py key_line), the other person's command (the
`dvcs-autosync init REMOTE FOLDER` they know), and how to stop sharing. Their key's
line is written out whole when --key names their public key file.
"""
import argparse
import os
import re
import subprocess
import sys

from autosync.core.messages import escaped, printable
from autosync.ssh.watch import probe as watch_probe
from autosync.tools.init.files import tilde
from autosync.tools.init.plan import Refused
from autosync.tools.init.words import key_line, shell_words
from autosync.vcs import git
from autosync.vcs.commands import environment
from autosync.vcs.remote import ssh_program, ssh_remote

WATCH_PROBE = 5.0  # seconds the remote's watch is tried, as init does (is autosync-remote there?)
# One public key line: its type, its base64 blob, an optional comment.
PUBLIC_KEY = re.compile(r"((?:sk-)?(?:ssh|ecdsa)-[A-Za-z0-9@.-]+) ([A-Za-z0-9+/]+={0,3})(?: .*)?")


def parser():
    p = argparse.ArgumentParser(
        prog="dvcs-autosync share",
        description="Say what to do on the server, and what the other person runs, to keep "
                    "FOLDER together with another person. Changes nothing.")
    p.add_argument("folder", metavar="FOLDER", help="the synced folder to share")
    p.add_argument("--with", dest="person", metavar="NAME", default=None,
                   help="the other person's name (the comment of their key's line)")
    p.add_argument("--key", metavar="FILE", default=None,
                   help="the other person's public key file (e.g. their id_ed25519.pub): "
                        "their authorized_keys line is then printed whole")
    p.add_argument("--no-probe", action="store_true",
                   help="do not log in to the server to see whether it has autosync-remote; "
                        "print the key line that needs nothing of ours there")
    return p


def git_text(folder, *args):
    out = git.git(folder, *args, check=False)
    return os.fsdecode(out or b"").strip()


def public_key(file, person):
    """The key's type and blob from a public key file, with `person` as its comment."""
    try:
        with open(os.path.expanduser(file), errors="replace") as f:
            text = f.read(64 * 1024)
    except OSError as e:
        raise Refused("cannot read --key %s: %s" % (printable(file), e.strerror)) from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = PUBLIC_KEY.fullmatch(lines[0]) if len(lines) == 1 else None
    if not found:
        raise Refused("--key %s is not one public key line (ssh-ed25519 AAAA... as in "
                      "~/.ssh/id_ed25519.pub; never the private key)" % printable(file))
    return "%s %s %s" % (found.group(1), found.group(2), person)


def their_remote(remote, folder):
    """The address as another person's machine reaches it: the login user and the host
    name the ssh configuration here resolves (`ssh -G`: an alias in ~/.ssh/config, a
    user set there), the port and path as they are. The address itself where ssh does
    not say."""
    kind, destination, port, path = ssh_remote(remote, folder)
    user, _, host = destination.rpartition("@")
    try:
        done = subprocess.run(ssh_program(os.environ, folder) + ["-G", host],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=10,
                              env=environment())
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return remote
    said = dict(line.partition(" ")[::2] for line in done.stdout.splitlines())
    if done.returncode or not said.get("hostname"):
        return remote
    user = user or said.get("user", "")
    host = said["hostname"]
    port = port or (int(said["port"]) if said.get("port", "22").isdigit() else 22)
    login = (user + "@" if user else "") + (("[%s]" % host) if ":" in host else host)
    if port != 22:
        return "ssh://%s:%d%s" % (login, port, path if path.startswith("/") else "/" + path)
    return "%s:%s" % (login, path)


def words(args):
    folder = os.path.abspath(os.path.expanduser(args.folder))
    if not os.path.isdir(folder):
        raise Refused("%s is not a folder" % printable(folder))
    if git.git_dir(folder) is None:
        raise Refused("%s is not a synced folder (no git repository): set it up first with "
                      "dvcs-autosync init REMOTE %s" % (printable(folder), printable(folder)))
    remote = git_text(folder, "config", "--get", "remote.origin.url")
    if not remote:
        raise Refused("%s has no remote (remote.origin.url) to share: dvcs-autosync init "
                      "REMOTE %s sets one" % (printable(folder), printable(folder)))
    if ssh_remote(remote, folder) is None:
        raise Refused("%s's remote, %s, is not reached over ssh: a shared folder is one "
                      "repository on an ssh server both people reach (docs/sharing.md)"
                      % (printable(folder), printable(remote)))
    person = args.person
    if person is not None and (not person.strip() or not person.isprintable()):
        raise Refused("--with NAME: a name of printable characters, e.g. --with Bob")
    if args.key and not person:
        raise Refused("--key needs --with NAME (the name their key's line carries)")
    them = (person or "the other person").strip()
    key = public_key(args.key, person.strip()) if args.key else None
    installed = False
    if not args.no_probe:
        verdict = watch_probe(remote, folder, WATCH_PROBE)
        installed = verdict.why is None and verdict.how is None
    line = key_line(remote, installed)
    me = git_text(folder, "var", "GIT_AUTHOR_IDENT")
    me = re.sub(r" \d+ [-+]\d{4}$", "", me) or "(none set: git config user.name / user.email)"
    address = their_remote(remote, folder)
    join = shell_words(["dvcs-autosync", "init", address, "~/" + os.path.basename(folder)])
    said = ["Sharing %s with %s: one repository, %s, that both of you push to." % (
                printable(tilde(folder)), printable(them), printable(remote)),
            "",
            "1. On the server, in ~/.ssh/authorized_keys of the account that holds it, "
            "%s's key, allowed that repository and nothing else:" % printable(them),
            "       %s %s" % (line, printable(key) if key else "THEIR-PUBLIC-KEY %s"
                              % printable(them)),
            "   Begin your own machines' key lines with the same words (everything before "
            "the key), so that no key of the share can do more.%s" % (
                "" if installed else " (It needs only sh and git on the server.)"),
            "2. %s runs, on each of their machines (with their own key, their own git "
            "identity):" % printable(them),
            "       %s" % join,
            "   (the same init as for a machine of your own: their folder's files, if it "
            "has some, are merged in, none lost)",
            "3. Each commit then carries its author (yours: %s) and, in its message, the "
            "machine; a conflict copy of %s's version names them: "
            "'name (conflict from %s on HOST DATE).ext'. dvcs-autosync log and the history "
            "page (dvcs-autosync open) show who changed what." % (
                printable(me), printable(them), printable(them)),
            "4. Over ssh (syncmethod = ssh) each push reaches every machine of both of you "
            "at once. Over XMPP, each of you names the other's account in [xmpp] "
            "sharedwith (docs/sharing.md).",
            "",
            "To stop sharing, remove %s's line from authorized_keys: their machines get no "
            "new versions and keep what they have; their status says the server refuses "
            "their key. A connection their machines hold already lasts until it drops: end "
            "their sshd sessions on the server to cut them off at once (docs/sharing.md)."
            % printable(them)]
    if address != remote:
        said.append("(%s is the address %s resolves to with your ssh configuration; give "
                    "them the one that reaches the server from their side if it differs.)"
                    % (printable(address), printable(remote)))
    return "\n".join(said)


def main(argv):
    args = parser().parse_args(list(argv)[1:])  # argv[0] is "share"
    try:
        print(words(args))
    except Refused as e:
        print(escaped("dvcs-autosync share: %s" % e), file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as e:
        print(escaped("dvcs-autosync share: %s" % e), file=sys.stderr)
        return 1
    return 0
