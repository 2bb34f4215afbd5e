"""dvcs-autosync share: its words and its refusals, without a server (--no-probe: the
line that needs nothing of ours there). The server's side: e2e/test_shared_folder.py."""
import subprocess

import pytest

from autosync.tools import share


def clone(tmp_path, remote):
    folder = tmp_path / "Sync"
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", remote], check=True)
    return str(folder)


def run(capsys, *argv):
    code = share.main(["share"] + [str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_words_name_the_line_the_join_and_the_removal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GIT_SSH_COMMAND", "false")  # no ssh -G answer: the address as it is
    folder = clone(tmp_path, "me@server:Sync.git")
    key = tmp_path / "bob.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0b bob@desk\n")
    code, out, err = run(capsys, folder, "--with", "Bob", "--key", key, "--no-probe")
    assert code == 0, err
    line = [w.strip() for w in out.splitlines() if "AAAAC3" in w]
    assert line == [share.key_line("me@server:Sync.git", False) +
                    " ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0b Bob"]
    assert "       dvcs-autosync init me@server:Sync.git ~/Sync\n" in out
    assert "(conflict from Bob on HOST DATE)" in out and "sharedwith" in out
    assert "To stop sharing, remove Bob's line from authorized_keys" in out


@pytest.mark.parametrize("remote, args, said", [
    (None, [], "has no remote (remote.origin.url) to share"),
    ("/srv/sync.git", [], "is not reached over ssh"),
    ("me@server:s.git", ["--key", "KEY"], "--key needs --with NAME"),
    ("me@server:s.git", ["--with", "Bob", "--key", "KEY"], "is not one public key line"),
    ("me@server:s.git", ["--with", "Bo\nb"], "--with NAME: a name of printable characters"),
    ("me@server:s.git", ["--with", "Bob", "--key", "MISSING"], "cannot read --key"),
])
def test_bad_input_is_one_line_and_nothing_is_done(tmp_path, capsys, remote, args, said):
    folder = clone(tmp_path, remote)
    private = tmp_path / "id_ed25519"
    private.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH "
                       "PRIVATE KEY-----\n")
    args = [str(private) if a == "KEY" else str(tmp_path / "nope") if a == "MISSING" else a
            for a in args]
    code, out, err = run(capsys, folder, "--no-probe", *args)
    assert code == 1 and out == "" and said in err and len(err.splitlines()) == 1, err
    assert "b3Blbn" not in err


def test_a_folder_that_is_not_synced_is_refused(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path, "--no-probe")
    assert code == 1 and "is not a synced folder (no git repository)" in err
