"""ignore.py: which paths are never synced, checked against git itself."""
import os
import subprocess

from autosync.core.ignore import Ignore
from conftest import git
from helpers import make_files


GITIGNORES = {
    ".gitignore": "*.log\n!keep.log\nbuild/\n**/cache\n/rootonly.txt\ndocs/*.pdf\n",
    "sub/.gitignore": "!*.log\nlocal.txt\nnested/**/deep.txt\n",
    "sub/nested/.gitignore": "*.tmp\n",
}
PATHS = ["a.log", "keep.log", "build/out.o", "src/build/x.o", "x/cache/c", "cache",
         "rootonly.txt", "sub/rootonly.txt", "docs/a.pdf", "docs/more/b.pdf", "sub/a.log",
         "sub/local.txt", "local.txt", "sub/nested/a/b/deep.txt", "sub/nested/x.tmp",
         "sub/other/x.tmp", "plain.txt", "sub/nested/keep.txt"]


def test_ignore_rules_agree_with_git(tmp_path):
    root = str(tmp_path / "repo")
    git("init", "-q", root)
    make_files(root, GITIGNORES)
    make_files(root, {p: "x" for p in PATHS})
    with open(os.path.join(root, ".git", "info", "exclude"), "a") as f:
        f.write("excluded-by-info\n")
    make_files(root, {"excluded-by-info": "x"})
    ignore = Ignore(root)
    for rel in PATHS + ["excluded-by-info"]:
        by_git = subprocess.run(["git", "check-ignore", "-q", "--no-index", rel],
                                cwd=root).returncode == 0
        assert ignore(rel) == by_git, rel


def test_ignorepath_metadata_and_editor_junk(tmp_path):
    ignore = Ignore(str(tmp_path), ["src/packages", "big/"])
    for rel in ("src/packages/x", "big/y", ".git/config", "sub/.hg/store", "notes.txt~",
                ".notes.txt.swp", "4913", "#notes#", ".#notes", ".~lock.doc.odt#"):
        assert ignore(rel), rel
    for rel in ("src/packagesX", "notes.txt", "big.txt", "src/p"):
        assert not ignore(rel), rel


def test_a_changed_gitignore_is_read_again(tmp_path):
    root = str(tmp_path)
    make_files(root, {".gitignore": "*.a\n"})
    ignore = Ignore(root)
    assert ignore("x.a") and not ignore("x.b")
    make_files(root, {".gitignore": "*.b\n"})
    ignore.forget("")
    assert ignore("x.b") and not ignore("x.a")
