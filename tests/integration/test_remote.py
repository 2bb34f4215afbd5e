"""autosync-remote watch, on its own: a real bare repository, real pushes, real inotify."""
import os
import select
import subprocess
import sys

import pytest

from base import ROOT, Remote, git

from autosync.ssh import remote as ar
from repos import ME, THEM, repos  # noqa: F401 (repos: a fixture)



SYSTEM_PYTHON = "/usr/bin/python3"


def watch(spawn, path, how="installed"):
    """autosync-remote watch PATH as installed, or (`sent`) as the link sends it to a
    server without it: this file alone, run by a python3 that has nothing of ours."""
    if how == "installed":
        env = dict(os.environ, PYTHONPATH=ROOT)
        return spawn([sys.executable, "-m", "autosync.ssh.remote", "watch", str(path)],
                     env=env, stderr=subprocess.PIPE)
    from autosync.ssh import watch as sshwatch
    if subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import autosync"], cwd="/",
                      stderr=subprocess.DEVNULL).returncode == 0:
        pytest.skip("%s can import autosync: no server without it here" % SYSTEM_PYTHON)
    return spawn([SYSTEM_PYTHON, "-I", "-c", sshwatch.BOOT, sshwatch.watch_program(),
                  "watch", str(path)], cwd="/", stderr=subprocess.PIPE)


HOW = pytest.mark.parametrize("how", ["installed", "sent"])


def line(proc, timeout=20.0):
    """The next line the watch prints (failing the test if none comes)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "autosync-remote printed nothing within %gs" % timeout
    return proc.stdout.readline().decode()


def quiet(proc, seconds):
    """True if the watch prints nothing for `seconds`."""
    return not select.select([proc.stdout], [], [], seconds)[0]


def cpu_ticks(pid):
    """User + system CPU time of a process, in clock ticks (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def push(clone, name):
    with open(os.path.join(clone, name), "w") as f:
        f.write(name + "\n")
    git("add", name, cwd=clone)
    git("commit", "-q", "-m", name, cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    return git("rev-parse", "HEAD", cwd=clone).decode().strip()


@pytest.fixture
def bare(tmp_path):
    remote = Remote(tmp_path / "remote.git")
    clone = str(tmp_path / "clone")
    git("clone", "-q", remote.path, clone)
    return remote, clone


@HOW
def test_first_the_state_then_one_line_per_push(bare, spawn, how):
    remote, clone = bare
    head = git("--git-dir", remote.path, "rev-parse", "main").decode().strip()
    proc = watch(spawn, remote.path, how)
    assert line(proc) == "refs/heads/main %s\n" % head
    for name in ("a", "b"):
        rev = push(clone, name)
        assert line(proc) == "refs/heads/main %s\n" % rev
    # A new branch in a new subfolder of refs/heads, then its removal.
    git("push", "-q", "origin", "HEAD:refs/heads/topic/x", cwd=clone)
    assert line(proc) == "refs/heads/topic/x %s\n" % rev
    git("push", "-q", "origin", ":topic/x", cwd=clone)
    assert line(proc) == "refs/heads/topic/x %s\n" % ("0" * 40)
    # Refs moved into packed-refs: nothing moved, nothing printed; a push after it is seen.
    git("--git-dir", remote.path, "pack-refs", "--all")
    rev = push(clone, "c")
    assert line(proc) == "refs/heads/main %s\n" % rev


@HOW
def test_idle_it_prints_nothing_and_uses_no_cpu(bare, spawn, how):
    remote, _ = bare
    proc = watch(spawn, remote.path, how)
    line(proc)
    before = cpu_ticks(proc.pid)
    assert quiet(proc, 3.0)
    # Waiting on inotify, not polling: at most a tick of rounding in three seconds.
    assert cpu_ticks(proc.pid) - before <= 1


@HOW
def test_it_exits_when_its_output_is_closed_even_while_nothing_moves(bare, spawn, how):
    remote, _ = bare
    proc = watch(spawn, remote.path, how)
    line(proc)
    assert proc.poll() is None
    proc.stdout.close()  # the reader goes away (ssh's connection dropped)
    assert proc.wait(20) == 0
    assert proc.stderr.read() == b""  # no traceback about a broken pipe


def test_a_folder_that_is_no_repository_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "autosync.ssh.remote", "watch", str(tmp_path)],
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "autosync-remote: %s is not a git repository (no refs/ and HEAD " \
                            "in it or in its .git)\n" % tmp_path


def test_usage(capsys):
    assert ar.main(["look", "x"]) == 2
    assert capsys.readouterr().err == ar.USAGE + "\n"
    # --help: the usage once (it printed the three forms twice), then what it does
    assert ar.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(ar.USAGE + "\n\nprints one line per branch movement")
    assert out.count("autosync-remote serve REPO") == 2  # the usage line, the key's line


def test_changes_lists_moves_and_removals():
    old = {"refs/heads/main": "1" * 40, "refs/heads/gone": "2" * 40}
    new = {"refs/heads/main": "3" * 40, "refs/heads/new": "4" * 40}
    assert ar.changes(old, new) == ["refs/heads/main " + "3" * 40, "refs/heads/new " + "4" * 40,
                                    "refs/heads/gone " + "0" * 40]
    assert ar.changes(new, new) == []


def test_a_working_tree_is_watched_through_its_git_folder(bare):
    _, clone = bare
    assert ar.git_dir(clone) == os.path.join(clone, ".git")
    assert ar.branches(ar.git_dir(clone)) == {
        "refs/heads/main": git("rev-parse", "HEAD", cwd=clone).decode().strip()}


MOUNTINFO = """\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:35 / /srv rw,relatime - nfs4 server:/export rw,vers=4.2
41 40 8:2 / /srv/local\\040disk rw,relatime - ext4 /dev/sdb1 rw
42 22 0:50 / /mnt/box rw - fuse.sshfs me@box: rw
"""


@pytest.mark.parametrize("path, kind, network", [
    ("/home/me/r.git", "ext4", False), ("/srv/r.git", "nfs4", True),
    ("/srv/local disk/r.git", "ext4", False), ("/srvx/r.git", "ext4", False),
    ("/mnt/box/r.git", "fuse.sshfs", True),
])
def test_a_repository_on_a_network_filesystem_is_told_apart(tmp_path, path, kind, network):
    # There inotify never hears of other machines' pushes: the watch reads the refs on a
    # timer as well (the one place it polls).
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    assert ar.filesystem(path, str(info)) == kind
    assert ar.on_network(kind) is network


def test_the_filesystem_of_a_real_folder_is_known(tmp_path):
    assert ar.filesystem(str(tmp_path))


# --- serve: a key that may only sync one repository -----------------------------------

def test_serve_allows_git_s_fetch_and_push_and_the_watch_of_its_repository_only(tmp_path):
    repo = Remote(tmp_path / "sync.git").path
    Remote(tmp_path / "other.git")
    home = str(tmp_path)
    from autosync.ssh.watch import default_watch
    link_sends = default_watch("host:" + repo, "/")[-1]  # the link's own watch command
    for command, what in (("git-upload-pack '%s'" % repo, "upload-pack"),
                          ("git-receive-pack '%s'" % repo, "receive-pack"),
                          ("git-upload-pack 'sync.git'", "upload-pack"),  # below the home
                          ("git-upload-pack 'sync'", "upload-pack"),      # git adds .git
                          (link_sends, "watch"),
                          ("autosync-remote watch %s" % repo, "watch")):
        assert ar.asked(command, repo, home) == what, command
    for command, said in (
            (None, "this key may only sync %s: no shell" % repo),
            ("", "this key may only sync %s: an empty command is not a command of git's, "
                 "git-annex's or the watch" % repo),
            ("cat /etc/passwd", "this key may only sync %s: cat is not a command of git's, "
                                "git-annex's or the watch" % repo),
            ("git-upload-pack 'other.git'", "this key may only sync %s, not other.git" % repo),
            ("git-receive-pack '/tmp'", "this key may only sync %s, not /tmp" % repo),
            ("git-upload-pack '%s' --x" % repo, "this key may only sync %s: git-upload-pack "
                                                "is not a command of git's, git-annex's or the "
                                                "watch" % repo),
            ("sh -c 'exec sh' autosync-remote %s" % repo, "this key may only sync %s: sh is not "
                                                          "a command of git's, git-annex's or "
                                                          "the watch" % repo),
            ("git-upload-pack 'unclosed", "this key may only sync %s: not a command of git's, "
                                          "git-annex's or the watch" % repo)):
        with pytest.raises(ar.NotAllowed) as refused:
            ar.asked(command, repo, home)
        assert str(refused.value) == said, command


def test_serve_refuses_in_one_line_with_exit_1(tmp_path, monkeypatch, capsys):
    repo = Remote(tmp_path / "sync.git").path
    monkeypatch.delenv("SSH_ORIGINAL_COMMAND", raising=False)
    assert ar.main(["serve", repo]) == 1
    assert capsys.readouterr().err == "autosync-remote: this key may only sync %s: no " \
                                      "shell\n" % repo


def test_poll_prints_the_same_lines_from_ls_remote_and_ends_with_its_reader(bare, spawn):
    remote, clone = bare
    head = git("--git-dir", remote.path, "rev-parse", "main").decode().strip()
    proc = spawn([sys.executable, "-c", "from autosync.ssh import remote; import sys; "
                  "sys.exit(remote.poll(sys.argv[1], interval=0.2))", remote.path],
                 env=dict(os.environ, PYTHONPATH=ROOT), stderr=subprocess.PIPE)
    assert line(proc) == "refs/heads/main %s\n" % head
    rev = push(clone, "polled")
    assert line(proc) == "refs/heads/main %s\n" % rev
    proc.stdout.close()
    assert proc.wait(20) == 0


def test_poll_of_a_remote_it_cannot_read_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "autosync.ssh.remote", "poll",
                             str(tmp_path / "none.git")], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("autosync-remote: git ls-remote failed: ")
    assert result.stderr.count("\n") == 1


def test_the_poll_interval_is_the_one_core_states():
    """remote.py runs alone on a server (no core there): its interval is written twice,
    and must agree with the one init and the link tell the user."""
    from autosync.ssh import watch as sshwatch
    from autosync.ssh import remote
    assert remote.POLL == sshwatch.POLL


# --- autosync-remote serve as the forced command runs it (tests/unit/ssh/test_serve_annex.py:
# what it makes of what git-annex sends) ---------------------------------------------------

def serve(repo, sent, path):
    return subprocess.run([sys.executable, "-m", "autosync.ssh.remote", "serve", repo],
                          env=dict(os.environ, PYTHONPATH=ROOT, PATH=path,
                                   SSH_ORIGINAL_COMMAND=sent),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def test_serve_runs_git_annex_shell_itself_with_its_words_and_no_shell(repos, tmp_path):
    repo, _, home = repos
    # A git-annex-shell that says how it was run (a shell would have run the $(...)).
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git-annex-shell").write_text(
        "#!%s\nimport os, sys\nprint(sys.argv[1:])\nprint(sorted((k, v) for k, v in "
        "os.environ.items() if k.startswith(('GIT_ANNEX_SHELL', 'SSH_ORIGINAL'))))\n"
        % sys.executable)
    os.chmod(str(fake / "git-annex-shell"), 0o755)
    ran = serve(repo, "git-annex-shell 'p2pstdio' '%s' '%s' --uuid %s" % (repo, ME, THEM),
                str(fake))
    assert ran.returncode == 0 and ran.stderr == ""
    assert ran.stdout.splitlines() == [
        str(["p2pstdio", repo, ME, "--uuid", THEM]),
        str([("GIT_ANNEX_SHELL_DIRECTORY", repo), ("GIT_ANNEX_SHELL_LIMITED", "1")])]
    refused = serve(repo, "git-annex-shell 'p2pstdio' '%s' '$(touch %s)'"
                    % (repo, tmp_path / "x"), str(fake))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("autosync-remote: this key may only sync %s: "
                                     "git-annex-shell p2pstdio: $(touch " % repo)
    assert refused.stderr.count("\n") == 1 and not (tmp_path / "x").exists()


def test_a_server_without_git_annex_says_so_in_one_line(repos, tmp_path):
    repo, _, _ = repos
    empty = tmp_path / "empty"
    empty.mkdir()
    ran = serve(repo, "git-annex-shell 'configlist' '%s'" % repo, str(empty))
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr == "autosync-remote: git-annex-shell is not installed on this server " \
                         "(not on PATH %s): install git-annex here to sync the annexed files " \
                         "of %s\n" % (empty, repo)
