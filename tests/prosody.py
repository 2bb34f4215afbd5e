"""A private prosody XMPP server for tests, benchmarks and the demo.

Everything lives in one folder: config, data, pid file, log and certificates.
The server listens on a free port of 127.0.0.1 only, has s2s turned off, and
runs in the foreground as our child process.

    server = Prosody(folder)            # tls="required" | "optional" | "off"
    server.register("me", "secret")     # -> "me@localhost"
    server.start(); ...; server.restart(); ...; server.stop()

`server.cafile` is the certificate that clients should trust. `Certs` makes
the self-signed certificates with openssl. The pytest fixtures at the bottom
are only defined when pytest is importable.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

DOMAIN = "localhost"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(folder, name, cn=DOMAIN):
    """A self-signed certificate and key for `cn`; returns (certfile, keyfile)."""
    os.makedirs(folder, exist_ok=True)
    cert = os.path.join(folder, name + ".crt")
    key = os.path.join(folder, name + ".key")
    if not os.path.exists(cert):
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-keyout", key, "-out", cert, "-subj", "/CN=" + cn,
             "-addext", "subjectAltName=DNS:%s,IP:127.0.0.1" % cn],
            check=True, capture_output=True)
    return cert, key


class Certs:
    """The certificates a test run needs, made once and shared.

    `trusted`: the one clients are given as cafile; `untrusted`: another
    self-signed one for localhost, which nobody trusts; `wrongname`: for a
    different host name.
    """

    def __init__(self, folder):
        self.trusted = make_cert(folder, "trusted")
        self.untrusted = make_cert(folder, "untrusted")
        self.wrongname = make_cert(folder, "wrongname", cn="other.example")


class Prosody:
    def __init__(self, folder, certs=None, tls="required", plain_auth=None, port=None):
        """tls: "required" (STARTTLS before login), "optional", or "off" (not offered).

        plain_auth: allow PLAIN login without TLS; default: only when tls is off.
        certs: a (certfile, keyfile) pair; default: a fresh trusted pair in `folder`.
        """
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.cert, self.key = certs or make_cert(os.path.join(self.folder, "certs"), "trusted")
        self.cafile = self.cert
        self.tls = tls
        self.plain_auth = (tls == "off") if plain_auth is None else plain_auth
        self.port = port or free_port()
        self.domain = DOMAIN
        self.config = os.path.join(self.folder, "prosody.cfg.lua")
        self.log = os.path.join(self.folder, "prosody.log")
        self.proc = None
        os.makedirs(os.path.join(self.folder, "data"), mode=0o700, exist_ok=True)
        self._write_config()

    def _write_config(self):
        lua = lambda v: "true" if v else "false"
        modules = ["roster", "saslauth", "disco", "ping", "carbons", "posix"]
        if self.tls != "off":
            modules.append("tls")
        text = f"""\
-- Private test server: written by tests/prosody.py
run_as_root = true                  -- we may run as root; without it 0.12 hangs
pidfile = "{self.folder}/prosody.pid"
data_path = "{self.folder}/data"
log = {{ {{ levels = {{ min = "info" }}, to = "file", filename = "{self.log}" }} }}
modules_enabled = {{ {", ".join('"%s"' % m for m in modules)} }}
modules_disabled = {{ "s2s" }}
s2s_ports = {{ }}
c2s_ports = {{ {self.port} }}
c2s_interfaces = {{ "127.0.0.1" }}
c2s_require_encryption = {lua(self.tls == "required")}
allow_unencrypted_plain_auth = {lua(self.plain_auth)}
authentication = "internal_hashed"
ssl = {{ certificate = "{self.cert}"; key = "{self.key}"; }}

VirtualHost "{DOMAIN}"
    ssl = {{ certificate = "{self.cert}"; key = "{self.key}"; }}
"""
        with open(self.config, "w") as f:
            f.write(text)

    def register(self, user, password):
        """Create an account (works whether or not the server runs); returns the JID."""
        subprocess.run(["prosodyctl", "--config", self.config, "register", user, DOMAIN, password],
                       check=True, capture_output=True, timeout=30)
        return "%s@%s" % (user, DOMAIN)

    def start(self, timeout=10.0):
        if self.proc:
            return
        self.proc = subprocess.Popen(["prosody", "-F", "--config", self.config],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise RuntimeError("prosody exited with %s; see %s" % (code, self.log))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("prosody did not listen on port %d within %ss"
                                       % (self.port, timeout))
                time.sleep(0.02)

    def stop(self, timeout=5.0, kill=False):
        """Stop the server: SIGTERM (or SIGKILL with kill=True), SIGKILL after `timeout`."""
        proc, self.proc = self.proc, None
        if not proc:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, **stop_args):
        """Stop and start again on the same port, with the same accounts."""
        self.stop(**stop_args)
        self.start()

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def missing():
    """Why the tests cannot run a prosody here, or None."""
    if not shutil.which("prosody") or not shutil.which("prosodyctl"):
        return "prosody is not installed (Debian: apt-get install prosody)"
    return None


try:
    import pytest
except ImportError:  # the class above is also used without pytest
    pytest = None

if pytest:
    @pytest.fixture(scope="session")
    def prosody_certs(tmp_path_factory):
        reason = missing()
        if reason:
            pytest.skip(reason)
        return Certs(str(tmp_path_factory.mktemp("certs")))

    @pytest.fixture
    def prosody_factory(prosody_certs, tmp_path_factory):
        """make(tls=..., certs=..., plain_auth=...) -> a started Prosody, stopped after the test."""
        servers = []

        def make(certs=None, start=True, **options):
            folder = str(tmp_path_factory.mktemp("prosody"))
            server = Prosody(folder, certs=certs or prosody_certs.trusted, **options)
            servers.append(server)
            if start:
                server.start()
            return server

        yield make
        for server in servers:
            server.stop()

    @pytest.fixture
    def prosody_server(prosody_factory):
        """A started private prosody with STARTTLS required and the trusted test certificate."""
        return prosody_factory()
