"""autosync-remote serve, the forced command of a restricted key: what it makes of
git-annex's commands (git-annex-shell), word by word. The commands admitted are those
git-annex 10.20230126 sent over ssh for a sync with content, a get, a drop here and from
the remote, an init on a repository with an annex and on one without (logged by a
forced command that wrote SSH_ORIGINAL_COMMAND down). The same through a real sshd and
git-annex: tests/e2e/test_restricted_annex.py."""
import shlex

import pytest

from autosync.ssh import remote as ar
from repos import ME, THEM, repos  # noqa: F401 (repos: a fixture)

def test_what_git_annex_sends_runs_git_annex_shell_on_the_served_repository(repos):
    repo, _, home = repos
    for sent, arguments in (
            ("git-annex-shell 'configlist' '%s'" % repo, ["configlist", repo]),
            ("git-annex-shell 'configlist' '%s' '--' 'autoinit=1' '--'" % repo,
             ["configlist", repo, "--", "autoinit=1", "--"]),
            ("git-annex-shell 'p2pstdio' '%s' '%s' --uuid %s" % (repo, ME, THEM),
             ["p2pstdio", repo, ME, "--uuid", THEM]),
            ("git-annex-shell 'p2pstdio' '%s' '--debug' '%s' --uuid %s" % (repo, ME, THEM),
             ["p2pstdio", repo, ME, "--debug", "--uuid", THEM]),
            ("git-annex-shell 'notifychanges' '%s' --uuid=%s" % (repo, THEM),
             ["notifychanges", repo, "--uuid=" + THEM]),
            ("git-annex-shell 'p2pstdio' '%s' '%s' -- 'remoteuuid=%s' --" % (repo, ME, ME),
             ["p2pstdio", repo, ME, "--", "remoteuuid=" + ME, "--"]),
            # ssh://HOST/~/sync.git and HOST:sync.git: git-annex writes the home as /~/;
            # git-annex-shell gets the served path all the same
            ("git-annex-shell 'configlist' '/~/sync.git'", ["configlist", repo]),
            ("git-annex-shell 'configlist' 'sync.git'", ["configlist", repo]),
            ("git-annex-shell 'configlist' '%s/'" % repo, ["configlist", repo])):
        assert ar.asked(sent, repo, home) == "annex", sent
        assert ar.annex_arguments(shlex.split(sent), repo, home) == arguments, sent


def test_a_tilde_is_read_below_the_home(repos, monkeypatch):
    repo, _, home = repos
    monkeypatch.setenv("HOME", home)
    assert ar.annex_arguments(["git-annex-shell", "configlist", "/~/sync"], repo) == \
        ["configlist", repo]


def test_the_connection_git_annex_opens_first_runs_nothing(repos):
    repo, _, home = repos
    assert ar.asked("true", repo, home) == "true"
    assert ar.serve(repo, "true") == 0
    for sent in ("true; sh", "true x", "/bin/true"):
        with pytest.raises(ar.NotAllowed):
            ar.asked(sent, repo, home)


def refusal(sent, repo, home):
    with pytest.raises(ar.NotAllowed) as refused:
        ar.asked(sent, repo, home)
    said = str(refused.value)
    assert "\n" not in said
    return said


def test_another_repository_or_a_path_outside_is_refused(repos):
    repo, other, home = repos
    for path in (other, "other.git", "/~/other.git", repo + "/../other.git", "/", "/tmp",
                 "..", repo + "/..", "-c", "--uuid=" + THEM, ""):
        for command in ("configlist", "p2pstdio"):
            sent = "git-annex-shell '%s' '%s' %s" % (command, path, ME)
            assert refusal(sent, repo, home) == "this key may only sync %s, not %s" % (
                repo, path), sent


def test_other_commands_options_and_fields_are_refused(repos):
    repo, _, home = repos
    start = "this key may only sync %s: git-annex-shell " % repo
    only = " is not a command it runs here (only configlist, notifychanges, p2pstdio)"
    for sent, said in (
            # what git-annex-shell does besides, or hands to git-shell
            ("git-annex-shell 'dropkey' '%s' KEY" % repo, "dropkey" + only),
            ("git-annex-shell 'sendkey' '%s' KEY" % repo, "sendkey" + only),
            ("git-annex-shell 'gcryptsetup' '%s' x" % repo, "gcryptsetup" + only),
            ("git-annex-shell 'git-upload-pack' '%s'" % repo, "git-upload-pack" + only),
            ("git-annex-shell -c 'configlist %s'" % repo, "-c" + only),
            ("git-annex-shell ''", "''" + only),
            ("git-annex-shell", "without a command" + only),
            ("git-annex-shell configlist", "configlist without a directory"),
            # an option git-annex-shell would take, smuggled in
            ("git-annex-shell 'configlist' '%s' -c annex.x=y" % repo,
             "configlist: -c is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' %s --uuid -c" % (repo, ME),
             "p2pstdio: --uuid is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' %s --uuid" % (repo, ME),
             "p2pstdio: --uuid is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' --uuid=-x %s" % (repo, ME),
             "p2pstdio: --uuid=-x is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' --json %s" % (repo, ME),
             "p2pstdio: --json is not an argument it takes here"),
            ("git-annex-shell 'p2pstdio' '%s' '../x'" % repo,
             "p2pstdio: ../x is not an argument it takes here"),
            # the words the command takes
            ("git-annex-shell 'p2pstdio' '%s'" % repo,
             "p2pstdio takes 1 word(s) after the directory, not 0"),
            ("git-annex-shell 'configlist' '%s' %s" % (repo, ME),
             "configlist takes 0 word(s) after the directory, not 1"),
            # fields: only git-annex's, and nothing after them (rsync's options)
            ("git-annex-shell 'configlist' '%s' -- autoinit=1 -- --server" % repo,
             "configlist: words after its fields"),
            ("git-annex-shell 'configlist' '%s' -- autoinit=1" % repo,
             "configlist: words after its fields"),
            ("git-annex-shell 'configlist' '%s' --" % repo, "configlist: words after its fields"),
            ("git-annex-shell 'configlist' '%s' -- associatedfile=x --" % repo,
             "configlist: the field associatedfile=x is not one git-annex sends"),
            ("git-annex-shell 'configlist' '%s' -- autoinit=yes --" % repo,
             "configlist: the field autoinit=yes is not one git-annex sends"),
            ("git-annex-shell 'configlist' '%s' -- autoinit --" % repo,
             "configlist: the field autoinit is not one git-annex sends"),
            ("git-annex-shell 'p2pstdio' '%s' %s -- 'remoteuuid=a b' --" % (repo, ME),
             "p2pstdio: the field remoteuuid=a b is not one git-annex sends")):
        assert refusal(sent, repo, home) == start + said, sent


def test_git_and_the_watch_are_admitted_as_before(repos):
    repo, _, home = repos
    assert ar.asked("git-upload-pack '%s'" % repo, repo, home) == "upload-pack"
    assert ar.asked("git-receive-pack '%s'" % repo, repo, home) == "receive-pack"
    assert refusal("git-annex '%s'" % repo, repo, home) == \
        "this key may only sync %s: git-annex is not a command of git's, git-annex's or " \
        "the watch" % repo


def test_git_annex_shell_is_held_to_the_repository_and_its_own_commands():
    env = ar.annex_environment("/srv/sync.git", {"PATH": "/usr/bin",
                                                 "GIT_ANNEX_SHELL_DIRECTORY": "/",
                                                 "GIT_ANNEX_SHELL_LIMITED": "",
                                                 "GIT_ANNEX_SHELL_APPENDONLY": "1",
                                                 "SSH_ORIGINAL_COMMAND": "sh"})
    assert env == {"PATH": "/usr/bin", "GIT_ANNEX_SHELL_DIRECTORY": "/srv/sync.git",
                   "GIT_ANNEX_SHELL_LIMITED": "1",
                   # set in the forced command by whoever wants a key that cannot drop
                   "GIT_ANNEX_SHELL_APPENDONLY": "1"}
