"""autosync.config: the original's INI syntax read as RawConfigParser read it, checks, defaults."""
import configparser
import dataclasses
import logging
import os
import socket
import subprocess

import pytest

from autosync.core import config, ini
from autosync.core.config import ConfigError
from autosync.core.paths import socket_for
from base import HERE  # tests/ (its data/; the checkout above it)

ORIGINAL = os.path.join(HERE, "data", "original-autosync-example")


@pytest.fixture
def folder(tmp_path):
    """A synced folder inside a working tree (a .git is all load() looks for)."""
    path = tmp_path / "sync"
    (path / ".git").mkdir(parents=True)
    return str(path)


def write(tmp_path, text, mode=0o600, name="autosync.ini"):
    file = tmp_path / name
    file.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    file.chmod(mode)
    return str(file)


def minimal(folder, extra="", autosync=""):
    return "[autosync]\npath = %s\nsyncmethod = none\n%s\n%s" % (folder, autosync, extra)


def raw(text):
    """What the original's RawConfigParser gives for `text` (read as a text file reads it)."""
    parser = configparser.RawConfigParser()
    parser.read_string(text.replace("\r\n", "\n").lstrip("\ufeff"))
    return {s: dict(parser.items(s)) for s in parser.sections()}


ALSONOTIFY_WARNING = ("%s: [xmpp] alsonotify: %r is not an XMPP address; ignored, so nobody "
                      "gets notifications over XMPP (notifymethod = %s)")


def original_text(**replace):
    with open(ORIGINAL, encoding="utf-8") as f:
        text = f.read()
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


# --- The original example file -------------------------------------------------------------

def test_syncmethod_none_keeps_the_original_s_meaning_only_in_an_original_configuration(
        tmp_path, folder):
    """The original's none: local history only (commits, never a push nor a pull). Ours:
    push at once, pull every pullinterval. An original configuration (its [dvcs] commands,
    no key of ours) gets the original's; any key of ours, or no [dvcs] (init's), ours."""
    none = original_text(**{"syncmethod = xmpp": "syncmethod = none"})
    cfg = config.load(write(tmp_path, none), check_path=False)
    assert (cfg.syncmethod, cfg.localonly, cfg.pullinterval) == ("none", True, 0)
    ours = config.load(write(tmp_path, none.replace("pulllock = conservative",
                                                    "pulllock = conservative\npullinterval = 300"
                                                    )), check_path=False)
    assert (ours.localonly, ours.pullinterval) == (False, 300)
    assert not config.load(write(tmp_path, minimal(folder)), check_path=False).localonly
    xmpp = config.load(write(tmp_path, original_text()), check_path=False)
    assert (xmpp.syncmethod, xmpp.localonly) == ("none", False)  # its placeholders: XMPP off

def test_original_example_reads_exactly_as_rawconfigparser():
    text = original_text()
    assert "openuat \n" in text and "git rm %s \n" in text  # the trailing spaces are there
    parsed = ini.parse("f", text, [])
    assert {s: {k: v for k, (v, _) in keys.items()} for s, keys in parsed.items()} == raw(text)


def test_original_example_values_reach_config_unchanged(tmp_path):
    text = original_text(**{"your XMPP id here": "me@example.org"})
    cfg = config.load(write(tmp_path, text), check_path=False)
    want = raw(text)
    for key, value in want["dvcs"].items():
        assert cfg.commands[key] == value
    assert cfg.commands["movecmd"] == "git rm %s\ngit add %s"
    assert cfg.commands["statuscmd"] == 'git status | grep -iq "nothing to commit"'
    home = os.path.expanduser("~")
    assert cfg.path == os.path.join(home, "amw")
    assert cfg.pidfile == os.path.join(home, ".autosync.pid")
    assert cfg.syncmethod == want["autosync"]["syncmethod"] == "xmpp"
    assert cfg.pulllock == want["autosync"]["pulllock"]
    assert cfg.readfrequency == float(want["autosync"]["readfrequency"]) == 5.0
    assert cfg.ignorepath == want["autosync"]["ignorepath"].split()
    assert len(cfg.ignorepath) == 8
    for key in ("username", "password"):
        assert getattr(cfg.xmpp, key) == want["xmpp"][key]
    # The placeholder sentence in alsonotify cannot be used: warned about and off. Nothing
    # else warns ([autosync-server] is accepted silently).
    assert cfg.xmpp.alsonotify == ""
    assert cfg.warnings == [ALSONOTIFY_WARNING % (cfg.file, want["xmpp"]["alsonotify"], "desktop")]


def test_sharedwith_keeps_the_addresses_and_warns_of_the_rest(tmp_path, folder):
    cfg = config.load(write(tmp_path, "[autosync]\npath = %s\n[xmpp]\nusername = me@example.org"
                                      "\npassword = x\nsharedwith = Bob@Example.org, not one,"
                                      "ann@example.net\n" % folder))
    assert cfg.xmpp.sharedwith == "bob@example.org ann@example.net"
    assert cfg.warnings == ["%s: [xmpp] sharedwith: 'not', 'one' are not an XMPP address; "
                            "ignored" % cfg.file]


def test_original_example_is_a_working_config(tmp_path, folder):
    text = original_text(**{"~/amw": folder, "your XMPP id here": "me@example.org"})
    cfg = config.load(write(tmp_path, text))
    assert cfg.file == str(tmp_path / "autosync.ini")
    assert cfg.path == folder
    assert cfg.notifymethod == "desktop"
    assert (cfg.maxwait, cfg.pushdelay, cfg.pullinterval) == (10.0, 0.0, 300.0)
    assert cfg.socket == socket_for(folder)
    assert cfg.xmpp.host == "example.org" and cfg.xmpp.port == 5222
    assert cfg.xmpp.tls == "required" and cfg.xmpp.priority == 0
    assert cfg.xmpp.resource.startswith("autosync-")
    assert cfg.commands["logcmd"].startswith("git log") and cfg.commands["contextcmd"] == ""
    assert cfg.commands["restorecmd"] == "git cat-file --filters %s:./%s"


@pytest.mark.parametrize("notifymethod, works_as", [
    ("desktop", "desktop"), ("xmpp", "none"), ("all", "desktop"), ("none", "none")])
def test_original_example_placeholder_username_switches_xmpp_off(tmp_path, notifymethod,
                                                                 works_as):
    """The original started with its example's account, failed to log in, and synced on
    without XMPP ("Will not announce pushes to other running autosync instances")."""
    file = write(tmp_path, original_text(**{
        "syncmethod = xmpp": "syncmethod = xmpp\nnotifymethod = %s" % notifymethod}))
    cfg = config.load(file, check_path=False)
    assert (cfg.syncmethod, cfg.notifymethod) == ("none", works_as)
    tail = ", notifymethod %s works as %s" % (notifymethod, works_as) if (
        notifymethod != works_as) else ""
    assert cfg.warnings == [
        "%s: [xmpp] username: 'your XMPP id here' is not an XMPP address; XMPP is off: pushes "
        "are not announced, other machines' pushes are pulled every 300 s (pullinterval)%s"
        % (file, tail)]


@pytest.mark.parametrize("username", ["me", "me@example.org/laptop", "me@@example.org"])
def test_unusable_username_switches_xmpp_off(tmp_path, folder, username):
    file = write(tmp_path, minimal(folder, "[xmpp]\nusername = %s\npassword = pw\n" % username,
                                   autosync="pullinterval = 0\nnotifymethod = xmpp\n"))
    cfg = config.load(file)
    assert (cfg.syncmethod, cfg.notifymethod) == ("none", "none")
    assert cfg.warnings == [
        "%s: [xmpp] username: %r is not an XMPP address; XMPP is off: pushes are not announced, "
        "other machines' pushes are never pulled (pullinterval = 0), notifymethod xmpp works "
        "as none" % (file, username)]


def test_new_example_file_loads_with_every_key(tmp_path, folder):
    with open(os.path.join(HERE, "..", ".autosync-example"), encoding="utf-8") as f:
        text = f.read().replace("~/Sync", folder)
    file = write(tmp_path, text)
    cfg = config.load(file)
    # Only the account, a placeholder, is told to be filled in.
    assert cfg.warnings == ["%s: [xmpp] username: 'you@example.org' is the example's "
                            "placeholder: put in your own XMPP account and its password; XMPP "
                            "is off: pushes are not announced, other machines' pushes are pulled "
                            "every 300 s (pullinterval)" % file]
    assert cfg.commands == config.GIT_COMMANDS
    parsed = ini.parse("f", text, [])
    for section, keys in config.KEYS.items():
        assert set(parsed[section]) == set(keys), section  # the example shows every key
        for name, key in keys.items():  # with its default, or empty where that is worked out
            shown = "" if key.derived or key.default is None else key.default
            if isinstance(shown, bool):
                shown = "yes" if shown else "no"
            elif not isinstance(shown, str):
                shown = "%g" % shown
            if name not in ("path", "username", "password"):  # those are examples
                assert parsed[section][name][0] == shown, (section, name)


# --- Syntax the original accepted ----------------------------------------------------------

TRICKY = {
    "hash": 'logcmd = git commit -m "fix #3"\n',
    "semicolon": "logcmd = a ; b\n",
    "leading quote": 'logcmd = "quoted" and not\n',
    "single quotes": "logcmd = 'a' b 'c'\n",
    "trailing quote": 'logcmd = say "hi"\n',
    "triple double": 'logcmd = a """ b\n',
    "triple single": "logcmd = a ''' b'\n",
    "both triple quotes": "logcmd = a ''' b \"\"\" c\n",
    "commas": "logcmd = a, b, c\n",
    "interpolation": "logcmd = %(name)s and %s and %%s\n",
    "colon": "logcmd: git log\n",
    "colon and equals": "logcmd : a=b\n",
    "continuation": "logcmd = first\n    second  \n\tthird\n",
    "blank line inside": "logcmd = first\n\n    second\n\n",
    "comment inside": "logcmd = first\n# not part of it\n  ; nor this\n    second\n",
    "empty": "logcmd =\n",
    "empty then continuation": "logcmd =\n    next\n",
    "upper-case key": "LogCmd = x\n",
    "unicode": "logcmd = echo été ✓\n",
}


@pytest.mark.parametrize("line", TRICKY.values(), ids=TRICKY.keys())
def test_value_is_what_rawconfigparser_gives(tmp_path, folder, line):
    text = minimal(folder, "[dvcs]\n" + line + "pushcmd = git push\n")
    cfg = config.load(write(tmp_path, text))
    assert cfg.commands["logcmd"] == raw(text)["dvcs"]["logcmd"]
    assert cfg.commands["pushcmd"] == "git push"


def test_warnings_are_logged_once_a_start_and_not_where_asked_not_to(tmp_path, folder, caplog,
                                                                     monkeypatch):
    """The supervisor says a file's warnings, the programs it starts (WARNED) do not, and
    init reading back the file it wrote says nothing (warn=False, no variable set)."""
    file = write(tmp_path, minimal(folder, "[DEFAULT]\npushcmd = x\n"))
    monkeypatch.delenv(config.WARNED, raising=False)
    said = "[DEFAULT]: unknown section, ignored"
    with caplog.at_level(logging.WARNING, logger="autosync"):
        assert config.load(file, warn=False).warnings and said not in caplog.text
        config.load(file)
        assert said in caplog.text
        caplog.clear()
        monkeypatch.setenv(config.WARNED, "1")
        config.load(file)
        assert said not in caplog.text
        assert config.load(file, warn=True) and said in caplog.text


def test_default_section_is_an_ordinary_unknown_one(tmp_path, folder):
    # RawConfigParser would lend [DEFAULT]'s keys to every section; the original's
    # example has none, and a command that turned up in every section would be a surprise.
    file = write(tmp_path, minimal(folder, "[DEFAULT]\npushcmd = x\n"))
    cfg = config.load(file)
    assert cfg.commands["pushcmd"] == "git push -q"
    assert cfg.warnings == ["%s: [DEFAULT]: unknown section, ignored" % file]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_line_endings(tmp_path, folder, newline):
    text = minimal(folder, "[dvcs]\nmovecmd = git rm %s\n  git add %s\n").replace("\n", newline)
    cfg = config.load(write(tmp_path, text))
    assert cfg.path == folder
    assert cfg.commands["movecmd"] == "git rm %s\ngit add %s"


def test_utf8_bom(tmp_path, folder):
    cfg = config.load(write(tmp_path, b"\xef\xbb\xbf" + minimal(folder).encode()))
    assert cfg.path == folder and cfg.warnings == []


def test_quoted_xmpp_values_keep_their_quotes(tmp_path, folder):
    text = minimal(folder, '[xmpp]\npassword = "p#ss, w\'rd"\nresource = \'r\'\n')
    cfg = config.load(write(tmp_path, text))
    assert cfg.xmpp.password == raw(text)["xmpp"]["password"] == '"p#ss, w\'rd"'
    assert cfg.xmpp.resource == "'r'"


def test_empty_command_means_do_not_run(tmp_path, folder):
    # The original's Mercurial example has an empty modifycmd.
    text = minimal(folder, "[dvcs]\nmodifycmd =\nstatuscmd = hg status\n")
    cfg = config.load(write(tmp_path, text))
    assert cfg.commands["modifycmd"] == ""
    assert cfg.commands["statuscmd"] == "hg status"
    assert cfg.commands["addcmd"] == "git add -A -- %s"  # unset: the git default


def test_duplicate_key_last_wins_with_a_warning(tmp_path, folder):
    file = write(tmp_path, minimal(folder, autosync="readfrequency = 1\nreadfrequency = 2\n"))
    cfg = config.load(file)
    assert cfg.readfrequency == 2.0
    assert cfg.warnings == ["%s: line 5: [autosync] readfrequency is set again; "
                            "the last value counts" % file]


# --- Defaults and derived values ---------------------------------------------------------

def test_defaults(tmp_path, folder):
    file = write(tmp_path, "[autosync]\npath = %s/\nsyncmethod = none\n" % folder)
    cfg = config.load(file)
    assert cfg.path == folder  # no trailing slash
    assert cfg.pidfile == file + ".pid"
    assert cfg.notifymethod == "desktop" and cfg.pulllock == "conservative"
    assert cfg.readfrequency is None and cfg.ignorepath == [".git", ".svn", ".hg"]
    assert (cfg.maxwait, cfg.pushdelay, cfg.pullinterval) == (10.0, 0.0, 300.0)
    assert cfg.socket == socket_for(folder)
    assert cfg.commands == config.GIT_COMMANDS
    assert cfg.xmpp.username == cfg.xmpp.password == cfg.xmpp.host == ""
    assert cfg.xmpp.port == 5222 and cfg.xmpp.tls == "required"
    assert cfg.warnings == []


def test_syncmethod_defaults_to_xmpp_as_in_the_original(tmp_path, folder):
    text = "[autosync]\npath = %s\n[xmpp]\nusername = a@b.example\npassword = pw\n" % folder
    assert config.load(write(tmp_path, text)).syncmethod == "xmpp"


def test_paths_expand_home_vars_and_relative(tmp_path, folder, monkeypatch):
    monkeypatch.setenv("SYNC_SOCKETS", str(tmp_path / "s"))
    text = ("[autosync]\npath = sync\nsyncmethod = none\npidfile = ~/x.pid\n"
            "socket = $SYNC_SOCKETS/a.sock\nignorepath = a/ ./b %s/c ../out\n" % folder)
    file = write(tmp_path, text)
    cfg = config.load(file)
    assert cfg.path == folder  # relative to the config file's folder
    assert cfg.pidfile == os.path.expanduser("~/x.pid")
    assert cfg.socket == str(tmp_path / "s" / "a.sock")
    assert cfg.ignorepath == ["a", "b", "c"]
    assert cfg.warnings == ["%s: [autosync] ignorepath: '../out' is not below path, ignored" % file]


def test_new_keys(tmp_path, folder):
    cafile = tmp_path / "ca.pem"
    cafile.write_text("x")
    text = minimal(folder, "[xmpp]\nusername = u@d.example\npassword = pw\nhost = 127.0.0.1\n"
                   "port = 5299\ntls = off\ncafile = %s\npriority = -5\nresource = laptop\n"
                   % cafile,
                   "readfrequency = 0.25\nmaxwait = 2.5\npushdelay = 0\npullinterval = 0\n"
                   "notifymethod = all\npulllock = optimized\n")
    file = write(tmp_path, text)
    cfg = config.load(file)
    assert (cfg.readfrequency, cfg.maxwait, cfg.pushdelay, cfg.pullinterval) == (0.25, 2.5, 0, 0)
    assert cfg.notifymethod == "all" and cfg.pulllock == "optimized"
    x = cfg.xmpp
    assert (x.host, x.port, x.tls, x.cafile, x.priority, x.resource) == (
        "127.0.0.1", 5299, "off", str(cafile), -5, "laptop")
    assert cfg.warnings == ["%s: [xmpp] tls = off: the password and all messages travel "
                            "unencrypted" % file]


# openssl x509 -noout -fingerprint -sha256 prints this line (OpenSSL 3.0; 1.1 says SHA256).
OPENSSL_LINE = "sha256 Fingerprint=" + ":".join(["0A", "1b"] * 16)
PIN = "sha256:" + ":".join(["0A", "1B"] * 16)


@pytest.mark.parametrize("spelling", [
    PIN, PIN.lower(), PIN[len("sha256:"):], PIN.replace(":", "").replace("sha256", "sha256:"),
    PIN.replace(":", "")[len("sha256"):], "SHA256:" + PIN[7:], "SHA-256:" + PIN[7:],
    OPENSSL_LINE, OPENSSL_LINE.replace("sha256", "SHA256"), "  %s  " % PIN,
    PIN.replace(":", " ").replace("sha256 ", "sha256: ")])
def test_fingerprint_spellings(tmp_path, folder, spelling):
    cfg = config.load(write(tmp_path, minimal(folder, "[xmpp]\nfingerprint = %s\n" % spelling)))
    assert cfg.xmpp.fingerprint == PIN
    assert cfg.warnings == []


def test_fingerprint_is_not_used_without_tls(tmp_path, folder):
    file = write(tmp_path, minimal(folder, "[xmpp]\ntls = off\nfingerprint = %s\n" % PIN))
    assert config.load(file).warnings == [
        "%s: [xmpp] tls = off: the password and all messages travel unencrypted" % file,
        "%s: [xmpp] fingerprint: not used, since tls = off" % file]


def test_syncmethod_ssh_needs_no_account_and_takes_watchcmd(tmp_path, folder):
    text = "[autosync]\npath = %s\nsyncmethod = ssh\n[dvcs]\nwatchcmd = ssh h w %%s\n" % folder
    cfg = config.load(write(tmp_path, text))
    assert (cfg.syncmethod, cfg.commands["watchcmd"], cfg.warnings) == ("ssh", "ssh h w %s", [])
    # Set, but another syncmethod: said, since nothing would run it.
    file = write(tmp_path, minimal(folder, "[dvcs]\nwatchcmd = ssh h w\n"))
    assert config.load(file).warnings == [
        "%s: [dvcs] watchcmd: not used, since syncmethod is none (not ssh)" % file]


@pytest.mark.parametrize("notifymethod", ["desktop", "xmpp", "all", "none"])
@pytest.mark.parametrize("alsonotify", ["nobody", "if set, another XMPP id that will get "
                                        "notified when something happens", "a@b/c", "@b"])
def test_unusable_alsonotify_is_a_warning_and_off(tmp_path, folder, notifymethod, alsonotify):
    """The original's example holds a sentence there; the original ran with it."""
    file = write(tmp_path, "[autosync]\npath = %s\nnotifymethod = %s\n[xmpp]\nusername = "
                 "a@b.example\npassword = pw\nalsonotify = %s\n" % (folder, notifymethod,
                                                                    alsonotify))
    cfg = config.load(file)
    assert cfg.notifymethod == notifymethod and cfg.xmpp.alsonotify == ""
    assert cfg.warnings == [ALSONOTIFY_WARNING % (file, alsonotify, notifymethod)]


def test_usable_alsonotify_is_kept(tmp_path, folder):
    file = write(tmp_path, xmpp_text(folder) + "alsonotify = Phone@Example.org\n")
    cfg = config.load(file)
    assert cfg.xmpp.alsonotify == "Phone@Example.org" and cfg.warnings == []


def test_alsonotify_is_not_looked_at_while_xmpp_is_unused(tmp_path, folder):
    file = write(tmp_path, minimal(folder, "[xmpp]\nalsonotify = nobody\n"))
    cfg = config.load(file)
    assert cfg.warnings == [] and cfg.xmpp.alsonotify == "nobody"


def test_long_readfrequency_raises_the_default_maxwait(tmp_path, folder):
    cfg = config.load(write(tmp_path, minimal(folder, autosync="readfrequency = 30\n")))
    assert cfg.maxwait == 30.0


# --- One table of defaults: the dataclasses and docs/configuration.md follow KEYS ----------

def test_dataclass_defaults_are_those_of_keys():
    cfg, xmpp = config.Config(), config.Xmpp()
    own = {"file", "warnings", "commands", "xmpp", "localonly"}
    assert {f.name for f in dataclasses.fields(cfg)} - own == set(config.KEYS["autosync"])
    assert {f.name for f in dataclasses.fields(xmpp)} == set(config.KEYS["xmpp"])
    for section, made in (("autosync", cfg), ("xmpp", xmpp)):
        for name, key in config.KEYS[section].items():
            if key.default is not None and not key.derived:
                want = key.default.split() if name == "ignorepath" else key.default
                assert getattr(made, name) == want, (section, name)
    assert cfg.hostname == socket.gethostname()
    assert cfg.commands == config.GIT_COMMANDS == {
        name: key.default for name, key in config.KEYS["dvcs"].items()}


def readme_text():
    """The page that holds the table of keys (it left the README for docs/)."""
    with open(os.path.join(HERE, "..", "docs", "configuration.md"), encoding="utf-8") as f:
        return f.read()


def readme_differences(text):
    """Each key whose default the key table shows otherwise than KEYS, in one line."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] in config.KEYS and cells[1].startswith("`"):
            rows[cells[0], cells[1].strip("`")] = cells[2]
    found = []
    for section, keys in config.KEYS.items():
        for name, key in keys.items():
            if key.default is None:
                want = "(required)"
            elif key.derived:
                want = key.derived
            elif key.default == "":
                want = "empty"
            elif isinstance(key.default, bool):
                want = "`yes`" if key.default else "`no`"
            elif isinstance(key.default, str):  # a command's lines: `first` then `second`
                want = " then ".join("`%s`" % line for line in key.default.split("\n"))
            else:
                want = "`%g`" % key.default
            cell = rows.pop((section, name), None)
            if cell is None:
                found.append("[%s] %s: not in the docs" % (section, name))
            elif cell != want and not cell.startswith(want + " "):
                found.append("[%s] %s: the docs say %s, KEYS %s" % (section, name, cell, want))
    return found + ["[%s] %s: in the docs, not in KEYS" % row for row in rows]


def test_readme_shows_every_key_with_the_default_of_keys():
    assert readme_differences(readme_text()) == []


def test_a_readme_difference_names_the_key():
    text = readme_text()
    text = text.replace("| autosync | `pushdelay` | `0` |", "| autosync | `pushdelay` | `2` |")
    text = text.replace("| dvcs | `pushcmd` | `git push -q` |", "| dvcs | `pushcmd` | `git push` |")
    text = text.replace("| xmpp | `port` |", "| xmpp | `portt` |")
    assert readme_differences(text) == [
        "[autosync] pushdelay: the docs say `2`, KEYS `0`",
        "[dvcs] pushcmd: the docs say `git push`, KEYS `git push -q`",
        "[xmpp] port: not in the docs",
        "[xmpp] portt: in the docs, not in KEYS"]


# --- Errors: one line naming file, section, key and what was expected -------------------

def test_missing_file(tmp_path):
    file = str(tmp_path / "nope")
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == "%s: cannot read: No such file or directory" % file


# A file that is fine so far: {path} is replaced by a folder in a working tree.
OK = "[autosync]\npath = {path}\nsyncmethod = none\n"
NUMBER = "a number of seconds >= 0"
ADDRESS = "an XMPP address like user@example.org"

BAD = {
    "garbage": ("this is not an ini file\nat all\n",
                "line 1: expected a [section] header before any key, "
                "got 'this is not an ini file'"),
    "garbage in a section": (OK + "what is this\n", "line 4: expected 'key = value' or a "
                             "[section] header, got 'what is this'"),
    "empty key": (OK + "= x\n",
                  "line 4: expected 'key = value' or a [section] header, got '= x'"),
    "not utf-8": (b"[autosync]\npath = \xff\n",
                  "line 2: expected UTF-8 text, got bytes that are not"),
    "no autosync section": ("[dvcs]\naddcmd = git add %s\n",
                            "[autosync]: expected a section [autosync] with path = FOLDER, "
                            "got no such section"),
    "empty file": ("", "[autosync]: expected a section [autosync] with path = FOLDER, "
                       "got no such section"),
    "no path": ("[autosync]\nsyncmethod = none\n",
                "[autosync] path: expected the folder to keep in sync, got nothing"),
    "empty path": ("[autosync]\npath =\n",
                   "[autosync] path: expected the folder to keep in sync, got ''"),
    "readfrequency abc": (OK + "readfrequency = abc",
                          "[autosync] readfrequency: expected %s, got 'abc'" % NUMBER),
    "readfrequency negative": (OK + "readfrequency = -1",
                               "[autosync] readfrequency: expected %s, got '-1'" % NUMBER),
    "pushdelay nan": (OK + "pushdelay = nan",
                      "[autosync] pushdelay: expected %s, got 'nan'" % NUMBER),
    "pullinterval inf": (OK + "pullinterval = inf",
                         "[autosync] pullinterval: expected %s (0: never), got 'inf'" % NUMBER),
    "syncmethod bogus": (OK + "syncmethod = bogus",
                         "[autosync] syncmethod: expected xmpp, ssh or none, got 'bogus'"),
    "syncmethod server": (OK + "syncmethod = autosync-server",
                          "[autosync] syncmethod: expected xmpp, ssh or none (autosync-server was "
                          "never implemented), got 'autosync-server'"),
    "notifymethod": (OK + "notifymethod = email", "[autosync] notifymethod: expected desktop, "
                     "xmpp, all or none, got 'email'"),
    "pulllock": (OK + "pulllock = x",
                 "[autosync] pulllock: expected conservative or optimized, got 'x'"),
    "maxwait below readfrequency": (OK + "readfrequency = 3\nmaxwait = 2.5", "[autosync] maxwait: "
                                    "expected a number of seconds >= readfrequency (3), got '2.5'"),
    "addcmd two": (OK + "[dvcs]\naddcmd = git add %s %s", "[dvcs] addcmd: expected exactly 1 %s "
                   "(the path), got 2 in 'git add %s %s'"),
    "watchcmd two": (OK + "[dvcs]\nwatchcmd = ssh h watch %s %s", "[dvcs] watchcmd: expected "
                     "a command of one line with at most one %s (the remote's path), got "
                     "'ssh h watch %s %s'"),
    "watchcmd two lines": (OK + "[dvcs]\nwatchcmd = ssh h watch %s\n  true", "[dvcs] watchcmd: "
                           "expected a command of one line with at most one %s (the remote's "
                           "path), got 'ssh h watch %s\\ntrue'"),
    "movecmd one": (OK + "[dvcs]\nmovecmd = git mv %s", "[dvcs] movecmd: expected exactly 2 %s "
                    "(source, then destination), got 1 in 'git mv %s'"),
    "movecmd three": (OK + "[dvcs]\nmovecmd = git rm %s\n  git add %s %s", "[dvcs] movecmd: "
                      "expected exactly 2 %s (source, then destination), got 3 in "
                      "'git rm %s\\ngit add %s %s'"),
    "commitcmd none": (OK + "[dvcs]\ncommitcmd = git commit -m x", "[dvcs] commitcmd: expected "
                       "exactly 1 %s (the message), got 0 in 'git commit -m x'"),
    "pushcmd one": (OK + "[dvcs]\npushcmd = git push %s",
                    "[dvcs] pushcmd: expected no %s, got 1 in 'git push %s'"),
    "port": (OK + "[xmpp]\nport = x",
             "[xmpp] port: expected a port number from 1 to 65535, got 'x'"),
    "port range": (OK + "[xmpp]\nport = 70000",
                   "[xmpp] port: expected a port number from 1 to 65535, got '70000'"),
    "priority": (OK + "[xmpp]\npriority = 128",
                 "[xmpp] priority: expected a whole number from -128 to 127, got '128'"),
    "tls": (OK + "[xmpp]\ntls = maybe", "[xmpp] tls: expected required or off, got 'maybe'"),
    "cafile": (OK + "[xmpp]\ncafile = /nonexistent/ca.pem", "[xmpp] cafile: expected an "
               "existing file of CA certificates, got '/nonexistent/ca.pem'"),
    "xmpp needs username": ("[autosync]\npath = {path}\n[xmpp]\npassword = pw",
                            "[xmpp] username: expected %s, got nothing" % ADDRESS),
    "xmpp notify needs username": (OK + "notifymethod = xmpp",
                                   "[xmpp] username: expected %s, got nothing" % ADDRESS),
    "xmpp needs password": ("[autosync]\npath = {path}\n[xmpp]\nusername = a@b.example",
                            "[xmpp] password: expected the password of username, got nothing"),
    "fingerprint": (OK + "[xmpp]\nfingerprint = sha256:AB:CD", "[xmpp] fingerprint: expected "
                    "%s, got 'sha256:AB:CD'" % config.FINGERPRINT),
    "fingerprint md5": (OK + "[xmpp]\nfingerprint = md5:" + "ab" * 32, "[xmpp] fingerprint: "
                        "expected %s, got 'md5:%s'" % (config.FINGERPRINT, "ab" * 32)),
}


@pytest.mark.parametrize("text, message", BAD.values(), ids=BAD.keys())
def test_bad_config_is_one_line_error(tmp_path, folder, text, message):
    if isinstance(text, str):
        text = text.replace("{path}", folder)
    file = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == "%s: %s" % (file, message)
    assert "\n" not in str(e.value)


def test_path_that_does_not_exist(tmp_path):
    missing = str(tmp_path / "missing")
    file = write(tmp_path, minimal(missing))
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == ("%s: [autosync] path: expected an existing folder, got %r, "
                            "which does not exist" % (file, missing))
    assert config.load(file, check_path=False).path == missing


def test_path_that_is_a_file(tmp_path, folder):
    plain = os.path.join(folder, "file")
    open(plain, "w").close()
    file = write(tmp_path, minimal(plain))
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == ("%s: [autosync] path: expected a folder, got %r, which is not "
                            "a folder" % (file, plain))


def test_path_outside_a_working_tree(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    file = write(tmp_path, minimal(str(plain)))
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == ("%s: [autosync] path: expected a folder in a working tree (.git, "
                            ".hg, .bzr, _darcs, .svn or .fossil in it or above), got %r"
                            % (file, str(plain)))


@pytest.mark.parametrize("marker", [".git", ".hg", ".bzr", "_darcs", ".svn", ".fossil"])
def test_subfolder_of_a_working_tree(tmp_path, marker):
    (tmp_path / "repo" / marker).mkdir(parents=True)
    sub = tmp_path / "repo" / "a" / "b"
    sub.mkdir(parents=True)
    assert config.load(write(tmp_path, minimal(str(sub)))).path == str(sub)


def snapshot(root):
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            seen[os.path.join(dirpath, name)] = (st.st_mtime_ns, st.st_size, st.st_mode)
    return seen


def test_load_writes_nothing(tmp_path, folder, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    text = minimal(folder, "[xmpp]\nusername = a@b.example\npassword = pw\n") + "\n"
    file = write(tmp_path, text.replace("syncmethod = none", "syncmethod = xmpp"), mode=0o644)
    before = snapshot(tmp_path)
    cfg = config.load(file)
    assert snapshot(tmp_path) == before
    assert not os.path.exists(cfg.pidfile) and not os.path.exists(cfg.socket)


# --- Warnings -----------------------------------------------------------------------------

def test_unknown_key_and_section_warn(tmp_path, folder, caplog):
    file = write(tmp_path, minimal(folder, "[dvcs]\nadcmd = git add %s\n[extra]\nx = 1\n"
                                   "[autosync-server]\nserver = http://x\n"))
    with caplog.at_level(logging.WARNING, logger="autosync.config"):
        cfg = config.load(file)
    assert cfg.warnings == ["%s: line 6: [dvcs] adcmd: unknown key, ignored; did you mean "
                            "addcmd?" % file,
                            "%s: [extra]: unknown section, ignored" % file]
    assert [r.getMessage() for r in caplog.records] == cfg.warnings


def test_an_unknown_name_is_told_with_the_nearest_known_one(tmp_path, folder):
    file = write(tmp_path, minimal(folder, "[xmmp]\nport = 5222\n[dvcs]\npuhscmd = x\n",
                                   autosync="pushdelayy = 3\nusername = me@example.org\n"))
    assert config.load(file).warnings == [
        "%s: line 4: [autosync] pushdelayy: unknown key, ignored; did you mean pushdelay?" % file,
        "%s: line 5: [autosync] username: unknown key, ignored; it belongs in [xmpp]" % file,
        "%s: [xmmp]: unknown section, ignored; did you mean [xmpp]?" % file,
        "%s: line 10: [dvcs] puhscmd: unknown key, ignored; did you mean pushcmd?" % file]


@pytest.mark.parametrize("text, error", [
    # The key the typo stands for is required: the error itself names the typo.
    ("[autosync]\npathh = {folder}\nsyncmethod = none\n",
     "[autosync] path: expected the folder to keep in sync, got nothing "
     "(line 2: pathh: unknown key; did you mean path?)"),
    ("[autosync]\npath = {folder}\n[xmmp]\nusername = me@example.org\npassword = x\n",
     "[xmpp] username: expected an XMPP address like user@example.org, got nothing "
     "([xmmp]: unknown section; did you mean [xmpp]?)"),
    ("[autosync]\npath = {folder}\nusername = me@example.org\n",
     "[xmpp] username: expected an XMPP address like user@example.org, got nothing "
     "(line 3: username: unknown key; it belongs in [xmpp])"),
    ("[autosyn]\npath = {folder}\n",
     "[autosync]: expected a section [autosync] with path = FOLDER, got no such section "
     "([autosyn]: unknown section; did you mean [autosync]?)"),
    # Nothing near: the error as it was.
    ("[autosync]\nfolder = {folder}\nsyncmethod = none\n",
     "[autosync] path: expected the folder to keep in sync, got nothing"),
])
def test_a_missing_key_names_the_typo_that_stands_for_it(tmp_path, folder, text, error):
    file = write(tmp_path, text.format(folder=folder))
    with pytest.raises(ConfigError) as raised:
        config.load(file)
    assert str(raised.value) == "%s: %s" % (file, error)


def test_a_folder_given_for_the_config_file_is_told_what_to_write(tmp_path, folder,
                                                                    private_home):
    with pytest.raises(ConfigError) as raised:
        config.load(folder)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("%s: a folder, where a config file is expected; " % folder)
    assert "cannot read" not in message
    # The command it names writes a config that loads, for that very folder.
    command = message.split("write the config file: ")[1].split(", then run ")[0]
    subprocess.run(["sh", "-c", command], check=True)
    cfg = config.load(str(private_home / ".autosync"))
    assert (cfg.path, cfg.syncmethod) == (folder, "none")
    assert "then run `dvcs-autosync`" in message
    assert message.endswith("or set it all up with `dvcs-autosync init REMOTE %s` (README, "
                            "Set up with init)" % folder)


def test_a_folder_given_while_a_config_file_exists_names_it(tmp_path, folder, private_home):
    (private_home / ".autosync").write_text(minimal(folder))
    with pytest.raises(ConfigError) as raised:
        config.load(folder)
    assert str(raised.value) == (
        "%s: a folder, where a config file is expected; to sync it, set `path = %s` in "
        "[autosync] of %s (or of another file) and run `dvcs-autosync` (or `dvcs-autosync "
        "--config FILE`); or set it up with `dvcs-autosync init REMOTE %s --config FILE`"
        % (folder, folder, private_home / ".autosync", folder))


def test_the_examples_placeholder_account_is_told_to_be_filled_in(tmp_path, folder):
    text = "[autosync]\npath = %s\n[xmpp]\nusername = you@example.org\npassword = x\n" % folder
    file = write(tmp_path, text)
    cfg = config.load(file)
    assert cfg.warnings == [
        "%s: [xmpp] username: 'you@example.org' is the example's placeholder: put in your own "
        "XMPP account and its password; XMPP is off: pushes are not announced, other "
        "machines' pushes are pulled every 300 s (pullinterval)" % file]
    assert cfg.syncmethod == "none"


def test_the_example_file_and_the_xmpp_page_agree():
    example = os.path.join(os.path.dirname(HERE), ".autosync-example")
    with open(os.path.join(os.path.dirname(HERE), "docs", "xmpp.md"), encoding="utf-8") as f:
        page = f.read()
    setup = page[page.index("\n## Setting it up\n"):page.index("\n## ", page.index(
        "\n## Setting it up\n") + 1)]
    with open(example, encoding="utf-8") as f:
        text = f.read()
    shown = {}
    for line in setup.splitlines():
        key, sep, value = line.strip().partition(" = ")
        if sep:
            shown[key] = value
    assert shown["path"] == "~/Sync" and "\npath = ~/Sync\n" in text
    assert "\nusername = %s\n" % shown["username"] in text
    assert "\npassword = %s\n" % shown["password"] in text
    assert shown["username"] in config.PLACEHOLDER_ACCOUNTS


PASSWORD = "s3cret-Pa55"


def xmpp_text(folder, password=PASSWORD):
    return ("[autosync]\npath = %s\n[xmpp]\nusername = me@example.org\npassword = %s\n"
            % (folder, password))


def test_readable_password_warns(tmp_path, folder):
    file = write(tmp_path, xmpp_text(folder), mode=0o640)
    cfg = config.load(file)
    assert cfg.warnings == ["%s is readable by others (mode 0640) and holds a password; "
                            "chmod 600 it" % file]


def test_private_password_does_not_warn(tmp_path, folder):
    assert config.load(write(tmp_path, xmpp_text(folder), mode=0o600)).warnings == []


def test_password_never_shown(tmp_path, folder, caplog):
    file = write(tmp_path, xmpp_text(folder) + "tls = off\nbogus = 1\n", mode=0o644)
    with caplog.at_level(logging.DEBUG):
        cfg = config.load(file)
    assert cfg.xmpp.password == PASSWORD
    assert len(cfg.warnings) == 3
    for shown in (str(cfg), repr(cfg), str(cfg.xmpp), repr(cfg.xmpp), caplog.text,
                  *cfg.warnings):
        assert PASSWORD not in shown
    assert "password='***'" in repr(cfg.xmpp)


def test_password_not_in_syntax_error(tmp_path, folder):
    # A password line without its '=' must not be echoed.
    file = write(tmp_path, xmpp_text(folder, password="x") + PASSWORD + "\n")
    with pytest.raises(ConfigError) as e:
        config.load(file)
    assert str(e.value) == ("%s: line 6: expected 'key = value' or a [section] header, "
                            "got a line that is neither" % file)
