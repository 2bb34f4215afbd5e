"""ignore.py: which paths are never synced, checked against git itself."""
import os
import subprocess

from autosync.core.ignore import EDITOR_JUNK_RE, EDITOR_JUNK_SPEC, Ignore
from base import git
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


def test_a_gitignore_that_appears_below_looked_at_folders_counts_once_forgotten(tmp_path):
    """The folders known to have no .gitignore down to them are asked again after one
    appears (the watcher calls forget() for the folder whose .gitignore changed)."""
    root = str(tmp_path)
    ignore = Ignore(root)
    assert not ignore("photos/2026/raw/x.cr2") and not ignore("photos/2026/y.jpg")
    make_files(root, {"photos/.gitignore": "raw/\n"})
    ignore.forget("photos")
    assert ignore("photos/2026/raw/x.cr2") and not ignore("photos/2026/y.jpg")
    make_files(root, {"photos/.gitignore": "# nothing now\n"})
    ignore.forget("photos")
    assert not ignore("photos/2026/raw/x.cr2")


def test_editor_junk_in_one_expression_is_what_its_patterns_say():
    names = ["a~", "x.swp", ".x.swa", ".swp", "a.swpx", ".a.sw", "4913", "4913x", "x4913",
             "#a#", "#", "a#", ".#a", ".~lock.a.odt#", ".~lock.a", ".goutputstream-1",
             "a.kate-swp", "a.tmp.1", "a.tmp", "a.tmp.x", "~a", "photo.jpg", "notes.txt",
             "a.swo", "b.swx", "Makefile"]
    for name in names:
        assert bool(EDITOR_JUNK_RE.match(name)) == bool(EDITOR_JUNK_SPEC.match_file(name)), name
    assert sum(bool(EDITOR_JUNK_RE.match(n)) for n in names) == 13
