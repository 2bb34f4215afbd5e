"""What every program of the suite does first: arguments, logging, config."""
import argparse
import logging
import os
import sys
import time

from autosync import __version__, config


def setup_logging(verbose):
    # Under systemd the journal adds its own timestamp and program name.
    if os.environ.get("JOURNAL_STREAM"):
        fmt = "%(name)s: %(levelname)s %(message)s"
    else:
        fmt = "%(asctime)s %(name)s[%(process)d] %(levelname)s %(message)s"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=fmt,
                        stream=sys.stderr)


def parser(prog, doc):
    p = argparse.ArgumentParser(prog=prog, description=(doc or "").strip().split("\n")[0])
    p.add_argument("config", nargs="?", default=None,
                   help="configuration file (default: ~/.autosync)")
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
    try:
        return config.load(path or config.default_path(), check_path=check_path)
    except config.ConfigError as e:
        die(str(e))


def start(prog, doc, argv=None):
    """Parse the usual arguments, set up logging, and return the checked config."""
    args = parser(prog, doc).parse_args(argv)
    setup_logging(args.verbose)
    return load(args.config)
