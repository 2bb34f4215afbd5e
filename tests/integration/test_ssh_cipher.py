"""The held ssh connection's cipher (issue 32 item 2, big files over ssh): AES-GCM first
where the CPU has AES instructions and the user chose no ciphers; checked in what a real
sshd (tests/sshd.py, LogLevel DEBUG1) says the connection agreed on."""
import os
import subprocess

import pytest

from autosync.vcs import remote as connection
from base import wait_until
from sshd import Sshd, missing


def test_aes_first_only_with_aes_instructions_and_the_default_ciphers():
    default = {"ciphers": connection.DEFAULT_CIPHERS}
    assert connection.ciphers(default, aes=True) == ["-o", "Ciphers=" + connection.AES_FIRST]
    assert connection.ciphers(default, aes=False) == []
    assert connection.ciphers({"ciphers": "aes256-ctr"}, aes=True) == []  # the user's choice
    assert connection.ciphers({}, aes=True) == []  # `ssh -G` said nothing: not OpenSSH's
    # The same ciphers in another order: a server that took the default still finds one.
    assert sorted(connection.AES_FIRST.split(",")) == \
        sorted(connection.DEFAULT_CIPHERS.split(","))


@pytest.mark.parametrize("text, aes", [
    ("processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n", True),           # x86 with AES-NI
    ("processor\t: 0\nflags\t\t: fpu sse2 avx2\n", False),
    ("processor\t: 0\nFeatures\t: fp asimd aes pmull sha1\n", True),    # ARMv8 crypto
    ("processor\t: 0\nFeatures\t: fp asimd evtstrm crc32\n", False),    # Raspberry Pi 4
])
def test_aes_instructions_are_read_from_cpuinfo(tmp_path, text, aes):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert connection.has_aes(str(cpuinfo)) is aes
    assert connection.has_aes(str(tmp_path / "none")) is False


@pytest.fixture
def server(tmp_path):
    if missing():
        pytest.skip(missing())
    sshd = Sshd(tmp_path / "sshd", log_level="DEBUG1").start()
    yield sshd
    sshd.stop()


def agreed(server, ssh, path):
    """The cipher the held connection made by connect() at `path` agreed on (sshd's log)."""
    master = connection.connect(ssh, "127.0.0.1", server.port, path)
    assert master is not None
    wait_until(lambda: master.poll() is not None, 30, what="the master")
    assert master.poll() == 0
    try:
        said = wait_until(lambda: [line for line in server.logtext().splitlines()
                                   if "kex: client->server cipher:" in line], 10,
                          what="sshd to log the cipher")
        return said[-1].split("cipher:")[1].split()[0]
    finally:
        master.end()


@pytest.mark.e2e
def test_the_held_connection_takes_aes_gcm_where_the_cpu_has_aes(server, tmp_path):
    ssh = ["ssh", "-F", server.client_config]
    expected = "aes128-gcm@openssh.com" if connection.has_aes() else \
        "chacha20-poly1305@openssh.com"
    assert agreed(server, ssh, str(tmp_path / "held")) == expected


@pytest.mark.e2e
def test_ciphers_the_user_chose_are_left_alone(server, tmp_path):
    own = tmp_path / "ssh_config"
    with open(server.client_config) as f:
        own.write_text(f.read().replace("Host *\n", "Host *\n  Ciphers aes256-ctr\n"))
    assert agreed(server, ["ssh", "-F", str(own)], str(tmp_path / "held")) == "aes256-ctr"
