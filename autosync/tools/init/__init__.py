"""dvcs-autosync init REMOTE FOLDER: one command per machine brings a folder into sync.

FOLDER, whatever it holds now:
  missing or empty      cloned from REMOTE (an empty remote is fine);
  files, no repository  becomes a working tree of REMOTE without losing a file: its
                        files are committed as they are, then merged with what REMOTE
                        has by the daemon's own pull (vcs/pull/git.py), so a path in both
                        with other content keeps both versions (a conflict copy);
  a clone of REMOTE     taken as it is;
  anything else         refused in one line, nothing touched.

init is a plain list of steps (STEPS) over one small value, the Setup (plan.py), each
step in the module of its job: the checks (checks.py) and the link's probe (probe.py)
refuse before anything is written; then the repository (repository.py: a git identity
where git has none, the first commit and push when the remote is empty), the remote's
repository set for big files (server.py), the config file (files.py, mode 0600, only what differs from the defaults), with --service the
systemd user unit (unit.py), and the closing words with the next machine's command
(words.py).
"""
import argparse
import logging
import sys

from autosync.core import cli
from autosync.core.messages import escaped, printable
from autosync.tools.init import checks, files, probe, repository, server, unit, words
from autosync.tools.init.plan import Refused, Setup
from autosync.tools.init.words import key_line  # noqa: F401  (the restricted key's line)

STEPS = (
    words.about_the_original,  # worth knowing even when init refuses
    checks.config_file,
    checks.options,
    checks.folder,
    checks.remote,
    probe.link,
    unit.check,
    # From here on things are written.
    repository.bring_in,
    repository.identity,
    repository.first_commit,
    server.big_files,
    files.write_config,
    unit.install,
    words.closing,
)


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


def run(plan):
    for step in STEPS:
        step(plan)
    return 0


def main(argv):
    args = parser().parse_args(list(argv)[1:])  # argv[0] is "init"
    cli.log_to_stderr(logging.DEBUG if args.verbose else logging.WARNING,
                      "%(name)s: %(levelname)s %(message)s")
    try:
        return run(Setup.of(args))
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
