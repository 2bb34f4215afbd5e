"""End-to-end: `dvcs-autosync init REMOTE FOLDER` (issue 19, item 2), each case for real:
a real bare remote on disk, `init` run as a user runs it (a process), then the real suite
started on the config it wrote, on two machines (two folders, two configs)."""
import hashlib
import os
import re
import stat
import subprocess
import sys


from base import Remote, git, tree, wait_until
from prosody import prosody_certs, prosody_factory  # noqa: F401 (fixtures)
from helpers import write
from helpers import EmptyRemote
from helpers import Joined, init, listing, ok



def config_lines(machine):
    with open(machine.config) as f:
        return [l for l in f.read().splitlines() if l and not l.startswith("#")]


def test_an_empty_remote_gets_the_first_commit_and_the_next_machine_syncs(tmp_path):
    remote = EmptyRemote(tmp_path / "empty.git")
    a, b = Joined(tmp_path, "a"), Joined(tmp_path, "b")
    out = ok(a.init(remote))
    assert "The remote was empty: made the first commit and pushed it." in out
    assert remote.head(), "the first commit is on the remote"
    # The next machine's command is said, and it works as said.
    assert "On the next machine run:\n    dvcs-autosync init %s" % remote.path in out
    next_line = out.split("On the next machine run:\n    ")[1].splitlines()[0]
    assert next_line.endswith(" --config %s" % a.config)  # the options this one was given
    assert "authorized_keys" not in out  # a remote on a local path: no key to restrict
    assert stat.S_IMODE(os.stat(a.config).st_mode) == 0o600
    # A remote on a local path is watched here (autosync-remote): pushes arrive at once.
    assert config_lines(a) == ["[autosync]", "path = %s" % a.path, "syncmethod = ssh"]
    assert "Other machines' pushes arrive at once" in out
    ok(b.init(remote))
    assert git("rev-parse", "HEAD", cwd=b.path).strip() == remote.head()
    try:
        a.start(), b.start()
        write(a, "first.txt", b"the first file\n")
        wait_until(lambda: b.read("first.txt"), 60, 0.1, "first.txt on b, unasked")
        assert b.read("first.txt") == b"the first file\n"
        assert b.status()["problems"] == []
    finally:
        a.stop(), b.stop()


def test_the_remote_s_repository_is_set_for_big_files_where_the_user_set_nothing(tmp_path):
    """The two settings docs/large-folders.md asked users to make on the server by hand:
    made by init, a value of the user's kept, a repository it cannot set named with the
    commands to run there."""
    remote = EmptyRemote(tmp_path / "empty.git")
    out = ok(Joined(tmp_path, "a").init(remote))
    assert "Big files: the remote's repository stores and sends them as they came " \
        "(core.bigFileThreshold 16m, receive.unpackLimit 1)." in out
    local = ["git", "--git-dir", str(remote.path), "config", "--local"]
    assert subprocess.run(local + ["core.bigFileThreshold"], stdout=subprocess.PIPE).stdout \
        == b"16m\n"
    # The next machine's init finds them set; the user's own value stays.
    subprocess.run(local + ["receive.unpackLimit", "100"], check=True)
    out = ok(Joined(tmp_path, "b").init(remote))
    assert "keeps its own settings (core.bigFileThreshold 16m, receive.unpackLimit 100; " \
        "init would set core.bigFileThreshold 16m, receive.unpackLimit 1)." in out
    assert subprocess.run(local + ["receive.unpackLimit"], stdout=subprocess.PIPE).stdout \
        == b"100\n"
    # A repository init cannot set (its config locked, as by a git config that runs):
    # said, with what to run there, and init goes on.
    other = EmptyRemote(tmp_path / "other.git")
    open(os.path.join(other.path, "config.lock"), "w").close()
    c = Joined(tmp_path, "c")
    out = ok(c.init(other))
    assert "Big files: the remote's repository could not be set (error: could not lock " \
        "config file" in out
    assert "until you run, on the server: git -C %s config core.bigFileThreshold 16m; " \
        "git -C %s config receive.unpackLimit 1" % (other.path, other.path) in out
    assert "Wrote %s (mode 0600)." % c.config in out  # init went on


def test_a_non_empty_remote_into_an_empty_folder(tmp_path, remote):
    a = Joined(tmp_path, "a")
    os.mkdir(a.path)
    out = ok(a.init(remote))
    assert "Cloned" in out and "first commit" not in out
    assert tree(a) == {"README": b"synced folder\n"}
    assert remote.commit_count() == 1  # nothing made: the remote had a branch
    assert git("rev-parse", "--abbrev-ref", "@{upstream}", cwd=a.path).strip() == b"origin/main"


def test_a_folder_of_files_joins_a_remote_with_files_keeping_both_versions(tmp_path):
    """b's folder is not a repository and holds README with other content than the
    remote's: after init both versions are on both machines, every other file too. By
    the usual rule the newer version (b's, the remote's is from 2020) stays at the path."""
    old = dict(os.environ, GIT_COMMITTER_DATE="2020-01-01T12:00:00Z",
               GIT_AUTHOR_DATE="2020-01-01T12:00:00Z")
    saved = dict(os.environ)
    os.environ.update(old)
    try:
        remote = Remote(tmp_path / "remote.git")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    a, b = Joined(tmp_path, "a"), Joined(tmp_path, "b")
    ok(a.init(remote))
    os.makedirs(os.path.join(b.path, "docs"))
    write(b, "README", b"b's own README\n")
    write(b, "docs/plan.txt", b"b's plan\n")
    write(b, "notes.txt~", b"an editor's backup: never synced, never lost\n")
    before = tree(b)
    out = ok(b.init(remote))
    assert "README is in both with other content: both kept" in out
    files = tree(b)
    for rel, content in before.items():
        assert files[rel] == content, rel  # every byte b had is where it was
    copies = [p for p in files if p.startswith("README") and p != "README"]
    assert len(copies) == 1 and files[copies[0]] == b"synced folder\n"
    # Committed: all but the editor's file (git alone, without the suite's excludes, sees it).
    assert git("status", "--porcelain", cwd=b.path) == b"?? notes.txt~\n"
    assert set(n.decode() for n in remote.files()) == {"README", copies[0], "docs/plan.txt"}
    try:
        a.start(), b.start()
        wait_until(lambda: a.notify("pull", check=False) and
                   a.read("docs/plan.txt") is not None, 60, 0.3, "b's files on a")
        on_a = tree(a)
        assert on_a["README"] == b"b's own README\n"
        assert on_a[copies[0]] == b"synced folder\n"
        assert on_a["docs/plan.txt"] == b"b's plan\n"
        assert set(on_a) == set(files) - {"notes.txt~"}
    finally:
        a.stop(), b.stop()


def test_no_git_identity_gets_one_for_this_repository(tmp_path):
    remote = EmptyRemote(tmp_path / "empty.git")
    bare_home = tmp_path / "bare-home"
    bare_home.mkdir()
    # (its own runtime folder: none made in /tmp for this HOME)
    env = dict(os.environ, HOME=str(bare_home), GIT_CONFIG_NOSYSTEM="1",
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    a = Joined(tmp_path, "a")
    os.mkdir(a.path)
    write(a, "mine.txt", b"written before git knew who I am\n")
    out = ok(a.init(remote, env=env))
    assert "git had no identity here: set user.name" in out
    name = git("config", "--file", os.path.join(a.path, ".git", "config"), "user.name").strip()
    email = git("config", "--file", os.path.join(a.path, ".git", "config"), "user.email").strip()
    assert name and re.fullmatch(rb"[^@\s]+@[^@\s]+", email)
    assert git("--git-dir", remote.path, "log", "-1", "--format=%ae", "main").strip() == email
    assert git("--git-dir", remote.path, "show", "main:mine.txt") == \
        b"written before git knew who I am\n"


def test_a_clone_of_another_remote_is_refused_with_nothing_touched(tmp_path, remote):
    other = Remote(tmp_path / "other.git")
    a = Joined(tmp_path, "a")
    git("clone", "-q", other.path, a.path)
    write(a, "work.txt", b"not committed yet\n")
    before = listing(a.path)
    result = a.init(remote)
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "\n" not in line and "is a clone of %s, not of %s" % (other.path, remote.path) in line
    assert listing(a.path) == before
    assert not os.path.exists(a.config)
    assert remote.commit_count() == 1 and other.commit_count() == 1


def test_a_clone_of_the_same_remote_is_taken_as_it_is(tmp_path, remote):
    a = Joined(tmp_path, "a")
    git("clone", "-q", remote.path, a.path)
    write(a, "work.txt", b"not committed yet\n")
    before = listing(a.path)
    out = ok(a.init(remote))
    assert "taken as it is" in out
    assert listing(a.path) == before
    assert config_lines(a)[:2] == ["[autosync]", "path = %s" % a.path]


def test_an_existing_config_is_refused_without_force(tmp_path, remote):
    a = Joined(tmp_path, "a")
    with open(a.config, "w") as f:
        f.write("[autosync]\npath = ~/elsewhere\n")
    result = a.init(remote)
    assert result.returncode == 1
    assert "exists: not overwritten (--force replaces it)" in result.stderr
    assert open(a.config).read() == "[autosync]\npath = ~/elsewhere\n"
    assert not os.path.exists(a.path)  # refused before anything was done
    ok(a.init(remote, "--force"))
    assert config_lines(a)[1] == "path = %s" % a.path
    assert stat.S_IMODE(os.stat(a.config).st_mode) == 0o600


def test_a_file_where_the_folder_should_be_is_refused(tmp_path, remote):
    a = Joined(tmp_path, "a")
    with open(a.path, "w") as f:
        f.write("a file\n")
    result = a.init(remote)
    assert result.returncode == 1 and "is a file, not a folder" in result.stderr
    assert open(a.path).read() == "a file\n" and not os.path.exists(a.config)


def test_an_unreachable_remote_is_refused_with_nothing_touched(tmp_path):
    a = Joined(tmp_path, "a")
    os.mkdir(a.path)
    write(a, "mine.txt", b"mine\n")
    result = a.init(tmp_path / "no-such.git")
    assert result.returncode == 1 and "cannot read the remote" in result.stderr
    assert sorted(os.listdir(a.path)) == ["mine.txt"] and not os.path.exists(a.config)


# --- the XMPP account -------------------------------------------------------------------------

def test_account_with_a_self_signed_certificate_shows_its_fingerprint(tmp_path, remote,
                                                                      prosody_factory,
                                                                      prosody_certs):
    server = prosody_factory(certs=prosody_certs.untrusted)
    account = server.register("me", "s3cret pass")
    secret = tmp_path / "password"
    secret.write_text("s3cret pass\n")
    a = Joined(tmp_path, "a")
    where = "--server", "127.0.0.1:%d" % server.port
    common = ("--account", account, "--password-file", secret) + where
    # No terminal to confirm on: refused, the fingerprint named, nothing touched.
    result = a.init(remote, *common)
    assert result.returncode == 1
    found = re.search(r"run again with --fingerprint (sha256:[0-9A-F:]{95})", result.stderr)
    assert found, result.stderr
    assert not os.path.exists(a.path) and not os.path.exists(a.config)
    fingerprint = found.group(1)
    # It is the certificate's own.
    der = subprocess.run(["openssl", "x509", "-in", prosody_certs.untrusted[0], "-outform",
                          "DER"], stdout=subprocess.PIPE, check=True).stdout
    digest = hashlib.sha256(der).hexdigest().upper()
    assert fingerprint == "sha256:" + ":".join(digest[i:i + 2] for i in range(0, 64, 2))
    # A wrong password: refused in one line, nothing touched.
    wrong = tmp_path / "wrong"
    wrong.write_text("not it\n")
    result = a.init(remote, "--account", account, "--password-file", wrong,
                    "--fingerprint", fingerprint, *where)
    assert result.returncode == 1 and "wrong user name or password" in result.stderr
    assert not os.path.exists(a.path)
    # Confirmed by --fingerprint: logged in once, the config holds the account.
    out = ok(a.init(remote, *common, "--fingerprint", fingerprint))
    assert "the account works (certificate pinned by its fingerprint)" in out
    assert config_lines(a) == ["[autosync]", "path = %s" % a.path, "[xmpp]",
                               "username = %s" % account, "password = s3cret pass",
                               "host = 127.0.0.1", "port = %d" % server.port,
                               "fingerprint = %s" % fingerprint]
    assert "--account %s --server 127.0.0.1:%d --fingerprint %s" % (
        account, server.port, fingerprint) in out
    # The suite logs in with what was written.
    try:
        a.start()
        wait_until(lambda: "logged in to" in a.logtext(), 30, 0.2, "the daemon's login")
        assert "certificate matches the pinned fingerprint" in a.logtext()
    finally:
        a.stop()


def test_on_a_terminal_the_password_is_asked_and_the_certificate_confirmed(tmp_path, remote,
                                                                         prosody_factory,
                                                                         prosody_certs):
    """As a user runs it: the password typed (getpass), the fingerprint shown and "y"."""
    import pty
    server = prosody_factory(certs=prosody_certs.untrusted)
    account = server.register("me", "typed")
    a = Joined(tmp_path, "a")
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "autosync.supervisor", "init", remote.path, a.path,
            "--config", a.config, "--account", account, "--server", "127.0.0.1:%d" % server.port]
    # A session of its own: no controlling terminal, so getpass asks on stdin (the pty).
    proc = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.close(slave)
    try:
        said = {"stdout": b"", "stderr": b""}

        def upto(stream, text):
            while text not in said[stream]:
                chunk = os.read(getattr(proc, stream).fileno(), 4096)
                assert chunk, "init ended before saying %r: %r" % (text, said)
                said[stream] += chunk
        # Typed only once asked: getpass turns echo off with TCSAFLUSH, dropping what waits.
        upto("stderr", b"Password of me@localhost: ")
        os.write(master, b"typed\n")
        upto("stdout", b"Trust exactly this certificate? [y/N] ")
        os.write(master, b"y\n")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    result = subprocess.CompletedProcess(argv, proc.returncode, (said["stdout"] + out).decode(),
                                         (said["stderr"] + err).decode())
    out = ok(result)
    assert "Its SHA-256 fingerprint is\n    sha256:" in out
    assert "the account works (certificate pinned by its fingerprint)" in out
    lines = config_lines(a)
    assert "password = typed" in lines and any(l.startswith("fingerprint = sha256:")
                                               for l in lines)


# --- the service ------------------------------------------------------------------------------

def test_service_writes_a_unit_with_the_installed_program(tmp_path, remote):
    a = Joined(tmp_path, "a")
    out = ok(a.init(remote, "--service"))
    units = os.path.join(os.environ["HOME"], ".config", "systemd", "user")
    (name,) = os.listdir(units)
    assert name == "dvcs-autosync-a.autosync.service"
    text = open(os.path.join(units, name)).read()
    (execstart,) = [l for l in text.splitlines() if l.startswith("ExecStart=")]
    program, config_file = [w.strip('"') for w in execstart[len("ExecStart="):].split()]
    assert os.path.isabs(program) and os.access(program, os.X_OK)
    assert os.path.basename(program) == "dvcs-autosync" and config_file == a.config
    if "Enabled and started" not in out:  # no user manager here: the one command to run
        assert "Start syncing with:\n    " in out
    verify = subprocess.run(["systemd-analyze", "verify", "--user", "--man=no",
                             os.path.join(units, name)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path)))
    assert verify.returncode == 0, verify.stdout


# --- the original beside -------------------------------------------------------------------

def test_init_tells_to_set_pull_rebase_false_when_it_finds_the_originals_config(tmp_path,
                                                                                 remote):
    original = os.path.join(os.environ["HOME"], ".autosync")
    with open(original, "w") as f:
        f.write("[autosync]\npath = ~/autosync\n[dvcs]\n"
                "statuscmd = git status | grep -iq \"nothing to commit\"\n")
    a = Joined(tmp_path, "a")
    out = ok(a.init(remote))
    assert "Found the original dvcs-autosync's config %s" % original in out
    assert "git -C %s config pull.rebase false" % os.path.expanduser("~/autosync") in out


def test_init_gives_no_pull_rebase_advice_where_the_original_s_clone_has_it(tmp_path, remote):
    """The advice is for a clone whose plain `git pull` would stop at a divergence: one
    that says pull.rebase false already is not told again."""
    original = os.path.join(os.environ["HOME"], ".autosync")
    with open(original, "w") as f:
        f.write("[autosync]\npath = ~/autosync\n[dvcs]\n"
                "statuscmd = git status | grep -iq \"nothing to commit\"\n")
    its_clone = os.path.expanduser("~/autosync")
    git("clone", "-q", remote.path, its_clone)
    git("-C", its_clone, "config", "pull.rebase", "false")
    out = ok(Joined(tmp_path, "a").init(remote))
    # (An original another test or the machine runs may be named: not this one.)
    assert "original dvcs-autosync's config" not in out and its_clone not in out, out


def test_a_clone_given_where_the_config_goes_is_told_the_init_command(tmp_path, remote):
    """`dvcs-autosync ~/Sync` (the folder, not a config file): the message names the init
    command with the clone's own remote, and that command works as it says."""
    folder = str(tmp_path / "Sync")
    git("clone", "-q", remote.path, folder)
    result = subprocess.run([sys.executable, "-m", "autosync.supervisor", folder],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    command = result.stderr.split("or set it all up with `")[1].split("`")[0]
    assert command == "dvcs-autosync init %s %s" % (remote.path, folder)
    out = ok(init(*command.split()[2:]))
    assert "taken as it is" in out and os.path.exists(os.path.expanduser("~/.autosync"))


def test_the_originals_config_in_the_way_is_named_with_the_advice(tmp_path, remote):
    """init refuses to write over ~/.autosync, the original's, and still says what the
    original's clone needs while both run."""
    original = os.path.join(os.environ["HOME"], ".autosync")
    text = "[autosync]\npath = ~/autosync\n[dvcs]\nstatuscmd = git status | grep -iq " \
           "\"nothing to commit\"\n"
    with open(original, "w") as f:
        f.write(text)
    result = init(remote.path, tmp_path / "Sync")
    assert result.returncode == 1 and "exists: not overwritten" in result.stderr
    assert "config pull.rebase false" in result.stdout
    assert open(original).read() == text and not os.path.exists(tmp_path / "Sync")


def test_a_file_git_cannot_read_leaves_the_folder_as_it_was(tmp_path, remote, nobody):
    """As an ordinary user (root reads everything): an unreadable file stops the join in
    one line, and the folder is left as it was found (no .git left behind)."""
    folder = os.path.join(nobody.base, "Sync")
    os.mkdir(folder)
    for name, mode in (("mine.txt", 0o644), ("secret.txt", 0o000)):
        with open(os.path.join(folder, name), "w") as f:
            f.write(name)
        os.chmod(os.path.join(folder, name), mode)
    bare = os.path.join(nobody.base, "remote.git")
    git("clone", "-q", "--bare", remote.path, bare)
    nobody.chown(nobody.base)
    before = listing(folder)
    argv = nobody.command(["-m", "autosync.supervisor", "init", bare, folder, "--config",
                           os.path.join(nobody.base, "a.autosync")])
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("dvcs-autosync init: git add: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert listing(folder) == before
    assert not os.path.exists(os.path.join(nobody.base, "a.autosync"))


def test_a_push_refused_during_init_is_left_to_the_daemon(tmp_path):
    """Committed, not pushed (the remote refused): the config is written all the same,
    init says so, and the daemon pushes once the remote takes it."""
    remote = EmptyRemote(tmp_path / "empty.git")
    hook = os.path.join(remote.path, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho 'quota exceeded' >&2\nexit 1\n")
    os.chmod(hook, 0o755)
    a = Joined(tmp_path, "a")
    os.mkdir(a.path)
    write(a, "mine.txt", b"mine\n")
    out = ok(a.init(remote))
    assert "Not pushed yet: " in out and "quota exceeded" in out
    assert "made the first commit and pushed it" not in out and not remote.head()
    assert config_lines(a)[:2] == ["[autosync]", "path = %s" % a.path]
    os.unlink(hook)
    try:
        a.start()
        wait_until(lambda: remote.head(), 60, 0.2, "the daemon's push")
        assert git("--git-dir", remote.path, "show", "main:mine.txt") == b"mine\n"
    finally:
        a.stop()


def test_a_remote_that_cannot_be_watched_is_said_with_why_and_polled(monkeypatch):
    """ssh refused (ssh's own exit 255): the probe says why in ssh's words and the config
    falls back to syncmethod none. A server that cannot run the watch (its own exit: no
    autosync-remote nor python3, a hosted git without a shell): syncmethod ssh, polled
    with git ls-remote, and said so. (A unit test: the real sshd cases are test_link.py's.)"""
    from autosync.ssh import watch
    from autosync.tools.init import files, plan, probe
    refused = ["sh", "-c", "echo 'me@server: Permission denied (publickey).' >&2; exit 255"]
    monkeypatch.setattr(watch, "default_watch", lambda *a: refused)
    step = plan.Setup(args=None, config="/home/me/.autosync", folder="/home/me/Sync",
                     remote="server:sync.git", host="here", program=None)
    step.watch_why = probe.watch(step)
    assert "exit 255" in step.watch_why and "Permission denied" in step.watch_why
    assert "syncmethod = none" in files.config_text(step)
    fails = ["sh", "-c", "echo 'sh: 1: autosync-remote: not found' >&2; exit 127"]
    monkeypatch.setattr(watch, "default_watch", lambda *a: fails)
    step.watch_why = probe.watch(step)
    assert step.watch_why is None and "syncmethod = ssh" in files.config_text(step)
    assert "exit 127" in step.watch_how and "autosync-remote: not found" in step.watch_how
    monkeypatch.setattr(watch, "default_watch",
                        lambda *a: ["sh", "-c", "sleep 30"])  # an empty remote: no line yet
    monkeypatch.setattr(probe, "WATCH_PROBE", 0.5)
    step.watch_how = None
    assert probe.watch(step) is None and step.watch_how is None


def test_the_restricted_key_s_line_is_made_for_an_ssh_remote_only():
    from autosync.tools.init import key_line
    assert key_line("server:sync.git") == 'command="autosync-remote serve sync.git",restrict'
    assert key_line('ssh://me@server:2222/~/my "sync".git') == \
        r"""command="autosync-remote serve '~/my \"sync\".git'",restrict"""
    assert key_line("/srv/sync.git") is None and key_line("https://h/r.git") is None


def test_init_finds_the_original_run_by_python3_on_any_config(tmp_path, remote):
    """`python3 dvcs-autosync other.autosync`: a port of the original, on a config of
    its own, is found running and named; ours, run the same way, is not the original."""
    its_folder = tmp_path / "its-folder"
    its_config = tmp_path / "other.autosync"
    its_config.write_text("[autosync]\npath = %s\n" % its_folder)
    scripts = {}
    for kind, text in (("original", "# import pyinotify (the original's script)\n"),
                       ("ours", "# from autosync.supervisor import main (our launcher)\n")):
        script = tmp_path / kind / "dvcs-autosync"
        script.parent.mkdir()
        script.write_text(text + "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
        scripts[kind] = script
    for kind, found in (("ours", False), ("original", True)):
        running = subprocess.Popen(["python3", str(scripts[kind]), str(its_config)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert running.stdout.readline() == b"ready\n"
            out = ok(Joined(tmp_path, "a-" + kind).init(remote))
        finally:
            running.kill()
            running.wait()
        said = "Found the original dvcs-autosync's process (PID %d, config %s)" % (
            running.pid, its_config)
        assert (said in out) is found, out
        if found:
            assert "git -C %s config pull.rebase false" % its_folder in out


def test_init_force_refuses_while_a_daemon_runs_on_the_config_and_then_moves_the_folder(
        tmp_path, remote):
    a = Joined(tmp_path, "a")
    ok(a.init(remote))
    before = open(a.config).read()
    a.start()
    moved = tmp_path / "moved"
    try:
        result = init(remote.path, moved, "--config", a.config, "--force")
        assert result.returncode == 1
        assert result.stderr.strip().endswith(
            "dvcs-autosync runs on %s (PID %d): stop it first (kill %d), then run this init "
            "again and start it; nothing touched" % (a.config, a.proc.pid, a.proc.pid))
        assert open(a.config).read() == before and not moved.exists()
    finally:
        assert a.stop() == 0
    # The recipe: stopped, the folder moved, init --force takes it where it is now.
    os.rename(a.path, moved)
    out = ok(init(remote.path, moved, "--config", a.config, "--force"))
    assert "is a clone of %s already: taken as it is" % remote.path in out
    a.path = str(moved)
    a.start()
    write(a, "after-the-move.txt", b"synced from the new place\n")
    wait_until(lambda: a.settled(remote), what="a's push from the moved folder")
    assert remote.files()[b"after-the-move.txt"] == b"synced from the new place\n"
