"""git's own path rules as data: the paths git's test suite uses to check verify_path
and the .git / .gitmodules look-alikes (t1014-read-tree-confusing, and the
is_dotgitmodules cases of t0060-path-utils that the submodule-name fixes brought), each
pulled through the guarded pull: refused exactly where git itself refuses to read the
tree (`git read-tree` in the same repository, with core.protectHFS and
core.protectNTFS on, as t1014 sets them)."""
import os
import subprocess

import pytest

from autosync.vcs.pull import git as gitpull
from base import git
from repos import head, plant, pull, two  # noqa: F401 (two: a fixture)

U200C = "\u200c"

# t1014: refused at the end of a path and as a folder.
CONFUSING = [".", "..", ".git", ".GIT", U200C + ".Git", ".gI" + U200C + "T",
             ".GiT" + U200C, "git~1", ".git. ", ".\\.GIT\\foobar", ".git\\foobar",
             ".git...:alternate-stream"]

# t0060 is_dotgitmodules: names git takes for .gitmodules (a symlink there is refused) ...
DOTGITMODULES = [".gitmodules", ".git" + U200C + "modules", ".Gitmodules", ".gitmoduleS",
                 ".gitmodules ", ".gitmodules.", ".gitmodules  ", ".gitmodules. ",
                 ".gitmodules .", ".gitmodules..", ".gitmodules   ", ".gitmodules.  ",
                 ".gitmodules . ", ".gitmodules  .", ".Gitmodules ", ".Gitmodules.",
                 ".Gitmodules  ", ".Gitmodules. ", ".Gitmodules .", ".Gitmodules..",
                 ".Gitmodules   ", ".Gitmodules.  ", ".Gitmodules . ", ".Gitmodules  .",
                 "GITMOD~1", "gitmod~1", "GITMOD~2", "gitmod~3", "GITMOD~4", "GITMOD~1 ",
                 "gitmod~2.", "GITMOD~3  ", "gitmod~4. ", "GITMOD~1 .", "gitmod~2   ",
                 "GITMOD~3.  ", "gitmod~4 . ", "GI7EBA~1", "gi7eba~9", "GI7EB~10", "GI7EB~11",
                 "GI7EB~99", "GI7E~100", "GI7E~101", "GI7E~999", "~1000000", "~9999999",
                 ".gitmodules:$DATA", "gitmod~4 . :$DATA"]
# ... and names it does not.
NOT_DOTGITMODULES = [".gitmodules x", ".gitmodules .x", " .gitmodules", "..gitmodules",
                     "gitmodules", ".gitmodule", ".gitmodules x ", "GI7EBA~", "GI7EBA~0",
                     "GI7EBA~~1", "GI7EBA~X", "Gx7EBA~1", "GI7EBX~1", "GI7EB~1", "GI7EB~01",
                     "GI7EB~1X", ".gitmodules,:$DATA"]

CASES = [(p, "100644", "at end of path") for p in CONFUSING] + \
    [(p + "/file", "100644", "as a folder") for p in CONFUSING] + \
    [(p, "120000", "a symlink") for p in DOTGITMODULES + NOT_DOTGITMODULES] + \
    [(p, "100644", "a file") for p in DOTGITMODULES[:4] + NOT_DOTGITMODULES[:4]]


def git_refuses(folder, rev):
    """Does git itself refuse to read the tree (into an index of its own)?"""
    index = os.path.join(folder, ".git", "verdict-index")
    proc = subprocess.run(["git", "read-tree", "--index-output=" + index, rev], cwd=folder,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if os.path.exists(index):
        os.unlink(index)
    return proc.returncode != 0


# git's cases in four parts (each a fresh pair of repositories): one test of them all
# would be over the unit tier's CPU budget, and the parts run side by side.
PARTS = 4


@pytest.mark.parametrize("part", range(PARTS))
def test_git_s_own_path_cases_are_refused_exactly_where_git_refuses(two, part):
    remote, a, b = two
    cases = CASES[part::PARTS]
    for folder in (a, b):
        git("config", "core.protectHFS", "true", cwd=folder)
        git("config", "core.protectNTFS", "true", cwd=folder)
    base = head(b)
    verdicts = []
    for path, mode, how in cases:
        git("reset", "-q", "--hard", base, cwd=a)
        rev = plant(a, [(mode, path, b"../../outside" if mode == "120000" else b"x\n")])
        git("fetch", "-q", "origin", cwd=b)
        expected = git_refuses(b, rev)
        try:
            pull(b)
            refused = False
        except gitpull.Unsafe:
            refused = True
        assert head(b) == (base if refused else rev), (path, how)
        if not refused:   # back to the base for the next case
            git("reset", "-q", "--hard", base, cwd=b)
            git("clean", "-qfdx", cwd=b)
        verdicts.append((path, how, refused, expected))
    wrong = [(p, how, r, e) for p, how, r, e in verdicts if r != e]
    assert wrong == []
    # The data say so too: every confusing path and every .gitmodules symlink refused,
    # the look-alikes that are not .gitmodules taken.
    refused = {(p, how) for p, how, r, _ in verdicts if r}
    taken = {(p, how) for p, how, r, _ in verdicts if not r}
    assert all((p, "at end of path") not in taken and (p + "/file", "as a folder") not in taken
               for p in CONFUSING)
    assert all((p, "a symlink") not in taken for p in DOTGITMODULES)
    assert not any((p, "a symlink") in refused for p in NOT_DOTGITMODULES)
    assert len(verdicts) == len(cases) > 20


@pytest.mark.parametrize("protect", ["false", "true"])
def test_the_hfs_look_alike_follows_core_protecthfs(two, protect):
    """t1014's last case: with core.protectHFS off, .gi<U+200C>t is an ordinary name."""
    remote, a, b = two
    git("config", "core.protectHFS", protect, cwd=b)
    plant(a, [("100644", ".gi" + U200C + "t", b"x\n")])
    if protect == "true":
        with pytest.raises(gitpull.Unsafe):
            pull(b)
    else:
        pull(b)
        assert os.path.exists(os.path.join(b, ".gi" + U200C + "t"))
