"""quickcommit.py on real git repositories: the commit it builds from the changed paths is
the one `git add` + `git commit` make, it steps aside where it cannot be, and the index
it leaves behind is brought up to date by settle()."""
import os
import shutil
import time

import pytest

from autosync.committer import quickcommit
from autosync.vcs.commands import Template
from autosync.core.config import GIT_COMMANDS
from autosync.committer.repository import Repository
from base import Remote, git
from fakes import Reports, config
from repos import repo  # noqa: F401 (the fixture: a Repository on a real clone)


@pytest.fixture
def clones(tmp_path, monkeypatch):
    """Two clones of one remote: `quick` for committer/quickcommit.py, `usual` for git add + commit."""
    remote = Remote(tmp_path / "remote.git")
    made = {}
    for name in ("quick", "usual"):
        git("clone", "-q", remote.path, str(tmp_path / name))
        made[name] = str(tmp_path / name)
    return made


def both(clones, do):
    """Run do(folder) in each clone."""
    for folder in clones.values():
        do(folder)


def write(folder, rel, content, mode=None):
    path = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)
    if mode is not None:
        os.chmod(path, mode)


def message(listed):
    return "autosync on test: %d changes" % len(listed)


def quick(folder, commands=None):
    cmd = {n: Template(n, t) for n, t in dict(GIT_COMMANDS, **(commands or {})).items()}
    return quickcommit.QuickCommit(folder, os.path.join(folder, ".git"), cmd, True)


def commit_both(clones, changes):
    """The batch committed quickly in one clone and by git add -A + git commit in the other;
    -> (quick result, the two new trees)."""
    q = quick(clones["quick"])
    made = q.commit(changes, message)
    paths = sorted({c[k] for c in changes for k in ("path", "src") if k in c})
    git("add", "-A", "--", *paths, cwd=clones["usual"])
    git("commit", "-q", "-m", "usual", cwd=clones["usual"], check=False)
    trees = [git("rev-parse", "HEAD^{tree}", cwd=clones[n]).strip() for n in ("quick", "usual")]
    return q, made, trees


def settle_tree(clones):
    """Both clones at one commit again (the usual one's tree equal), quick's index settled."""
    q = quick(clones["quick"])
    q.settle()
    assert git("status", "--porcelain", cwd=clones["quick"]) == b""


def test_a_change_in_nested_folders_a_new_folder_and_modes_make_git_s_tree(clones):
    both(clones, lambda f: write(f, "a/b/c/deep.txt", "deep\n"))
    both(clones, lambda f: write(f, "a/side.txt", "side\n"))
    both(clones, lambda f: (git("add", "-A", cwd=f), git("commit", "-q", "-m", "base", cwd=f)))
    both(clones, lambda f: write(f, "a/b/c/deep.txt", "changed\n"))
    both(clones, lambda f: write(f, "new/folder/file.txt", "new\n"))
    both(clones, lambda f: write(f, "run.sh", "#!/bin/sh\n", 0o755))
    both(clones, lambda f: os.symlink("a/side.txt", os.path.join(f, "link")))
    changes = [{"action": "modified", "path": "a/b/c/deep.txt"},
               {"action": "added", "path": "new/folder/file.txt"},
               {"action": "added", "path": "run.sh"}, {"action": "added", "path": "link"}]
    q, made, (mine, theirs) = commit_both(clones, changes)
    assert made is not None and mine == theirs
    assert made[1] == [{"action": "modified", "path": "a/b/c/deep.txt"},
                       {"action": "added", "path": "link"},
                       {"action": "added", "path": "new/folder/file.txt"},
                       {"action": "added", "path": "run.sh"}]
    listing = git("ls-tree", "-r", "HEAD", cwd=clones["quick"]).decode()
    assert "100755 blob" in listing and "120000 blob" in listing
    # The index lags until settle(); then `git status` is clean.
    assert git("status", "--porcelain", cwd=clones["quick"]) != b""
    assert q.settle()
    assert git("status", "--porcelain", cwd=clones["quick"]) == b""
    assert git("diff", "--cached", "--quiet", cwd=clones["quick"], check=False) == b""


def test_the_last_file_of_a_folder_removed_removes_the_folder_and_a_move_is_a_move(clones):
    both(clones, lambda f: write(f, "only/one.txt", "one\n"))
    both(clones, lambda f: write(f, "keep/x.txt", "some text that is long enough to be moved\n"))
    both(clones, lambda f: (git("add", "-A", cwd=f), git("commit", "-q", "-m", "base", cwd=f)))
    both(clones, lambda f: os.unlink(os.path.join(f, "only/one.txt")))
    both(clones, lambda f: os.rename(os.path.join(f, "keep/x.txt"), os.path.join(f, "keep/y.txt")))
    changes = [{"action": "removed", "path": "only/one.txt"},
               {"action": "moved", "path": "keep/y.txt", "src": "keep/x.txt"}]
    q, made, (mine, theirs) = commit_both(clones, changes)
    assert mine == theirs
    assert made[1] == [{"action": "moved", "path": "keep/y.txt", "src": "keep/x.txt"},
                       {"action": "removed", "path": "only/one.txt"}]
    assert b"only" not in git("ls-tree", "HEAD", cwd=clones["quick"])
    settle_tree(clones)


def test_a_clean_filter_and_line_endings_apply_as_git_add_applies_them(clones):
    def setup(f):
        git("config", "filter.upper.clean", "tr a-z A-Z", cwd=f)
        write(f, ".gitattributes", "*.up filter=upper\n*.txt text eol=lf\n")
        git("add", "-A", cwd=f)
        git("commit", "-q", "-m", "attributes", cwd=f)
        write(f, "shout.up", "quiet words\n")
        with open(os.path.join(f, "dos.txt"), "wb") as out:
            out.write(b"one\r\ntwo\r\n")
    both(clones, setup)
    changes = [{"action": "added", "path": "shout.up"}, {"action": "added", "path": "dos.txt"}]
    q, made, (mine, theirs) = commit_both(clones, changes)
    assert made is not None and mine == theirs
    assert git("show", "HEAD:shout.up", cwd=clones["quick"]) == b"QUIET WORDS\n"
    assert git("show", "HEAD:dos.txt", cwd=clones["quick"]) == b"one\ntwo\n"
    settle_tree(clones)


def test_an_ignored_new_file_is_left_to_the_usual_path(clones):
    folder = clones["quick"]
    write(folder, ".gitignore", "*.log\n")
    git("add", "-A", cwd=folder)
    git("commit", "-q", "-m", "ignore", cwd=folder)
    write(folder, "debug.log", "x")
    write(folder, "fine.txt", "x")
    head = git("rev-parse", "HEAD", cwd=folder)
    assert quick(folder).commit([{"action": "added", "path": "debug.log"},
                                 {"action": "added", "path": "fine.txt"}], message) is None
    assert git("rev-parse", "HEAD", cwd=folder) == head  # nothing committed here


def test_an_ignored_file_in_a_batch_ends_as_it_ended_before(tmp_path, monkeypatch):
    """Through Repository: what the commit records with an ignored file in the batch is what
    the usual path records (the quick one steps aside)."""
    remote = Remote(tmp_path / "remote.git")
    results = []
    for name, commitcmd in (("quick", GIT_COMMANDS["commitcmd"]), ("usual", "git commit -m %s")):
        folder = tmp_path / name
        git("clone", "-q", remote.path, str(folder))
        reports = Reports()
        r = Repository(config(folder, commands=dict(GIT_COMMANDS, commitcmd=commitcmd)), reports)
        (folder / ".gitignore").write_text("*.log\n")
        assert r.commit([{"action": "added", "path": ".gitignore"}])
        (folder / "debug.log").write_text("x")
        (folder / "fine.txt").write_text("x")
        made = r.commit([{"action": "added", "path": "debug.log"},
                         {"action": "added", "path": "fine.txt"}])
        results.append((made, reports.named("committed")[-1][0][1],
                        git("ls-tree", "-r", "--name-only", "HEAD", cwd=str(folder)),
                        reports.fields.get("held_back")))
    assert results[0] == results[1]
    assert b"debug.log" not in results[0][2]


@pytest.mark.parametrize("setup, why", [
    (lambda f: write(f, ".git/hooks/pre-commit", "#!/bin/sh\n", 0o755), "pre-commit"),
    (lambda f: write(f, ".git/hooks/commit-msg", "#!/bin/sh\n", 0o755), "commit-msg"),
    (lambda f: (write(f, "../myhooks/post-commit", "#!/bin/sh\n", 0o755),
                git("config", "core.hooksPath", "../myhooks", cwd=f)), "post-commit"),
    (lambda f: git("config", "commit.gpgSign", "true", cwd=f), "gpgSign"),
    (lambda f: write(f, ".git/MERGE_HEAD", "0" * 40 + "\n"), "merge"),
    (lambda f: git("config", "core.fileMode", "false", cwd=f), "core.filemode"),
    (lambda f: git("config", "commit.cleanup", "strip", cwd=f), "commit.cleanup"),
    (lambda f: write(f, ".git/index.lock", ""), "index lock"),  # a user's git commit
    # an annex of the repository's, not the annex.* settings every repository gets from us
    pytest.param(lambda f: git("annex", "init", "-q", "here", cwd=f), "git-annex",
                 marks=pytest.mark.skipif(not shutil.which("git-annex"), reason="git-annex")),
])
def test_hooks_signing_and_a_merge_take_the_usual_path(clones, setup, why):
    folder = clones["quick"]
    setup(folder)
    write(folder, "a.txt", "a")
    q = quick(folder)
    assert why.lower() in q.why_not([{"action": "added", "path": "a.txt"}]).lower()
    head = git("rev-parse", "HEAD", cwd=folder)
    assert q.commit([{"action": "added", "path": "a.txt"}], message) is None
    assert git("rev-parse", "HEAD", cwd=folder) == head


def test_a_hook_that_is_not_executable_is_no_hook(clones):
    folder = clones["quick"]
    write(folder, ".git/hooks/pre-commit.sample", "#!/bin/sh\n", 0o755)
    write(folder, ".git/hooks/pre-commit", "#!/bin/sh\n", 0o644)
    assert quick(folder).why_not([{"action": "added", "path": "a.txt"}]) is None


@pytest.mark.parametrize("commands", [
    # (The original's own strings are run as the shipped ones: test_original_commands.py.)
    {"commitcmd": "git commit --no-verify -m %s"},
    {"addcmd": "git add -f %s"},
    {"statuscmd": "git status --porcelain | grep -q ."},
    {"rmcmd": "git rm --cached %s"},
])
def test_command_strings_of_the_user_s_take_the_usual_path(clones, commands):
    folder = clones["quick"]
    write(folder, "a.txt", "a")
    q = quick(folder, commands)
    assert q.why_not([{"action": "added", "path": "a.txt"}])
    assert q.commit([{"action": "added", "path": "a.txt"}], message) is None


def test_a_repository_inside_and_a_folder_take_the_usual_path(clones):
    folder = clones["quick"]
    git("init", "-q", os.path.join(folder, "inner"))
    write(folder, "inner/x", "x")
    git("add", "x", cwd=os.path.join(folder, "inner"))
    git("commit", "-q", "-m", "x", cwd=os.path.join(folder, "inner"))
    q = quick(folder)
    assert q.commit([{"action": "added", "path": "inner"}], message) is None
    write(folder, "dir/f", "f")
    assert q.commit([{"action": "added", "path": "dir"}], message) is None


def test_other_staged_changes_take_the_usual_path(clones):
    """git commit records the whole index: a file the user staged goes in too."""
    folder = clones["quick"]
    write(folder, "mine.txt", "staged by the user")
    git("add", "mine.txt", cwd=folder)
    write(folder, "a.txt", "a")
    assert quick(folder).commit([{"action": "added", "path": "a.txt"}], message) is None


def test_a_head_that_moved_is_never_overwritten(clones, monkeypatch):
    folder = clones["quick"]
    write(folder, "a.txt", "a")
    q = quick(folder)
    real = quickcommit.run

    def user_commits_meanwhile(folder_, *args, **kw):
        if args[0] == "update-ref":
            git("commit", "-q", "--allow-empty", "-m", "the user's", cwd=folder)
        return real(folder_, *args, **kw)
    monkeypatch.setattr(quickcommit, "run", user_commits_meanwhile)
    assert q.commit([{"action": "added", "path": "a.txt"}], message) is None
    assert git("log", "-1", "--format=%s", cwd=folder) == b"the user's\n"
    assert not os.path.exists(os.path.join(folder, ".git", quickcommit.OWED))


def test_a_message_is_cleaned_as_git_commit_cleans_it():
    assert quickcommit.cleanup("\n\nsubject  \n\n\n\nbody\t\n# kept\n\n") == "subject\n\nbody\n# kept\n"


# --- through Repository: what is reported, what git runs, a daemon killed meanwhile ----------

def traced(trace):
    return [line.split("trace: built-in: git ", 1)[1].split()
            for line in open(trace, encoding="utf-8", errors="replace")
            if "trace: built-in: git " in line]


def test_a_commit_neither_reads_nor_writes_the_whole_index(repo, tmp_path, monkeypatch):
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    r.settle_index()
    trace, perf = tmp_path / "trace", tmp_path / "perf"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    monkeypatch.setenv("GIT_TRACE2_PERF", str(perf))
    (repo.path / "a.txt").write_text("b")
    assert r.commit([{"action": "modified", "path": "a.txt"}])
    # No command read the index either (diff-tree of the two trees read it: 110 ms at
    # 1,000,000 files); only the temporary one was read.
    reads = [line.rsplit("do_read_index", 1)[1].strip() for line in open(perf)
             if "label:do_read_index" in line]
    assert reads and ".git/index" not in reads and not any(r.endswith("/.git/index") for r in reads)
    commands = traced(trace)
    ran = [c[0] for c in commands]
    # Before: add (whole index read and written), diff --cached, commit (refresh, write).
    assert "commit" not in ran and "diff" not in ran and "add" not in ran
    # The file hashed into the temporary index; the index is settled later, not here.
    assert [c for c in commands if c[0] == "update-index"] == [
        ["update-index", "--add", "-z", "--stdin"]]
    (message, listed), _ = reports.named("committed")[-1]
    assert message.startswith("autosync on testhost: 1 modified") and listed == [
        {"action": "modified", "path": "a.txt"}]
    assert git("show", "HEAD:a.txt", cwd=str(repo.path)) == b"b"
    r.settle_index()
    assert git("status", "--porcelain", cwd=str(repo.path)) == b""


def test_nothing_changed_is_no_commit(repo):
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    assert not r.commit([{"action": "modified", "path": "a.txt"}])
    assert len(reports.named("committed")) == 1 and not reports.named("failed")


def test_no_identity_fails_as_it_always_did(repo, monkeypatch):
    """commit-tree refuses as git commit does; the usual path then runs and says it."""
    home = os.environ["HOME"]
    git("config", "--global", "--unset", "user.email")
    git("config", "--global", "--unset", "user.name")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "")
    monkeypatch.setenv("EMAIL", "")
    monkeypatch.setenv("HOME", home)
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert not r.commit([{"action": "added", "path": "a.txt"}])
    (op, error), kw = reports.named("failed")[-1]
    assert op == "commit" and kw == {"retry": "commit"}
    assert str(error).startswith("commitcmd failed") and "user.email" in str(error)


def test_a_description_of_the_user_s_takes_the_usual_path(repo, tmp_path, monkeypatch):
    """Its text heads the subject, which update-ref's reflog line would show to every
    local user (ps); git commit reads the message from stdin."""
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    assert r.commit([{"action": "added", "path": "a.txt"}], text="my secret plan")
    assert "update-ref" not in [c[0] for c in traced(trace)]
    assert git("log", "-1", "--format=%s", cwd=str(repo.path)).startswith(b"my secret plan (")


def test_a_daemon_killed_before_settling_settles_at_its_next_start(repo):
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    assert os.path.exists(repo.path / ".git" / quickcommit.OWED)  # killed here
    again, _ = repo()
    again.recover()
    assert not os.path.exists(repo.path / ".git" / quickcommit.OWED)
    assert git("status", "--porcelain", cwd=str(repo.path)) == b""


def test_a_settle_reads_each_tree_once_however_many_paths_it_holds(repo, monkeypatch):
    """200 new files in one folder under a root of 50 entries: the root, the folder and
    its parent each read once (not once per path: at 1,000,000 files a 10,000-file
    batch under a 10,000-entry root took 127 s)."""
    for i in range(50):
        (repo.path / ("top%02d.txt" % i)).write_text("t")
    git("add", "-A", cwd=str(repo.path))
    git("commit", "-q", "-m", "wide root", cwd=str(repo.path))
    r, _ = repo()
    many = repo.path / "photos" / "2026"
    many.mkdir(parents=True)
    for i in range(200):
        (many / ("p%03d.jpg" % i)).write_text(str(i))
    assert r.commit([{"action": "added", "path": "photos/2026/p%03d.jpg" % i}
                     for i in range(200)])
    reads = []
    real = quickcommit.Trees.read
    monkeypatch.setattr(quickcommit.Trees, "read",
                        lambda self, name: reads.append(name) or real(self, name))
    r.settle_index()
    assert reads[0] == "HEAD" and len(reads) == len(set(reads)) == 4  # HEAD, root, photos, 2026
    assert git("status", "--porcelain", cwd=str(repo.path)) == b""


def index_times(folder, path):
    """The file times git keeps for `path` in the index (all zero: none kept)."""
    out = git("ls-files", "--debug", "--", path, cwd=folder).decode()
    return [line.split()[1:] for line in out.splitlines() if "time:" in line]


def commit_five(r, folder):
    for i in range(5):
        (folder / ("n%d.txt" % i)).write_text(str(i))
    assert r.commit([{"action": "added", "path": "n%d.txt" % i} for i in range(5)])


def settled(r, tmp_path, monkeypatch):
    """r's index settled -> the git commands it ran, their first two words."""
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    r.settle_index()
    return [c[:2] for c in traced(trace)]


def test_many_paths_settle_by_reading_the_whole_tree_when_nobody_wrote_the_index(
        repo, tmp_path, monkeypatch):
    monkeypatch.setattr(quickcommit, "WHOLE_TREE_FROM", 3)
    (repo.path / "keep.txt").write_text("kept")
    git("add", "keep.txt", cwd=str(repo.path))
    git("commit", "-q", "-m", "keep", cwd=str(repo.path))
    kept = index_times(str(repo.path), "keep.txt")
    assert kept and all(t != ["0:0"] for t in kept)
    r, _ = repo()
    (repo.path / "README").write_text("edited, not committed")  # the user's, in no batch
    commit_five(r, repo.path)
    ran = settled(r, tmp_path, monkeypatch)
    assert ["read-tree", "-m"] in ran and ["update-index", "-z"] not in ran
    assert git("status", "--porcelain", cwd=str(repo.path)) == b" M README\n"
    assert index_times(str(repo.path), "keep.txt") == kept  # its file times kept


def test_an_index_written_since_the_commit_settles_path_by_path(repo, tmp_path, monkeypatch):
    """The user staged something after our commit: reading the whole tree would drop it."""
    monkeypatch.setattr(quickcommit, "WHOLE_TREE_FROM", 3)
    r, _ = repo()
    commit_five(r, repo.path)
    (repo.path / "mine.txt").write_text("staged by the user")
    git("add", "mine.txt", cwd=str(repo.path))
    ran = settled(r, tmp_path, monkeypatch)
    assert ["update-index", "-z"] in ran and ["read-tree", "-m"] not in ran
    assert git("status", "--porcelain", cwd=str(repo.path)) == b"A  mine.txt\n"


def test_an_amend_and_a_pull_see_the_index_settled_first(repo):
    r, reports = repo(amendcmd="git commit -q --amend -m %s")
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    assert r.amend("reworded", r.head())
    assert git("ls-tree", "--name-only", "HEAD", cwd=str(repo.path)).split() == [b"README", b"a.txt"]
    assert git("status", "--porcelain", cwd=str(repo.path)) == b""


# --- end to end: the running suite's commit is git add + git commit's ---------------------

@pytest.mark.e2e
def test_the_running_suite_commits_quickly_what_git_add_and_commit_would(machines, remote):
    import subprocess
    from base import wait_until
    a = machines("a")
    write(a.path, "docs/old/keep.txt", "kept\n")
    write(a.path, "docs/old/gone.txt", "gone\n")
    wait_until(lambda: git("ls-tree", "-r", "HEAD", "docs", cwd=a.path).count(b"\n") == 2
               and a.settled(remote), 60, 0.1, "the first files")
    base = git("rev-parse", "HEAD", cwd=a.path).strip().decode()
    write(a.path, "docs/old/keep.txt", "changed\n")
    os.unlink(os.path.join(a.path, "docs/old/gone.txt"))
    write(a.path, "new/deep/file.txt", "new\n")
    write(a.path, "run.sh", "#!/bin/sh\n", 0o755)
    os.symlink("run.sh", os.path.join(a.path, "link"))
    wait_until(lambda: b"link" in git("ls-tree", "--name-only", "HEAD", cwd=a.path)
               and a.settled(remote), 60, 0.1, "the changes")
    time.sleep(1)
    assert a.settled(remote)
    assert "the index untouched" in a.logtext()
    # Each commit since: its tree is what `git add` of its paths makes on its parent's tree
    # (in an index of the test's own; no path changed twice, so the folder holds each).
    env = dict(os.environ, GIT_INDEX_FILE=os.path.join(a.path, ".git", "test-index"))

    def tree_git_makes(parent, *add):
        subprocess.run(["git", "read-tree", parent], cwd=a.path, env=env, check=True)
        subprocess.run(["git", "add", "-A", "--"] + list(add), cwd=a.path, env=env, check=True)
        return subprocess.run(["git", "write-tree"], cwd=a.path, env=env, check=True,
                              stdout=subprocess.PIPE).stdout.strip()
    revs = git("rev-list", "--reverse", base + "..HEAD", cwd=a.path).decode().split()
    assert revs
    for rev in revs:
        paths = [os.fsdecode(p) for p in git("diff-tree", "-r", "--no-renames", "--name-only",
                                             "-z", rev + "^", rev, cwd=a.path).split(b"\0") if p]
        assert tree_git_makes(rev + "^", *paths) == git("rev-parse", rev + "^{tree}", cwd=a.path).strip()
    # The whole folder: HEAD is what git add -A commits, and `git status` is clean.
    assert tree_git_makes("HEAD", ".") == git("rev-parse", "HEAD^{tree}", cwd=a.path).strip()
    assert git("status", "--porcelain", cwd=a.path) == b""
    listing = git("ls-tree", "-r", "HEAD", cwd=a.path).decode()
    assert "100755 blob" in listing and "120000 blob" in listing and "gone.txt" not in listing
