"""Large files (issue 21, item 3): the `largefiles` key sends files above a size to
git-annex through the existing annex set-up (docs/examples/git-annex.autosync), and
`dvcs-autosync expire` drops old versions' content from the remote, saying exactly what
first. End to end on real git, git-annex and a bare remote."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from autosync.core import config
from autosync.vcs import largefiles
from conftest import ROOT, git, wait_until
from helpers import annex, annex_bytes
from helpers import use_example

SIZE = 300 * 1000


def test_sizes_are_read_for_git_annex():
    assert config.parse_size("") == "" and config.parse_size("off") == ""
    assert config.parse_size("10mb") == "10mb"
    assert config.parse_size("10 MB") == "10mb"
    assert config.parse_size("500000") == "500000b"
    assert config.parse_size("1.5GiB") == "1.5gib"
    for bad in ("big", "10 parsecs", "-1mb"):
        with pytest.raises(ValueError):
            config.parse_size(bad)


def write_config(tmp_path, text):
    folder = tmp_path / "f"
    folder.mkdir(exist_ok=True)
    git("init", "-q", str(folder))
    path = tmp_path / "c.autosync"
    path.write_text("[autosync]\npath = %s\nsyncmethod = none\n%s" % (folder, text))
    return str(path)


def test_largefiles_needs_push_and_pull_commands_that_carry_annexed_content(tmp_path):
    with pytest.raises(config.ConfigError) as e:
        config.load(write_config(tmp_path, "largefiles = 10mb\n"))
    assert "[autosync] largefiles: expected nothing, since pushcmd does not carry annexed " \
           "content" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(config.ConfigError) as e:
        config.load(write_config(tmp_path, "largefiles = huge\n"))
    assert "[autosync] largefiles: expected a size such as 10mb" in str(e.value)
    cfg = config.load(write_config(tmp_path, "largefiles = 10 MB\n[dvcs]\n"
                                   "pushcmd = git annex sync --no-pull --content\n"
                                   "pullcmd = git annex sync --no-push --content\n"))
    assert cfg.largefiles == "10mb"
    assert config.load(write_config(tmp_path, "")).largefiles == ""


def expire(machine, *args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor", "expire",
                           "--config", machine.config] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300)


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")
def test_files_above_largefiles_go_to_the_annex_and_old_versions_expire_from_the_remote(
        machines, remote):
    annex(remote.path, "init", "-q", "remote")
    a = machines("a", start=False, largefiles="100kb")
    annex(a.path, "init", "-q", "a")
    annex(a.path, "sync", "-q", "--no-content")
    b = machines("b", start=False, largefiles="100kb")
    annex(b.path, "init", "-q", "b")
    hook = os.path.join(remote.path, "hooks", "post-receive")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"), hook)
    for m in (a, b):
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
        use_example(m, "git-annex.autosync")  # no annex.largefiles rule of its own
        m.start()

    versions = []
    for i in range(3):
        versions.append(os.urandom(SIZE))
        with open(os.path.join(a.path, "video.bin"), "wb") as f:
            f.write(versions[-1])
        wait_until(lambda: b.read("video.bin") == versions[-1] and a.settled(remote)
                   and b.settled(remote), 60, 0.1, "version %d on b" % i)
    with open(os.path.join(a.path, "notes.txt"), "wb") as f:
        f.write(b"small\n")
    wait_until(lambda: b.read("notes.txt") == b"small\n" and a.settled(remote), 60, 0.1,
               "notes.txt on b")
    files = remote.files()
    assert files[b"video.bin"].startswith(b"/annex/objects/")  # above 100kb: annexed
    assert files[b"notes.txt"] == b"small\n"  # below: an ordinary git file
    assert annex_bytes(remote.path) >= 3 * SIZE

    time.sleep(2)
    said = expire(a, "--older-than", "1s")
    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    drops = [l for l in lines if l.startswith("would drop from origin: video.bin as it was "
                                              "until ")]
    assert len(drops) == 2, said.stdout  # the two replaced versions, not the current one
    assert all("300.0 kB" in l for l in drops)
    assert lines[-1] == "would free 600.0 kB on origin (2 versions); nothing dropped: run " \
                        "again with --yes to drop exactly these"
    assert annex_bytes(remote.path) >= 3 * SIZE  # nothing dropped yet
    # b never held the old versions' content locally?  It did (sync --content): still,
    # only a machine that holds a version drops it from the remote.
    done = expire(a, "--older-than", "1s", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "dropped 2 versions (600.0 kB) from origin"
    assert SIZE <= annex_bytes(remote.path) < 2 * SIZE  # the current version only
    # Nothing lost: a still holds every version, and the current one is everywhere.
    assert annex_bytes(os.path.join(a.path, ".git")) >= 3 * SIZE
    assert b.read("video.bin") == versions[-1]
    again = expire(a, "--older-than", "1s")
    assert "nothing to expire on origin" in again.stdout


def test_expire_refuses_in_one_line_without_an_annex(tmp_path, remote):
    from conftest import Machine
    m = Machine(tmp_path, "m", remote)
    said = expire(m, "--older-than", "30d")
    assert said.returncode == 1
    assert said.stderr.startswith("dvcs-autosync expire: ") and "no git-annex repository" \
        in said.stderr and len(said.stderr.splitlines()) == 1
    said = expire(m, "--older-than", "soon")
    assert said.returncode == 1 and "expected an age such as 90d" in said.stderr
