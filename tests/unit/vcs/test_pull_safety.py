"""The guarded pull keeps every rule git keeps when it writes a working tree (issue 31):
paths git refuses are refused whole and nothing of them is written or run; a version
that could not be written is never claimed by HEAD or the index; gitlinks stay; any
byte a name can hold crosses git's pipes; contents are streamed. Real git repositories
(a bare remote, two clones); the planted trees are made with `git mktree`, as an
attacker who can push would make them."""
import os
import subprocess

import pytest

from autosync.vcs.pull import git as gitpull
from base import git
from repos import commit, head, plant, pull, small_tmpfs, state, status, two, write  # noqa: F401


def index_of(folder):
    return git("ls-files", "-s", "-z", cwd=folder)


# --- 1. every path rule git keeps ---------------------------------------------------

def test_a_planted_hook_is_never_written_and_never_run(two, tmp_path):
    """A tree holding .git/hooks/post-merge (and post-commit): refused whole in one line,
    nothing of it written (not even its harmless file), HEAD and the index unmoved."""
    remote, a, b = two
    proof = tmp_path / "ran"
    hook = b"#!/bin/sh\ntouch %s\n" % os.fsencode(str(proof))
    plant(a, [("100755", ".git/hooks/post-merge", hook),
              ("100755", ".git/hooks/post-commit", hook),
              ("100644", "harmless.txt", b"innocent\n")])
    before, index = head(b), index_of(b)
    with pytest.raises(gitpull.Unsafe) as refused:
        pull(b)
    assert "\n" not in str(refused.value) and ".git/hooks/post-merge" in str(refused.value)
    assert not os.path.exists(os.path.join(b, ".git", "hooks", "post-merge"))
    assert not os.path.exists(os.path.join(b, ".git", "hooks", "post-commit"))
    assert not os.path.exists(os.path.join(b, "harmless.txt"))
    assert head(b) == before and index_of(b) == index
    git("commit", "-q", "--allow-empty", "-m", "a commit runs post-commit", cwd=b)
    assert not proof.exists()


@pytest.mark.parametrize("path", [".GIT/hooks/post-merge", ".Git/config", "d/.git/hooks/x",
                                  "git~1/hooks/post-merge", ".git. /hooks/post-merge",
                                  "../outside.txt", "d/../../outside.txt"])
def test_every_spelling_of_dot_git_and_dot_dot_is_refused(two, path):
    remote, a, b = two
    plant(a, [("100755", path, b"#!/bin/sh\nexit 0\n")])
    before = head(b)
    with pytest.raises(gitpull.Unsafe):
        pull(b)
    assert head(b) == before
    assert git("status", "--porcelain", "--untracked-files=all", "--ignored", cwd=b) == b""


def test_a_hook_the_pull_wrote_through_hookspath_is_not_run(two, tmp_path):
    """core.hooksPath pointing into the working tree: a post-merge that arrives with the
    pull is a file the pull wrote, so it does not run (git pull would run it)."""
    remote, a, b = two
    git("config", "core.hooksPath", "hooks", cwd=b)
    proof = tmp_path / "ran"
    os.mkdir(os.path.join(a, "hooks"))
    write(a, "hooks/post-merge", b"#!/bin/sh\ntouch %s\n" % os.fsencode(str(proof)))
    os.chmod(os.path.join(a, "hooks", "post-merge"), 0o755)
    commit(a, "a hook in the folder")
    pull(b)
    assert os.path.exists(os.path.join(b, "hooks", "post-merge")) and not proof.exists()


def test_a_hook_that_was_there_before_still_runs(two, tmp_path):
    remote, a, b = two
    proof = tmp_path / "ran"
    hook = os.path.join(b, ".git", "hooks", "post-merge")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\ntouch '%s'\n" % proof)
    os.chmod(hook, 0o755)
    write(a, "z.txt", b"second\n")
    commit(a, "autosync on a: z")
    pull(b)
    assert proof.exists()


# --- 2. a pull never claims what it did not write ------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """b's working tree on a 4 MB tmpfs (its .git on the ordinary disk)."""
    yield from small_tmpfs(tmp_path, "4m")


def test_a_full_disk_moves_nothing_and_the_pull_completes_once_space_is_freed(
        two, small_disk, tmp_path):
    remote, a, b = two
    tree = str(small_disk / "b")
    git("clone", "-q", "--separate-git-dir", str(tmp_path / "b.git"), remote.path, tree)
    filler = small_disk / "filler"
    write(a, "z.txt", b"edited on a\n")
    os.unlink(os.path.join(a, "d", "y.txt"))
    write(a, "big.bin", os.urandom(3 << 20))
    write(a, "small.txt", b"new on a\n")
    commit(a, "autosync on a: edited z.txt, removed d/y.txt, added big.bin, small.txt")
    free = os.statvfs(tree).f_bavail * os.statvfs(tree).f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * (free - (1 << 20)))   # 1 MB left: big.bin cannot be written
    before, index = head(tree), index_of(tree)
    with pytest.raises(gitpull.Unwritten) as failed:
        pull(tree)
    assert "No space left on device" in str(failed.value)
    assert head(tree) == before and index_of(tree) == index
    # Nothing changed on disk: no half-written file, no temporary one, no removal.
    assert sorted(os.listdir(tree)) == [".git", "README", "d", "z.txt"]
    assert open(os.path.join(tree, "z.txt"), "rb").read() == b"first\n"
    assert os.path.exists(os.path.join(tree, "d", "y.txt"))
    # What a commit of this machine would record now: nothing (no revert of a's edits).
    assert git("status", "--porcelain", "--untracked-files=all", cwd=tree) == b""
    os.unlink(filler)
    pull(tree)
    assert git("rev-parse", "HEAD", cwd=tree) == git("rev-parse", "HEAD", cwd=a)
    assert open(os.path.join(tree, "z.txt"), "rb").read() == b"edited on a\n"
    assert git("status", "--porcelain", "--untracked-files=all", cwd=tree) == b""


def test_a_file_where_the_pull_needs_a_folder_is_not_claimed_then_merged_keeping_both(two):
    """b has a new file x, not committed yet; a pushes x/a. The pull cannot make the
    folder: nothing is claimed. Once b commits x, the pull is a merge that keeps both."""
    remote, a, b = two
    write(b, "x", b"b's own x\n")
    os.mkdir(os.path.join(a, "x"))
    write(a, "x/a", b"a's x/a\n")
    commit(a, "autosync on a: added x/a")
    before = head(b)
    with pytest.raises(gitpull.Unwritten) as failed:
        pull(b)
    assert "x/a" in str(failed.value) and "\n" not in str(failed.value)
    assert head(b) == before and open(os.path.join(b, "x"), "rb").read() == b"b's own x\n"
    git("add", "-A", cwd=b)  # what b's committer does with its new file
    git("commit", "-q", "-m", "autosync on b: added x", cwd=b)
    pull(b)
    files = git("ls-tree", "-r", "--name-only", "HEAD", cwd=b).decode().split("\n")
    assert "x/a" in files
    contents = {git("cat-file", "blob", "HEAD:" + f, cwd=b) for f in files if f}
    assert b"b's own x\n" in contents and b"a's x/a\n" in contents
    git("add", "-A", cwd=b)
    assert git("diff", "--cached", "--name-status", "HEAD", cwd=b) == b""  # nothing undone


# --- pulled renames (issue 32) ---------------------------------------------------------

def test_a_pulled_rename_moves_the_file_and_an_edit_here_keeps_both(two):
    """A folder whose files all moved is renamed whole (its inode stays); a renamed file
    changed here is not moved: the edit keeps the old name, the new name gets the
    pulled version."""
    remote, a, b = two
    write(a, "single.txt", b"single\n")
    commit(a, "autosync on a: added single.txt")
    pull(b)
    inode = os.stat(os.path.join(b, "d")).st_ino
    write(b, "single.txt", b"single, edited on b\n")   # not committed yet
    os.rename(os.path.join(a, "d"), os.path.join(a, "e"))
    os.rename(os.path.join(a, "single.txt"), os.path.join(a, "renamed.txt"))
    commit(a, "autosync on a: moved d to e, single.txt to renamed.txt")
    result = pull(b)
    assert os.stat(os.path.join(b, "e")).st_ino == inode and not os.path.exists(
        os.path.join(b, "d"))
    assert open(os.path.join(b, "e", "y.txt"), "rb").read() == b"y\n"
    assert open(os.path.join(b, "renamed.txt"), "rb").read() == b"single\n"
    assert open(os.path.join(b, "single.txt"), "rb").read() == b"single, edited on b\n"
    assert result["kept"] == ["single.txt"]
    git("add", "-A", cwd=b)   # what b commits next: its edit, nothing undone
    assert git("diff", "--cached", "--name-status", "HEAD", cwd=b) == b"A\tsingle.txt\n"


# --- 3. submodules --------------------------------------------------------------------

def test_a_pulled_submodule_survives_the_next_commit(two):
    remote, a, b = two
    sub = git("rev-parse", "HEAD", cwd=a).decode().strip()  # any commit id will do
    plant(a, [("160000", "nested", sub)])
    pull(b)
    assert ("160000 %s 0\tnested" % sub).encode() in index_of(b).replace(b"\0", b"\n")
    assert os.path.isdir(os.path.join(b, "nested"))  # as git pull leaves it: empty
    write(b, "z.txt", b"changed on b\n")
    git("add", "-A", cwd=b)  # the startupcmd's and the rescan's way
    git("commit", "-q", "-m", "autosync on b: modified z.txt", cwd=b)
    assert git("ls-tree", "HEAD", "nested", cwd=b).split()[:3] == \
        [b"160000", b"commit", sub.encode()]


# --- 4. any byte a name can hold --------------------------------------------------------

NAMES = ['"report.txt"', "new\nline.txt", "tab\there.txt", "back\\slash.txt",
         os.fsdecode(b"latin-\xe9.txt"), " lead and trail ", "-dash.txt"]


def test_names_with_quotes_newlines_tabs_backslashes_are_pulled_changed_and_removed(two):
    remote, a, b = two
    write(a, "report.txt", b"the real report\n")
    for i, name in enumerate(NAMES):
        write(a, name, b"version 1 of %d\n" % i)
    commit(a, "autosync on a: odd names")
    pull(b)
    for i, name in enumerate(NAMES):
        assert open(os.path.join(b, name), "rb").read() == b"version 1 of %d\n" % i
    assert open(os.path.join(b, "report.txt"), "rb").read() == b"the real report\n"
    assert git("status", "--porcelain", "-z", "--untracked-files=all", cwd=b) == b""
    for i, name in enumerate(NAMES):
        if i % 2:
            os.unlink(os.path.join(a, name))
        else:
            write(a, name, b"version 2 of %d\n" % i)
    commit(a, "autosync on a: odd names changed and removed")
    pull(b)
    for i, name in enumerate(NAMES):
        there = os.path.join(b, name)
        if i % 2:
            assert not os.path.lexists(there)
        else:
            assert open(there, "rb").read() == b"version 2 of %d\n" % i
    assert open(os.path.join(b, "report.txt"), "rb").read() == b"the real report\n"
    assert git("status", "--porcelain", "-z", "--untracked-files=all", cwd=b) == b""


# --- 5. the journal cannot be turned against the user ---------------------------------

def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_crafted_journal_entry_changes_nothing_outside_the_folder(tmp_path, state):
    from autosync.vcs import recovery
    root = tmp_path / "synced"
    (root / "d").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    key = outside / "id_ed25519"
    key.write_bytes(b"PRIVATE KEY\n")
    victim = outside / ".autosync-write.1.1~"
    victim.write_bytes(b"someone's file\n")
    (root / "link").symlink_to(outside)
    pid = dead_pid()
    crafted = [
        (root / "d" / ".." / ".." / "outside" / ".autosync-write.1.1~", root / "d" / "x"),
        (outside / ".autosync-write.1.1~", outside / "id_ed25519"),
        (root / "d" / ".autosync-write.1.1~", outside / "id_ed25519"),
        (root / "link" / ".autosync-write.1.1~", root / "link" / "id_ed25519"),
        (root / "d" / "id_ed25519", root / "d" / "x"),
    ]
    for n, (temp, path) in enumerate(crafted):
        (state / ("%d.%d" % (pid, n))).write_bytes(
            os.fsencode(str(temp)) + b"\0" + os.fsencode(str(path)) + b"\0\0")
    (state / ("%d.99.plan" % pid)).write_bytes(os.fsencode(str(victim)) + b"\0")
    assert recovery.leftover_writes(str(root), lambda t, p: False, lambda p: p + " (kept)") == []
    assert key.read_bytes() == b"PRIVATE KEY\n" and victim.read_bytes() == b"someone's file\n"
    assert sorted(os.listdir(outside)) == [".autosync-write.1.1~", "id_ed25519"]
    assert sorted(os.listdir(root / "d")) == []


def test_a_journal_folder_others_can_write_is_not_followed(tmp_path, state, caplog):
    from autosync.vcs import recovery
    root = tmp_path / "synced"
    root.mkdir()
    temp = root / ".autosync-write.1.1~"
    temp.write_bytes(b"bytes\n")
    (state / ("%d.0" % dead_pid())).write_bytes(
        os.fsencode(str(temp)) + b"\0" + os.fsencode(str(root / "a")) + b"\0\0")
    state.chmod(0o777)
    assert recovery.leftover_writes(str(root), None, lambda p: p + " (kept)") == []
    assert temp.exists() and not (root / "a (kept)").exists()
    assert "not a private folder" in caplog.text


# --- 6. lean: contents streamed ---------------------------------------------------------

# --- a tree git's own tools never write, which git checks out all the same --------------

def raw_tree(folder, entries):
    """A tree object with `entries` [(mode, name, oid)] as given: one name twice, a file
    and a folder of one name (what `git mktree` refuses to make)."""
    data = b"".join(b"%s %s\0" % (m.encode(), n.encode()) + bytes.fromhex(o)
                    for m, n, o in entries)
    return subprocess.run(["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
                          cwd=folder, input=data, stdout=subprocess.PIPE, check=True
                          ).stdout.decode().strip()


def blob(folder, data):
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=folder, input=data,
                          stdout=subprocess.PIPE, check=True).stdout.decode().strip()


def files(folder):
    found = {}
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            full = os.path.join(root, name)
            found[os.path.relpath(full, folder)] = open(full, "rb").read()
    return found


def test_a_tree_holding_a_name_twice_is_checked_out_as_git_does(two, tmp_path, monkeypatch):
    """`git clone` checks out a tree with two entries `a` (the later one) and with a file
    `x` beside a folder `x` (the folder), where the guarded pull refused it whole and the
    machine could then neither pull nor push. b writes what git's clone writes, keeps
    the version git leaves out as a conflict copy (a commit of its own on top, pushed),
    and a second machine settling the same commit makes the very same tree."""
    remote, a, b = two
    readme = git("rev-parse", "HEAD:README", cwd=a).decode().strip()
    sub = raw_tree(a, [("100644", "y", blob(a, b"in the folder\n"))])
    d = raw_tree(a, [("100644", "k", blob(a, b"k first\n")), ("100644", "k", blob(a, b"k last\n"))])
    tree = raw_tree(a, [("100644", "README", readme),
                        ("100644", "a", blob(a, b"a first\n")), ("100644", "a", blob(a, b"a last\n")),
                        ("040000", "d", d),
                        ("100644", "x", blob(a, b"the file x\n")), ("040000", "x", sub)])
    odd = git("commit-tree", tree, "-p", "HEAD", "-m", "autosync on a: odd", cwd=a).decode().strip()
    git("push", "-q", "origin", odd + ":main", cwd=a)
    clone = str(tmp_path / "clone")
    git("clone", "-q", remote.path, clone)   # git's own checkout of it
    theirs = files(clone)
    assert theirs["a"] == b"a last\n" and theirs["x/y"] == b"in the folder\n"
    other = str(tmp_path / "other")
    git("clone", "-q", "-b", "main", remote.path, other)
    git("reset", "-q", "--hard", "HEAD^", cwd=other)
    result = pull(b)
    import time
    monkeypatch.setenv("TZ", "Asia/Tokyo")   # another machine, elsewhere in the world
    time.tzset()
    try:
        assert pull(other)["merged"] == result["merged"]
    finally:
        monkeypatch.undo()
        time.tzset()
    ours = files(b)
    kept = {c["path"]: ours.pop(c["copy"]) for c in result["merged"]}
    assert ours == {p: v for p, v in theirs.items()}
    assert kept == {"a": b"a first\n", "d/k": b"k first\n", "x": b"the file x\n"}
    assert status(b) == "" and git("rev-parse", "HEAD^", cwd=b).decode().strip() == odd
    assert result["merge"] == git("rev-parse", "HEAD", cwd=b).decode().strip()
    assert git("rev-parse", "HEAD", cwd=b) == git("rev-parse", "HEAD", cwd=other)  # the same
    git("push", "-q", cwd=b)   # the remote holds both versions, by name, and syncs on
    assert pull(other) == {"merged": [], "beside": [], "kept": [], "merge": None}
    assert files(other) == files(b) and status(other) == ""


def test_a_tree_holding_a_name_twice_merges_with_a_change_of_this_machine(two):
    remote, a, b = two
    readme = git("rev-parse", "HEAD:README", cwd=a).decode().strip()
    tree = raw_tree(a, [("100644", "README", readme), ("100644", "a", blob(a, b"a first\n")),
                        ("100644", "a", blob(a, b"a last\n"))])
    odd = git("commit-tree", tree, "-p", "HEAD", "-m", "autosync on a: odd", cwd=a).decode().strip()
    git("push", "-q", "origin", odd + ":main", cwd=a)
    write(b, "mine.txt", b"b's\n")
    git("add", "-A", cwd=b)
    git("commit", "-q", "-m", "autosync on b: added mine.txt", cwd=b)
    result = pull(b)
    [copy] = result["merged"]
    assert open(os.path.join(b, "a"), "rb").read() == b"a last\n"
    assert open(os.path.join(b, copy["copy"]), "rb").read() == b"a first\n"
    assert open(os.path.join(b, "mine.txt"), "rb").read() == b"b's\n"
    assert status(b) == "" and result["merge"]
