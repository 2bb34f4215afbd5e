"""What every program of the suite does first: arguments, logging, config."""
import argparse
import logging
import os
import sys
import time

from autosync import __version__
from autosync.core import protocol
from autosync.core.messages import escaped


# A program's exit status that stops the whole suite instead of a restart (EX_CONFIG:
# the configured folder holds something else now). The supervisor exits with it too.
STOP_ALL = 78


def setup_logging(verbose):
    # Under systemd the journal adds its own timestamp and program name.
    if os.environ.get("JOURNAL_STREAM"):
        fmt = "%(name)s: %(levelname)s %(message)s"
    else:
        fmt = "%(asctime)s %(name)s[%(process)d] %(levelname)s %(message)s"
    log_to_stderr(logging.DEBUG if verbose else logging.INFO, fmt)


class _Escaping(logging.Formatter):
    """A log line acts on no terminal: a name from another machine, or a tool's words
    that hold one, written as messages.printable writes it (newlines kept)."""

    def format(self, record):
        return escaped(super().format(record))


def log_to_stderr(level, fmt):
    """logging.basicConfig(level=level, format=fmt, stream=sys.stderr), escaping."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Escaping(fmt))
    logging.basicConfig(level=level, handlers=[handler])


class _Parser(argparse.ArgumentParser):
    """The config file as the original took it (an argument), or as `autosync-notify`,
    `log` and the rest take it (`--config FILE`): either way in `args.config`."""

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        given = parsed.__dict__.pop("config_option")
        if given is not None:
            if parsed.config is not None and parsed.config != given:
                self.error("two config files: %s and --config %s" % (parsed.config, given))
            parsed.config = given
        return parsed


def parser(prog, doc):
    p = _Parser(prog=prog, description=(doc or "").strip().split("\n")[0])
    p.add_argument("config", nargs="?", default=None,
                   help="configuration file (default: ~/.autosync)")
    p.add_argument("--config", dest="config_option", metavar="FILE",
                   help="the same, as the other commands take it")
    p.add_argument("-v", "--verbose", action="store_true", help="log every command run")
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    return p


def show_time(stamp):
    """A unix time as local date and time, the way every program prints it."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def die(message, status=2):
    print(message, file=sys.stderr)
    sys.exit(status)


def load(path, check_path=True):
    # Imported here: configobj and the config's checks are most of a client's start-up
    # (70 ms), and autosync-notify in a git hook, given --socket, needs neither.
    from autosync.core import config
    try:
        return config.load(path or config.default_path(), check_path=check_path)
    except config.ConfigError as e:
        die(str(e))


def start(prog, doc, argv=None, client=True):
    """Parse the usual arguments, set up logging, and return the checked config.

    A client of the committer's socket (every program but the committer) stops
    here, with one line, if the socket is not this user's own daemon's."""
    args = parser(prog, doc).parse_args(argv)
    setup_logging(args.verbose)
    cfg = load(args.config)
    if client:
        trust(prog, cfg.socket)
    return cfg


def trust(prog, path):
    """Stop with one line unless `path` is this user's own daemon's socket (or nobody's yet)."""
    try:
        protocol.check_folder(path)
        if os.path.exists(path):
            protocol.answers(path, timeout=2.0)  # nobody yet: checked again before a send
    except protocol.Untrusted as e:
        die("%s: %s" % (prog, e))
