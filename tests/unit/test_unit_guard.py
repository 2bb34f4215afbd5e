"""The unit tier's guard (tests/unitguard.py): a unit test that starts a program of
ours fails, naming itself and the command; programs not ours stay allowed."""
import os
import subprocess
import sys

import pytest

import unitguard as unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_guard_knows_our_programs_from_others(tmp_path):
    script = tmp_path / "tool"
    script.write_text("#!%s\nimport sys\nfrom autosync.core import cli\n" % sys.executable)
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\nexec git \"$@\"\n")
    for argv in ([sys.executable, "-m", "autosync.supervisor", "status"],
                 [sys.executable, "-I", "-m", "autosync"],
                 ["dvcs-autosync", "status"], ["/usr/bin/autosync-committer"],
                 ["autosync-hgmerge"], ["autosync-sshlink"], ["autosync-xmpp"],
                 [os.path.join(ROOT, "bin", "autosync-notify"), "sync"],
                 ["sh", "-c", "exec dvcs-autosync \"$@\"", "sh", "pause"],
                 ["/bin/sh", "-lc", "cd / && python3 -m autosync.committer"],
                 [sys.executable, "-c", "import sys; from autosync.vcs import git"],
                 [str(script)], [sys.executable, str(script)],
                 "dvcs-autosync --config x.conf status"):
        assert unit.ours(argv), argv
    for argv in (["git", "status"], ["hg", "pull"], ["ssh-keygen", "-q"], [str(plain)],
                 [sys.executable, "-c", "print('autosync')"],
                 [sys.executable, "-m", "pytest"],
                 ["bash", "-c", 'source "$1"; complete -p "$2"', "bash", "x", "dvcs-autosync"],
                 "git commit -m 'dvcs-autosync'"):
        assert unit.ours(argv) is None, argv


def test_a_unit_test_that_starts_one_of_ours_fails_naming_itself_and_the_command(request):
    # A unit test's body as one that should be in the middle tier would be: refused...
    argv = [sys.executable, "-m", "autosync.supervisor", "--help"]
    with pytest.raises(unit.StartedOurs) as refused:
        subprocess.run(argv, stdout=subprocess.PIPE)
    assert request.node.nodeid in str(refused.value)
    assert repr(argv) in str(refused.value)
    # ...and remembered, so that the test fails after it even where the code it called
    # swallowed the refusal; git, not ours, still runs.
    assert unit.STARTED == [("runs python -m autosync.supervisor", argv)]
    assert subprocess.run(["git", "--version"], stdout=subprocess.PIPE).returncode == 0
    del unit.STARTED[:]  # this test's own start was the point: let it pass


def test_a_unit_test_over_its_cpu_budget_fails_and_the_tier_sums_what_each_used(request,
                                                                               monkeypatch):
    # The phase's check, as the hook makes it after a test's call: a test that waited for
    # a child burning CPU (as a heavy git run would) is failed, naming itself...
    began = unit.cpu_seconds()
    subprocess.run([sys.executable, "-c", "sum(range(10 ** 7))"], check=True)
    with monkeypatch.context() as budget:  # (the hook's own check, after this, is not)
        budget.setattr(unit, "BUDGET", 0.05)
        with pytest.raises(pytest.fail.Exception) as over:
            unit.within_budget(request.node, "call", began)
    assert request.node.nodeid in str(over.value) and "s of CPU in its call" in str(over.value)
    # ...and what it used is on its report, for the tier's sum.
    # (The first is its setup's.)
    used = [value for name, value in request.node.user_properties if name == "cpu"]
    assert len(used) == 2 and used[-1] > 0.05
    request.node.user_properties.remove(("cpu", used[-1]))  # not counted twice
