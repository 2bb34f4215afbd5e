"""autosync-web: the history page's server, for this user's synced folders.

Python's own WSGI server (wsgiref, a thread per request) bound to 127.0.0.1 on a
free port; the address and a new random secret go into the address file
(core/webpage.py) that `dvcs-autosync open` reads. A connection is refused before
its request is read unless the kernel's socket table says that its other end is a
process of this user (another local user reaches the port, not the page). It stops
on SIGTERM or SIGINT, or after --idle seconds without a request (an open page asks
every few seconds); one runs per user: a second one started says where the first is.
"""
import argparse
import logging
import os
import socket
import socketserver
import sys
import time
from wsgiref import simple_server

from autosync import __version__
from autosync.core import cli, webpage
from autosync.core.paths import NotPrivate
from autosync.core.stopflag import StopFlag
from autosync.web.app import App

log = logging.getLogger("autosync.web")


def loopback_owner(local, remote, table="/proc/net/tcp"):
    """The uid of the process whose loopback TCP socket is `remote` and talks to
    `local` ((host, port) pairs as the server sees them), or None when not found."""
    def hexed(address):
        host, port = address
        return "%s:%04X" % (socket.inet_aton(host)[::-1].hex().upper(), port)
    want = (hexed(remote), hexed(local))
    try:
        with open(table) as f:
            next(f)
            for line in f:
                words = line.split()
                if (words[1], words[2]) == want:
                    return int(words[7])
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return None


class Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        log.debug("%s %s", self.address_string(), format % args)


class PageServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = False

    def verify_request(self, request, client_address):
        owner = loopback_owner(request.getsockname(), client_address)
        if owner != os.getuid():
            log.warning("refused a connection from uid %s: the page is for uid %d only",
                        owner, os.getuid())
            return False
        return True


def parse(argv):
    p = argparse.ArgumentParser(prog="autosync-web", description=__doc__.strip().split("\n")[0])
    p.add_argument("--config", action="append", default=[], metavar="FILE",
                   help="a synced folder's configuration file to show (again for more); the "
                        "folders of your running daemons are shown too")
    p.add_argument("--idle", type=float, default=3600.0, metavar="SECONDS",
                   help="stop after this long without a request (default 3600)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request")
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    cli.setup_logging(args.verbose)
    try:
        running = webpage.read_address()
    except NotPrivate as e:
        print("autosync-web: %s" % e, file=sys.stderr)
        return 1
    if running:
        print("autosync-web: already runs for you on 127.0.0.1:%d (pid %d)"
              % (running["port"], running["pid"]))
        return 0
    server = PageServer(("127.0.0.1", 0), Quiet)
    port = server.server_address[1]
    secret = webpage.new_secret()
    app = App(port, secret, [os.path.abspath(c) for c in args.config])
    server.set_app(app)
    stop = StopFlag()
    stop.install()
    webpage.write_address(port, secret)
    log.info("the history page is at http://127.0.0.1:%d/ (dvcs-autosync open)", port)
    server.timeout = 0.5
    try:
        while not stop and time.monotonic() - app.last_request < args.idle:
            server.handle_request()
    finally:
        webpage.remove_address(os.getpid())
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
