"""vcs/pull/finish.py writes a conflict's versions as git's checkout would: through the
path's smudge filters (line endings, git-lfs, any filter the user set), streamed."""
import os
import subprocess

import pytest

from autosync.vcs.pull import finish as gitmerge
from base import git


def blob_of(folder, data):
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=folder, input=data,
                          stdout=subprocess.PIPE, check=True).stdout.decode().strip()


@pytest.mark.parametrize("rel", ["a.txt", "-x and \"y\" .txt", "line\nbreak.txt", " lead.txt"])
def test_a_version_goes_through_the_path_s_smudge_filter(tmp_path, rel):
    folder = str(tmp_path)
    git("init", "-q", folder)
    git("config", "filter.upper.smudge", "tr a-z A-Z", cwd=folder)
    git("config", "filter.upper.clean", "tr A-Z a-z", cwd=folder)
    with open(os.path.join(folder, ".gitattributes"), "w") as f:
        f.write("*.txt filter=upper\n")
    blob = blob_of(folder, b"hello\n")
    gitmerge.write_blob(folder, rel, "100644", blob)
    assert open(os.path.join(folder, rel), "rb").read() == b"HELLO\n"  # as checked out
    assert gitmerge.same_blob(folder, rel, blob) == ("\n" not in rel)


@pytest.mark.parametrize("data", [b"", b"\n", b"no newline at the end",
                                  os.urandom(3 * 1024 * 1024 + 7) + b"\n"])
def test_a_version_is_written_whole_whatever_it_ends_with(tmp_path, data):
    folder = str(tmp_path)
    git("init", "-q", folder)
    gitmerge.write_blob(folder, "sub/f.bin", "100755", blob_of(folder, data))
    path = os.path.join(folder, "sub", "f.bin")
    assert open(path, "rb").read() == data and os.access(path, os.X_OK)


def test_a_missing_version_fails_in_one_line_and_writes_nothing_half(tmp_path):
    folder = str(tmp_path)
    git("init", "-q", folder)
    with pytest.raises(RuntimeError, match="git cat-file"):
        gitmerge.write_blob(folder, "f.txt", "100644", "1" * 40)


def test_a_conflict_copy_keeps_its_original_s_filter(tmp_path):
    """A merge stopped in the working tree (a `git pull` pullcmd): the rule names one
    file (git-crypt's way), the copy gets one of its own beside it, staged with it, so
    the copy is written through the original's smudge and stored through its clean."""
    folder = str(tmp_path)
    git("init", "-q", "-b", "main", folder)
    git("config", "filter.crypt.clean", "sed 's/^/ENC:/'", cwd=folder)
    git("config", "filter.crypt.smudge", "sed 's/^ENC://'", cwd=folder)
    os.mkdir(os.path.join(folder, "keys"))
    with open(os.path.join(folder, "keys", ".gitattributes"), "w") as f:
        f.write("secrets.env filter=crypt\n")
    for branch, text in (("main", "KEY=0\n"), ("other", "KEY=other\n"), ("main", "KEY=main\n")):
        if branch == "other":
            git("checkout", "-q", "-b", "other", cwd=folder)
        elif text != "KEY=0\n":
            git("checkout", "-q", "main", cwd=folder)
        with open(os.path.join(folder, "keys", "secrets.env"), "w") as f:
            f.write(text)
        git("add", "-A", cwd=folder)
        git("commit", "-q", "-m", "autosync on %s: %s" % (branch, text.strip()), cwd=folder)
    assert subprocess.run(["git", "merge", "-q", "other"], cwd=folder,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    [made] = gitmerge.resolve(folder)
    git("commit", "-q", "--no-edit", cwd=folder)
    texts = {open(os.path.join(folder, p), "rb").read() for p in ("keys/secrets.env", made["copy"])}
    assert texts == {b"KEY=main\n", b"KEY=other\n"}   # both as checked out
    for line in git("ls-tree", "-r", "HEAD", cwd=folder).decode().splitlines():
        blob = git("cat-file", "blob", line.split()[2], cwd=folder)
        assert b"KEY=" not in blob or blob.startswith(b"ENC:KEY="), line
    assert git("status", "--porcelain", cwd=folder) == b""
