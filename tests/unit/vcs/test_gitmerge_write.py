"""vcs/gitmerge.py writes a conflict's versions as git's checkout would: through the
path's smudge filters (line endings, git-lfs, any filter the user set), streamed."""
import os
import subprocess

import pytest

from autosync.vcs import gitmerge
from conftest import git


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
