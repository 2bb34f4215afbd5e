"""autosync-notify: what it prints and its exit status, against a real protocol.Server
with a scripted handler (no daemon), a dead socket, or a server that misbehaves."""
import json
import os
import socket
import sys
import threading

import pytest

from autosync.core import cli, problems
from autosync.tools import notify
from fakes import STATUS, paused_reply, serving



@pytest.fixture(autouse=True)
def nowhere(monkeypatch, tmp_path):
    """No daemon of the user's can be found: sockets live below tmp_path."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    monkeypatch.delenv("AUTOSYNC_SOCKET", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def daemon(tmp_path):
    """A real Server answering as the handler set in `daemon.reply` says."""
    requests = []

    def handler(message, client):
        requests.append(message)
        return daemon.reply(message)

    with serving(str(tmp_path / "run" / "d.sock"), handler) as server:
        server.requests = requests
        daemon = server
        daemon.reply = lambda m: {"ok": True, "status": STATUS}
        yield server


def lines(text):
    """The status' "key: value" lines (the first line is the headline)."""
    return dict(line.split(":", 1) for line in text.splitlines()[1:])


# --- status_text -----------------------------------------------------------------------

def test_status_text_shows_every_field():
    text = notify.status_text(STATUS)
    got = {k: v.strip() for k, v in lines(text.replace("last commit", "last_commit")
                                          .replace("last push", "last_push")
                                          .replace("last error", "last_error")).items()}
    assert got["folder"] == "/home/u/Sync (on laptop)"
    assert got["state"] == "idle"
    assert got["pending"] == "2 paths"
    assert got["last_commit"] == cli.show_time(1700000000) + "  autosync on laptop: 1 added"
    assert got["last_push"] == cli.show_time(1700000060) + "  to ssh://server/sync.git"
    assert got["unpushed"] == "2 commits"
    assert got["last_error"] == "push: connection refused"
    assert got["conflict"] == "notes.txt"


def test_status_text_starts_with_in_sync_or_what_stops_it_and_always_says_the_link():
    quiet = dict(STATUS, pending=[], unpushed=0, link="up", last_error=None)
    text = notify.status_text(quiet)
    assert text.splitlines()[0] == "in sync" and "link:        up" in text
    text = notify.status_text(dict(quiet, link="down",
                                   failing={"push": "push: ! [remote rejected] main (full)",
                                            "link": "login refused: not-authorized"}))
    first = text.splitlines()[0]
    assert first.startswith("NOT syncing: push: ! [remote rejected] main (full) - check the "
                            "remote") and first.endswith("(and 1 more problem)")
    assert "link:        down (login refused: not-authorized)" in text
    assert "also:        login refused: not-authorized - check [xmpp]" in text
    assert notify.status_text(dict(quiet, link=None)).count("syncmethod = none") == 1
    assert notify.status_text(dict(quiet, unpushed=1)).splitlines()[0] == "syncing"
    paused = notify.status_text(dict(quiet, paused={"since": 1700000000, "until": None}))
    assert paused.splitlines()[0] == "NOT syncing: paused by the user - dvcs-autosync resume"


def test_status_text_of_local_history_only_says_so_whatever_is_unpushed():
    """The original's syncmethod = none (config.local_only): its commits are never pushed,
    so a growing `unpushed` is no "syncing"; the headline and the link line say why."""
    local = dict(STATUS, pending=[], unpushed=7, link=None, last_error=None, localonly=True,
                 state="idle")
    lines = notify.status_text(local).splitlines()
    assert lines[0] == "history kept here only (%s)" % problems.LOCAL_ONLY
    assert "link:        none: history kept here only (" in "\n".join(lines)
    assert notify.status_text(dict(local, pending=["a.txt"])).splitlines()[0] == "committing"
    assert notify.status_text(dict(local, localonly=None)).splitlines()[0] == "syncing"


def test_status_text_says_a_long_step_and_how_far_while_it_runs():
    assert "progress:" not in notify.status_text(STATUS)  # (null: nothing long runs)
    since = 1700000000
    said = {"adding": (None, None), "committing": (3000, None), "pushing": (3000, None),
            "writing": (3000, 1200)}
    lines = [[line for line in notify.status_text(dict(STATUS, state="committing", progress={
        "doing": doing, "files": files, "done": done, "since": since})).splitlines()
        if line.startswith("progress:")] for doing, (files, done) in said.items()]
    at = cli.show_time(since)
    assert lines == [
        ["progress:    adding the folder's files to the history, since %s" % at],
        ["progress:    committing 3,000 files, since %s" % at],
        ["progress:    pushing 3,000 files to the remote, since %s" % at],
        ["progress:    writing the pulled files: 1,200 of 3,000 (40%%), since %s" % at]]


def test_status_text_of_a_fresh_daemon():
    text = notify.status_text({"path": "/s", "host": "h", "state": "starting"})
    assert "last commit: none yet" in text and "last push:   none yet" in text
    assert "pending:     0 paths" in text and "unpushed:    0 commits" in text
    assert "last error:  none" in text and "conflict" not in text


def test_status_text_lists_each_conflict():
    text = notify.status_text(dict(STATUS, conflicts=["a", "b/c"]))
    assert [l for l in text.splitlines() if l.startswith("conflict:")] == [
        "conflict:    a", "conflict:    b/c"]


def test_status_text_names_held_back_files_and_nested_repositories():
    """README: both are named in `status` (`held back`, `nested repository`)."""
    text = notify.status_text(dict(STATUS, held_back=["secret.txt", "b/x"],
                                   nested_repositories=["project"]))
    held = [l for l in text.splitlines() if l.startswith("held back:")]
    assert len(held) == 2 and "secret.txt" in held[0] and "b/x" in held[1]
    nested = [l for l in text.splitlines() if l.startswith("nested repository:")]
    assert len(nested) == 1 and "project" in nested[0]
    assert "held back" not in notify.status_text(STATUS)
    assert "nested repository" not in notify.status_text(STATUS)


def test_status_text_names_files_still_being_written():
    """README: `status` lists the files left out while open for writing."""
    text = notify.status_text(dict(STATUS, writing=["video.mkv"]))
    assert [l for l in text.splitlines() if l.startswith("writing:")] == [
        "writing:     video.mkv (open for writing: committed once closed)"]
    assert "writing:" not in notify.status_text(STATUS)


def test_status_text_says_how_to_undo_a_mass_delete():
    mass = {"count": 40, "total": 100, "time": 1700000000,
            "restore": "dvcs-autosync restore . --at 2023-11-14"}
    text = notify.status_text(dict(STATUS, mass_delete=mass))
    line = [l for l in text.splitlines() if l.startswith("mass delete:")]
    assert line == ["mass delete: 40 of 100 files removed at %s; undo: "
                    "dvcs-autosync restore . --at 2023-11-14" % cli.show_time(1700000000)]
    assert "mass delete" not in notify.status_text(dict(STATUS, mass_delete=None))


# A name pushed from another machine that a terminal would act on: it sets the window's
# title, switches to red, moves the cursor up (C1 CSI), and holds a byte that is not UTF-8.
HOSTILE = "\033]0;owned\007\033[31mred\x7f\u009b1A\udcff.txt"
QUOTED = '"\\033]0;owned\\a\\033[31mred\\177\\302\\2331A\\377.txt"'


def acted_on(text):
    """The characters of `text` a terminal would act on (a newline ends a line only)."""
    return [ch for ch in text if ch != "\n" and not ch.isprintable()]


def test_status_text_quotes_each_name_as_git_does():
    text = notify.status_text(dict(STATUS, conflicts=[HOSTILE], writing=[HOSTILE],
                                   held_back=[HOSTILE], nested_repositories=[HOSTILE]))
    assert acted_on(text) == []
    named = {l.split(":", 1)[0]: l.split(":", 1)[1].split()[0] for l in text.splitlines()
             if l.startswith(("conflict:", "writing:", "held back:", "nested repository:"))}
    assert named == {"conflict": QUOTED, "writing": QUOTED, "held back": QUOTED,
                     "nested repository": QUOTED}


def test_every_status_line_goes_through_the_quoting():
    """Whatever field another machine's words reach (an error with a name in it, a
    commit message, a host), no line of `status` carries what a terminal acts on."""
    def poisoned(value):
        if isinstance(value, str):
            return value + HOSTILE
        if isinstance(value, list):
            return [poisoned(v) for v in value] or [HOSTILE]
        if isinstance(value, dict):
            return {k: poisoned(v) for k, v in value.items()}
        return value
    status = poisoned(dict(STATUS, link="down", syncmethod="xmpp", writing=[],
                           failing={"push": "push: refused", "link": "down"},
                           watch={"problem": "no watch"},
                           mass_delete={"count": 1, "total": 2, "time": 1700000000,
                                        "restore": "dvcs-autosync restore ."},
                           progress={"doing": "writing", "files": 3, "done": 1,
                                     "since": 1700000000}))
    text = notify.status_text(status)
    assert acted_on(text) == []
    shown = {l.split(":", 1)[0] for l in text.splitlines() if "\\033]0;owned" in l}
    assert {"folder", "conflict", "writing", "held back", "nested repository", "mass delete",
            "last error", "last commit", "last push", "also", "link", "watches"} <= shown


# --- main(): requests, output and exit status -----------------------------------------

def test_status_prints_the_text_and_exits_0(daemon, capsys):
    assert notify.main(["--socket", daemon.path, "status"]) == 0
    out, err = capsys.readouterr()
    assert out == notify.status_text(STATUS) + "\n" and err == ""
    assert daemon.requests == [{"cmd": "status"}]


def test_json_prints_the_status_for_scripts(daemon, capsys):
    assert notify.main(["--socket", daemon.path, "--json", "status"]) == 0
    assert json.loads(capsys.readouterr().out) == STATUS


def test_sync_and_pull_send_their_timeout_and_pushed_its_url(daemon, capsys):
    daemon.reply = lambda m: {"ok": True}
    assert notify.main(["--socket", daemon.path, "--timeout", "7", "sync"]) == 0
    assert notify.main(["--socket", daemon.path, "pull"]) == 0
    assert notify.main(["--socket", daemon.path, "pushed", "ssh://x/y.git"]) == 0
    assert notify.main(["--socket", daemon.path, "pushed"]) == 0
    assert daemon.requests == [{"cmd": "sync", "timeout": 7.0}, {"cmd": "pull", "timeout": 600.0},
                               {"cmd": "pushed", "url": "ssh://x/y.git"}, {"cmd": "pushed"}]
    assert capsys.readouterr().out == ""


def test_a_refusal_is_one_line_and_exit_1(daemon, capsys):
    daemon.reply = lambda m: {"ok": False, "error": "commit failed: disk full"}
    assert notify.main(["--socket", daemon.path, "sync"]) == notify.EXIT_ERROR == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "autosync-notify: commit failed: disk full\n"


def test_the_daemon_is_found_from_a_subfolder_and_through_autosync_socket(
        daemon, tmp_path, monkeypatch, capsys):
    from autosync.core.paths import socket_for
    folder = tmp_path / "Sync"
    (folder / "deep").mkdir(parents=True)
    with serving(socket_for(str(folder)), lambda m, c: {"ok": True, "status": STATUS}):
        monkeypatch.chdir(folder / "deep")
        assert notify.main(["status"]) == 0
    monkeypatch.setenv("AUTOSYNC_SOCKET", daemon.path)
    assert notify.main(["status"]) == 0
    assert daemon.requests == [{"cmd": "status"}]


def test_config_names_the_daemon(daemon, tmp_path, capsys):
    folder = tmp_path / "Sync"
    folder.mkdir()
    conf = tmp_path / "autosync.ini"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\nsocket = %s\n"
                    % (folder, daemon.path))
    conf.chmod(0o600)
    assert notify.main(["--config", str(conf), "status"]) == 0
    assert daemon.requests == [{"cmd": "status"}]


def test_a_bad_config_is_one_line_and_exit_2(tmp_path, capsys):
    conf = tmp_path / "autosync.ini"
    conf.write_text("this is no ini file\n")
    with pytest.raises(SystemExit) as exited:
        notify.main(["--config", str(conf), "status"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(conf) in err


@pytest.mark.parametrize("where", ["nothing.sock", "run/missing/d.sock", "a-file"])
def test_no_daemon_on_the_socket_is_exit_3(tmp_path, capsys, where):
    (tmp_path / "a-file").write_text("not a socket\n")
    path = str(tmp_path / where)
    assert notify.main(["--socket", path, "status"]) == notify.EXIT_NO_DAEMON == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no autosync daemon" in err and path in err


def test_no_daemon_anywhere_above_is_exit_3(tmp_path, capsys):
    assert notify.main(["sync"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no dvcs-autosync daemon runs for %s" % tmp_path in err
    assert notify.main(["status"]) == 3
    assert capsys.readouterr().err == "autosync-notify: no dvcs-autosync daemon runs for this user\n"


def test_status_outside_any_synced_folder_lists_every_daemon(tmp_path, capsys):
    from autosync.core.paths import socket_for
    other = dict(STATUS, path="/home/u/Photos", state="pulling", last_error=None)
    with serving(socket_for(str(tmp_path / "Sync")), lambda m, c: {"ok": True, "status": STATUS}), \
            serving(socket_for(str(tmp_path / "Photos")), lambda m, c: {"ok": True, "status": other}):
        assert notify.main(["status"]) == 0  # run in tmp_path: in neither folder
        out = capsys.readouterr().out
        assert "folder:      /home/u/Sync" in out and "folder:      /home/u/Photos" in out
        assert "push: connection refused" in out and "state:       pulling" in out
        assert notify.main(["--all", "--json", "status"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert sorted(s["path"] for s in listed) == ["/home/u/Photos", "/home/u/Sync"]
        os.makedirs(tmp_path / "Sync" / "sub")
        os.chdir(tmp_path / "Sync" / "sub")  # inside one: that one only, unless --all
        assert notify.main(["--json", "status"]) == 0
        assert json.loads(capsys.readouterr().out)["path"] == "/home/u/Sync"
        assert notify.main(["--all", "--json", "status"]) == 0
        assert len(json.loads(capsys.readouterr().out)) == 2
    assert notify.main(["--all", "status"]) == 3  # the sockets left behind answer no more


def test_all_goes_with_status_only(capsys):
    with pytest.raises(SystemExit) as exited:
        notify.main(["--all", "sync"])
    assert exited.value.code == 2


def test_a_socket_folder_others_can_enter_is_refused_with_exit_1(tmp_path, capsys):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    path = str(folder / "d.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    try:
        assert notify.main(["--socket", path, "sync"]) == notify.EXIT_ERROR
    finally:
        listener.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing the socket folder %s" % folder in err


def misbehaving(tmp_path, reply):
    """A listening socket whose peer reads one request, then sends `reply` and hangs up."""
    path = str(tmp_path / "bad.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        conn.recv(1 << 16)
        conn.sendall(reply)
        conn.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return path, thread


def test_a_daemon_that_hangs_up_is_one_line_and_exit_1(tmp_path, capsys):
    path, thread = misbehaving(tmp_path, b"")
    assert notify.main(["--socket", path, "status"]) == 1
    thread.join(10)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "talking to %s failed" % path in err


def test_a_reply_that_is_not_json_is_one_line_and_exit_1(tmp_path, capsys):
    path, thread = misbehaving(tmp_path, b"garbage\n")
    try:
        code = notify.main(["--socket", path, "status"])
    finally:
        thread.join(10)
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "talking to %s failed" % path in err


def test_usage_errors_are_exit_2(capsys):
    for argv in (["frobnicate"], ["--config", "a", "--socket", "b", "status"], []):
        with pytest.raises(SystemExit) as exited:
            notify.main(argv)
        assert exited.value.code == notify.EXIT_USAGE == 2


def test_describe_dash_reads_the_text_from_stdin(monkeypatch):
    """Off the command line, which every local user can read."""
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO("Tax forms\nfor 2025\n"))
    request = notify.request_for(notify.parse(["describe", "-"]))
    assert request["text"] == "Tax forms for 2025"
    assert notify.request_for(notify.parse(["describe", "a", "-"]))["text"] == "a -"


# --- typed anywhere: ~/.autosync's daemon, else the only one ---------------------------

def test_outside_any_synced_folder_the_only_daemon_is_meant(tmp_path, capsys):
    from autosync.core.paths import socket_for
    gone = socket_for(str(tmp_path / "Gone"))
    with serving(gone, paused_reply):
        pass  # its file stays behind: a daemon that was killed
    requests = []
    with serving(socket_for(str(tmp_path / "Sync")),
                 lambda m, c: requests.append(m) or paused_reply(m)):
        for command in (["pause"], ["resume"], ["sync"], ["describe", "taxes"]):
            assert notify.main(command) == 0, capsys.readouterr().err
    assert [r["cmd"] for r in requests] == ["pause", "resume", "sync", "describe"]


def test_outside_any_synced_folder_two_daemons_are_named_not_guessed(tmp_path, capsys):
    from autosync.core.paths import socket_for
    photos = dict(STATUS, path="/home/u/Photos")
    with serving(socket_for(str(tmp_path / "Sync")),
                 lambda m, c: {"ok": True, "status": STATUS}), \
            serving(socket_for(str(tmp_path / "Photos")),
                    lambda m, c: {"ok": True, "status": photos}):
        assert notify.main(["pause"]) == notify.EXIT_NO_DAEMON
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("autosync-notify: 2 dvcs-autosync daemons "
                                                   "run (")
    assert "/home/u/Photos" in err and "/home/u/Sync" in err and "--config" in err


def test_outside_any_synced_folder_the_default_config_s_daemon_is_meant(
        tmp_path, capsys, private_home):
    from autosync.core.paths import socket_for
    own = str(tmp_path / "own.sock")
    conf = private_home / ".autosync"
    conf.write_text("[autosync]\npath = %s\nsyncmethod = none\nsocket = %s\n"
                    % (tmp_path / "Sync", own))
    conf.chmod(0o600)
    requests = []
    with serving(own, lambda m, c: requests.append(m) or paused_reply(m)), \
            serving(socket_for(str(tmp_path / "Photos")),
                    lambda m, c: paused_reply(m, "/home/u/Photos")):
        assert notify.main(["pause", "1h"]) == 0
    # The answer names the folder it paused.
    assert capsys.readouterr().out.startswith("paused /home/u/Sync: since ")
    assert requests == [{"cmd": "pause", "seconds": 3600}]


def test_a_polled_link_is_said_to_be_polled_not_up():
    polled = dict(STATUS, pending=[], unpushed=0, link="up", syncmethod="ssh", link_polled=10)
    text = notify.status_text(polled)
    assert "link:        polled every 10 s over ssh (git ls-remote: the server cannot run the " \
        "watch)" in text
    assert "link:        up over ssh" in notify.status_text(dict(polled, link_polled=None))
    why = "the watch command ended (exit 1): this key may only run git"
    assert "link:        polled every 10 s over ssh (git ls-remote: %s)" % why \
        in notify.status_text(dict(polled, link_why=why))
    assert "link:        down over ssh" in notify.status_text(dict(polled, link="down"))
