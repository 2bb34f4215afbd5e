"""The daemon's identity (vcs/daemon_identity.py): one module names it, sets it and reads it;
the shipped hook and recovery tell the daemon's commands by it."""
import os
import subprocess
import sys

import autosync
from autosync.vcs import daemon_identity
from autosync.vcs.commands import Template, environment
from base import ROOT, git

PACKAGE = os.path.dirname(autosync.__file__)


def test_every_command_the_suite_runs_carries_it_and_a_hook_under_git_sees_it(tmp_path):
    assert environment()[daemon_identity.NAME] == daemon_identity.VALUE
    folder = str(tmp_path / "repo")
    git("init", "-q", folder)
    seen = tmp_path / "seen"
    hook = os.path.join(folder, ".git", "hooks", "post-commit")
    with open(hook, "w") as f:
        f.write('#!/bin/sh\necho "${%s:-none}" > "%s"\n' % (daemon_identity.NAME, seen))
    os.chmod(hook, 0o755)
    Template("commitcmd", "git commit -q --allow-empty -m %s").run("daemon's", cwd=folder)
    assert seen.read_text().strip() == daemon_identity.VALUE
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "user's"], cwd=folder,
                   env={k: v for k, v in os.environ.items() if k != daemon_identity.NAME},
                   check=True)
    assert seen.read_text().strip() == "none"


def test_the_shipped_hook_begins_with_the_exit_the_fsmonitor_looks_for():
    with open(os.path.join(ROOT, "hooks", "post-commit")) as f:
        commands = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    assert commands[0] == daemon_identity.HOOK_EXIT


def test_started_by_daemon_reads_another_process_s_environment(spawn):
    code = "import sys; print('ready', flush=True); sys.stdin.read()"
    ours = spawn([sys.executable, "-c", code], env=dict(os.environ, **daemon_identity.variables()))
    users = spawn([sys.executable, "-c", code],
                  env={k: v for k, v in os.environ.items() if k != daemon_identity.NAME})
    for proc in (ours, users):
        assert proc.stdout.readline() == b"ready\n"
    assert daemon_identity.started_by_daemon(ours.pid)
    assert not daemon_identity.started_by_daemon(users.pid)
    assert not daemon_identity.started_by_daemon(2 ** 22 + 1)  # no such process


def test_only_daemon_identity_names_the_variable():
    """Its name, how it is set and how it is read live in one module: any other module
    of the package that spells it fails here."""
    spelt = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and path != daemon_identity.__file__:
                with open(path) as f:
                    if daemon_identity.NAME in f.read():
                        spelt.append(os.path.relpath(path, PACKAGE))
    assert spelt == []
