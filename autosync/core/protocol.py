"""The control socket: how a message is framed, server and client.

One JSON object per line, one reply per request (docs/protocol.md). The
committer runs the Server; every other program uses connect(). Where the
socket lives: autosync.paths.
"""
import contextlib
import errno
import json
import logging
import os
import socket
import stat
import struct
import threading

log = logging.getLogger("autosync.protocol")

# The vocabulary, each word described in docs/protocol.md (a test keeps them equal).
# What a client may ask the committer (its table of handlers is checked against this):
REQUESTS = ("status", "batch", "sync", "note", "pull", "pushed", "link", "watch", "subscribe",
            "pause", "resume", "describe")
# Why the watcher asks for a rescan (a batch's `reason`):
RESCANS = ("start", "committer-restarted", "drained", "overflow", "folder-back")
# What the committer tells its subscribers:
EVENTS = ("committed", "pushed", "pull-started", "pull-finished", "pulled", "conflict",
          "failed", "recovered", "mass-delete", "stopping", "paused", "resumed", "link",
          "described", "progress")
# What the committer's worker is doing (status "state"):
STATES = ("starting", "idle", "committing", "pulling", "pushing", "paused", "stopped")

MAX_LINE = 16 * 1024 * 1024  # a 100,000-file batch fits; anything longer is refused
# A client may sit between requests for ever (the suite's own connections do);
# only a line that was begun must be finished within this many seconds.
PARTIAL_LINE_TIMEOUT = 60.0
SEND_TIMEOUT = 5.0  # a subscriber that takes no event this long is dropped


class ProtocolError(Exception):
    """A line that is not a valid message."""


class NoDaemon(Exception):
    """Nobody listens on the socket."""


class Untrusted(Exception):
    """The socket, its folder or the process listening on it is not this user's own:
    nothing may be sent there. str() is one line naming the folder and what is wrong."""


def check_folder(path):
    """Refuse a socket whose folder another user owns or could enter (a squatter's)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return  # nobody is there at all: connecting says so
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.getuid():
        raise Untrusted("refusing the socket folder %s: it belongs to uid %d, not to you (uid %d)"
                        % (folder, st.st_uid, os.getuid()))
    if mode & 0o077:
        raise Untrusted("refusing the socket folder %s: its mode is %04o, others may enter it "
                        "(it must be 0700)" % (folder, mode))


def peer_uid(sock):
    """The uid of the process at the other end of a UNIX socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def encode(message):
    # ensure_ascii keeps lone surrogates (undecodable file name bytes) as \udcXX escapes.
    return (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def decode(line):
    try:
        message = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("not a JSON line: %s" % e) from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


class LineReader:
    """Reads newline-terminated lines from a socket, refusing over-long ones."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""

    def has_line(self):
        """A whole line is buffered: readline() will not wait."""
        return b"\n" in self.buffer

    def readline(self):
        """The next line without its newline; None at end of stream."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise ProtocolError("line longer than %d bytes" % MAX_LINE)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        if len(line) > MAX_LINE:
            raise ProtocolError("line longer than %d bytes" % MAX_LINE)
        return line


class Connection:
    """A client's connection to the committer."""

    def __init__(self, sock):
        self.sock = sock
        self.reader = LineReader(sock)

    def request(self, message, timeout=None):
        """Send one request and return its reply (a dict with "ok")."""
        self.sock.settimeout(timeout)
        self.sock.sendall(encode(message))
        line = self.reader.readline()
        if line is None:
            raise ConnectionError("the daemon closed the connection")
        return decode(line)

    def events(self):
        """Events, one dict each, after a subscribe request; ends when the daemon goes."""
        self.sock.settimeout(None)
        while True:
            line = self.reader.readline()
            if line is None:
                return
            yield decode(line)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()


# sockaddr_un holds 108 bytes, the last a NUL: a longer path cannot be bound or reached
# by name (a deep XDG_RUNTIME_DIR), so it is reached through its folder's descriptor.
SUN_PATH_MAX = 107


@contextlib.contextmanager
def reachable(path):
    """`path` as bind() and connect() can take it: itself, or when too long for a socket,
    /proc/self/fd/N/NAME, N a descriptor of its folder, open while the call runs."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_PATH | os.O_DIRECTORY)
    try:
        yield "/proc/self/fd/%d/%s" % (folder, os.path.basename(path))
    finally:
        os.close(folder)


def connect(path, timeout=5.0):
    """A connection to this user's own daemon at `path`, checked before a byte is sent:
    NoDaemon if nobody listens, Untrusted if the folder or the listener is not ours."""
    check_folder(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with reachable(path) as name:
            sock.connect(name)
    except OSError as e:
        sock.close()
        raise NoDaemon("no autosync daemon is listening on %s (%s)" % (path, e.strerror or e)) from None
    uid = peer_uid(sock)
    if uid != os.getuid():
        sock.close()
        raise Untrusted("refusing the socket %s: the process listening on it runs as uid %d, "
                        "not as you (uid %d)" % (path, uid, os.getuid()))
    return Connection(sock)


def ask(path, request, timeout=10.0, connect_timeout=5.0):
    """One request to this user's daemon at `path` on a connection of its own, closed
    after -> its reply. NoDaemon or Untrusted as connect() raises them; ProtocolError,
    OSError or ValueError when the talk fails."""
    conn = connect(path, timeout=connect_timeout)
    try:
        return conn.request(request, timeout=timeout)
    finally:
        conn.close()


def answers(path, timeout=1.0):
    """Does this user's daemon answer at `path`? False when nobody listens; Untrusted
    when what listens (or the folder) is not this user's."""
    try:
        connect(path, timeout=timeout).close()
        return True
    except NoDaemon:
        return False


def _private_dir(path):
    """Create the socket's directory 0700, and refuse one that others could enter."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    try:
        check_folder(os.path.join(path, "x"))
    except Untrusted as e:
        raise OSError(errno.EPERM, "%s; if another user made it, remove it (as root), or set "
                      "socket = in [autosync] to a path in a folder only you can enter "
                      "(mode 0700)" % e) from None


class Server:
    """Serves one thread per client; `handler(message, client)` returns the reply."""

    def __init__(self, path, handler):
        self.path = path
        self.handler = handler
        self.subscribers = set()
        self.lock = threading.Lock()
        _private_dir(os.path.dirname(path))
        self._remove_stale()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is born 0600
        try:
            with reachable(path) as name:
                self.sock.bind(name)
        finally:
            os.umask(old_umask)
        self.sock.listen(16)

    def _remove_stale(self):
        if not os.path.exists(self.path):
            return
        try:
            taken = answers(self.path)
        except Untrusted as e:
            raise OSError(errno.EPERM, str(e)) from None
        if not taken:
            os.unlink(self.path)  # left behind by a daemon that died
            return
        raise OSError(errno.EADDRINUSE, "another daemon is already listening on %s" % self.path)

    def serve_forever(self):
        """Accept clients until close()."""
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def start(self):
        threading.Thread(target=self.serve_forever, name="socket", daemon=True).start()

    def _serve(self, sock):
        reader = LineReader(sock)
        try:
            while sock not in self.subscribers:
                try:
                    line = self._next_request(reader)
                except ProtocolError as e:
                    self._send(sock, {"ok": False, "error": str(e)})
                    return
                if line is None:
                    return
                self._send(sock, self._reply(line, sock))
            # A subscriber only listens from now on; wait until it hangs up.
            # Its timeout bounds how long publish() may block on it.
            sock.settimeout(SEND_TIMEOUT)
            while True:
                try:
                    if not sock.recv(1 << 12):
                        return
                except socket.timeout:
                    continue
        except OSError:
            pass  # timed out or went away: only this client is affected
        finally:
            with self.lock:
                self.subscribers.discard(sock)
            sock.close()

    @staticmethod
    def _next_request(reader):
        """The next line: waits for ever for it to begin, PARTIAL_LINE_TIMEOUT for its end."""
        if not reader.buffer:  # between requests: no bound
            reader.sock.settimeout(None)
            chunk = reader.sock.recv(1 << 16)
            if not chunk:
                return None
            reader.buffer += chunk
        reader.sock.settimeout(PARTIAL_LINE_TIMEOUT)
        return reader.readline()

    def _reply(self, line, sock):
        try:
            message = decode(line)
            if message.get("cmd") == "subscribe":
                # Reply before the first event can reach this client.
                with self.lock:
                    sock.sendall(encode({"ok": True}))
                    self.subscribers.add(sock)
                return None
            return self.handler(message, sock)
        except ProtocolError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # a bug in one request must not take the daemon down
            log.exception("request failed: %.200r", line)
            return {"ok": False, "error": "internal error: %s" % e}

    def _send(self, sock, message):
        if message is not None:
            sock.sendall(encode(message))

    def publish(self, event):
        """Send an event to every subscriber; one that cannot keep up is dropped."""
        data = encode(event)
        with self.lock:
            for sock in list(self.subscribers):
                try:
                    sock.sendall(data)
                except OSError:
                    self.subscribers.discard(sock)
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self):
        try:
            # shutdown first: it wakes a thread blocked in accept(), which a close alone
            # leaves blocked (and able to take the next socket given the same number).
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        finally:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
