"""The XMPP password in the desktop's keyring (`password = keyring`, core/keyring.py),
against a real Secret Service: GNOME Keyring's daemon, its login keyring unlocked with a
password on its standard input (`gnome-keyring-daemon --unlock`), on a private D-Bus
session bus (tests/dbus_session.py) that nothing else answers on.

`init --account` keeps the password there and writes `password = keyring`; the daemon
reads it when it logs in to a private prosody; with the keyring locked the login fails
with one line that says so, and the status names it (the link problem), without a hang.
"""
import hashlib
import os
import shutil
import subprocess

import pytest

from base import wait_until
from dbus_session import SessionBus
from helpers import Joined, ok
from prosody import prosody_certs, prosody_factory  # noqa: F401 (fixtures)

from autosync.core import keyring


@pytest.fixture
def secret_service(tmp_path, monkeypatch):
    """A running gnome-keyring-daemon, its login keyring unlocked and the default, on a
    private session bus that this test's processes (and the programs they start) use."""
    daemon = shutil.which("gnome-keyring-daemon")
    if daemon is None:
        pytest.fail("gnome-keyring-daemon is missing: install the Debian package gnome-keyring")
    with SessionBus(tmp_path / "bus") as bus:
        home = tmp_path / "keyring-home"
        (home / "run").mkdir(parents=True, mode=0o700)
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=bus.address, HOME=str(home),
                   XDG_RUNTIME_DIR=str(home / "run"), XDG_DATA_HOME=str(home / "data"))
        proc = subprocess.Popen([daemon, "--foreground", "--components=secrets", "--unlock"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env)
        proc.stdin.write(b"the login password")
        proc.stdin.close()
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
        try:
            wait_until(keyring.available, 30, 0.05, "gnome-keyring-daemon's Secret Service")
            yield bus
        finally:
            proc.terminate()
            proc.wait(10)


def lock_the_keyring():
    with keyring.Service() as service:
        (path,) = service.call(keyring.SERVICE, "ReadAlias", "s", ("default",))
        locked, prompt = service.call(keyring.SERVICE, "Lock", "ao", ([path],))
    assert locked == [path] and prompt == "/"


def test_kept_read_back_missing_and_locked(secret_service):
    keyring.store("me@example.org", "first")
    keyring.store("me@example.org", "s3cret pass")  # replaces it
    keyring.store("other@example.org", "another")
    assert keyring.password("me@example.org") == "s3cret pass"
    assert keyring.password("other@example.org") == "another"
    with pytest.raises(keyring.KeyringError) as missing:
        keyring.password("nobody@example.org")
    assert str(missing.value).startswith("the keyring holds no XMPP password of "
                                         "nobody@example.org")
    lock_the_keyring()
    with pytest.raises(keyring.KeyringError) as locked:
        keyring.password("me@example.org")
    assert "is locked: unlock it" in str(locked.value) and "s3cret" not in str(locked.value)
    with pytest.raises(keyring.KeyringError) as refused:
        keyring.store("me@example.org", "new")
    assert str(refused.value).startswith("the keyring is locked")


def test_without_a_secret_service_each_failure_is_one_line(tmp_path, monkeypatch):
    with SessionBus(tmp_path / "bus") as bus:  # a bus where nothing owns the name
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
        assert not keyring.available()
        with pytest.raises(keyring.KeyringError) as none:
            keyring.password("me@example.org")
        assert str(none.value) == ("no keyring: nothing answers as the Secret Service "
                                   "(org.freedesktop.secrets) on the session bus")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "no-such-folder"))
    with pytest.raises(keyring.KeyringError) as no_bus:
        keyring.password("me@example.org")
    assert str(no_bus.value).startswith("no keyring: no D-Bus session bus")


def fingerprint_of(certs):
    der = subprocess.run(["openssl", "x509", "-in", certs.untrusted[0], "-outform", "DER"],
                         stdout=subprocess.PIPE, check=True).stdout
    digest = hashlib.sha256(der).hexdigest().upper()
    return "sha256:" + ":".join(digest[i:i + 2] for i in range(0, 64, 2))


def test_init_keeps_the_password_in_the_keyring_and_the_daemon_logs_in_with_it(
        tmp_path, remote, prosody_factory, prosody_certs, secret_service):
    server = prosody_factory(certs=prosody_certs.untrusted)
    account = server.register("me", "s3cret pass")
    secret = tmp_path / "password"
    secret.write_text("s3cret pass\n")
    a = Joined(tmp_path, "a")
    out = ok(a.init(remote, "--account", account, "--password-file", secret, "--server",
                    "127.0.0.1:%d" % server.port, "--fingerprint", fingerprint_of(prosody_certs)))
    assert "The password of %s is kept in your keyring (Secret Service)" % account in out
    written = open(a.config).read()
    assert "\npassword = keyring\n" in written and "s3cret" not in written
    assert keyring.password(account) == "s3cret pass"
    try:
        a.start()
        wait_until(lambda: "logged in to" in a.logtext(), 30, 0.2, "the daemon's login")
    finally:
        a.stop()
    # Locked: the login fails with the keyring's one line, named in the status.
    lock_the_keyring()
    try:
        a.start()

        def link_problem():
            found = [p for p in a.status().get("problems", []) if p["name"] == "link"]
            return found and "is locked" in found[0]["error"] and found[0]
        problem = wait_until(link_problem, 30, 0.2, "the locked keyring in the status")
        assert ("the keyring that holds the XMPP password of %s is locked" % account
                in problem["error"])
        assert "is locked: unlock it" in a.logtext()
    finally:
        a.stop()


def test_password_in_file_keeps_it_in_the_config_file(tmp_path, remote, prosody_factory,
                                                      prosody_certs, secret_service):
    server = prosody_factory(certs=prosody_certs.untrusted)
    account = server.register("me", "s3cret pass")
    secret = tmp_path / "password"
    secret.write_text("s3cret pass\n")
    a = Joined(tmp_path, "a")
    out = ok(a.init(remote, "--account", account, "--password-file", secret, "--server",
                    "127.0.0.1:%d" % server.port, "--fingerprint", fingerprint_of(prosody_certs),
                    "--password-in-file"))
    assert "keyring" not in out
    assert "\npassword = s3cret pass\n" in open(a.config).read()
    with pytest.raises(keyring.KeyringError):
        keyring.password(account)
