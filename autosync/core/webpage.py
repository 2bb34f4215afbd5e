"""The history page's address: where autosync-web listens, and the secret it asks for.

autosync-web (web/server.py) writes one small file, `page.json` in this user's
private runtime folder (paths.runtime_dir(), checked private first), mode 0600:
its port, its pid and a random secret. `dvcs-autosync open` (tools/page.py) reads
it and opens the page with a one-time ticket made from the secret (`ticket`), never
the secret itself: a browser's command line is readable by every local user, so the
ticket is good for one visit within TICKET_LIFE seconds, which swaps it for a cookie
holding the secret (web/app.py checks both with `ticket_ok`).
"""
import hashlib
import hmac
import json
import os
import secrets
import socket
import time

from autosync.core.paths import private_folder, runtime_dir

NAME = "page.json"
TICKET_LIFE = 120.0  # seconds a ticket opens the page for, once


def address_file():
    """The address file's path, in the private runtime folder (made and checked)."""
    return os.path.join(private_folder(runtime_dir()), NAME)


def write_address(port, secret, pid=None):
    """Write the address file (0600, whole or not at all)."""
    path = address_file()
    temp = "%s.%d.new" % (path, os.getpid())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"port": port, "secret": secret, "pid": pid or os.getpid()}, f)
    os.replace(temp, path)
    return path


def read_address():
    """{"port", "secret", "pid"} of the page that runs now, or None (no file, a dead
    pid, a port nobody answers on)."""
    try:
        with open(address_file(), "rb") as f:
            found = json.loads(f.read().decode("utf-8"))
        port, pid = int(found["port"]), int(found["pid"])
        str(found["secret"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
    except OSError:
        return None
    return found


def remove_address(pid):
    """Remove the address file if it is still the one `pid` wrote."""
    try:
        path = address_file()
        with open(path, "rb") as f:
            if json.loads(f.read().decode("utf-8")).get("pid") == pid:
                os.unlink(path)
    except (OSError, ValueError, AttributeError):
        pass


def new_secret():
    return secrets.token_urlsafe(32)


def _sign(secret, nonce, until):
    return hmac.new(secret.encode(), ("ticket %s %d" % (nonce, until)).encode(),
                    hashlib.sha256).hexdigest()


def ticket(secret, now=None):
    """A one-time ticket for the page: NONCE.UNTIL.SIGNATURE."""
    nonce = secrets.token_hex(8)
    until = int((time.time() if now is None else now) + TICKET_LIFE)
    return "%s.%d.%s" % (nonce, until, _sign(secret, nonce, until))


def ticket_ok(secret, text, used, now=None):
    """Is `text` a ticket made with `secret`, in time and not used yet? `used`: the set
    of nonces already taken (the one checked is added to it)."""
    try:
        nonce, until, signature = str(text).split(".")
        until = int(until)
    except ValueError:
        return False
    if not hmac.compare_digest(signature, _sign(secret, nonce, until)):
        return False
    if until < (time.time() if now is None else now) or nonce in used:
        return False
    used.add(nonce)
    return True


def page_url(port, ticket_text):
    return "http://127.0.0.1:%d/?ticket=%s" % (port, ticket_text)
