"""dvcs-autosync open: the history page in your browser.

Starts autosync-web (web/server.py) when it does not run yet, detached, and waits
for its address file (core/webpage.py); then opens the page in the browser the
desktop chooses (Python's webbrowser: $BROWSER first, then xdg-open and the known
browsers) with a one-time ticket, good for one visit within two minutes: the browser's
command line, which every local user can read, never holds the page's secret.
"""
import argparse
import os
import subprocess
import sys
import time
import webbrowser

from autosync.core import cli, webpage
from autosync.core.paths import NotPrivate, state_dir, private_folder

START_TIMEOUT = 20.0


def parse(argv):
    p = argparse.ArgumentParser(prog="dvcs-autosync open",
                                description="Open the history page of your synced folders "
                                            "in your browser.")
    p.add_argument("--config", help="configuration file (default: ~/.autosync); the "
                                    "folders of your running daemons are shown too")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the page's address (a one-time ticket) instead of opening it")
    return p.parse_args(argv)


def start(config_files):
    """Start autosync-web, detached, its log in the state folder -> its address."""
    log = os.path.join(private_folder(state_dir(), others=0o022), "web.log")
    given = [word for file in config_files for word in ("--config", file)]
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        subprocess.Popen([sys.executable, "-m", "autosync.web"] + given,
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, cwd="/")
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = webpage.read_address()
        if found:
            return found
        time.sleep(0.05)
    raise OSError("autosync-web did not start within %g s: see %s" % (START_TIMEOUT, log))


def main(argv):
    """`dvcs-autosync open ...`: argv starts with "open"."""
    args = parse(argv[1:])
    # No ~/.autosync (and none named): the folders of the running daemons alone.
    default = os.path.expanduser("~/.autosync")
    files = [cli.load(args.config, check_path=False).file] \
        if args.config or os.path.isfile(default) else []
    try:
        found = webpage.read_address() or start(files)
    except (NotPrivate, OSError) as e:
        print("dvcs-autosync open: %s" % e, file=sys.stderr)
        return 1
    url = webpage.page_url(found["port"], webpage.ticket(found["secret"]))
    if args.print_only:
        print(url)
        return 0
    if not webbrowser.open(url):
        print("dvcs-autosync open: no browser found (set BROWSER); open this address, good "
              "for one visit within %d s: %s" % (webpage.TICKET_LIFE, url))
        return 1
    print("the history page is open in your browser (http://127.0.0.1:%d/)" % found["port"])
    return 0
