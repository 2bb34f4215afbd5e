"""The control socket: framing, bad clients, and the real committer's replies."""
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from autosync.core import protocol
from autosync.core.paths import find_socket, socket_for
from autosync.core.protocol import Server, connect, decode, encode


def raw(path, data, read=True):
    """Send raw bytes, return the first reply line (parsed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    sock.sendall(data)
    if not read:
        return sock
    reply = protocol.LineReader(sock).readline()
    sock.close()
    return json.loads(reply)


@pytest.fixture
def server(tmp_path):
    calls = []

    def handler(message, client):
        calls.append(message)
        if message.get("cmd") == "boom":
            raise RuntimeError("handler bug")
        return {"ok": True, "echo": message}

    path = str(tmp_path / "run" / "s.sock")
    s = Server(path, handler)
    s.start()
    s.calls = calls
    yield s
    s.close()


def test_a_socket_path_too_long_for_a_socket_is_served_and_reached(tmp_path):
    """A deep XDG_RUNTIME_DIR: the committer's socket path over sockaddr_un's 107 bytes
    is bound and reached through its folder (before, the daemon refused to start)."""
    folder = tmp_path.joinpath(*["x" * 40] * 3, "autosync")
    path = str(folder / "a22f8a1070e5685b.sock")
    assert len(os.fsencode(path)) > protocol.SUN_PATH_MAX
    s = Server(path, lambda message, client: {"ok": True, "echo": message})
    s.start()
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode)  # at its own name, not elsewhere
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert protocol.ask(path, {"cmd": "status"})["echo"] == {"cmd": "status"}
        assert protocol.answers(path)
        with pytest.raises(OSError):
            Server(path, lambda message, client: {"ok": True})  # taken: refused as before
    finally:
        s.close()
    assert not protocol.answers(path)


def test_names_that_are_not_utf8_survive_the_wire():
    name = os.fsdecode(b"caf\xe9/\xff\xfe new\nline")
    line = encode({"cmd": "batch", "changes": [{"action": "added", "path": name}]})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line[:-1])["changes"][0]["path"] == name
    assert os.fsencode(decode(line[:-1])["changes"][0]["path"]) == b"caf\xe9/\xff\xfe new\nline"


def test_socket_and_its_folder_are_private(server):
    assert stat.S_IMODE(os.stat(os.path.dirname(server.path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600


def test_a_second_server_on_a_live_socket_is_refused(server):
    with pytest.raises(OSError, match="already listening"):
        Server(server.path, lambda m, c: {"ok": True})


def test_a_stale_socket_file_is_replaced(tmp_path):
    path = str(tmp_path / "run" / "s.sock")
    os.makedirs(os.path.dirname(path), mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # the file stays, nobody listens
    s = Server(path, lambda m, c: {"ok": True})
    s.start()
    assert connect(path).request({"cmd": "x"})["ok"]
    s.close()


@pytest.mark.parametrize("garbage, error", [
    (b"not json at all\n", "not a JSON line"),
    (b"[1, 2, 3]\n", "must be a JSON object"),
    (b"\xff\xfe\n", "not a JSON line"),
    (b'{"cmd": "boom"}\n', "internal error"),
])
def test_garbage_gets_an_error_reply_and_the_next_client_is_served(server, garbage, error):
    reply = raw(server.path, garbage)
    assert reply["ok"] is False and error in reply["error"]
    assert connect(server.path).request({"cmd": "next"}) == {"ok": True, "echo": {"cmd": "next"}}


def test_a_huge_line_is_refused_without_reading_it_all(server):
    sock = raw(server.path, b"", read=False)
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(protocol.MAX_LINE // len(chunk) + 4):
            sock.sendall(chunk)
    except OSError:
        pass  # the server hung up on us: fine
    reply = protocol.LineReader(sock).readline()
    assert reply is not None and "longer than" in json.loads(reply)["error"]
    sock.close()
    assert connect(server.path).request({"cmd": "after"})["ok"]


def test_a_silent_client_does_not_block_others(server):
    silent = raw(server.path, b"", read=False)
    started = time.monotonic()
    assert connect(server.path).request({"cmd": "status"})["ok"]
    assert time.monotonic() - started < 1.0
    silent.close()


def test_subscribers_get_events_after_their_reply(server):
    conn = connect(server.path)
    assert conn.request({"cmd": "subscribe"}) == {"ok": True}
    events = conn.events()
    server.publish({"event": "committed", "n": 1})
    server.publish({"event": "pushed", "n": 2})
    assert next(events)["n"] == 1
    assert next(events)["n"] == 2
    conn.close()
    server.publish({"event": "after-close"})  # a gone subscriber is dropped quietly


def test_find_socket_walks_up_from_a_subfolder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    folder = tmp_path / "Sync"
    (folder / "deep" / "er").mkdir(parents=True)
    path = socket_for(str(folder))
    assert path.startswith(str(tmp_path / "xdg" / "autosync"))
    assert find_socket(str(folder / "deep" / "er")) is None
    s = Server(path, lambda m, c: {"ok": True})
    try:
        assert find_socket(str(folder / "deep" / "er")) == path
    finally:
        s.close()


def test_the_real_committer_survives_bad_requests(machines):
    """Against the running suite: every bad request gets an error, the daemon goes on."""
    a = machines("a")
    path = a.status() and __import__("autosync.core.config").core.config.load(a.config).socket
    bad = [b"garbage\n", b'{"cmd": "nope"}\n', b'{"cmd": "batch", "changes": "x"}\n',
           b'{"cmd": "batch", "changes": [{"action": "added", "path": "../../etc/passwd"}]}\n',
           b'{"cmd": "batch", "changes": [{"action": "added", "path": "/etc/passwd"}]}\n',
           b'{"cmd": "batch", "changes": [{"action": "exploded", "path": "a"}]}\n', b"{}\n"]
    for line in bad:
        reply = raw(path, line)
        assert reply["ok"] is False and reply["error"], line
    # it still answers, and gets to idle (its start-up rescan may still be under way)
    from base import wait_until
    wait_until(lambda: a.status().get("state") == "idle", 30, what="a to answer, idle")
    result = subprocess.run([sys.executable, "-m", "autosync.tools.notify", "--socket", path, "sync"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_notify_without_a_daemon_says_so(tmp_path):
    result = subprocess.run([sys.executable, "-m", "autosync.tools.notify", "--socket",
                             str(tmp_path / "none.sock"), "status"],
                            capture_output=True, text=True, cwd=str(tmp_path))
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "no autosync daemon" in result.stderr
    # Outside a folder, `sync` looks for the user's daemons (the only one would do): a
    # runtime folder of its own, so that other tests' daemons are not this user's.
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    result = subprocess.run([sys.executable, "-m", "autosync.tools.notify", "sync"],
                            capture_output=True, text=True, cwd=str(tmp_path),
                            env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)))
    assert result.returncode == 3 and "no dvcs-autosync daemon runs" in result.stderr, \
        result.stderr


def blocked_in_accept(thread):
    """True while `thread` waits inside accept()/accept4() (x86-64 syscall numbers)."""
    try:
        with open("/proc/self/task/%d/syscall" % thread.native_id) as f:
            return f.read().split()[0] in ("43", "288")
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86-64")
def test_close_ends_serve_forever(tmp_path):
    s = Server(str(tmp_path / "run" / "s.sock"), lambda m, c: {"ok": True})
    thread = threading.Thread(target=s.serve_forever, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not blocked_in_accept(thread) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert blocked_in_accept(thread)
    s.close()
    thread.join(2)
    assert not thread.is_alive()


def test_a_client_quiet_between_requests_is_kept_a_half_sent_line_is_not(server, monkeypatch):
    """Only a line that was begun has a deadline (shortened here: a unit test may fake it)."""
    monkeypatch.setattr(protocol, "PARTIAL_LINE_TIMEOUT", 0.3)
    quiet = connect(server.path)
    assert quiet.request({"cmd": "first"})["ok"]
    half = raw(server.path, b'{"cmd": "ha', read=False)
    # The half-sent line is dropped after its bound: the server hangs up on it.
    half.settimeout(10)
    assert half.recv(100) == b""
    half.close()
    # Quiet for many times that bound, the other client is still served.
    time.sleep(1.0)
    assert quiet.request({"cmd": "after a quiet while"}, timeout=5)["ok"]
    quiet.close()


def test_ask_and_answers_are_the_one_shot_request_and_the_probe(server, tmp_path):
    """Every program that asks the committer once (history, settle, describer, tray,
    notify) or probes it (cli.trust, the supervisor, Server's stale check) uses these."""
    from autosync.core import protocol
    assert protocol.answers(server.path)
    reply = protocol.ask(server.path, {"cmd": "status"})
    assert reply["ok"]
    missing = str(tmp_path / "run" / "nobody.sock")
    assert not protocol.answers(missing)
    with pytest.raises(protocol.NoDaemon):
        protocol.ask(missing, {"cmd": "status"})
