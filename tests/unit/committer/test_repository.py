"""One folder's DVCS operations on a real git repository, reporting to a fake committer."""
import os
import shutil
import sys

import pytest

from autosync.core.config import GIT_COMMANDS
from autosync.vcs import commands
from autosync.committer.repository import Repository
from base import git
from fakes import Reports, config
from helpers import CUT_PULL
from repos import repo  # noqa: F401 (a fixture)


def test_the_repository_hands_its_one_git_environment_to_every_part_that_runs_git(repo):
    """Made once from the config and the folder, given to its parts; the process keeps
    nothing: a git command run by anyone else gets only the settings (PLAIN)."""
    r = Repository(config(repo.path, commands=dict(GIT_COMMANDS), fsmonitor="yes"), Reports())
    assert r.gitenv.excludes == r.excludes.where and os.path.exists(r.gitenv.excludes)
    parts = [t.gitenv for t in r.cmd.values()] + [
        r.git_pull.gitenv, r.staging.gitenv, r.quick.gitenv, r.where.gitenv, r.fsmonitor.gitenv]
    assert all(gitenv is r.gitenv for gitenv in parts)
    assert r.git_pull.index_env == r.fsmonitor.env  # the fsmonitor handed in, not patched in
    assert type(r.cmd["addcmd"]).__name__ == "Monitored"
    assert type(r.cmd["pushcmd"]).__name__ == "Template"
    variables = commands.environment()
    assert "core.excludesFile" not in [variables.get("GIT_CONFIG_KEY_%d" % i)
                                       for i in range(int(variables["GIT_CONFIG_COUNT"]))]


def test_every_git_the_repository_runs_gets_its_settings(repo, tmp_path, monkeypatch):
    """A part that ran git without the repository's GitEnvironment (a gitenv= forgotten)
    would read no excludes file: a `git` first on PATH notes what each one got."""
    r, _ = repo()
    other = tmp_path / "other"
    git("clone", "-q", repo.remote.path, str(other))
    (other / "b.txt").write_text("b")
    git("add", "b.txt", cwd=str(other))
    git("-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", "b", cwd=str(other))
    git("push", "-q", cwd=str(other))
    seen, wrapper = tmp_path / "seen", tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!%s\nimport os, sys\nn = int(os.environ.get('GIT_CONFIG_COUNT') or 0)\n"
        "got = {os.environ.get('GIT_CONFIG_KEY_%%d' %% i): os.environ.get('GIT_CONFIG_VALUE_%%d' %% i)"
        " for i in range(n)}\nwith open(%r, 'a') as f:\n"
        "    f.write('%%s %%s\\n' %% (got.get('core.excludesFile') == %r, sys.argv[1]))\n"
        "os.execv(%r, [%r] + sys.argv[1:])\n"
        % (sys.executable, str(seen), r.gitenv.excludes, shutil.which("git"), "git"))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (wrapper.parent, os.environ["PATH"]))
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}]) and r.pull()["ok"] and r.push()
    r.settle_index()
    (repo.path / "a.txt").write_text("again")
    assert r.commit([{"action": "modified", "path": "a.txt"}]) and r.push()
    runs = [line.split() for line in seen.read_text().splitlines()]
    assert {"fetch", "push", "update-index"} <= {what for _, what in runs}
    assert [what for ok, what in runs if ok != "True"] == []


def test_a_batch_becomes_one_commit_that_names_its_files(repo):
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    (message, listed), _ = reports.named("committed")[0]
    assert message.startswith("autosync on testhost: 1 added") and "added: a.txt" in message
    assert listed == [{"action": "added", "path": "a.txt"}]
    assert r.push() and repo.remote.files()[b"a.txt"] == b"a"


def test_a_path_that_cannot_be_staged_is_held_back_and_said_once(repo):
    r, reports = repo(addcmd="test %s != bad.txt && git add -A -- %s",
                      startupcmd="test ! -e bad.txt && git add -A")
    (repo.path / "bad.txt").write_text("x")
    (repo.path / "good.txt").write_text("x")
    assert r.commit([{"action": "added", "path": "bad.txt"},
                     {"action": "added", "path": "good.txt"}])
    assert "good.txt" in reports.named("committed")[0][0][0]
    assert reports.fields["held_back"] == ["bad.txt"]
    assert r.commit_error.startswith("commit: left out of the commit") and "bad.txt" in r.commit_error
    said = reports.named("failed")
    assert len(said) == 1 and said[0][1] == {"retry": "commit", "quiet": False}
    assert not r.commit([], rescan=True)  # nothing else to commit: looked at again quietly
    assert reports.named("failed")[-1][1] == {"retry": "commit", "quiet": True}
    (repo.path / "bad.txt").rename(repo.path / "fine.txt")
    assert r.commit([], rescan=True)
    assert reports.fields["held_back"] == [] and r.commit_error is None


def test_a_nested_repository_is_left_out_and_said_once(repo):
    r, reports = repo()
    git("init", "-q", str(repo.path / "tool"))
    (repo.path / "tool" / "x.c").write_text("x")
    git("add", "-A", cwd=str(repo.path / "tool"))
    git("commit", "-q", "-m", "its own", cwd=str(repo.path / "tool"))
    (repo.path / "notes.txt").write_text("x")
    assert r.commit([{"action": "added", "path": "tool/x.c"}], rescan=True)
    assert reports.fields["nested_repositories"] == ["tool"]
    assert [a[0] for a, _ in reports.named("failed")] == ["nested-repository"]
    assert not git("ls-tree", "-r", "HEAD", cwd=str(repo.path)).count(b"160000")
    (repo.path / "notes.txt").write_text("y")
    assert r.commit([{"action": "modified", "path": "notes.txt"}], rescan=True)
    assert len(reports.named("failed")) == 1


def test_a_replaced_folder_is_never_committed_and_looked_at_again(repo, tmp_path):
    r, reports = repo()
    os.rename(repo.path, tmp_path / "moved-away")
    os.mkdir(repo.path)
    assert not r.commit([], rescan=True)
    assert not r.commit([], rescan=True)
    assert len(reports.named("failed")) == 1 and "replaced" in reports.named("failed")[0][0][1]
    assert len(reports.named("look_again")) == 2


def test_a_mass_delete_is_said_with_the_command_that_undoes_it(repo):
    r, reports = repo()
    photos = repo.path / "photos"
    photos.mkdir()
    for i in range(30):
        (photos / ("p%02d.jpg" % i)).write_text("x")
    for i in range(10):
        (repo.path / ("keep%d.txt" % i)).write_text("x")
    assert r.commit([], rescan=True)
    assert not reports.named("event")
    for i in range(24):
        (photos / ("p%02d.jpg" % i)).unlink()
    assert r.commit([], rescan=True)
    (_, fields), = [(a, k) for a, k in reports.named("event") if a[0] == "mass-delete"]
    assert fields["count"] == 24 and fields["total"] == 41  # README, 30 photos, 10 kept
    assert fields["restore"].split()[:4] == ["dvcs-autosync", "restore", "photos", "--at"]
    assert fields["restore"].split()[5] == "--config"
    assert reports.fields["mass_delete"]["count"] == 24


def test_a_few_removals_are_not_a_mass_delete(repo):
    r, reports = repo()
    for i in range(19):
        (repo.path / ("f%d" % i)).write_text("x")
    assert r.commit([], rescan=True)
    for i in range(19):
        (repo.path / ("f%d" % i)).unlink()
    assert r.commit([], rescan=True)  # 19 of 20: many, but under the 20 that counts
    assert not [a for a, _ in reports.named("event") if a[0] == "mass-delete"]


def test_many_paths_are_staged_folder_by_folder_where_a_folder_is_all_listed(repo):
    r, reports = repo(addcmd="git add -A -- %s")
    for rel in ("old/kept.txt", "docs/sub/draft.txt") + tuple("docs/sub/d%d" % f for f in range(40)):
        os.makedirs(repo.path / os.path.dirname(rel), exist_ok=True)
        (repo.path / rel).write_text("x")
    assert r.commit([], rescan=True)
    added = []
    for d in range(10):
        for f in range(30):
            rel = "new%d/sub/f%d.txt" % (d, f)
            os.makedirs(repo.path / os.path.dirname(rel), exist_ok=True)
            (repo.path / rel).write_text(rel)
            added.append(rel)
    for f in range(5):  # new files in a folder whose other file is not in the batch
        (repo.path / "old" / ("n%d" % f)).write_text("x")
        added.append("old/n%d" % f)
    (repo.path / "new0" / ".f1.txt.swp").write_text("vim")  # ignored: new0 is not all listed
    changes = [{"action": "added", "path": p} for p in added]
    for f in range(40):  # a tracked folder all of whose files changed: one path too
        (repo.path / "docs" / "sub" / ("d%d" % f)).write_text("changed")
        changes.append({"action": "modified", "path": "docs/sub/d%d" % f})
    (repo.path / "docs" / "sub" / "draft.txt").write_text("half-written, not in the batch")
    assert r.staging.collapse_folders([c["path"] for c in changes]) == sorted(
        ["new0/sub"] + ["new%d" % d for d in range(1, 10)] + ["old/n%d" % f for f in range(5)]
        + ["docs/sub/d%d" % f for f in range(40)])
    assert "docs" in r.staging.collapse_folders([c["path"] for c in changes]
                                                + ["docs/sub/draft.txt"])
    assert r.commit(changes)  # without the draft
    (message, listed), _ = reports.named("committed")[-1]
    assert message.startswith("autosync on testhost: 305 added, 40 modified")
    assert sorted(c["path"] for c in listed) == sorted(c["path"] for c in changes)


def test_a_file_git_refuses_in_a_whole_folder_is_held_back_alone(repo):
    r, reports = repo()
    names = ["docs/f%03d" % i for i in range(120)] + ["docs/bad.txt"]
    os.makedirs(repo.path / "docs")
    for name in names:
        (repo.path / name).write_text("x")
    assert r.commit([], rescan=True)
    # A clean filter that fails on one file: `git add` of the folder fails as a whole.
    (repo.path / ".git" / "info" / "attributes").write_text("bad.txt filter=refuse\n")
    git("-C", str(repo.path), "config", "filter.refuse.clean", "false")
    git("-C", str(repo.path), "config", "filter.refuse.required", "true")
    for name in names:
        (repo.path / name).write_text("changed")
    assert r.staging.collapse_folders(names) == ["docs"]
    assert r.commit([{"action": "modified", "path": n} for n in names])
    (message, listed), _ = reports.named("committed")[-1]
    assert message.startswith("autosync on testhost: 120 modified")
    assert reports.fields["held_back"] == ["docs/bad.txt"]


@pytest.mark.parametrize("addcmd", ["test %s != x && git add -A -- %s", "hg add -- %s",
                                    "git add %s --force"])
def test_only_a_plain_git_add_is_given_whole_folders(repo, addcmd):
    r, _ = repo(addcmd=addcmd)
    names = ["docs/f%03d" % i for i in range(120)]
    os.makedirs(repo.path / "docs")
    for name in names:
        (repo.path / name).write_text("x")
    assert r.staging.collapse_folders(names) == names


def test_a_rescan_does_not_stage_the_batch_path_by_path_first(repo, caplog):
    """An overflowed queue's batch lists every file: git's rescan stages them anyway."""
    r, reports = repo()
    names = ["f%03d" % i for i in range(150)]
    for name in names:
        (repo.path / name).write_text("x")
    assert r.commit([], rescan=True)
    (repo.path / "old").mkdir()
    os.rename(repo.path / "f000", repo.path / "old" / "f000")
    for name in names[1:]:
        (repo.path / name).write_text("changed")
    caplog.set_level("DEBUG", logger="autosync.commands")
    changes = [{"action": "modified", "path": n} for n in names[1:]]
    assert r.commit(changes + [{"action": "moved", "path": "old/f000", "src": "f000"}],
                    rescan=True)
    ran = [m.getMessage().split(":")[0] for m in caplog.records]
    assert "addcmd" not in ran and "modifycmd" not in ran and "movecmd" in ran
    (message, listed), _ = reports.named("committed")[-1]
    assert message.startswith("autosync on testhost: 149 modified, 1 moved")


def test_a_killed_pulls_markers_are_put_back_at_start_even_when_it_ended_before(repo, tmp_path):
    """A pull whose committer was killed died of SIGPIPE with markers in the files and
    nothing in the index or MERGE_HEAD, before the new committer started (so no leftover
    command was seen): they are put back, never committed; a file that merely holds
    marker lines naming a merged commit is left alone."""
    r, reports = repo()
    (repo.path / "notes.txt").write_text("base\n")
    assert r.commit([{"action": "added", "path": "notes.txt"}]) and r.push()
    other = tmp_path / "other"
    git("clone", "-q", repo.remote.path, str(other))
    (other / "notes.txt").write_text("theirs\n")
    git("commit", "-q", "-am", "theirs", cwd=str(other))
    git("push", "-q", cwd=str(other))
    (repo.path / "notes.txt").write_text("mine\n")
    assert r.commit([{"action": "modified", "path": "notes.txt"}])
    git("fetch", "-q", cwd=str(repo.path))
    theirs = git("rev-parse", "origin/main", cwd=str(repo.path)).decode().strip()
    mine = git("rev-parse", "HEAD", cwd=str(repo.path)).decode().strip()
    markers = "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> %s\n" % theirs
    (repo.path / "notes.txt").write_text(markers)
    quoted = "How a conflict looks:\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> %s\n" % mine
    (repo.path / "git-notes.md").write_text(quoted)
    r.recover()  # no leftover command: it had ended already
    assert (repo.path / "notes.txt").read_text() == "mine\n"
    assert (repo.path / "git-notes.md").read_text() == quoted


def test_a_file_made_between_add_and_status_is_no_commit_failure(repo):
    """The original's statuscmd greps `git status` for "nothing to commit"; a file made
    just after the add turns that into "nothing added to commit but untracked files
    present": git commit then has nothing and exits 1. Not a failure (its own batch
    commits the file): no `failed`, no problem in the status."""
    # (The original's own string runs as the shipped one: a user's grep like it.)
    r, reports = repo(statuscmd='git status | grep -q "nothing to commit"')
    (repo.path / "late.txt").write_text("made after the add")  # in no batch yet
    assert not r.commit([])
    assert not reports.named("failed") and not reports.named("committed")
    assert r.commit([{"action": "added", "path": "late.txt"}])  # its batch
    assert reports.named("committed")


def report_methods(cls):
    import inspect
    return {name: [(p.name, p.kind) for p in inspect.signature(f).parameters.values()]
            for name, f in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_the_committer_and_the_fake_answer_exactly_the_report_interface():
    """repository.Report is written once; reports.Reports (the committer's) has each of
    its methods with its parameters, and fakes.Reports has those and no others (a
    misspelt report call fails in every unit test)."""
    from autosync.committer.reports import Reports as CommitterReports
    from autosync.committer.repository import Report
    interface = report_methods(Report)
    assert set(interface) == {"state", "status", "failed", "succeeded", "look_again",
                              "committed", "pulled", "event", "last_error"}
    committer = report_methods(CommitterReports)
    fake = report_methods(Reports)
    for name, parameters in interface.items():
        assert committer[name] == parameters, name
        assert fake[name] == parameters, name
    assert set(fake) - set(interface) <= {"record", "named"}
    with pytest.raises(AttributeError):
        Reports().faild("push", "x")


def test_the_fake_repository_has_the_repository_s_signatures():
    from fakes import FakeRepository
    real, fake = report_methods(Repository), report_methods(FakeRepository)
    for name in set(real) & set(fake):
        assert fake[name] == real[name], name


# --- issue 21: one whole-index read where there were several -----------------------------

def git_commands(trace):
    """The git commands a GIT_TRACE file shows run (built-ins), as their argument lists."""
    out = []
    for line in open(trace, encoding="utf-8", errors="replace"):
        if "trace: built-in: git " in line:
            out.append(line.split("trace: built-in: git ", 1)[1].split())
    return out


def whole_index_reads(commands):
    return [c for c in commands if c[:1] == ["ls-files"] or c[:2] == ["diff", "--cached"]]


def test_a_commit_reads_what_is_staged_once_and_looks_for_a_killed_merge_only_when_the_index_changed(
        repo, tmp_path, monkeypatch):
    # (a commitcmd of the user's: the usual path, not committer/quickcommit.py's, which reads none)
    r, reports = repo(statuscmd="git diff --cached --quiet", commitcmd="git commit --quiet -m %s")
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    (repo.path / "a.txt").write_text("b")
    assert r.commit([{"action": "modified", "path": "a.txt"}])
    # Before: ls-files -u, diff --cached --raw twice, diff --cached --quiet (statuscmd).
    assert whole_index_reads(git_commands(trace)) == [
        ["diff", "--cached", "--raw", "-z", "-M", "--relative"]]
    (message, listed), _ = reports.named("committed")[-1]
    assert listed == [{"action": "modified", "path": "a.txt"}]
    # Nothing staged: nothing committed, and statuscmd is not run for it.
    trace.unlink()
    assert not r.commit([{"action": "modified", "path": "a.txt"}])
    assert [c[0] for c in git_commands(trace)].count("diff") == 1


def test_a_conflict_left_in_the_index_by_the_users_git_is_still_undone(repo):
    """merge_cleared skips `ls-files -u` only for the index file our own commands left:
    a merge of the user's that stopped without MERGE_HEAD (git stash pop) is seen."""
    r, reports = repo(statuscmd="git diff --cached --quiet")
    path = str(repo.path)
    (repo.path / "a.txt").write_text("a\n")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    r.settle_index()  # the committer's step after a commit (committer/quickcommit.py)
    (repo.path / "a.txt").write_text("stashed\n")
    git("stash", "-q", cwd=path)
    (repo.path / "a.txt").write_text("committed\n")
    assert r.commit([{"action": "modified", "path": "a.txt"}])
    r.settle_index()
    git("stash", "pop", cwd=path, check=False)  # conflicts: unmerged entries, no MERGE_HEAD
    assert git("ls-files", "-u", cwd=path)
    (repo.path / "b.txt").write_text("b\n")
    assert r.commit([{"action": "added", "path": "b.txt"},
                     {"action": "modified", "path": "a.txt"}])
    assert b"<<<<<<<" not in git("show", "HEAD:a.txt", cwd=path)
    assert not git("ls-files", "-u", cwd=path)


def test_a_folder_inside_a_working_tree_runs_statuscmd(repo, tmp_path):
    """The staged list is the folder's (--relative): below the top, statuscmd decides."""
    from fakes import config as make_config
    from autosync.core.config import GIT_COMMANDS as commands
    (repo.path / "sub").mkdir()
    (repo.path / "top.txt").write_text("t")
    git("add", "top.txt", cwd=str(repo.path))  # staged outside the synced folder
    r = Repository(make_config(repo.path / "sub", commands=dict(
        commands, statuscmd="git diff --cached --quiet")), Reports())
    assert not r.at_top
    assert r.commit([], rescan=True)  # statuscmd sees top.txt staged: commit


def test_a_pull_reads_the_whole_index_only_to_write_it(repo, tmp_path, monkeypatch):
    """A guarded pull that brings one file: no `ls-files` (the conflict copies are counted
    only when the pull names one), and none for a killed merge after our own commit."""
    r, reports = repo(statuscmd="git diff --cached --quiet")
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}]) and r.push()
    other = tmp_path / "other"
    git("clone", "-q", repo.remote.path, str(other))
    (other / "b.txt").write_text("b")
    git("add", "b.txt", cwd=str(other))
    git("-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", "autosync on other: 1 added",
        cwd=str(other))
    git("push", "-q", cwd=str(other))
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    assert r.pull()["ok"] and (repo.path / "b.txt").read_text() == "b"
    assert whole_index_reads(git_commands(trace)) == []
    # A conflict copy pulled in is counted.
    copy = "b (conflict from other 2026-01-01 120000).txt"
    (other / copy).write_text("old b")
    git("add", copy, cwd=str(other))
    git("-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", "autosync on other: 1 added",
        cwd=str(other))
    git("push", "-q", cwd=str(other))
    assert r.pull()["ok"]
    assert reports.fields["conflicts"] == [copy]


def test_a_stop_kills_the_pull_s_fetch_and_the_pull_is_not_done_not_failed(repo, tmp_path,
                                                                           caplog):
    import logging
    import threading
    from autosync.vcs.commands import Template
    from base import wait_until
    caplog.set_level(logging.INFO)
    r, reports = repo()
    other = str(tmp_path / "other")
    git("clone", "-q", repo.remote.path, other)
    with open(os.path.join(other, "new.txt"), "w") as f:
        f.write("from the other machine\n")
    git("add", "new.txt", cwd=other)
    git("commit", "-q", "-m", "new", cwd=other)
    git("push", "-q", "origin", "HEAD:main", cwd=other)
    started = str(tmp_path / "fetching")
    r.git_pull.fetch = Template("pullcmd", "touch %s && exec sleep 600" % started)  # a slow server
    replies = []
    puller = threading.Thread(target=lambda: replies.append(r.pull()))
    puller.start()
    wait_until(lambda: os.path.exists(started), what="the fetch to hang")
    r.stop()  # as Committer.stop does, from its SIGTERM handler
    puller.join(30)
    assert not puller.is_alive()
    assert replies == [{"ok": False, "pulled": False, "stopping": True,
                        "error": "the daemon is stopping before the pull was made"}]
    assert reports.named("failed") == []
    said = [rec.getMessage() for rec in caplog.records]
    assert "pull not done: the daemon is stopping (the next start pulls)" in said
    assert not os.path.exists(repo.path / "new.txt")


def test_rmcmd_is_not_run_for_paths_a_pull_has_just_removed(repo, tmp_path, caplog):
    import logging
    caplog.set_level(logging.DEBUG)
    # A user's own rmcmd that fails on a path git does not hold (`git rm` without -r or
    # --ignore-unmatch), as a drop-in config's may.
    r, reports = repo(rmcmd="git rm -q %s")
    for name in ("gone.txt", "kept.txt"):
        (repo.path / name).write_text(name)
    assert r.commit([{"action": "added", "path": "gone.txt"},
                     {"action": "added", "path": "kept.txt"}])
    assert r.push()
    other = str(tmp_path / "other")
    git("clone", "-q", repo.remote.path, other)
    git("rm", "-q", "gone.txt", cwd=other)
    git("commit", "-q", "-m", "removed there", cwd=other)
    git("push", "-q", "origin", "HEAD:main", cwd=other)
    assert r.pull()["ok"] and not (repo.path / "gone.txt").exists()
    # The watcher names the pull's removal after it; a file removed here too.
    os.unlink(repo.path / "kept.txt")
    assert r.commit([{"action": "removed", "path": "gone.txt"},
                     {"action": "removed", "path": "kept.txt"}])
    said = [rec.getMessage() for rec in caplog.records]
    assert not any("rmcmd failed" in line for line in said), said
    ran = [line for line in said if line.startswith("rmcmd: ")]
    assert len(ran) == 1 and ran[0].endswith("< kept.txt"), ran  # (its paths on stdin)
    assert reports.named("failed") == []
    assert b"kept.txt" not in git("ls-tree", "-r", "--name-only", "HEAD", cwd=str(repo.path))


def test_a_stop_kills_a_push_under_way_and_it_is_not_done_not_failed(repo, tmp_path, caplog):
    import logging
    import threading
    from autosync.vcs.commands import Template
    from base import wait_until
    caplog.set_level(logging.INFO)
    r, reports = repo()
    (repo.path / "a.txt").write_text("a")
    assert r.commit([{"action": "added", "path": "a.txt"}])
    started = str(tmp_path / "pushing")
    r.cmd["pushcmd"] = Template("pushcmd", "touch %s && exec sleep 600" % started)  # slow
    done = []
    pusher = threading.Thread(target=lambda: done.append(r.push()))
    pusher.start()
    wait_until(lambda: os.path.exists(started), what="the push to hang")
    r.stop()
    pusher.join(30)
    assert not pusher.is_alive() and done == [False]
    assert reports.named("failed") == []
    said = [rec.getMessage() for rec in caplog.records]
    assert "push not done: the daemon is stopping (the next start pushes)" in said
    # A push that begins after the stop (of the stop's last commit) still runs.
    r.cmd["pushcmd"] = Template("pushcmd", "git push -q")
    assert r.push() and repo.remote.files()[b"a.txt"] == b"a"


def test_a_first_commit_of_many_files_tells_its_steps_and_a_small_batch_none(tmp_path):
    # core/underway.py: a rescan in a folder with no commit yet is a first sync (how many
    # files is known once git has staged them); a batch under LONG files says nothing
    from autosync.core.underway import LONG
    folder = tmp_path / "first"
    git("init", "-q", "-b", "main", str(folder))
    for i in range(LONG + 200):
        (folder / ("f%04d.txt" % i)).write_text("file %d\n" % i)
    reports = Reports()
    r = Repository(config(folder, commands=dict(GIT_COMMANDS)), reports)
    assert r.commit([], rescan=True)
    told = [fields["progress"] for args, fields in reports.named("event")
            if args[0] == "progress"]
    assert [p and (p["doing"], p["files"], p["done"]) for p in told] == [
        ("adding", None, None), ("committing", LONG + 200, None), None]
    assert told[0]["since"] <= told[1]["since"] and reports.fields["progress"] is None
    for i in range(LONG - 1):
        (folder / ("g%04d.txt" % i)).write_text("small batch %d\n" % i)
    before = len(reports.calls)
    assert r.commit([{"action": "added", "path": "g%04d.txt" % i} for i in range(LONG - 1)])
    assert not [c for c in reports.calls[before:] if c[0] == "event" and c[1][0] == "progress"]


def test_a_push_of_many_files_made_before_the_start_tells_how_many(repo):
    # commits made before this start (a first sync cut short by a logout): git counts them
    from autosync.core.underway import LONG
    for i in range(LONG + 5):
        (repo.path / ("f%04d.txt" % i)).write_text("file %d\n" % i)
    git("add", "-A", cwd=repo.path)
    git("commit", "-q", "-m", "made before the start", cwd=repo.path)
    r, reports = repo()
    assert r.push()
    told = [fields["progress"] for args, fields in reports.named("event")
            if args[0] == "progress"]
    assert [p and (p["doing"], p["files"]) for p in told] == [("pushing", LONG + 5), None]
    assert repo.remote.files().keys() >= {b"f0000.txt", b"README"}
    # pushed: the next push has nothing to say
    (repo.path / "one.txt").write_text("one\n")
    assert r.commit([{"action": "added", "path": "one.txt"}]) and r.push()
    assert len([1 for args, _ in reports.named("event") if args[0] == "progress"]) == 2


# --- a pullcmd of the user's that fails half-way (issue 40 item 4) --------------------


def test_a_failed_pullcmd_s_half_written_files_are_never_committed(repo, tmp_path):
    """The pull's leftovers (cut files the pull's target has, whole or begun) are put back
    as HEAD has them and never committed, pushed or taken for the user's; the user's own
    edit made before the pull is committed and reaches the remote; the failure is said."""
    other = tmp_path / "other"
    git("clone", "-q", repo.remote.path, str(other))
    contents = {"big.txt": "x" * 5000 + "\n", "empty.txt": "", "README": "changed on b\n",
                "whole.txt": "abc"}  # (the script writes 4 bytes: all of whole.txt)
    for name, text in contents.items():
        (other / name).write_text(text)
    git("add", "-A", cwd=str(other))
    git("commit", "-q", "-m", "b's", cwd=str(other))
    git("push", "-q", "origin", "HEAD:main", cwd=str(other))
    full = tmp_path / "full"
    full.touch()
    script = tmp_path / "pull.sh"
    script.write_text(CUT_PULL % {"full": full})
    r, reports = repo(pullcmd="bash %s" % script)
    (repo.path / "mine.txt").write_text("the user's own edit\n")
    before = git("rev-parse", "HEAD", cwd=str(repo.path)).strip()

    result = r.pull()
    assert not result["ok"] and "No space left on device" in result["error"]
    assert "left half-written" not in result["error"]  # all of them put back
    said = [args[1] for args, _ in reports.named("failed") if args[0] == "pull"]
    assert said and "No space left on device" in str(said[-1])
    # Put back as HEAD has them: new files gone, README as committed.
    assert sorted(os.listdir(repo.path)) == [".git", "README", "mine.txt"]
    assert (repo.path / "README").read_text() == "synced folder\n"
    # The user's edit was committed ("changes made before a pull"), nothing of the pull's.
    assert git("diff", "--name-only", before, "HEAD", cwd=str(repo.path)).split() == [
        b"mine.txt"]
    assert not r.commit([], rescan=True)  # the rescan after the pull finds nothing more

    full.unlink()  # space again: the next pull works, the push takes the user's edit
    assert r.pull()["ok"] and r.push()
    files = repo.remote.files()
    assert files[b"mine.txt"] == b"the user's own edit\n"
    for name, text in contents.items():  # no cut version in the remote's history, ever
        assert files[name.encode()] == text.encode()
        versions = git("log", "--format=%H", "main", "--", name, cwd=repo.remote.path).split()
        assert {git("show", b"%s:%s" % (v, name.encode()), cwd=repo.remote.path,
                    check=False) for v in versions} <= {text.encode(), b"synced folder\n",
                                                        None}  # (None: removed there)


def test_a_leftover_that_cannot_be_put_back_is_kept_out_of_commits_until_it_changes(
        repo, tmp_path, monkeypatch):
    from autosync.vcs import pullleftovers
    other = tmp_path / "other"
    git("clone", "-q", repo.remote.path, str(other))
    (other / "new.txt").write_text("the remote's new file\n")
    git("add", "-A", cwd=str(other))
    git("commit", "-q", "-m", "b's", cwd=str(other))
    git("push", "-q", "origin", "HEAD:main", cwd=str(other))
    full = tmp_path / "full"
    full.touch()
    script = tmp_path / "pull.sh"
    script.write_text(CUT_PULL % {"full": full})
    r, reports = repo(pullcmd="bash %s" % script)
    monkeypatch.setattr(pullleftovers.Writer, "remove", lambda self, rel, expect: False)
    result = r.pull()
    assert not result["ok"] and "1 file(s) it left half-written are kept out of commits " \
                                "(new.txt)" in result["error"]
    assert (repo.path / "new.txt").read_text() == "the "
    assert not r.commit([{"action": "added", "path": "new.txt"}])
    assert not r.commit([], rescan=True)
    (repo.path / "new.txt").write_text("the user's now\n")  # changed: the user's
    assert r.commit([{"action": "modified", "path": "new.txt"}])


def test_bytes_a_killed_write_moved_aside_are_kept_with_their_file_s_filter(repo, tmp_path,
                                                                          monkeypatch):
    """A write killed between its swap and its swap back leaves the user's bytes under
    a temporary name; kept as a conflict copy, they get the attributes of the file they
    were (a rule naming it alone: git-crypt's way), so the rescan stores them encrypted."""
    import subprocess
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    r, _ = repo()
    folder = str(repo.path)
    git("config", "filter.crypt.clean", "sed 's/^/ENC:/'", cwd=folder)
    git("config", "filter.crypt.smudge", "sed 's/^ENC://'", cwd=folder)
    (repo.path / ".gitattributes").write_text("secrets.env filter=crypt\n")
    (repo.path / "secrets.env").write_text("KEY=pulled\n")
    temp = repo.path / ".autosync-write.1.1~"
    temp.write_text("KEY=typed here\n")    # the user's cleartext, moved aside
    dead = subprocess.Popen(["true"])
    dead.wait()
    journal = tmp_path / "state" / "autosync" / "writing"
    journal.mkdir(parents=True, mode=0o700)
    (journal / ("%d.1" % dead.pid)).write_bytes(
        bytes(temp) + b"\0" + bytes(repo.path / "secrets.env") + b"\0" + b"1" * 40 + b"\0")
    [kept] = r.pulls.keep_leftover_writes()
    copy = os.path.relpath(kept, folder)
    assert open(kept).read() == "KEY=typed here\n"
    git("add", "-A", cwd=folder)
    assert git("cat-file", "blob", ":" + copy, cwd=folder) == b"ENC:KEY=typed here\n"


# Names Mercurial reads as patterns when given raw (`hg help patterns`), and a name
# every such pattern would match too.
HG_PATTERN_NAMES = ["re:.*", "glob:*", "set:all()", "listfile:x", "path:y", "relglob:z",
                    "rootfilesin:w", "*", "-rf", "d/re:q"]


@pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")
def test_mercurial_gets_every_name_literally_and_one_it_refuses_is_held_back_alone(
        tmp_path, central, caplog):
    """docs/examples/mercurial.autosync's commands on a real clone: each name reaches hg
    as a path (add, rename, log, cat, files), and a name hg refuses (a newline, a
    carriage return) is held back and said once while everything else is committed,
    in a batch and in a rescan (hg addremove aborts on it)."""
    from base import hg
    from helpers import example_dvcs_section
    from autosync.core import config as config_module
    from autosync.tools.history import History
    clone = tmp_path / "clone"
    hg("clone", "-q", central, str(clone))
    conf = tmp_path / "hg.autosync"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\n%s"
                    % (clone, example_dvcs_section()))
    conf.chmod(0o600)
    cfg = config_module.load(str(conf))
    reports = Reports()
    r = Repository(cfg, reports)
    (clone / "d").mkdir()
    for name in HG_PATTERN_NAMES + ["untouched.txt"]:
        (clone / name).write_text(name)
    assert r.commit([{"action": "added", "path": n} for n in HG_PATTERN_NAMES])
    assert sorted(hg("files", "-r", "tip", cwd=clone).splitlines()) == sorted(
        HG_PATTERN_NAMES + ["README"])  # untouched.txt: matched by none
    (clone / "glob:*").rename(clone / "set:moved")
    assert r.commit([{"action": "moved", "path": "set:moved", "src": "glob:*"}])
    assert "set:moved (glob:*)" in hg("log", "-r", "tip", "-T", "{file_copies}", cwd=clone)
    history = History(cfg)
    [version] = history.versions("re:.*")  # one commit touched it, not every commit
    assert version.action == "added"
    assert history.content(version.rev, "re:.*") == b"re:.*"
    assert history.listing(version.rev, "set:all()") == {"set:all()": "100644"}

    for name in ("new\nline", "carriage\rreturn"):
        (clone / name).write_text("hg refuses this name")
    (clone / "after.txt").write_text("x")
    assert r.commit([{"action": "added", "path": n}
                     for n in ("new\nline", "carriage\rreturn", "after.txt")])
    assert "after.txt" in hg("files", "-r", "tip", cwd=clone)
    assert reports.fields["held_back"] == ["carriage\rreturn", "new\nline"]
    said = reports.named("failed")
    assert len(said) == 1 and said[0][1] == {"retry": None, "quiet": False}
    assert "Mercurial cannot record a name with a newline" in said[0][0][1]
    assert '"new\\nline"' in said[0][0][1]
    # A rescan (each start, each pull): hg addremove aborts on those names; the rest goes.
    (clone / "later.txt").write_text("x")
    (clone / "re:.*").unlink()
    assert r.commit([], rescan=True)
    files = hg("files", "-r", "tip", cwd=clone).splitlines()
    assert "later.txt" in files and "untouched.txt" in files and "re:.*" not in files
    assert reports.fields["held_back"] == ["carriage\rreturn", "new\nline"]
    assert len([f for f in reports.named("failed") if not f[1]["quiet"]]) == 1  # said once
    assert not [r for r in caplog.records if "cannot record" in r.getMessage()]  # (there)
    # Renamed, it is synced, and nothing is held back any more.
    (clone / "new\nline").rename(clone / "new line")
    (clone / "carriage\rreturn").unlink()
    assert r.commit([{"action": "moved", "path": "new line", "src": "new\nline"},
                     {"action": "removed", "path": "carriage\rreturn"}])
    assert "new line" in hg("files", "-r", "tip", cwd=clone).splitlines()
    assert reports.fields["held_back"] == [] and r.commit_error is None
    assert hg("status", cwd=clone) == ""
