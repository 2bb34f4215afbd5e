"""Large files (issue 21, item 3): the `largefiles` key sends files above a size to
git-annex through the existing annex set-up (docs/examples/git-annex.autosync), and
`dvcs-autosync expire` drops old versions' content from the remote, saying exactly what
first. End to end on real git, git-annex and a bare remote."""
import io
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from autosync.core import config
from autosync.tools import expire as expire_command
from autosync.vcs import largefiles
from base import git, wait_until
from helpers import annex, annex_bytes, annexed_pair, save_versions

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
    a, b = annexed_pair(machines, remote, largefiles="100kb")

    versions = save_versions(a, b, remote, 3, SIZE)
    with open(os.path.join(a.path, "notes.txt"), "wb") as f:
        f.write(b"small\n")
    wait_until(lambda: b.read("notes.txt") == b"small\n" and a.settled(remote), 60, 0.1,
               "notes.txt on b")
    files = remote.files()
    assert files[b"video.bin"].startswith(b"/annex/objects/")  # above 100kb: annexed
    assert files[b"notes.txt"] == b"small\n"  # below: an ordinary git file
    assert annex_bytes(remote.path) >= 3 * SIZE
    # Each machine keeps the current version only: the remote has the others.
    wait_until(lambda: all(SIZE <= annex_bytes(os.path.join(m.path, ".git")) < 2 * SIZE
                           for m in (a, b)), 60, 0.1, "a and b to drop their old versions")
    assert "dropped here 1 old version(s) the remote holds" in a.logtext()

    time.sleep(2)  # the versions' age (whole seconds in commits), not a wait for the daemons
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
    # Every machine (a, b) has got them: they go for good, though no machine keeps a copy.
    done = expire(a, "--older-than", "1s", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "dropped 2 versions (600.0 kB on origin)"
    assert SIZE <= annex_bytes(remote.path) < 2 * SIZE  # the current version only
    assert b.read("video.bin") == versions[-1] and a.read("video.bin") == versions[-1]
    again = expire(a, "--older-than", "1s", "--yes")
    assert again.stdout.startswith("nothing to expire: "), again.stdout
    # An expired version cannot be restored: said in one line, nothing written.
    said = restore(a, "video.bin")
    assert said.returncode == 1 and said.stderr.count("\n") == 1
    assert "cannot restore video.bin: git-annex could not get 1 version(s) (expired, or no " \
           "repository holding them is reachable: %s-s300000--" % largefiles.BACKEND \
           in said.stderr
    assert a.read("video.bin") == versions[-1]


def restore(machine, rel):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor", "restore",
                           os.path.join(machine.path, rel), "--config", machine.config],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")
def test_restore_gets_back_a_version_this_machine_dropped(machines, remote):
    a, b = annexed_pair(machines, remote, largefiles="100kb")
    versions = save_versions(a, b, remote, 2, SIZE)
    wait_until(lambda: annex_bytes(os.path.join(a.path, ".git")) < 2 * SIZE, 60, 0.1,
               "a to drop the first version")
    # (Without the restore's get, git-annex's pointer would be written, and the content
    # would replace it only when the daemon's `git annex sync --content` gets it.)
    said = restore(a, "video.bin")
    assert said.returncode == 0, said.stderr
    assert a.read("video.bin") == versions[0]  # its content, not git-annex's pointer
    wait_until(lambda: b.read("video.bin") == versions[0] and a.settled(remote), 60, 0.1,
               "the restored version on b")
    assert "Traceback" not in a.logtext() + b.logtext()


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")
def test_the_daemon_keeps_to_largefileskeep_by_itself(machines, remote):
    a, b = annexed_pair(machines, remote, largefiles="100kb",
                        only_a=dict(largefileskeep="1s", maintenanceinterval="1"))
    versions = save_versions(a, b, remote, 3, SIZE)
    # The upkeep (every second here) expires the two replaced versions from the remote,
    # each logged once it is gone.
    wait_until(lambda: a.logtext().count("expire (largefileskeep = 1s): dropping from origin: "
                                         "video.bin as it was until ") == 2, 60, 0.2,
               "a's upkeep to expire the two replaced versions")
    assert SIZE <= annex_bytes(remote.path) < 2 * SIZE  # the current version only
    assert b.read("video.bin") == versions[-1] and a.read("video.bin") == versions[-1]
    assert largefiles.local_keys(remote.path) == largefiles.used_keys(a.path)
    assert "Traceback" not in a.logtext() + b.logtext()


def test_expire_refuses_in_one_line_without_an_annex(tmp_path, remote):
    from base import Machine
    m = Machine(tmp_path, "m", remote)
    said = expire(m, "--older-than", "30d")
    assert said.returncode == 1
    assert said.stderr.startswith("dvcs-autosync expire: ") and "no git-annex repository" \
        in said.stderr and len(said.stderr.splitlines()) == 1
    said = expire(m, "--older-than", "soon")
    assert said.returncode == 1 and "expected an age such as 30d" in said.stderr


# --- the rule's parts, on real git-annex repositories without the daemon ---------------------

needs_annex = pytest.mark.skipif(not shutil.which("git-annex"), reason="needs git-annex")
LATER = 3600  # plan() is asked an hour from now: every version made here is "old"


class Clone:
    """A clone of the remote with an annex, driven by git-annex's own commands: what the
    daemon runs (add, commit, `git annex sync --content`) done by hand."""

    def __init__(self, tmp_path, name, remote):
        self.name, self.path = name, str(tmp_path / name)
        git("clone", "-q", remote.path, self.path)
        annex(self.path, "init", "-q", name)

    def save(self, content, rel="video.bin"):
        with open(os.path.join(self.path, rel), "wb") as f:
            f.write(content)
        git("-c", "annex.largefiles=largerthan=100kb", "add", "-A", cwd=self.path)
        git("commit", "-q", "-m", "save", cwd=self.path)
        return git("annex", "lookupkey", rel, cwd=self.path).decode().strip()

    def sync(self):
        annex(self.path, "sync", "-q", "--content")

    def held(self):
        return largefiles.local_keys(self.path)

    def plan(self):
        return largefiles.plan(self.path, "origin", largefiles.annex_uuid(self.path, "origin"),
                               60, now=time.time() + LATER)


def annexed_remote(tmp_path):
    from base import Remote
    remote = Remote(tmp_path / "remote.git")
    annex(remote.path, "init", "-q", "remote")
    return remote


def planned(clone):
    drops, kept = clone.plan()
    return ({v.key: where for v, _, where in drops}, {v.key: why for v, why in kept})


@needs_annex
def test_a_save_leaves_one_local_copy_once_the_remote_holds_the_old_one(tmp_path):
    remote = annexed_remote(tmp_path)
    a = Clone(tmp_path, "a", remote)
    trim = largefiles.Trimmer(a.path)
    v1 = a.save(os.urandom(SIZE))
    a.sync()
    assert trim.run() == [] and a.held() == {v1}  # current: kept
    v2 = a.save(os.urandom(SIZE))
    a.sync()
    assert trim.run() == [(v1, SIZE)] and a.held() == {v2}  # the remote has v1: not kept here
    assert v1 in largefiles.local_keys(remote.path)
    # A version that never reached the remote stays: git-annex finds no other copy.
    v3 = a.save(os.urandom(SIZE))
    v4 = a.save(os.urandom(SIZE))
    assert trim.run() == [] and a.held() == {v2, v3, v4}
    # v2 is still current on the remote's main (origin/main) until the push.
    a.sync()  # v4 (current) goes to the remote; v2 is there; v3 never is
    assert sorted(trim.run()) == sorted([(v2, SIZE)]) and a.held() == {v3, v4}
    # A removed big file: its last version goes too once the remote has it.
    os.unlink(os.path.join(a.path, "video.bin"))
    git("add", "-A", cwd=a.path)
    git("commit", "-q", "-m", "gone", cwd=a.path)
    assert trim.run() == [] and a.held() == {v3, v4}  # still current on the remote's main
    a.sync()
    assert trim.run() == [(v4, SIZE)] and a.held() == {v3}


def test_the_drop_does_nothing_in_a_repository_without_an_annex(tmp_path):
    from base import Remote
    remote = Remote(tmp_path / "remote.git")
    folder = str(tmp_path / "plain")
    git("clone", "-q", remote.path, folder)
    trim = largefiles.Trimmer(folder)
    assert trim.run() == [] and trim.tell() is False
    assert not os.path.exists(os.path.join(folder, ".git", "annex"))
    assert b"git-annex" not in git("--git-dir", remote.path, "branch", "-a")


@needs_annex
def test_expire_keeps_current_versions_and_what_only_this_machine_has(tmp_path):
    remote = annexed_remote(tmp_path)
    a = Clone(tmp_path, "a", remote)
    b = Clone(tmp_path, "b", remote)
    v1 = a.save(os.urandom(SIZE))
    a.sync()
    b.sync()  # b has v1
    v2 = a.save(os.urandom(SIZE))  # replaced before any push: only a has it
    v3 = a.save(os.urandom(SIZE))
    a.sync()
    b.sync()  # b has v3
    drops, kept = planned(a)
    assert drops == {v1: ("remote", "here")}
    assert kept == {v2: "only this machine has it (it never reached origin)"}
    # The same content current under another name is current: never a candidate.
    shutil.copy(os.path.join(a.path, "video.bin"), os.path.join(a.path, "copy.bin"))
    with open(os.path.join(a.path, "video.bin"), "wb") as f:
        f.write(os.urandom(SIZE))
    git("-c", "annex.largefiles=largerthan=100kb", "add", "-A", cwd=a.path)
    git("commit", "-q", "-m", "copy, then a new version", cwd=a.path)
    drops, kept = planned(a)
    assert v3 not in drops and v3 not in kept
    out = io.StringIO()
    assert expire_command.expire(Cfg(a.path), "1m", True, out, now=time.time() + LATER) == 0, \
        out.getvalue()
    assert out.getvalue().splitlines()[-1] == "dropped 1 versions (300.0 kB on origin, " \
                                              "300.0 kB here)"
    assert v1 not in largefiles.local_keys(remote.path) and v1 not in a.held()
    assert v2 in a.held() and v3 in a.held() and v3 in largefiles.local_keys(remote.path)
    out = io.StringIO()
    expire_command.expire(Cfg(a.path), "1m", True, out, now=time.time() + LATER)
    assert out.getvalue().splitlines()[-1].startswith("nothing to expire: ")


@needs_annex
def test_expire_keeps_a_version_until_every_machine_has_got_it_or_a_later_one(tmp_path):
    remote = annexed_remote(tmp_path)
    a = Clone(tmp_path, "a", remote)
    b = Clone(tmp_path, "b", remote)
    trim = largefiles.Trimmer(a.path)
    v1 = a.save(os.urandom(SIZE))
    a.sync()
    b.sync()  # b has v1
    v2 = a.save(os.urandom(SIZE))
    a.sync()
    v3 = a.save(os.urandom(SIZE))
    a.sync()  # b is away: it has got neither v2 nor v3
    trim.run()
    assert a.held() == {v3}
    drops, kept = planned(a)
    assert drops == {v1: ("remote",)}  # b has v1 itself; a dropped its own copy
    assert kept == {v2: "b has got neither this version nor a later one of the file yet"}
    b.sync()  # b gets v3 (never v2: it was not current when b came back)
    a.sync()  # a learns it through the git-annex branch
    drops, kept = planned(a)
    assert drops == {v1: ("remote",), v2: ("remote",)} and kept == {}
    # A machine retired with `git annex dead` is not waited for.
    c = Clone(tmp_path, "c", remote)
    c.sync()
    v4 = a.save(os.urandom(SIZE))
    a.sync()
    a.save(os.urandom(SIZE))
    a.sync()
    assert planned(a)[1] == {v4: "b, c has got neither this version nor a later one of the "
                                 "file yet"}
    annex(a.path, "dead", "c")
    assert planned(a)[1] == {v4: "b has got neither this version nor a later one of the "
                                 "file yet"}
    # A removed file waits for nobody: what b gets of it is the removal.
    v6 = a.save(os.urandom(SIZE), "other.bin")
    a.sync()
    os.unlink(os.path.join(a.path, "other.bin"))
    git("add", "-A", cwd=a.path)
    git("commit", "-q", "-m", "other.bin removed", cwd=a.path)
    assert v6 not in planned(a)[0]  # still current on the remote's branch
    a.sync()
    drops, kept = planned(a)
    assert drops[v6] == ("remote", "here") and v6 not in kept


class Cfg:
    def __init__(self, path, keep=""):
        self.path, self.largefileskeep = path, keep


def test_largefileskeep_is_an_age_or_nothing(tmp_path):
    annexed = "largefiles = 10mb\n[dvcs]\npushcmd = git annex sync --no-pull --content\n" \
              "pullcmd = git annex sync --no-push --content\n"
    assert config.load(write_config(tmp_path, annexed)).largefileskeep == ""
    assert config.load(write_config(tmp_path, "largefileskeep = 30d\n" + annexed)) \
        .largefileskeep == "30d"
    for bad in ("30", "a month", "-3d", "30 parsecs"):
        with pytest.raises(config.ConfigError) as e:
            config.load(write_config(tmp_path, "largefileskeep = %s\n" % bad + annexed))
        assert str(e.value).endswith("[autosync] largefileskeep: expected an age such as 30d, "
                                     "12w, 1y (s, m, h, d, w, y), or nothing (keep every "
                                     "version), got %r" % bad) and "\n" not in str(e.value)


def test_largefileskeep_needs_commands_that_carry_annexed_content(tmp_path):
    with pytest.raises(config.ConfigError) as e:
        config.load(write_config(tmp_path, "largefileskeep = 30d\n"))
    assert str(e.value).endswith("[autosync] largefileskeep: expected nothing, since pushcmd "
                                 "does not carry annexed content (it applies to git-annex's "
                                 "versions; docs/examples/git-annex.autosync), got '30d'")


@needs_annex
def test_expire_takes_its_age_from_largefileskeep(tmp_path):
    remote = annexed_remote(tmp_path)
    a = Clone(tmp_path, "a", remote)
    v1 = a.save(os.urandom(SIZE))
    a.sync()
    a.save(os.urandom(SIZE))
    a.sync()
    out = io.StringIO()
    expire_command.expire(Cfg(a.path, "1h"), None, False, out, now=time.time() + LATER)
    assert out.getvalue().splitlines()[0].startswith("would drop from origin and here: "
                                                     "video.bin as it was until ")
    assert v1 in out.getvalue()
    with pytest.raises(largefiles.ExpireError) as e:
        expire_command.expire(Cfg(a.path), None, False, io.StringIO())
    assert str(e.value) == "no age: give --older-than AGE, or set largefileskeep in [autosync]"


def replaced_versions(base, count):
    """A clone `a` (and a config for it) whose video.bin was saved count + 1 times, each
    version synced by a and by a second clone b: `count` replaced versions that expire
    lets go once a second has passed. -> the config's path."""
    base.mkdir()
    remote = annexed_remote(base)
    a, b = Clone(base, "a", remote), Clone(base, "b", remote)
    for _ in range(count + 1):
        a.save(os.urandom(SIZE))
        a.sync()
        b.sync()
    made = time.time()
    config_path = base / "a.autosync"
    config_path.write_text("[autosync]\npath = %s\nsyncmethod = none\n" % a.path)
    wait_until(lambda: time.time() >= made + 1.5, what="the versions to be older than 1 s")
    return str(config_path)


@needs_annex
def test_expire_shows_how_far_on_a_terminal_and_nothing_of_it_to_a_file(tmp_path):
    from terminal import ERASE, lasting, on_a_terminal
    argv = [sys.executable, "-m", "autosync.supervisor", "expire", "--older-than", "1s",
            "--yes", "--config"]
    status, seen = on_a_terminal(argv + [replaced_versions(tmp_path / "tty", 3)])
    assert status == 0, seen
    states = re.findall(r"\r\033\[K([^\r\n]*)", seen)
    assert "Fetching origin..." in states and \
        "Reading the history of the annexed files..." in states, states
    assert [s for s in states if s.startswith("Dropping: ")] == [
        "Dropping: 0 of 3 versions (0 bytes of 900.0 kB)",
        "Dropping: 1 of 3 versions (300.0 kB of 900.0 kB)",
        "Dropping: 2 of 3 versions (600.0 kB of 900.0 kB)",
        "Dropping: 3 of 3 versions (900.0 kB of 900.0 kB)"], states
    shown = [line for line in lasting(seen).splitlines() if line]
    assert shown[-1] == "dropped 3 versions (900.0 kB on origin, 900.0 kB here)", shown
    assert len([line for line in shown if line.startswith("dropping from origin and here: ")]) \
        == 3, shown
    # The same work with its output to a file: the lasting lines only.
    with open(tmp_path / "said", "w") as out:
        done = subprocess.run(argv + [replaced_versions(tmp_path / "file", 3)], stdout=out,
                              stderr=subprocess.STDOUT, timeout=300)
    said = (tmp_path / "said").read_text()
    assert done.returncode == 0, said
    assert "\r" not in said and "\033" not in said and ERASE not in said
    assert "Dropping" not in said and "Fetching" not in said and "Reading" not in said
    assert said.splitlines()[-1] == "dropped 3 versions (900.0 kB on origin, 900.0 kB here)"
    assert len(said.splitlines()) == len(shown)


@needs_annex
def test_the_daemon_keys_big_files_with_blake2b_unless_the_user_chose_a_backend(tmp_path):
    """Issue 32 item 2: a big file's hash is computed at the add, the copy to the remote
    and the other machine's get; BLAKE2b takes half git-annex's SHA-256's CPU here, so the
    daemon's commands use it. A backend the user set (annex.backend) stays theirs."""
    import types
    from autosync.vcs.remote import git_environment_for
    from autosync.vcs.commands import environment
    folder = str(tmp_path / "f")
    git("init", "-q", folder)
    annex(folder, "init", "-q", "f")
    cfg = types.SimpleNamespace(path=folder, largefiles="100kb")
    for chosen, expected in ((None, "BLAKE2B256E-s%d--" % SIZE), ("SHA256E", "SHA256E-")):
        if chosen:
            git("-C", folder, "config", "annex.backend", chosen)
        gitenv = git_environment_for(cfg, None, None, None)
        name = "big-%s.bin" % (chosen or "ours")
        with open(os.path.join(folder, name), "wb") as f:
            f.write(os.urandom(SIZE))
        subprocess.run(["git", "add", "--", name], cwd=folder, env=environment(gitenv=gitenv),
                       check=True)
        key = annex(folder, "lookupkey", name).decode().strip()
        assert key.startswith(expected), (chosen, key)
    gitenv = git_environment_for(types.SimpleNamespace(path=folder, largefiles=""), None,
                                 None, None)
    assert "annex.backend" not in environment(gitenv=gitenv).values()


def test_git_annex_takes_git_s_held_ssh_unless_the_user_gave_it_ssh_options(tmp_path):
    """GIT_ANNEX_USE_GIT_SSH=1 beside the held connection's GIT_SSH_COMMAND (the e2e test:
    tests/e2e/test_annex.py); not where remote.NAME.annex-ssh-options is set, which
    git-annex would then ignore, nor without a held connection. Another remote on another
    ssh server takes it too: the held connection's socket is per destination, that
    remote's ssh logs in by itself (tests/integration/test_link.py, the other server's test)."""
    import types
    from autosync.vcs.remote import git_environment_for
    folder = str(tmp_path / "f")
    git("init", "-q", folder)
    cfg = types.SimpleNamespace(path=folder, largefiles="")

    def env(url):
        gitenv = git_environment_for(cfg, os.path.join(folder, ".git"), None, lambda f: url)
        return gitenv.variables({})
    held = env("ssh://server.invalid/srv/f.git")
    assert "ControlPath=" in held["GIT_SSH_COMMAND"] and held["GIT_ANNEX_USE_GIT_SSH"] == "1"
    assert "GIT_ANNEX_USE_GIT_SSH" not in env("/srv/f.git")  # not over ssh
    for name, url in (("disk", "/mnt/backup/f.git"), ("same", "ssh://server.invalid/srv/o.git"),
                      ("other", "backup.invalid:f.git")):
        git("-C", folder, "remote", "add", name, url)
        assert env("ssh://server.invalid/srv/f.git")["GIT_ANNEX_USE_GIT_SSH"] == "1"
    git("-C", folder, "config", "remote.other.annex-ssh-options", "-p 2222")  # any remote's
    assert "GIT_ANNEX_USE_GIT_SSH" not in env("ssh://server.invalid/srv/f.git")
    git("-C", folder, "remote", "remove", "other")
    assert env("ssh://server.invalid/srv/f.git")["GIT_ANNEX_USE_GIT_SSH"] == "1"
    git("-C", folder, "config", "remote.origin.annex-ssh-options", "-i /my/key")
    held = env("ssh://server.invalid/srv/f.git")
    assert "ControlPath=" in held["GIT_SSH_COMMAND"] and "GIT_ANNEX_USE_GIT_SSH" not in held
