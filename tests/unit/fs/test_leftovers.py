"""fs/leftovers.py: the journal of a killed guarded write read on the folder's own floor,
with no version control: whether a temporary file holds the new version is asked of the
caller (vcs/recovery.py hands git's check in)."""
import os

import pytest

from autosync.fs import leftovers

DEAD = 1 << 22  # above the largest pid_max Linux allows: never a live process
OID = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cut_off(tmp_path, monkeypatch):
    """A swap's entry left by a dead writer: its temporary file beside d/a.txt."""
    top = os.path.realpath(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", os.path.join(top, "state"))
    journal = os.path.join(top, "state", "autosync", "writing")
    os.makedirs(journal, mode=0o700)
    os.chmod(journal, 0o700)
    folder = os.path.join(top, "synced", "d")
    os.makedirs(folder)
    temp = os.path.join(folder, ".autosync-write.%d.1~" % DEAD)
    path = os.path.join(folder, "a.txt")
    with open(temp, "wb") as f:
        f.write(b"pulled\n")
    with open(path, "wb") as f:
        f.write(b"the user's\n")
    with open(os.path.join(journal, "%d.1" % DEAD), "wb") as f:
        f.write(os.fsencode(temp) + b"\0" + os.fsencode(path) + b"\0" + OID.encode() + b"\0")
    return os.path.join(top, "synced"), temp, path, journal


def test_the_new_version_is_asked_of_the_caller(cut_off):
    root, temp, path, journal = cut_off
    asked = []

    def new_version(t, oid):
        asked.append((t, oid))
        return True

    assert leftovers.leftover_writes(root, None, lambda p: p + " (kept)",
                                     new_version=new_version) == []
    assert asked == [(temp, OID)]
    assert sorted(os.listdir(os.path.dirname(path))) == ["a.txt"] and os.listdir(journal) == []


def test_without_a_check_handed_in_the_bytes_are_kept(cut_off):
    root, temp, path, journal = cut_off
    assert leftovers.leftover_writes(root, None, lambda p: p + " (kept)") == [path + " (kept)"]
    with open(path + " (kept)", "rb") as f:
        assert f.read() == b"pulled\n"
    assert not os.path.exists(temp) and os.listdir(journal) == []
