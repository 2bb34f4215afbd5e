"""The watcher on a real folder: what reaches the committer, what it watches."""
import os
import select
import shutil
import signal
import time
from types import SimpleNamespace

import pytest

from autosync.fs import guarded
from autosync.watcher.watcher import Watcher
from base import git, wait_until
from helpers import watches_of


def test_a_folders_own_times_change_no_file(machines, remote):
    """tar sets its folders' times at the end: that is no modification of what they hold."""
    from helpers import settle, write
    a = machines("a")
    for i in range(3):
        write(a, "x/f%d" % i, b"%d\n" % i)
    settle(a, remote)
    os.utime(os.path.join(a.path, "x"), (1, 1))
    write(a, "y", b"y\n")
    settle(a, remote)
    assert remote.log("-1", "--format=%s").endswith(": 1 added\n")


def settle_watches(watcher):
    """Read and handle events (pyinotify's made-up ones too) until 0.2 s bring none.

    Watching through a link to /usr takes minutes: an alarm ends that."""
    def too_long(*_):
        raise AssertionError("still adding watches after 20 s: %d" % len(watcher.inotify))
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        watcher.drain()
        while select.select([watcher.inotify], [], [], 0.2)[0]:
            watcher.drain()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def watcher(tmp_path):
    root = tmp_path / "sync"
    root.mkdir()
    w = Watcher(SimpleNamespace(path=str(root), ignorepath=[], pulllock="conservative",
                                readfrequency=0.2, maxwait=3))
    w.start_watching()
    yield w
    w.inotify.wm.close()


def test_symlinks_are_entries_never_followed(watcher):
    """A folder unpacked with a link to /usr and a link loop: the links are files to us."""
    root = watcher.root
    os.makedirs(os.path.join(root, "unpacked", "deep"))  # in a blink, as tar does
    os.symlink("/usr", os.path.join(root, "unpacked", "deep", "usr"))
    os.symlink("..", os.path.join(root, "unpacked", "loop"))
    os.symlink("/usr", os.path.join(root, "usr-link"))
    settle_watches(watcher)
    assert sorted(watcher.inotify.watched()) == [
        root, os.path.join(root, "unpacked"), os.path.join(root, "unpacked", "deep")]
    changes = watcher.batch.close(root, watcher.tree, watcher.ignore)
    assert sorted((c["action"], c["path"]) for c in changes) == [
        ("added", "unpacked/deep/usr"), ("added", "unpacked/loop"), ("added", "usr-link")]
    # A scan of the tree stops at links too.
    assert sorted(watcher.tree.scan(root, "", watcher.ignore)) == [
        "unpacked/deep/usr", "unpacked/loop", "usr-link"]
    assert watcher.tree.scan(root, "usr-link", watcher.ignore) == []


def test_moves_into_and_out_of_editor_junk_name_only_the_real_file(watcher):
    """A file swapped with a temporary `~` name (a guarded write, an editor's backup)
    is a change of that file; the junk name itself is never sent."""
    root = watcher.root
    for name in ("a.txt", "b.txt~"):
        with open(os.path.join(root, name), "w") as f:
            f.write(name)
    settle_watches(watcher)
    watcher.batch.close(root, watcher.tree, watcher.ignore)
    os.rename(os.path.join(root, "a.txt"), os.path.join(root, ".a.txt.1~"))  # into junk
    os.rename(os.path.join(root, "b.txt~"), os.path.join(root, "b.txt"))  # out of junk
    settle_watches(watcher)
    changes = watcher.batch.close(root, watcher.tree, watcher.ignore)
    assert sorted((c["action"], c["path"]) for c in changes) == [
        ("added", "b.txt"), ("removed", "a.txt")]
    # The guarded writer's swap: both names move at once (renameat2 RENAME_EXCHANGE).
    with open(os.path.join(root, ".autosync-write.1.1~"), "w") as f:
        f.write("pulled")
    settle_watches(watcher)
    watcher.batch.close(root, watcher.tree, watcher.ignore)
    guarded.rename(guarded.AT_FDCWD, os.path.join(root, ".autosync-write.1.1~"),
                   guarded.AT_FDCWD, os.path.join(root, "b.txt"), guarded.RENAME_EXCHANGE)
    settle_watches(watcher)
    changes = watcher.batch.close(root, watcher.tree, watcher.ignore)
    assert [(c["action"], c["path"]) for c in changes] == [("modified", "b.txt")]


def test_symlinks_are_committed_as_links(machines, remote):
    """The real suite: links to /usr and a loop are synced as links (mode 120000), quickly."""
    from helpers import settle, write
    a = machines("a")
    write(a, "unpacked/deep/file.txt", b"x\n")
    os.symlink("/usr", os.path.join(a.path, "unpacked", "deep", "usr"))
    os.symlink("..", os.path.join(a.path, "unpacked", "loop"))
    settle(a, remote, timeout=20)
    listing = git("--git-dir", remote.path, "ls-tree", "-r", "main").decode()
    assert "120000 blob" in listing and "\tunpacked/deep/usr\n" in listing
    links = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert links["unpacked/deep/usr"] == links["unpacked/loop"] == "120000"
    assert remote.files()[b"unpacked/deep/usr"] == b"/usr"
    assert watches_of(a.children()["watcher"]) == 3  # the folder, unpacked, deep
    assert "cannot watch" not in a.logtext() and "Traceback" not in a.logtext()


def write_slowly(path, chunks, pause, during=None):
    """One writer holding the file open: a chunk every `pause` seconds."""
    with open(path, "wb") as f:
        for i, chunk in enumerate(chunks):
            f.write(chunk)
            f.flush()
            if during is not None and i == 1:
                during()
            time.sleep(pause)


def history_of(remote, name):
    """Every content `name` had in the remote's history, oldest first."""
    revs = remote.log("--format=%H", "--reverse", "--", name).split()
    return [git("--git-dir", remote.path, "cat-file", "blob", "%s:%s" % (rev, name))
            for rev in revs]


def test_a_file_open_for_writing_is_committed_once_closed(machines, remote):
    """Shipped defaults: 2.4 s of writing (maxwait 3 in these tests) is one commit, whole."""
    from helpers import settle
    a = machines("a")
    settle(a, remote)  # the start-up rescan takes what is on disk, open or not
    chunks = [b"part %d\n" % i for i in range(6)]
    write_slowly(os.path.join(a.path, "slow.log"), chunks, 0.4)
    settle(a, remote)
    assert history_of(remote, "slow.log") == [b"".join(chunks)]


def test_a_file_open_for_writing_is_not_committed_by_the_rescan_after_a_pull(machines, remote):
    """Another machine pushes while the file is written; this one pulls meanwhile.
    The rescan after that pull must not commit the half-written file."""
    from helpers import settle, write
    a, b = machines("a", "b")
    chunks = [b"part %d\n" % i for i in range(6)]

    def other_machine_pushes():
        write(b, "from-b.txt", b"b\n")
        settle(b, remote)
        a.notify("pull")
        wait_until(lambda: os.path.exists(os.path.join(a.path, "from-b.txt")), 20,
                   what="a to pull")
    write_slowly(os.path.join(a.path, "slow.log"), chunks, 0.3, during=other_machine_pushes)
    settle(a, remote)
    assert history_of(remote, "slow.log") == [b"".join(chunks)]


@pytest.mark.parametrize("pulllock", ["conservative", "optimized"])
def test_a_file_opened_during_a_pull_waits_in_the_open_batch(watcher, pulllock):
    """Written during the pull and still open at its end: neither the rescan nor
    the replay takes it before its writer closes it."""
    from autosync.watcher.batch import Batch
    watcher.cfg.pulllock = pulllock
    sent = []
    watcher.send = lambda changes, rescan=False: sent.append((changes, rescan))
    with open(os.path.join(watcher.root, "pulled.txt"), "w") as f:
        f.write("from the pull\n")
    with open(os.path.join(watcher.root, "local.txt"), "w") as f:
        f.write("half")
        watcher.pull_batch = Batch()
        watcher.pull_batch.touch("pulled.txt")
        watcher.pull_batch.touch("local.txt")
        watcher.pull_batch.written("local.txt")
        watcher.on_committer_event({"event": "pull-finished"})
    assert watcher.batch.writing == {"local.txt"}
    if pulllock == "optimized":
        assert sent == [([{"action": "added", "path": "pulled.txt"}], False)]
    else:
        assert sent == [] and watcher.batch.rescan


def test_a_file_closed_while_a_pull_runs_is_closed_in_the_open_batch_too(watcher):
    """A file written before a pull (the open batch waits for its close, or carries it:
    a log) closed while the pull runs: the close, which goes to the pull's batch, is the
    open batch's too. Else the open batch waited for it for ever (closed at maxwait,
    and then every maxwait, with a change of a file that did not change)."""
    from autosync.watcher.batch import Batch
    with open(os.path.join(watcher.root, "app.log"), "w") as log, \
            open(os.path.join(watcher.root, "other.log"), "w") as other:
        for f in (log, other):
            f.write("a line\n")
            f.flush()
        settle_watches(watcher)
        watcher.batch.carried["other.log"] = 10 ** 9  # carried from the batch before
        assert watcher.batch.writing == {"app.log", "other.log"}
        watcher.pull_batch = Batch()
    settle_watches(watcher)
    assert watcher.batch.writing == set() and watcher.batch.carried == {}
    assert watcher.batch.due(watcher.batch.last, 0.2, 3) == pytest.approx(0.2)


def test_the_rescan_after_a_pull_says_why(watcher):
    """The empty batch after a pull is told apart from a start or a restarted committer:
    its reason is "drained" (protocol.RESCANS)."""
    from autosync.watcher.batch import Batch
    watcher.cfg.pulllock = "conservative"
    sent = []
    watcher.request = lambda message: sent.append(message) or {"ok": True}
    watcher.pull_batch = Batch()
    watcher.on_committer_event({"event": "pull-finished"})
    assert sent == [{"cmd": "batch", "changes": [], "rescan": True, "reason": "drained"}]


def test_after_the_own_guarded_pull_the_paths_it_touched_are_sent_not_a_rescan(watcher):
    """conservative, after vcs/pull/git.py's pull (pull-finished says guarded): the pull
    batch's paths (the pull's writes and a local edit made meanwhile) are sent as a
    batch; a file still open waits in the open batch. No rescan of the whole folder
    (issue 21): it is asked for only after any other pullcmd, or when the pull touched
    a .gitignore."""
    from autosync.watcher.batch import Batch
    sent = []
    watcher.send = lambda changes, rescan=False: sent.append((changes, rescan))
    for name in ("pulled.txt", "local.txt"):
        with open(os.path.join(watcher.root, name), "w") as f:
            f.write(name)
    with open(os.path.join(watcher.root, "open.txt"), "w") as f:
        f.write("half")
        watcher.pull_batch = Batch()
        for name in ("pulled.txt", "local.txt", "open.txt"):
            watcher.pull_batch.touch(name)
        watcher.pull_batch.written("open.txt")
        watcher.on_committer_event({"event": "pull-finished", "ok": True, "guarded": True})
    assert [(sorted(changes, key=lambda c: c["path"]), rescan) for changes, rescan in sent] \
        == [([{"action": "added", "path": "local.txt"},
              {"action": "added", "path": "pulled.txt"}], False)]
    assert watcher.batch.writing == {"open.txt"} and not watcher.batch.rescan


def sent_after_a_pull_of(watcher, rel, content, event):
    """What the watcher sends when a pull (finished by `event`) wrote `rel`."""
    from autosync.watcher.batch import Batch
    sent = []
    watcher.send = lambda changes, rescan=False: sent.append((changes, rescan))
    with open(os.path.join(watcher.root, rel), "w") as f:
        f.write(content)
    watcher.pull_batch = Batch()
    watcher.pull_batch.touch(rel)
    watcher.on_committer_event(event)
    return sent


@pytest.mark.parametrize("event", [{"event": "pull-finished", "ok": True},
                                   {"event": "pull-finished", "ok": True, "guarded": False}])
def test_after_a_pullcmd_of_the_users_the_folder_is_rescanned(watcher, event):
    assert sent_after_a_pull_of(watcher, "pulled.txt", "pulled", event) == [([], "drained")]


def test_a_pulled_gitignore_still_asks_for_a_rescan(watcher):
    """A .gitignore the pull changed may un-ignore files that no event names."""
    event = {"event": "pull-finished", "ok": True, "guarded": True}
    assert sent_after_a_pull_of(watcher, ".gitignore", "*.o\n", event) == [([], "drained")]


# --- the synced folder itself moved, replaced, taken away (issue 18, item 2) -------------

RAW = ("-unknown-path", "<Watch wd=", "pyinotify")


def away(machine):
    """The committer's status says the folder is away (the watcher told it): the problem;
    None when an answer says it is watched; False while the daemon does not answer."""
    status = machine.status()
    return status.get("folder") if status else False


def test_the_folder_moved_away_and_back_syncs_on_without_a_restart(machines, remote):
    from helpers import settle, write
    a = machines("a")
    watcher = a.children()["watcher"]
    os.rename(a.path, a.path + ".x")
    problem = wait_until(lambda: away(a), 10, what="status to say the folder is away")
    assert "gone" in problem and a.path in problem
    status = a.status()
    assert status["headline"].startswith("NOT syncing: folder: " + problem)
    assert "folder" in status["failing"]
    with open(a.path + ".x/while-away.txt", "wb") as f:  # changed while away
        f.write(b"x\n")
    os.rename(a.path + ".x", a.path)
    wait_until(lambda: away(a) is None, 10, what="the folder to be watched again")
    assert "folder" not in a.status()["failing"]
    write(a, "after.txt", b"after\n")
    settle(a, remote)
    files = remote.files()
    assert files[b"after.txt"] == b"after\n"
    assert files[b"while-away.txt"] == b"x\n"  # found by the rescan on return
    assert a.children()["watcher"] == watcher  # no restart
    assert not any(raw in a.logtext() for raw in RAW)


def test_a_fresh_clone_in_its_place_syncs_on_without_a_restart(machines, remote):
    from helpers import settle, write
    a = machines("a")
    write(a, "before.txt", b"before\n")
    settle(a, remote)
    watcher = a.children()["watcher"]
    # Held open, the old folder keeps its inode number: the clone cannot get it again
    # (a reused one would look like our own folder come back, and say nothing).
    old = os.open(a.path, os.O_RDONLY)
    shutil.rmtree(a.path)
    wait_until(lambda: away(a), 10, what="status to say the folder is away")
    git("clone", "-q", remote.path, a.path)
    wait_until(lambda: away(a) is None, 20, what="the clone to be taken on")
    os.close(old)
    write(a, "after.txt", b"after\n")
    settle(a, remote)
    assert remote.files()[b"after.txt"] == b"after\n"
    assert b"before.txt" in remote.files()  # nothing was committed as removed
    assert a.children()["watcher"] == watcher
    assert "is another clone of" in a.logtext()
    assert not any(raw in a.logtext() for raw in RAW)


def test_a_folder_replaced_by_another_repository_stops_the_daemon(machines, remote, tmp_path):
    from helpers import settle
    a = machines("a")
    settle(a, remote)
    shutil.rmtree(a.path)
    git("init", "-q", a.path)  # a repository, but not a clone of the remote
    with open(os.path.join(a.path, "other.txt"), "w") as f:
        f.write("other\n")
    assert a.proc.wait(30) == 78
    lines = [l for l in a.logtext().splitlines() if "was replaced by another folder" in l]
    assert len(lines) == 1 and "not a clone of %s" % remote.path in lines[0]
    assert "start dvcs-autosync again" in lines[0]
    assert "Traceback" not in a.logtext() and "restarting" not in a.logtext()
    assert not os.path.exists(os.path.join(a.path, ".git", "refs", "heads", "master")) \
        and not os.path.exists(os.path.join(a.path, ".git", "refs", "heads", "main"))  # no commit


# --- what is committed is what the writer meant (issue 18, item 7) ------------------------

def test_a_file_created_and_held_open_is_never_committed_empty(machines, remote):
    from helpers import settle
    a = machines("a")
    settle(a, remote)  # the start-up rescan takes what is on disk, open or not
    with open(os.path.join(a.path, "download.part"), "wb") as f:
        time.sleep(2)  # the creator connects, then writes
        f.write(b"the content\n")
    settle(a, remote)
    assert history_of(remote, "download.part") == [b"the content\n"]


def test_a_file_written_for_long_is_one_version(machines, remote):
    """The issue's 300 MB over 60 s with maxwait 10, scaled down: 6 MB over 12 s with
    maxwait 2, six maxwaits of writing. The watcher hands the open file over at each
    maxwait; the committer leaves it out while it is open (issue 32: 3 versions before,
    one every maxwait before that): one version, the whole file, at its close."""
    from helpers import settle
    a = machines("a", maxwait="2")
    settle(a, remote)  # the start-up rescan takes what is on disk, open or not
    chunks = [bytes([65 + i % 26]) * 100_000 for i in range(60)]
    write_slowly(os.path.join(a.path, "big.iso"), chunks, 0.2)
    settle(a, remote)
    versions = history_of(remote, "big.iso")
    assert versions == [b"".join(chunks)], [len(v) for v in versions]
    assert a.logtext().count("left out of the commit while open for writing") >= 1


def test_a_file_held_open_empty_holds_nothing_else_back(machines, remote):
    """A lock file an application keeps open, empty, for its whole life: other changes
    are committed as usual (not at maxwait), the lock file once its writer closes it."""
    from helpers import settle, write
    a = machines("a", maxwait="30")
    settle(a, remote)  # the start-up rescan takes what is on disk, open or not
    with open(os.path.join(a.path, "app.lock"), "wb"):
        time.sleep(0.2)
        started = time.monotonic()
        write(a, "notes.txt", b"notes\n")
        wait_until(lambda: b"notes.txt" in remote.files(), 20, what="notes.txt pushed")
        assert time.monotonic() - started < 10  # not held back until maxwait (30 s)
        assert b"app.lock" not in remote.files()
    wait_until(lambda: b"app.lock" in remote.files(), 20, what="the closed lock file")


def test_a_log_written_for_long_holds_no_save_back_after_its_first_maxwait(machines, remote):
    """A home folder has logs some program appends to for hours. The batch the log's
    first writes open waits for its close up to maxwait, once; the batches after it carry
    it: a save beside it closes its batch when done, not at maxwait (each did, for as long
    as the log was open). The log itself: one version, the whole one, at its close."""
    from helpers import Writer, settle, write
    a = machines("a", maxwait="5")
    settle(a, remote)

    def at_maxwait(text):
        return text.count("batch closed (at maxwait)")
    log = Writer(os.path.join(a.path, "app.log"))
    try:
        log.write(b"started\n")
        wait_until(lambda: at_maxwait(a.logtext()) == 1, 30, what="the log's first batch")
        mark = len(a.logtext())
        write(a, "notes.txt", b"notes\n")
        log.write(b"one more line\n")  # the log goes on beside the save
        wait_until(lambda: b"notes.txt" in remote.files(), 30, what="notes.txt pushed")
        assert at_maxwait(a.logtext()[mark:]) == 0  # its batch did not wait for the log
        assert b"app.log" not in remote.files()  # still open: no version yet
    finally:
        log.close()
    settle(a, remote)
    assert history_of(remote, "app.log") == [b"started\none more line\n"]


def test_a_link_pointed_at_another_clone_is_noticed_by_its_identity(machines, remote, tmp_path):
    """The synced folder is a symbolic link; pointed elsewhere, no inotify event says so
    (as with a disk mounted over the folder): the look at its identity does. The other
    clone is taken on, with its own git dir."""
    from helpers import settle
    link = str(tmp_path / "Sync")
    a = machines("a", start=False, path=link)
    os.symlink(a.path, link)
    a.start()
    settle(a, remote)
    other = str(tmp_path / "other-clone")
    git("clone", "-q", remote.path, other)
    os.symlink(other, link + ".new")
    os.replace(link + ".new", link)
    wait_until(lambda: "is back: watching it again" in a.logtext(), 20,
               what="the identity look to see the folder replaced, then the clone taken on")
    assert "is another clone of %s" % remote.path in a.logtext()
    with open(os.path.join(other, "in-the-other.txt"), "wb") as f:
        f.write(b"other\n")
    wait_until(lambda: remote.files().get(b"in-the-other.txt") == b"other\n", 30,
               what="the other clone's file pushed")
    assert git("rev-parse", "HEAD", cwd=other) == git("--git-dir", remote.path, "rev-parse", "main")
