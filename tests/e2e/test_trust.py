"""End-to-end: another local user is a stranger, and a second daemon owns nothing.

The daemon runs as `nobody` (an ordinary user, setpriv); the stranger is a
third uid that squats the socket folder, or root listening where the daemon's
socket should be. Nothing the suite sends may reach them, and no client may
report success. A second dvcs-autosync for the same folder is refused and
leaves the running daemon's files (its excludes file above all) alone.
"""
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from base import wait_until
from helpers import settle, write
from sshd import free_port


STRANGER = 4242  # a uid no test machine uses
SYSTEM_PYTHON = "/usr/bin/python3"  # stdlib only; root's own interpreter may be unreachable

# A squatter: makes the folder (mode 0777 or 0700, its own), listens on the socket's name
# and writes down every byte any client sends it.
SQUAT = r"""
import os, socket, sys
folder, name, mode, record = sys.argv[1], sys.argv[2], int(sys.argv[3], 8), sys.argv[4]
os.makedirs(folder, exist_ok=True)
os.chmod(folder, mode)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(os.path.join(folder, name))
os.chmod(os.path.join(folder, name), 0o777)
sock.listen(8)
print("listening", flush=True)
while True:
    conn, _ = sock.accept()
    conn.settimeout(2)
    try:
        data = conn.recv(65536)
    except OSError:
        data = b""
    with open(record, "ab") as f:
        f.write(data)
    if data:
        conn.sendall(b'{"ok": true, "committed": true, "pushed": true}\n')
    conn.close()
"""


def default_socket(uid, folder):
    """Where the daemon of `uid` puts its socket without XDG_RUNTIME_DIR (paths.socket_for)."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(folder))).hexdigest()[:16]
    return "/tmp/autosync-%d" % uid, digest + ".sock"


class Squatter:
    def __init__(self, folder, name, mode, uid=STRANGER):
        self.folder = folder
        self.record = os.path.join("/tmp", "squatter-%d-%d.record" % (os.getpid(), id(self)))
        open(self.record, "wb").close()
        os.chmod(self.record, 0o666)
        argv = [SYSTEM_PYTHON, "-c", SQUAT, folder, name, "%o" % mode, self.record]
        if uid:
            argv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline() == b"listening\n"

    def received(self):
        with open(self.record, "rb") as f:
            return f.read()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.record)


@pytest.fixture
def squat():
    made = []

    def make(*args, **kwargs):
        made.append(Squatter(*args, **kwargs))
        return made[-1]
    yield make
    for s in made:
        s.stop()
        shutil.rmtree(s.folder, ignore_errors=True)


def squatted_control_socket(nobody, folder, destination, port):
    """Where the ssh of `nobody` would put a control socket ssh-%C for destination in
    `folder` (ssh's own expansion, as a squatter computes it)."""
    out = subprocess.run(nobody.as_user(["ssh", "-G", "-o", "ControlPath=%s/ssh-%%C" % folder,
                                         "-p", str(port), destination]),
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return [line.split(" ", 1)[1] for line in out.splitlines()
            if line.startswith("controlpath ")][0]


@pytest.mark.alone  # /tmp/autosync-UID of `nobody` is one folder for the whole machine
@pytest.mark.parametrize("mode,own_socket", [(0o777, True), (0o700, False)])
def test_a_folder_another_user_made_first_gets_nothing(nobody, squat, mode, own_socket):
    """Without XDG_RUNTIME_DIR, a stranger made /tmp/autosync-UID first (the runtime
    folder's name once) and listens there on the daemon's socket name and on the held
    ssh connection's control socket (a fake master: ssh does not check who listens;
    with `socket =` elsewhere, it was given the user's pushes and fetches). Neither gets
    a byte: the runtime folder has a name nobody can guess, and the daemon still starts
    (a refusal to start was a denial any local user could cause)."""
    port = free_port()  # nobody listens: the server is never reached
    remote, (a,) = nobody.machines("a", own_socket=own_socket, syncmethod="ssh")
    url = "ssh://nobody@127.0.0.1:%d%s" % (port, remote.path)
    subprocess.run(nobody.as_user(["git", "-C", a.path, "remote", "set-url", "origin", url]),
                   check=True)
    folder, name = default_socket(nobody.uid, a.path)
    shutil.rmtree(folder, ignore_errors=True)
    stranger = squat(folder, name, mode)
    control = squatted_control_socket(nobody, folder, "nobody@127.0.0.1", port)
    master = squat(folder, os.path.basename(control), mode)
    a.start(wait=False)
    wait_until(lambda: "watching the remote:" in a.logtext() or a.proc.poll() is not None, 60,
               what="the ssh watch")
    assert a.proc.poll() is None, a.logtext()  # started, with its socket elsewhere
    assert master.received() == b""  # no ssh of the user's connected to the fake master
    used = re.search(r"-o ControlPath=(\S+)/[0-9a-f]{8}-%C", a.logtext()).group(1)
    assert used != folder
    st = os.lstat(used)
    assert st.st_uid == nobody.uid and stat.S_IMODE(st.st_mode) == 0o700
    result = a.notify("status", check=False)  # clients reach the daemon, not the stranger
    assert result.returncode == 0, result.stderr
    assert a.proc.poll() is None
    a.stop()
    assert stranger.received() == b"" and master.received() == b""


def test_a_listener_of_another_user_in_the_right_place_is_refused(nobody, squat, tmp_path):
    """The folder is the user's own, but root answers on the socket's name (SO_PEERCRED)."""
    remote, (a,) = nobody.machines("a")
    folder, name = os.path.split(a.settings["socket"])
    stranger = squat(folder, name, 0o700, uid=None)  # root may enter the user's folder
    os.chown(folder, nobody.uid, nobody.gid)
    result = a.notify("sync", check=False)
    assert result.returncode != 0
    assert "runs as uid 0, not as you (uid %d)" % nobody.uid in result.stderr
    a.start(wait=False)
    assert a.proc.wait(15) != 0  # its own committer cannot have the name: nothing starts
    assert "watching" not in a.logtext()
    assert stranger.received() == b""


def excludes_file(machine):
    from autosync.core.config import load
    return load(machine.config).socket + ".exclude"


def sync_with_an_ignored_key(a, remote):
    """A key under ignorepath and a plain file, synced: -> the remote's files, checked."""
    write(a, "private/id_rsa", b"secret key\n")
    write(a, "notes.txt", b"synced\n")
    assert a.notify("sync").returncode == 0
    settle(a, remote)
    files = remote.files()
    assert b"notes.txt" in files and b"private/id_rsa" not in files
    return files


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL, None])
def test_a_second_instance_leaves_the_first_ones_files_alone(machines, remote, how):
    a = machines("a", ignorepath="private")
    other = a.config + ".second"
    shutil.copy(a.config, other)  # the same folder under another config file name
    second = subprocess.Popen([sys.executable, "-m", "autosync.supervisor", other],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if how is not None:
        time.sleep(0.3)
        second.send_signal(how)
    out, err = second.communicate(timeout=20)
    assert second.returncode != 0
    if how is None:
        assert b"a daemon already runs for %s" % os.fsencode(a.path) in err
    assert os.path.exists(excludes_file(a))
    assert not os.path.exists(other + ".pid")
    files = sync_with_an_ignored_key(a, remote)
    assert a.status()["state"] == "idle"


def test_a_removed_excludes_file_never_unignores_anything(machines, remote):
    a = machines("a", ignorepath="private")
    os.unlink(excludes_file(a))
    write(a, ".notes.txt.swp", b"vim\n")
    files = sync_with_an_ignored_key(a, remote)
    assert b".notes.txt.swp" not in files
    assert os.path.exists(excludes_file(a))
    assert "was removed; written again before scanning" in a.logtext()


def test_stopping_removes_only_what_the_daemon_made(machines, remote):
    a = machines("a")
    from autosync.core.config import load
    cfg = load(a.config)
    for path in (cfg.pidfile, cfg.socket, excludes_file(a)):
        assert os.path.exists(path), path
    assert a.stop() == 0
    for path in (cfg.pidfile, cfg.socket, excludes_file(a)):
        assert not os.path.exists(path), path


def test_an_excludes_file_removed_while_git_scans_never_unignores_anything(machines, remote):
    """The worst moment for the excludes file to go: after the committer checked it was
    there, while git add -A runs (startupcmd removes it, once, then scans the folder
    holding a key under ignorepath and an editor's swap file, written while stopped).
    What git staged without it is staged again with it in place: neither is ever
    committed (a removal right after the check committed both)."""
    a = machines("a", ignorepath="private", start=False)
    for rel, data in (("private/id_rsa", b"secret key\n"), (".notes.txt.swp", b"vim\n"),
                      ("notes.txt", b"written while stopped\n")):
        write(a, rel, data)
    once = a.path + ".removed-once"
    a.dvcs["startupcmd"] = ("if [ ! -e '%s' ]; then : > '%s'; rm -f \"$(git config "
                            "core.excludesFile)\"; fi; git add -A" % (once, once))
    a.write_config()
    a.start()
    assert a.notify("sync").returncode == 0
    settle(a, remote)
    assert os.path.exists(once)  # the removal happened, inside the scan
    files = remote.files()
    assert files[b"notes.txt"] == b"written while stopped\n"
    assert b"private/id_rsa" not in files and b".notes.txt.swp" not in files
    assert os.path.exists(excludes_file(a))
