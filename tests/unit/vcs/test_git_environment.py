"""git_environment: the settings syncing relies on win over any git configuration,
and nothing else of the user's is touched (checked with git itself)."""
import dataclasses
import os
import subprocess

import pytest

from autosync.vcs import commands, git_environment
from autosync.vcs.git_environment import PLAIN, GitEnvironment
from base import ROOT, git

OURS = len(git_environment.SETTINGS)


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    for name in list(os.environ):
        if name.startswith("GIT_CONFIG_"):
            monkeypatch.delenv(name)


@pytest.fixture
def repo(tmp_path):
    folder = str(tmp_path / "repo")
    git("init", "-q", folder)
    return folder


def config_get(folder, key, *options, gitenv=PLAIN):
    """What git itself says `key` is, run the way the suite runs every command."""
    proc = subprocess.run(("git",) + options + ("config", "--get", key), cwd=folder,
                          env=commands.environment(gitenv=gitenv), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def pairs(out):
    count = int(out["GIT_CONFIG_COUNT"])
    return [(out.get("GIT_CONFIG_KEY_%d" % i), out.get("GIT_CONFIG_VALUE_%d" % i))
            for i in range(count)]


def test_without_user_variables_ours_start_at_zero():
    out = PLAIN.variables({})
    assert int(out["GIT_CONFIG_COUNT"]) == OURS
    assert pairs(out) == [(k, v) for k, v, _ in git_environment.SETTINGS]
    for name, value in git_environment.VARIABLES.items():
        assert out[name] == value


def test_ours_come_after_the_users_and_leave_them_alone():
    env = {"GIT_CONFIG_COUNT": "2",
           "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "Someone",
           "GIT_CONFIG_KEY_1": "pull.rebase", "GIT_CONFIG_VALUE_1": "true"}
    out = PLAIN.variables(env)
    assert int(out["GIT_CONFIG_COUNT"]) == 2 + OURS
    for i in (0, 1):
        assert "GIT_CONFIG_KEY_%d" % i not in out and "GIT_CONFIG_VALUE_%d" % i not in out
    assert out["GIT_CONFIG_KEY_2"] == git_environment.SETTINGS[0][0]


@pytest.mark.parametrize("count", ["", "many"])
def test_a_count_that_is_not_a_number_is_replaced(count):
    out = PLAIN.variables({"GIT_CONFIG_COUNT": count})
    assert int(out["GIT_CONFIG_COUNT"]) == OURS
    assert out["GIT_CONFIG_KEY_0"] == git_environment.SETTINGS[0][0]


def test_a_hostile_gitconfig_is_overridden_and_the_identity_kept(repo, private_home):
    with open(os.path.join(str(private_home), ".gitconfig"), "a") as f:
        f.write("[pull]\n\trebase = true\n\tff = only\n[color]\n\tui = always\n"
                "[merge]\n\tconflictStyle = zdiff3\n\tautoStash = true\n"
                "[rerere]\n\tenabled = true\n[status]\n\tshort = true\n")
    git("config", "pull.rebase", "merges", cwd=repo)  # the repository's own file too
    assert config_get(repo, "pull.rebase") == "false"
    assert config_get(repo, "pull.ff") == "true"
    assert config_get(repo, "color.ui") == "never"
    assert config_get(repo, "merge.conflictStyle") == "merge"
    assert config_get(repo, "merge.autoStash") == "false"
    assert config_get(repo, "rerere.enabled") == "false"
    assert config_get(repo, "status.short") == "false"
    assert config_get(repo, "user.name") == "Test"
    assert config_get(repo, "user.email") == "test@example.org"


def test_the_users_environment_settings_stay_unless_syncing_needs_them(repo, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "From The Environment")
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "pull.rebase")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", "true")
    assert config_get(repo, "user.name") == "From The Environment"
    assert config_get(repo, "pull.rebase") == "false"


def test_a_command_line_setting_still_wins(repo):
    assert config_get(repo, "pull.rebase", "-c", "pull.rebase=true") == "true"


def test_an_excludes_file_given_adds_core_excludesfile(repo, tmp_path):
    assert "core.excludesFile" not in dict(pairs(PLAIN.variables({})))
    excludes = str(tmp_path / "excludes")
    with open(excludes, "w") as f:
        f.write("*.secret\n")
    with open(os.path.join(repo, "a.secret"), "w") as f:
        f.write("x\n")
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("x\n")
    given = GitEnvironment(excludes=excludes)
    assert dict(pairs(given.variables({})))["core.excludesFile"] == excludes
    assert int(given.variables({})["GIT_CONFIG_COUNT"]) == OURS + 1
    assert config_get(repo, "core.excludesFile", gitenv=given) == excludes
    assert config_get(repo, "core.excludesFile") is None  # only where it is given

    def status(gitenv):
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                              cwd=repo, env=commands.environment(gitenv=gitenv),
                              stdout=subprocess.PIPE, check=True).stdout.decode()
    assert "a.txt" in status(given) and "a.secret" not in status(given)
    assert "a.secret" in status(PLAIN)


def test_largefiles_and_ssh_go_only_where_given():
    """The committer's GitEnvironment carries annex.largefiles and the held connection's
    GIT_SSH_COMMAND; nothing else in the process gets them (no process-wide state)."""
    given = GitEnvironment(largefiles="largerthan=10mb", ssh_command="ssh -S x")
    env = commands.environment(gitenv=given)
    assert env["GIT_SSH_COMMAND"] == "ssh -S x"
    assert dict(pairs(env))["annex.largefiles"] == "largerthan=10mb"
    plain = commands.environment()
    assert "annex.largefiles" not in dict(pairs(plain))
    assert plain.get("GIT_SSH_COMMAND") == os.environ.get("GIT_SSH_COMMAND")
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.excludes = "/elsewhere"


def test_no_pager_editor_or_prompt_can_wait(repo, private_home):
    with open(os.path.join(str(private_home), ".gitconfig"), "a") as f:
        f.write("[core]\n\tpager = false\n\teditor = false\n")
    env = commands.environment()
    assert env["GIT_PAGER"] == "cat" and env["GIT_EDITOR"] == "true"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    proc = subprocess.run(["git", "var", "GIT_EDITOR"], cwd=repo, env=env,
                          stdout=subprocess.PIPE, check=True)
    assert proc.stdout.decode().strip() == "true"


def test_the_readme_lists_every_setting():
    """The table of settings left the README for docs/behaviour.md."""
    with open(os.path.join(ROOT, "docs", "behaviour.md")) as f:
        readme = f.read()
    missing = [k for k, _, _ in git_environment.SETTINGS if k not in readme]
    missing += [k for k in git_environment.VARIABLES if k not in readme]
    assert missing == []


def test_large_tree_settings_measured_and_left_out_stay_out():
    """The large-tree settings measured and rejected (NOT_SET says why) are never forced:
    a split index, above all, would make libgit2 tools fail on the user's repository."""
    ours = {key for key, _, _ in git_environment.SETTINGS}
    for key, _, why in git_environment.NOT_SET:
        assert key not in ours and why
    assert not any(k.startswith(("core.splitIndex", "index.", "feature."))
                   for k, _ in pairs(PLAIN.variables({})))


def test_no_split_index_is_written_by_the_suites_commands(repo):
    """A git add run the suite's way leaves a plain index (no sharedindex file)."""
    with open(os.path.join(repo, "a"), "w") as f:
        f.write("a\n")
    subprocess.run(("git", "add", "a"), cwd=repo, env=commands.environment(), check=True)
    assert not [n for n in os.listdir(os.path.join(repo, ".git")) if n.startswith("sharedindex.")]


def objects(folder):
    """(loose object files, pack files with their sizes) in a clone's object store."""
    store = os.path.join(folder, ".git", "objects")
    loose = [n for n in os.listdir(store) if len(n) == 2]
    packs = {n: os.path.getsize(os.path.join(store, "pack", n))
             for n in os.listdir(os.path.join(store, "pack")) if n.endswith(".pack")}
    return loose, packs


def test_a_big_file_is_stored_as_it_is_and_a_small_one_still_deflated(repo):
    """Issue 32: a file over core.bigFileThreshold goes straight into a pack, not
    deflated (pack.compression=0); a small text file stays a deflated loose object."""
    big = os.urandom(17 << 20)  # over 16 MB
    with open(os.path.join(repo, "big.bin"), "wb") as f:
        f.write(big)
    with open(os.path.join(repo, "notes.txt"), "w") as f:
        f.write("a line of notes\n" * 4096)  # 64 KiB, compresses well
    env = commands.environment()
    assert config_get(repo, "core.bigFileThreshold") == "16m"
    assert config_get(repo, "pack.compression") == "0"
    subprocess.run(("git", "add", "big.bin", "notes.txt"), cwd=repo, env=env, check=True)
    loose, packs = objects(repo)
    assert len(packs) == 1 and len(loose) == 1
    # Stored: the pack holds the whole file and little more (zlib's stored blocks).
    assert len(big) <= list(packs.values())[0] < len(big) * 1.01
    loose_dir = os.path.join(repo, ".git", "objects", loose[0])
    (name,) = os.listdir(loose_dir)
    assert os.path.getsize(os.path.join(loose_dir, name)) < 4096  # the text, deflated
    blob = subprocess.run(("git", "cat-file", "blob", ":big.bin"), cwd=repo, env=env,
                          stdout=subprocess.PIPE, check=True).stdout
    assert blob == big


def test_a_pulled_pack_is_kept_as_it_came(repo, tmp_path):
    """fetch.unpackLimit=1: even one fetched object stays in the pack that brought it
    (git's default unpacks fewer than 100 into loose objects, deflating each again)."""
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("one file\n")
    git("add", "a.txt", cwd=repo)
    git("commit", "-q", "-m", "one", cwd=repo)
    other = str(tmp_path / "other")
    git("init", "-q", other)
    subprocess.run(("git", "fetch", "-q", repo, "HEAD"), cwd=other, env=commands.environment(),
                   check=True)
    loose, packs = objects(other)
    assert loose == [] and len(packs) == 1
