"""A failed command is told in the DVCS's own words (issue 18, item 3), end to end: the
real suite, real git, and the status's `last_error` (what the log and the notification
say too) holding git's reasons and advice, not only its last line."""
import os


from base import git, wait_until



def write(machine, rel, text):
    with open(os.path.join(machine.path, rel), "w") as f:
        f.write(text)


def test_a_commit_without_a_git_identity_says_the_command_that_sets_it(machines):
    a = machines("a", start=False)
    git("config", "--global", "--unset", "user.email")
    git("config", "--global", "user.useConfigOnly", "true")   # no guess from the host name
    a.start()
    write(a, "notes.txt", "x\n")
    error = wait_until(lambda: a.status().get("last_error"), 20, what="the commit to fail")
    assert error.startswith("commit: commitcmd failed (exit 128): git commit -q -F - < ")
    assert 'git config --global user.email "you@example.com"' in error
    assert "fatal: no email was given and auto-detection is disabled" in error
    assert "\n" not in error


def test_a_push_the_remote_refuses_keeps_its_reasons(machines, remote):
    hook = os.path.join(remote.path, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho 'quota exceeded: 10 GB used of 10 GB'\nexit 1\n")
    os.chmod(hook, 0o755)
    a = machines("a")
    write(a, "big.txt", "x\n")
    error = wait_until(lambda: a.status().get("last_error"), 30, what="the push to fail")
    assert error.startswith("push: pushcmd failed (exit 1): git push -q: ")
    assert "remote: quota exceeded: 10 GB used of 10 GB | " \
           "! [remote rejected] main -> main (pre-receive hook declined) | " \
           "error: failed to push some refs to " in error
