"""Thin machines (issue 21, item 3): `dvcs-autosync init --thin` makes a partial clone
(`--filter=blob:none`) that keeps the current files only; old versions come from the
remote when restore, log or a pull needs them, in one fetch, and the remote away is one
line with nothing written. Real git, a real bare remote on disk, the real programs."""
import os
import subprocess
import sys

import pytest

from autosync.vcs import thin
from autosync.vcs.pull import git as gitpull
from autosync.vcs.commands import Template
from base import Machine, git, tree
from helpers import Joined, listing, ok
from helpers import ThinRemote, thin_machine



def run(*args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor"] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


def missing_blobs(folder):
    out = git("rev-list", "--objects", "--missing=print", "--all", cwd=folder)
    return {l[1:] for l in out.splitlines() if l.startswith(b"?")}


def files(folder):
    """listing() of the folder but for .git (where a lookup may leave a small object)."""
    return {k: v for k, v in listing(folder).items() if k != ".git" and
            not k.startswith(".git/")}


def blob(folder, rev, path):
    return git("rev-parse", "%s:%s" % (rev, path), cwd=folder).strip()


@pytest.fixture
def thin_remote(tmp_path):
    return ThinRemote(tmp_path / "remote.git")


def test_a_thin_machine_keeps_the_current_files_only(tmp_path, thin_remote):
    m = thin_machine(tmp_path, thin_remote)
    assert tree(m)["notes.txt"] == b"notes, version 3\n"
    gone = missing_blobs(m.path)
    first, last = thin_remote.revs[0], thin_remote.revs[-1]
    assert blob(m.path, first, "notes.txt") in gone  # an old version: on the remote only
    assert blob(m.path, last, "notes.txt") not in gone  # the current one: here
    assert len(gone) == 12  # notes.txt and the 5 photos, twice each
    assert thin.promisor(m.path) == "origin"


def test_a_thin_machine_restores_a_version_it_never_had_with_the_remote_reachable(
        tmp_path, thin_remote):
    m = thin_machine(tmp_path, thin_remote)
    first = thin_remote.revs[0]
    assert blob(m.path, first, "notes.txt") in missing_blobs(m.path)
    result = run("restore", "notes.txt", "--at", first[:12], "--config", m.config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "restored notes.txt" in result.stdout
    assert m.read("notes.txt") == b"notes, version 1\n"
    # A folder: its five old versions come in one fetch, and are written.
    result = run("restore", "photos", "--at", first[:12], "--config", m.config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(m.read("photos/p%d.txt" % i) == b"photo %d, version 1\n" % i for i in range(5))


def test_a_thin_machine_refuses_in_one_line_with_the_remote_away(tmp_path, thin_remote):
    m = thin_machine(tmp_path, thin_remote)
    first = thin_remote.revs[0]
    before = files(m.path)
    thin_remote.away()
    for path in ("notes.txt", "photos", "."):
        result = run("restore", path, "--at", first[:12], "--config", m.config)
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("dvcs-autosync restore: cannot restore %s: " % path)
        assert "thin machine" in lines[0] and "cannot be fetched from origin" in lines[0]
        assert lines[0].endswith("nothing written")
        assert files(m.path) == before  # not a byte written, no staging folder left
    # The list of versions needs no old content: it works with the remote away.
    result = run("log", "notes.txt", "--config", m.config)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 3, result.stdout
    # And with the remote back, the same restore works.
    thin_remote.back()
    result = run("restore", "notes.txt", "--at", first[:12], "--config", m.config)
    assert result.returncode == 0, result.stderr
    assert m.read("notes.txt") == b"notes, version 1\n"


def test_init_thin_refuses_a_remote_that_serves_no_partial_clone(tmp_path, remote):
    m = Joined(tmp_path, "thin")
    result = m.init(remote, "--thin")
    assert result.returncode == 1
    assert "does not serve partial clones" in result.stderr
    assert "uploadpack.allowFilter true" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not os.path.exists(m.path) and not os.path.exists(m.config)


def counting_upload_pack(tmp_path, machine):
    """Every connection the machine's git makes to the remote, with the command that made
    it and its parent (a wrapper of git-upload-pack, the program a fetch runs on the
    remote's side)."""
    counter = tmp_path / "upload-pack.count"
    script = tmp_path / "upload-pack"
    script.write_text("#!/bin/sh\ng=$(ps -o ppid= -p $PPID); ps -o args= -p $g -p $(ps -o ppid= -p $g) | tr '\\n' '<' >> '%s'; echo >> '%s'\n"
                      "exec git-upload-pack \"$@\"\n" % (counter, counter))
    script.chmod(0o755)
    git("config", "remote.origin.uploadpack", str(script), cwd=machine.path)
    return lambda: counter.read_text().splitlines() if counter.exists() else []


def test_the_daemons_pull_on_a_thin_machine_fetches_the_contents_in_one_go(tmp_path,
                                                                          thin_remote):
    thin_m = thin_machine(tmp_path, thin_remote)
    full = Machine(tmp_path, "full", thin_remote)
    connections = counting_upload_pack(tmp_path, thin_m)
    try:
        thin_m.start()
        base = len(connections())
        os.makedirs(os.path.join(full.path, "new"))
        for i in range(8):
            with open(os.path.join(full.path, "new", "f%d.txt" % i), "w") as f:
                f.write("new file %d\n" % i)
        git("add", "-A", cwd=full.path)
        git("commit", "-q", "-m", "eight files", cwd=full.path)
        git("push", "-q", cwd=full.path)
        thin_m.notify("pull")
        assert all(thin_m.read("new/f%d.txt" % i) == b"new file %d\n" % i for i in range(8))
        # The contents came in one fetch, not one connection per file (git fetches a
        # missing content by itself one at a time): the lines after the start's.
        fetches = [line for line in connections()[base:]
                   if "fetch.negotiationAlgorithm=noop" in line]
        assert len(fetches) == 1, connections()[base:]
        assert all("autosync.committer" in line for line in fetches)
        # The remote away: a pull fails in one line, said by name in status; nothing lost.
        before = files(thin_m.path)
        thin_remote.away()
        said = thin_m.notify("pull", check=False)
        assert said.returncode == 1
        status = thin_m.status()
        assert status["headline"].startswith("NOT syncing: pull: ")
        assert "\n" not in status["headline"]
        assert [p["name"] for p in status["problems"]] == ["pull"]
        assert files(thin_m.path) == before
        thin_remote.back()
        assert not missing_blobs(thin_m.path) & {blob(thin_m.path, "HEAD", "new/f0.txt")}
    finally:
        thin_m.stop()


def test_a_pull_whose_contents_cannot_be_fetched_writes_nothing(tmp_path, thin_remote):
    """The remote goes away between the fetch of the branch and that of its contents:
    the pull fails in one line, and neither the folder nor HEAD moved."""
    m = thin_machine(tmp_path, thin_remote)
    full = Machine(tmp_path, "full", thin_remote)
    with open(os.path.join(full.path, "notes.txt"), "w") as f:
        f.write("notes, version 4\n")
    git("commit", "-q", "-am", "version 4", cwd=full.path)
    git("push", "-q", cwd=full.path)
    git("fetch", "-q", cwd=m.path)  # the branch has come (FETCH_HEAD), its contents not
    head = git("rev-parse", "HEAD", cwd=m.path)
    before = files(m.path)
    thin_remote.away()
    pull = gitpull.GitPull(m.path, os.path.join(m.path, ".git"), "thin", [])
    pull.fetch = Template("pullcmd", "true")  # (the fetch above was it)
    with pytest.raises(gitpull.PullFailed) as failed:
        pull.run()
    assert "cannot be fetched from origin" in str(failed.value)
    assert "\n" not in str(failed.value)
    assert git("rev-parse", "HEAD", cwd=m.path) == head
    assert files(m.path) == before
    thin_remote.back()
    pull.run()
    assert m.read("notes.txt") == b"notes, version 4\n"


def test_missing_finds_what_a_thin_machine_lacks_without_fetching(tmp_path, thin_remote):
    m = thin_machine(tmp_path, thin_remote)
    old = blob(m.path, thin_remote.revs[0], "notes.txt").decode()
    new = blob(m.path, "HEAD", "notes.txt").decode()
    thin_remote.away()  # nothing may be fetched
    assert thin.missing(m.path, [old, new, "0" * 40]) == {old}
    assert thin.bring(m.path, []) == 0
    with pytest.raises(thin.Unreachable):
        thin.bring(m.path, [old])


def test_the_promisor_remote_is_found_however_git_named_it(tmp_path, thin_remote):
    m = thin_machine(tmp_path, thin_remote)
    git("config", "remote.origin.promisor", "yes", cwd=m.path)
    assert thin.promisor(m.path) == "origin"
    git("config", "--unset", "remote.origin.promisor", cwd=m.path)
    assert thin.promisor(m.path) is None
    git("config", "extensions.partialClone", "origin", cwd=m.path)  # an older git's way
    assert thin.promisor(m.path) == "origin"


def test_a_folder_of_files_joins_thin(tmp_path, thin_remote):
    """init --thin on a folder of files: they are committed and merged with the remote's
    (vcs/pull/git.py on a partial clone: the contents it writes come in one fetch)."""
    m = Joined(tmp_path, "thin")
    os.makedirs(os.path.join(m.path, "mine"))
    with open(os.path.join(m.path, "mine", "a.txt"), "w") as f:
        f.write("mine\n")
    out = ok(m.init(thin_remote, "--thin"))
    assert "joined" in out and "thin: the current files only" in out
    files = tree(m)
    assert files["mine/a.txt"] == b"mine\n" and files["notes.txt"] == b"notes, version 3\n"
    assert blob(m.path, thin_remote.revs[0], "notes.txt") in missing_blobs(m.path)
    assert b"mine/a.txt" in git("--git-dir", thin_remote.path, "ls-tree", "-r",
                                "--name-only", "main")


def test_a_conflict_on_a_thin_machine_keeps_both_versions(tmp_path, thin_remote):
    """Both machines changed notes.txt while apart: the merge needs the common version's
    content, which the thin machine never had; it comes from the remote, both kept."""
    m = thin_machine(tmp_path, thin_remote)
    full = Machine(tmp_path, "full", thin_remote)
    # The thin machine's own change (not pushed), then the other machine's, pushed.
    with open(os.path.join(m.path, "notes.txt"), "w") as f:
        f.write("notes, thin's version\n")
    git("commit", "-q", "-am", "thin's edit", cwd=m.path)
    with open(os.path.join(full.path, "notes.txt"), "w") as f:
        f.write("notes, full's version\n")
    git("commit", "-q", "-am", "full's edit", cwd=full.path)
    git("push", "-q", cwd=full.path)
    git("rm", "-q", "photos/p0.txt", cwd=m.path)  # a missing old blob in the base, too
    git("commit", "-q", "-m", "thin removes p0", cwd=m.path)
    result = gitpull.GitPull(m.path, os.path.join(m.path, ".git"), "thin", []).run()
    assert result["merge"] and len(result["merged"]) == 1
    copy = result["merged"][0]["copy"]
    files = tree(m)
    assert {files["notes.txt"], files[copy]} == {b"notes, thin's version\n",
                                                 b"notes, full's version\n"}
    assert "photos/p0.txt" not in files
