"""Progress of init and restore as the programs show it: a count on a terminal, not one
progress line in a file (tests/unit/tools/test_progress.py: the progress lines themselves)."""
import os
import re
import subprocess
import sys

from base import git
from helpers import EmptyRemote
from terminal import lasting, on_a_terminal

from autosync.tools import progress


FILES = 10000


def folder_of_files(path):
    """FILES small files in 100 folders; -> their bytes."""
    total = 0
    for i in range(FILES):
        folder = os.path.join(path, "d%03d" % (i // 100))
        os.makedirs(folder, exist_ok=True)
        data = b"x" * (i % 300) + b"\n"
        with open(os.path.join(folder, "f%05d.txt" % i), "wb") as f:
            f.write(data)
        total += len(data)
    return total


def init_argv(base):
    return [sys.executable, "-m", "autosync.supervisor", "init", str(base / "remote.git"),
            str(base / "folder"), "--config", str(base / "config")]


def setup(base):
    base.mkdir()
    EmptyRemote(base / "remote.git")
    os.mkdir(base / "folder")
    return folder_of_files(str(base / "folder"))


def test_init_of_many_files_counts_them_on_a_terminal_and_says_nothing_more_to_a_file(tmp_path):
    total = setup(tmp_path / "t")
    status, seen = on_a_terminal(init_argv(tmp_path / "t"))
    assert status == 0, seen
    states = re.findall(r"\r\033\[K([^\r\n]*)", seen)
    counts = [s for s in states if s.startswith("Adding the files: ")]
    # Shown at each whole percent: 0 to 100.
    assert len(counts) == 101, counts[:3]
    assert counts[-1] == "Adding the files: 10,000 of 10,000 files (%s of %s)" % (
        progress.sizes.human(total), progress.sizes.human(total))
    assert any(s.startswith("Pushing: Writing objects: 100% ") for s in states), states
    assert any(s.startswith("Trying whether the remote can be watched") for s in states)
    files = git("ls-tree", "-r", "--name-only", "main", cwd=str(tmp_path / "t" / "remote.git"))
    assert len(files.splitlines()) == FILES

    setup(tmp_path / "f")
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        result = subprocess.run(init_argv(tmp_path / "f"), stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    assert result.returncode == 0
    written = out.read_text()
    assert "\r" not in written and "\033" not in written
    assert "files (" not in written and "Pushing" not in written
    # The same lasting lines, on the terminal and in the file.
    assert lasting(seen).replace("/t/", "/f/") == written
    assert "The remote was empty: made the first commit and pushed it." in written


def test_restore_of_a_folder_counts_what_it_reads_and_writes_on_a_terminal_only(tmp_path):
    """`restore` of a removed folder of 500 files, no daemon running: on a terminal it
    shows how far reading the old versions and writing them got (files, bytes); its
    output to a file holds the same lasting lines and not one progress line."""
    def removed_folder(base):
        folder = str(base / "plain")
        git("init", "-q", "-b", "main", folder)
        config = str(base / "plain.autosync")
        with open(config, "w") as f:
            f.write("[autosync]\npath = %s\nsyncmethod = none\nnotifymethod = none\n" % folder)
        os.makedirs(os.path.join(folder, "photos"))
        total = 0
        for i in range(500):
            data = b"y" * (i % 500) + b"\n"
            with open(os.path.join(folder, "photos", "p%04d.txt" % i), "wb") as f:
                f.write(data)
            total += len(data)
        git("add", "-A", cwd=folder)
        git("commit", "-q", "-m", "photos", cwd=folder)
        git("rm", "-q", "-r", "photos", cwd=folder)
        git("commit", "-q", "-m", "gone", cwd=folder)
        argv = [sys.executable, "-m", "autosync.supervisor", "restore",
                os.path.join(folder, "photos"), "--config", config]
        return argv, folder, total

    argv, folder, total = removed_folder(tmp_path / "t")
    os.makedirs(tmp_path / "t", exist_ok=True)
    status, seen = on_a_terminal(argv)
    assert status == 0, seen
    assert len(os.listdir(os.path.join(folder, "photos"))) == 500
    states = re.findall(r"\r\033\[K([^\r\n]*)", seen)
    human = progress.sizes.human(total)
    reading = [s for s in states if s.startswith("reading the old versions: ")]
    writing = [s for s in states if s.startswith("writing: ")]
    assert len(reading) == 101 and len(writing) == 101, (reading[:2], writing[:2])
    assert reading[-1] == "reading the old versions: 500 of 500 files (%s so far)" % human
    assert writing[-1] == "writing: 500 of 500 files (%s so far)" % human

    argv, folder, _ = removed_folder(tmp_path / "f")
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        result = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    assert result.returncode == 0
    written = out.read_text()
    assert "\r" not in written and "\033" not in written and "so far" not in written
    # the same lasting lines (but the two histories' times and revisions)
    same = lambda text: re.sub(r"\d\d:\d\d:\d\d \([0-9a-f]{12}", "TIME (REV", text)
    assert same(lasting(seen).replace("/t/", "/f/")) == same(written)
