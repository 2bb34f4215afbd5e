"""cli: the arguments, log format, time format, error exit and config loading every
program of the suite shares."""
import os
import time

import pytest

from autosync import __version__
from autosync.core import cli
from autosync.core.config import Config
from fakes import config_with_a_shared_socket_folder, serving

DOC = """autosync-example: does one thing.

More text that --help does not show as the description.
"""


@pytest.fixture(autouse=True)
def runtime(tmp_path, monkeypatch):
    """Default sockets below tmp_path, never in the real /tmp/autosync-UID."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))


@pytest.fixture
def synced(tmp_path):
    """A config file for a folder in a working tree."""
    folder = tmp_path / "Sync"
    (folder / ".git").mkdir(parents=True)
    conf = tmp_path / "autosync.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\n" % folder)
    conf.chmod(0o600)
    return str(conf), str(folder)


def test_parser_takes_an_optional_config_and_verbose():
    p = cli.parser("autosync-example", DOC)
    args = p.parse_args([])
    assert args.config is None and args.verbose is False
    args = p.parse_args(["-v", "my.ini"])
    assert args.config == "my.ini" and args.verbose is True
    assert p.parse_args(["--verbose"]).verbose is True
    assert p.description == "autosync-example: does one thing."
    assert cli.parser("x", None).description == ""


def test_parser_takes_the_config_as_an_option_too(capsys):
    p = cli.parser("autosync-example", DOC)
    assert p.parse_args(["--config", "my.ini", "-v"]).config == "my.ini"
    assert p.parse_args(["--config=my.ini"]).config == "my.ini"
    assert p.parse_args(["my.ini", "--config", "my.ini"]).config == "my.ini"
    assert "config_option" not in vars(p.parse_args([]))
    with pytest.raises(SystemExit) as exited:
        p.parse_args(["a.ini", "--config", "b.ini"])
    assert exited.value.code == 2
    assert "two config files: a.ini and --config b.ini" in capsys.readouterr().err


def test_version_and_unknown_options(capsys):
    p = cli.parser("autosync-example", DOC)
    with pytest.raises(SystemExit) as exited:
        p.parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == "autosync-example %s\n" % __version__
    with pytest.raises(SystemExit) as exited:
        p.parse_args(["--no-such-option"])
    assert exited.value.code == 2


def test_show_time_is_local_date_and_time(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert cli.show_time(0) == "1970-01-01 00:00:00"
        assert cli.show_time(1700000000.9) == "2023-11-14 22:13:20"
        monkeypatch.setenv("TZ", "Europe/Berlin")
        time.tzset()
        assert cli.show_time(0) == "1970-01-01 01:00:00"
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("kwargs, code", [({}, 2), ({"status": 1}, 1), ({"status": 3}, 3)])
def test_die_prints_one_line_and_exits(capsys, kwargs, code):
    with pytest.raises(SystemExit) as exited:
        cli.die("autosync-example: it broke", **kwargs)
    assert exited.value.code == code
    out, err = capsys.readouterr()
    assert out == "" and err == "autosync-example: it broke\n"


def test_load_returns_the_checked_config(synced):
    conf, folder = synced
    cfg = cli.load(conf)
    assert isinstance(cfg, Config) and cfg.path == folder and cfg.syncmethod == "none"


def test_load_turns_a_config_error_into_one_line_and_exit_2(tmp_path, capsys):
    conf = tmp_path / "broken.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = carrier-pigeon\n" % tmp_path)
    conf.chmod(0o600)
    with pytest.raises(SystemExit) as exited:
        cli.load(str(conf))
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "syncmethod" in err


def test_load_without_a_path_reads_the_default_file(private_home, capsys, synced):
    with pytest.raises(SystemExit) as exited:
        cli.load(None)  # ~/.autosync does not exist in the private HOME
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and os.path.join(str(private_home), ".autosync") in err
    conf, folder = synced
    with open(conf) as f, open(os.path.join(str(private_home), ".autosync"), "w") as out:
        out.write(f.read())
    os.chmod(os.path.join(str(private_home), ".autosync"), 0o600)
    assert cli.load(None).path == folder


def test_load_can_skip_the_working_tree_check(tmp_path, capsys):
    """autosync-notify --config only needs the socket: no repository is required."""
    folder = tmp_path / "NotInGit"
    folder.mkdir()
    conf = tmp_path / "autosync.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\n" % folder)
    conf.chmod(0o600)
    assert cli.load(str(conf), check_path=False).path == str(folder)
    with pytest.raises(SystemExit) as exited:
        cli.load(str(conf))
    assert exited.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_start_parses_and_loads(synced):
    conf, folder = synced
    assert cli.start("autosync-example", DOC, [conf]).path == folder


def test_trust_passes_no_socket_yet_and_our_own_daemon(tmp_path):
    path = str(tmp_path / "run" / "d.sock")
    cli.trust("autosync-example", path)  # no folder, no socket: nobody's yet
    with serving(path, lambda m, c: {"ok": True}):
        cli.trust("autosync-example", path)


def test_trust_stops_with_one_line_on_a_folder_others_can_enter(tmp_path, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    with pytest.raises(SystemExit) as exited:
        cli.trust("autosync-example", str(shared / "d.sock"))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("autosync-example: refusing the socket folder %s" % shared)


def test_start_refuses_an_untrusted_socket_unless_it_is_the_committer(tmp_path, capsys):
    folder, conf = config_with_a_shared_socket_folder(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.start("autosync-example", DOC, [str(conf)])
    assert exited.value.code == 2 and "refusing the socket folder" in capsys.readouterr().err
    assert cli.start("autosync-committer", DOC, [str(conf)], client=False).path == str(folder)
