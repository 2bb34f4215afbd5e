"""End-to-end: the real suite on real git clones of a bare remote on disk."""
import os
import re
import shutil
import signal
import subprocess
import tarfile
import time

import pytest

from base import ROOT, git, wait_until
from helpers import settle, write


HOSTILE = ["$(touch pwned)", "`touch pwned`", "a;b", "*", "-rf", "--exec=x", "with space",
           'quote"s', "new\nline", os.fsdecode(b"bad\xffname")]


def test_hostile_names_are_committed_and_pushed_as_they_are(machines, remote, tmp_path):
    a = machines("a")
    for i, name in enumerate(HOSTILE):
        write(a, name, b"content %d\n" % i)
    settle(a, remote)
    files = remote.files()
    for i, name in enumerate(HOSTILE):
        assert files.get(os.fsencode(name)) == b"content %d\n" % i, name
    found = subprocess.run(["find", str(tmp_path), "/tmp", "-maxdepth", "3", "-name", "pwned"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    assert found == b""
    assert not os.path.exists("pwned")


def test_original_format_config_works_unchanged(machines, remote):
    a = machines("a", start=False)
    # The original's [dvcs] section, byte for byte (trailing spaces and all).
    original = (
        "statuscmd = git status | grep -iq \"nothing to commit\"\n"
        "addcmd = git add %s\n"
        "rmcmd = git rm %s\n"
        "modifycmd = git add %s\n"
        "#movecmd = git mv %s %s\n"
        "movecmd = git rm %s \n"
        "    git add %s\n"
        "startupcmd = git add -A\n"
        "commitcmd = git commit -m %s\n"
        "pushcmd = git push\n"
        "pullcmd = git pull\n"
        "remoteurlcmd = git config --get remote.origin.url\n")
    with open(a.config, "a") as f:
        f.write("ignorepath = .git .svn .hg src/packages \n    build\n[dvcs]\n" + original)
    a.start()
    write(a, "notes.txt", b"one\n")
    write(a, "build/out.o", b"ignored\n")
    settle(a, remote)
    write(a, "notes.txt", b"two\n")
    settle(a, remote)
    os.rename(os.path.join(a.path, "notes.txt"), os.path.join(a.path, "renamed.txt"))
    settle(a, remote)
    os.unlink(os.path.join(a.path, "README"))
    settle(a, remote)
    files = remote.files()
    assert files == {b"renamed.txt": b"two\n"}
    assert "on " in remote.log("-1", "--format=%s")


def start_rescan_done(machine):
    """The rescan the watcher asks for at start has been committed: what is written from
    now on is the test's burst alone."""
    wait_until(lambda: "the watcher asks for a rescan: it has just started" in
               machine.logtext() and (lambda s: s.get("state") == "idle" and
                                      not s.get("pending") and s.get("rescan") is False)(
                   machine.status()),
               30, what="%s's start-up rescan" % machine.name)


def test_untarred_archive_is_a_few_commits(machines, remote, tmp_path):
    """An untar is one burst: one batch, one commit, unless it lasts longer than maxwait
    (3 s in these tests), or the machine is so loaded that tar pauses longer than the
    batch's patience. The bound is the watcher's own account (its log says why each
    batch closed, and after what pause), not a guess at the machine's speed: one commit
    per batch at most, and a batch of the burst closed on a pause only if that pause was
    at least twice the one that closed the batch before it, or SETTLE_MAX (each split
    doubles the patience: a few splits at most, from 50 ms to 1 s). On a quiet machine:
    1 or 2 commits; 1 to 3 at load 13."""
    src = tmp_path / "src"
    for i in range(2000):
        d = src / ("dir%02d" % (i % 40))
        d.mkdir(parents=True, exist_ok=True)
        (d / ("file%04d.txt" % i)).write_bytes(b"%d\n" % i)
    archive = tmp_path / "files.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(src, arcname="unpacked")
    a = machines("a")
    start_rescan_done(a)
    before = remote.commit_count()
    logged = len(a.logtext())
    subprocess.run(["tar", "-xf", str(archive), "-C", a.path], check=True)
    settle(a, remote, timeout=120)
    names = git("--git-dir", remote.path, "ls-tree", "-r", "-z", "--name-only", "main").split(b"\0")
    assert sum(1 for n in names if n.startswith(b"unpacked/")) == 2000
    assert git("--git-dir", remote.path, "cat-file", "blob",
               "main:unpacked/dir07/file0047.txt") == b"47\n"
    from autosync.watcher.batch import SETTLE_MAX
    closed = re.findall(r"batch closed \((at maxwait|quiet [0-9.]+ s)\): ([0-9]+) changes",
                        a.logtext()[logged:])
    batches = [why for why, count in closed if count != "0"]
    commits = remote.commit_count() - before
    print("untar: %d commits, batches closed: %s" % (commits, batches))
    assert 1 <= commits <= len(batches)
    pauses = [float(why.split()[1]) for why in batches[:-1] if why != "at maxwait"]
    for earlier, later in zip(pauses, pauses[1:]):
        assert later >= min(SETTLE_MAX, 2 * earlier) - 0.005, batches


def test_renamed_folder_is_one_commit_of_renames(machines, remote):
    a = machines("a")
    for i in range(500):
        write(a, "photos/img%03d.jpg" % i, b"picture %d\n" % i)
    settle(a, remote)
    before = remote.commit_count()
    os.rename(os.path.join(a.path, "photos"), os.path.join(a.path, "pictures"))
    settle(a, remote)
    assert remote.commit_count() - before == 1
    status = remote.log("-1", "-M", "--name-status", "--format=")
    renames = [line for line in status.splitlines() if line.startswith("R")]
    assert len(renames) == 500, status[:500]
    assert "moved: pictures/img000.jpg (from photos/img000.jpg)" in remote.log("-1", "--format=%B")


def test_editor_saves_leave_no_temporary_files(machines, remote):
    a = machines("a")
    for name in ("vim.txt", "emacs.txt", "atomic.txt"):
        write(a, name, b"old\n")
    settle(a, remote)
    p = lambda n: os.path.join(a.path, n)
    # vim: probe file, rename the original to a backup, write anew, drop the backup.
    open(p("4913"), "w").close()
    os.unlink(p("4913"))
    open(p(".vim.txt.swp"), "w").write("swap")
    os.rename(p("vim.txt"), p("vim.txt~"))
    write(a, "vim.txt", b"vim new\n")
    os.unlink(p("vim.txt~"))
    os.unlink(p(".vim.txt.swp"))
    # emacs: lock symlink, backup by rename (kept), autosave file removed.
    os.symlink("user@host.123", p(".#emacs.txt"))
    write(a, "#emacs.txt#", b"autosave")
    os.rename(p("emacs.txt"), p("emacs.txt~"))
    write(a, "emacs.txt", b"emacs new\n")
    os.unlink(p("#emacs.txt#"))
    os.unlink(p(".#emacs.txt"))
    # write a temporary file, then rename it over the real one.
    write(a, ".atomic.txt.tmp123", b"atomic new\n")
    os.rename(p(".atomic.txt.tmp123"), p("atomic.txt"))
    settle(a, remote)
    files = remote.files()
    assert files[b"vim.txt"] == b"vim new\n"
    assert files[b"emacs.txt"] == b"emacs new\n"
    assert files[b"atomic.txt"] == b"atomic new\n"
    every_path = remote.log("--all", "--name-only", "--format=")
    for junk in ("4913", "swp", "~", "#", ".tmp123"):
        assert junk not in every_path, junk
    message = remote.log("-1", "--format=%B")
    assert "modified: vim.txt" in message and "modified: atomic.txt" in message


def test_new_folders_are_watched_from_the_first_instant(machines, remote):
    a = machines("a")
    subprocess.run("mkdir -p a/b/c && echo x > a/b/c/f && mkdir -p d/e && echo y > d/e/g",
                   shell=True, cwd=a.path, check=True)
    outside = os.path.join(os.path.dirname(a.path), "outside")
    os.makedirs(os.path.join(outside, "deep"))
    with open(os.path.join(outside, "deep", "h"), "w") as f:
        f.write("moved in\n")
    shutil.move(outside, os.path.join(a.path, "movedin"))
    settle(a, remote)
    files = remote.files()
    assert files[b"a/b/c/f"] == b"x\n" and files[b"d/e/g"] == b"y\n"
    assert files[b"movedin/deep/h"] == b"moved in\n"
    # A folder moved in is watched too.
    write(a, "movedin/deep/later", b"later\n")
    settle(a, remote)
    assert remote.files()[b"movedin/deep/later"] == b"later\n"


def test_killed_watcher_is_restarted_and_misses_nothing(machines, remote):
    a = machines("a")
    watcher = a.children()["watcher"]
    os.kill(watcher, signal.SIGKILL)
    write(a, "while-down.txt", b"written while the watcher was dead\n")
    wait_until(lambda: a.children().get("watcher") not in (None, watcher), 20,
               what="the watcher to be restarted")
    settle(a, remote)
    assert remote.files()[b"while-down.txt"] == b"written while the watcher was dead\n"
    assert "autosync-watcher was killed by signal 9" in a.logtext()


@pytest.mark.parametrize("pulllock", ["conservative", "optimized"])
def test_two_machines_sync_through_the_post_receive_hook(machines, remote, pulllock):
    a, b = machines("a", "b", pulllock=pulllock)
    hook = os.path.join(remote.path, "hooks", "post-receive")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"),
                hook)
    for m in (a, b):
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
    write(a, "from-a.txt", b"hello from a\n")
    wait_until(lambda: b.read("from-a.txt") == b"hello from a\n", 30, what="the file to reach b")
    # b does not commit what the pull brought in as its own change.
    settle(b, remote)
    settle(a, remote)
    mentions = remote.log("--format=%B").count("from-a.txt")
    assert mentions == 1, remote.log("--format=%B")


def test_the_hook_tells_daemons_started_with_a_path_without_our_programs(machines, remote,
                                                                       monkeypatch):
    """A venv install run by a systemd unit (PATH: /usr/bin:/bin) pushing to a local
    remote: the post-receive hook that the daemon's own push runs finds autosync-notify
    (the daemon's commands have its folder at the end of PATH). It did `exit 0` in
    silence, and the other machine never heard of a push."""
    short = "/usr/bin:/bin"
    if shutil.which("autosync-notify", path=short):
        pytest.skip("autosync-notify is installed in /usr/bin here: nothing to find")
    monkeypatch.setenv("PATH", short)
    a, b = machines("a", "b")
    shutil.copy(os.path.join(ROOT, "hooks", "post-receive"),
                os.path.join(remote.path, "hooks", "post-receive"))
    for m in (a, b):
        git("--git-dir", remote.path, "config", "--add", "autosync.config", m.config)
    write(a, "from-a.txt", b"hello from a\n")
    wait_until(lambda: b.read("from-a.txt") == b"hello from a\n", 30,
               what="the file to reach b, told by the hook of a's push")
    # By hand, with that PATH, the hook says why it tells nobody.
    hook = subprocess.run([os.path.join(remote.path, "hooks", "post-receive")],
                          cwd=remote.path, input=b"", stderr=subprocess.PIPE,
                          env=dict(os.environ, GIT_DIR=remote.path))
    assert hook.returncode == 0
    assert b"autosync-notify is not on PATH" in hook.stderr


def test_post_commit_hook_pushes_a_manual_commit_once(machines, remote):
    a = machines("a", start=False)
    hook = os.path.join(a.path, ".git", "hooks", "post-commit")
    shutil.copy(os.path.join(ROOT, "hooks", "post-commit"),
                hook)
    counter = os.path.join(remote.path, "pushes")
    with open(os.path.join(remote.path, "hooks", "post-receive"), "w") as f:
        f.write("#!/bin/sh\necho push >> %s\n" % counter)
    os.chmod(os.path.join(remote.path, "hooks", "post-receive"), 0o755)
    a.start()
    # The daemon's own commit: pushed once, not again by the hook.
    pushes = lambda: open(counter).read().count("push") if os.path.exists(counter) else 0
    start = pushes()
    write(a, "auto.txt", b"auto\n")
    settle(a, remote)
    time.sleep(1.0)
    assert pushes() - start == 1
    # A commit made by hand (the daemon leaves .git alone): pushed by the hook.
    with open(os.path.join(a.path, ".git", "info", "exclude"), "a") as f:
        f.write("manual.txt\n")
    write(a, "manual.txt", b"by hand\n")
    git("add", "-f", "manual.txt", cwd=a.path)
    git("commit", "-q", "-m", "by hand", cwd=a.path)
    wait_until(lambda: remote.files().get(b"manual.txt") == b"by hand\n", 20,
               what="the manual commit to be pushed")
    assert remote.log("-1", "--format=%s") == "by hand\n"


def test_second_instance_is_refused_and_stale_pidfile_replaced(machines, remote):
    a = machines("a")
    second = subprocess.run(["dvcs-autosync", a.config], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=20)
    assert second.returncode == 1
    assert "already running" in second.stderr and str(a.proc.pid) in second.stderr
    pidfile = a.config + ".pid"
    assert open(pidfile).read().strip() == str(a.proc.pid)
    started = time.monotonic()
    assert a.stop() == 0
    assert time.monotonic() - started < 5.0
    assert not os.path.exists(pidfile)
    # A pidfile left by a dead process does not stop the next start.
    with open(pidfile, "w") as f:
        f.write("999999\n")
    a.start()
    assert open(pidfile).read().strip() == str(a.proc.pid)


def test_stop_commits_what_is_pending_and_cleans_up(machines, remote):
    a = machines("a", readfrequency="1", maxwait="5")
    socket_path = a.status() and a.notify("--json", "status").stdout  # daemon answers
    assert socket_path
    write(a, "last.txt", b"written just before stop\n")
    time.sleep(0.3)  # the watcher has it; the batch is not closed yet
    started = time.monotonic()
    a.stop()
    assert time.monotonic() - started < 5.0
    assert git("show", "HEAD:last.txt", cwd=a.path, check=False) == b"written just before stop\n"
    result = a.notify("status", check=False)
    assert result.returncode == 3 and "no autosync daemon" in result.stderr


@pytest.mark.parametrize("content, expected", [
    ("this is not an ini file\n", "line 1"),
    ("[autosync]\nsyncmethod = none\n", "[autosync] path"),
    ("[autosync]\npath = {path}\nsyncmethod = none\nreadfrequency = soon\n",
     "[autosync] readfrequency"),
    ("[autosync]\npath = {path}/missing\nsyncmethod = none\n", "[autosync] path"),
    ("[autosync]\npath = {plain}\nsyncmethod = none\n", "[autosync] path"),
    ("[autosync]\npath = {path}\nsyncmethod = none\n[dvcs]\naddcmd = git add %s %s\n",
     "[dvcs] addcmd"),
    ("[autosync]\npath = {path}\nsyncmethod = bogus\n", "[autosync] syncmethod"),
])
def test_malformed_config_is_one_line_and_touches_nothing(tmp_path, remote, content, expected):
    folder = tmp_path / "clone"
    git("clone", "-q", remote.path, str(folder))
    plain = tmp_path / "plain"
    plain.mkdir()
    config = tmp_path / "bad.autosync"
    config.write_text(content.format(path=folder, plain=plain))
    before = git("status", "--porcelain", "--ignored", cwd=str(folder))
    head = git("rev-parse", "HEAD", cwd=str(folder))
    result = subprocess.run(["dvcs-autosync", str(config)], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert str(config) in result.stderr and expected in result.stderr, result.stderr
    assert not os.path.exists(str(config) + ".pid")
    assert git("status", "--porcelain", "--ignored", cwd=str(folder)) == before
    assert git("rev-parse", "HEAD", cwd=str(folder)) == head


QUEUE_LIMIT = "/proc/sys/fs/inotify/max_queued_events"


@pytest.mark.alone  # every inotify instance made meanwhile, another test's too, gets the small queue
@pytest.mark.skipif(not os.access(QUEUE_LIMIT, os.W_OK), reason="needs root to shrink the queue")
def test_overflowing_kernel_queue_means_rescan_and_nothing_lost(machines, remote):
    old = open(QUEUE_LIMIT).read()
    with open(QUEUE_LIMIT, "w") as f:
        f.write("32\n")  # taken by each inotify instance when it is made
    try:
        a = machines("a")
    finally:
        with open(QUEUE_LIMIT, "w") as f:
            f.write(old)
    watcher = a.children()["watcher"]
    os.kill(watcher, signal.SIGSTOP)  # a reader that falls behind
    try:
        for i in range(300):
            write(a, "flood%03d.txt" % i, b"%d\n" % i)  # in a watched folder
    finally:
        os.kill(watcher, signal.SIGCONT)
    settle(a, remote)
    files = remote.files()
    assert sum(1 for n in files if n.startswith(b"flood")) == 300
    assert "overflowed" in a.logtext()


def test_pulled_event_says_what_came_from_where(machines, remote):
    from autosync.core.config import load
    from autosync.core.protocol import connect
    a = machines("a", hostname="laptop")
    b = machines("b")
    events = connect(load(b.config).socket)
    assert events.request({"cmd": "subscribe"})["ok"]
    write(a, "news.txt", b"news\n")
    settle(a, remote)
    b.notify("pull")
    for event in events.events():
        if event["event"] == "pulled" and event.get("changed"):
            break
    assert event["files"] == ["news.txt"] and event["count"] == 1
    assert event["hosts"] == ["laptop"]
    assert remote.log("-1", "--format=%s").startswith("autosync on laptop: 1 added")
    events.close()
