"""~/.autosync -> Config: read the original's INI file once, check it, fill in defaults.

Users keep the file the original dvcs-autosync read with Python's
RawConfigParser (indented continuation lines, `#` inside values, `key: value`),
which configobj cannot parse. `_parse_ini` reads it by RawConfigParser's rules
(tests compare the two), keeping each key's line for warnings; configobj then
gets the values as a dict and its validator converts them and fills in the
defaults. `load` never writes anything.
"""
import dataclasses
import logging
import math
import hashlib
import os
import re
import socket

from configobj import ConfigObj, flatten_errors
from configobj.validate import Validator, VdtTypeError, VdtValueError

from autosync.paths import find_marker, socket_for

log = logging.getLogger("autosync.config")

# The [dvcs] defaults, for git. None of them reads git's (translatable) output.
GIT_COMMANDS = {
    "statuscmd": "git diff --cached --quiet",
    "addcmd": "git add -A -- %s",
    "rmcmd": "git rm -r -q --cached --ignore-unmatch -- %s",
    "modifycmd": "git add -A -- %s",
    "movecmd": "git rm -r -q --cached --ignore-unmatch -- %s\ngit add -A -- %s",
    "startupcmd": "git add -A",
    "commitcmd": "git commit -q -m %s",
    "pushcmd": "git push -q",
    "pullcmd": "git pull -q --no-rebase --no-edit",
    "remoteurlcmd": "git config --get remote.origin.url",
    # New keys. logcmd prints one NUL-ended record per version of %s (the path,
    # or "." for the folder): "REVISION UNIXTIME AUTHOR", newline, the message.
    # restorecmd writes the content of %s (the path) at revision %s to stdout;
    # --filters gives what a checkout would (git-annex content, line ends).
    "logcmd": "git log -z '--format=%H %at %an%n%B' -- %s",
    "restorecmd": "git cat-file --filters %s:./%s",
    "contextcmd": "",  # "" means "do not run"
}

# How many `%s` each command must hold (over all its lines); missing: not checked.
PLACEHOLDERS = {
    "addcmd": (1, "the path"), "rmcmd": (1, "the path"), "modifycmd": (1, "the path"),
    "movecmd": (2, "source, then destination"), "commitcmd": (1, "the message"),
    "statuscmd": (0, ""), "startupcmd": (0, ""), "pushcmd": (0, ""),
    "pullcmd": (0, ""), "remoteurlcmd": (0, ""),
}

SECONDS = "a number of seconds >= 0"
ADDRESS = "an XMPP address like user@example.org"

# Every known key: section -> key -> (configobj check with its default,
# what a wrong value is told it should have been).
KEYS = {
    "autosync": {
        "path": ("string(min=1)", "the folder to keep in sync"),
        "pidfile": ("string(default='')", "a file name"),
        "syncmethod": ("option('xmpp', 'none', default='xmpp')", "xmpp or none"),
        "notifymethod": ("option('desktop', 'xmpp', 'all', 'none', default='desktop')",
                         "desktop, xmpp, all or none"),
        "pulllock": ("option('conservative', 'optimized', default='conservative')",
                     "conservative or optimized"),
        "readfrequency": ("seconds(default=5)", SECONDS),
        "ignorepath": ("string(default='.git .svn .hg')", "paths below path"),
        "maxwait": ("seconds(default=None)", SECONDS),
        "pushdelay": ("seconds(default=1)", SECONDS),
        "pullinterval": ("seconds(default=300)", SECONDS + " (0: never)"),
        "socket": ("string(default='')", "a socket path"),
        "notifylevel": ("option('quiet', 'normal', 'verbose', default='normal')",
                        "quiet, normal or verbose"),
        "hostname": ("string(default='')", "a name for this machine"),
    },
    # None marks "not set", which takes the git default; "" means "do not run".
    "dvcs": {name: ("string(default=None)", "a command") for name in GIT_COMMANDS},
    "xmpp": {
        "username": ("string(default='')", ADDRESS),
        "password": ("string(default='')", "a password"),
        "alsonotify": ("string(default='')", ADDRESS),
        "host": ("string(default='')", "a host name"),
        "port": ("integer(min=1, max=65535, default=5222)", "a port number from 1 to 65535"),
        "tls": ("option('required', 'off', default='required')", "required or off"),
        "cafile": ("string(default='')", "a file of CA certificates"),
        "priority": ("integer(min=-128, max=127, default=0)", "a whole number from -128 to 127"),
        "resource": ("string(default='')", "a resource name"),
    },
}

# Accepted and not used: the original's planned but never written sync server.
IGNORED_SECTIONS = ("autosync-server",)

# RawConfigParser's own patterns: a header is [anything]; the key ends at the first = or :.
SECTION_LINE = re.compile(r"\[(?P<name>.+)\]")
KEY_LINE = re.compile(r"(?P<key>.*?)\s*[=:]\s*(?P<value>.*)$")
ADDRESS_RE = re.compile(r"[^@/\s]+@[^@/\s]+")


class ConfigError(Exception):
    """A configuration that cannot be used; str() is one line naming file, section and key."""


@dataclasses.dataclass(repr=False)
class Xmpp:
    username: str = ""
    password: str = ""
    alsonotify: str = ""
    host: str = ""
    port: int = 5222
    tls: str = "required"
    cafile: str = ""
    priority: int = 0
    resource: str = ""

    def __repr__(self):
        # The password must never reach a log, even through a debug repr.
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        shown["password"] = "***" if self.password else ""
        return "Xmpp(%s)" % ", ".join("%s=%r" % item for item in shown.items())


@dataclasses.dataclass
class Config:
    file: str = ""
    warnings: list = dataclasses.field(default_factory=list)
    path: str = ""
    pidfile: str = ""
    syncmethod: str = "xmpp"
    notifymethod: str = "desktop"
    pulllock: str = "conservative"
    readfrequency: float = 5.0
    ignorepath: list = dataclasses.field(default_factory=lambda: [".git", ".svn", ".hg"])
    maxwait: float = 10.0
    pushdelay: float = 1.0
    pullinterval: float = 300.0
    socket: str = ""
    notifylevel: str = "normal"
    hostname: str = dataclasses.field(default_factory=lambda: this_host())
    commands: dict = dataclasses.field(default_factory=lambda: dict(GIT_COMMANDS))
    xmpp: Xmpp = dataclasses.field(default_factory=Xmpp)


def this_host():
    return socket.gethostname()


def default_path() -> str:
    return os.path.expanduser("~/.autosync")


def load(path: str, check_path: bool = True) -> Config:
    """Read, check and complete the configuration in `path`; raise ConfigError if unusable."""
    file = os.path.abspath(os.path.expanduser(path))
    warnings = []
    sections = _parse_ini(file, _read_text(file), warnings)
    if "autosync" not in sections:
        raise ConfigError("%s: [autosync]: expected a section [autosync] with path = FOLDER, "
                          "got no such section" % file)
    known = _known_keys(file, sections, warnings)
    values = _validate(file, known)
    config = _build(file, values, warnings)
    if check_path:
        _check_working_tree(file, config.path)
    _check_permissions(file, config, warnings)
    for warning in warnings:
        log.warning("%s", warning)
    config.warnings = warnings
    return config


def _read_text(file):
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError("%s: cannot read: %s" % (file, e.strerror or e)) from None
    try:
        text = data.decode("utf-8-sig")  # a BOM from a Windows editor is not content
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError("%s: line %d: expected UTF-8 text, got bytes that are not"
                          % (file, line)) from None
    # Universal newlines, as Python's text files give RawConfigParser.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _parse_ini(file, text, warnings):
    """Read `text` by RawConfigParser's rules into {section: {key: (value, line number)}}.

    A line indented deeper than the key line continues its value, joined with
    a newline; comment lines (`#` or `;`, even indented) are skipped, also
    between continuation lines; blank lines inside a value are kept and those
    at its end dropped; `#` inside a value is kept; keys are lowercased.
    """
    sections = {}
    lines = {}  # (section, key) -> the value's lines so far
    section = key = None
    indent = 0
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped.startswith(("#", ";")):
            continue
        if not stripped:
            if key is not None:
                lines[section, key].append("")
            continue
        this_indent = len(line) - len(line.lstrip())
        if key is not None and this_indent > indent:
            lines[section, key].append(stripped)
            continue
        indent = this_indent
        header = SECTION_LINE.match(stripped)
        if header:
            section, key = header.group("name"), None
            if section in sections:
                warnings.append("%s: line %d: section [%s] appears again; its keys are merged"
                                % (file, number, section))
            sections.setdefault(section, {})
            continue
        option = KEY_LINE.match(stripped)
        if section is None or not option or not option.group("key"):
            raise ConfigError("%s: line %d: %s" % (file, number, _syntax(section, stripped)))
        key = option.group("key").rstrip().lower()
        if key in sections[section]:
            # The original (Python 2) let the last one win; Python 3 would refuse.
            warnings.append("%s: line %d: [%s] %s is set again; the last value counts"
                            % (file, number, section, key))
        sections[section][key] = number
        lines[section, key] = [option.group("value")]
    return {name: {k: ("\n".join(lines[name, k]).rstrip(), n) for k, n in keys.items()}
            for name, keys in sections.items()}


def _syntax(section, line):
    if section is None:
        expected = "expected a [section] header before any key"
    else:
        expected = "expected 'key = value' or a [section] header"
    # A malformed line where passwords live might be one: do not echo it.
    secret = section == "xmpp" or section in IGNORED_SECTIONS
    got = "a line that is neither" if secret else repr(line[:60])
    return "%s, got %s" % (expected, got)


def _known_keys(file, sections, warnings):
    """Keep the known sections and keys; warn about the rest (typos would otherwise go unseen)."""
    known = {}
    for name, keys in sections.items():
        if name in IGNORED_SECTIONS:
            log.info("%s: section [%s] was never implemented; ignored", file, name)
        elif name not in KEYS:
            warnings.append("%s: unknown section [%s], ignored" % (file, name))
        else:
            known[name] = {}
            for key, (value, number) in keys.items():
                if key in KEYS[name]:
                    known[name][key] = value
                else:
                    warnings.append("%s: line %d: [%s] %s: unknown key, ignored"
                                    % (file, number, name, key))
    return known


def _validate(file, known):
    """Convert the values and fill in defaults with configobj; a bad value is a ConfigError."""
    if known["autosync"].get("syncmethod") == "autosync-server":
        raise _bad(file, "autosync", "syncmethod", "xmpp or none (autosync-server was never "
                   "implemented)", "autosync-server")
    spec = []
    for name, keys in KEYS.items():
        spec.append("[%s]" % name)
        spec.extend("%s = %s" % (key, check) for key, (check, _) in keys.items())
    # configobj gets the values as read, in a dict: no quoting, nothing parsed twice.
    values = ConfigObj(known, configspec=spec, interpolation=False)
    results = values.validate(Validator({"seconds": _seconds}), preserve_errors=True)
    # Report the first bad key in the order of KEYS, so the message does not vary.
    errors = {(path[0], key) for path, key, _ in flatten_errors(values, results) if key}
    for name, keys in KEYS.items():
        for key, (_, expected) in keys.items():
            if (name, key) in errors:
                raise _bad(file, name, key, expected, known.get(name, {}).get(key))
    return values


def _seconds(value):
    """configobj check: a finite number >= 0 (float() alone would take 'nan' and 'inf')."""
    try:
        number = float(value)
    except ValueError:
        raise VdtTypeError(value) from None
    if not math.isfinite(number) or number < 0:
        raise VdtValueError(value)
    return number


def _build(file, values, warnings):
    """The Config, with the defaults that depend on other keys and the checks across keys."""
    a, x = values["autosync"], values["xmpp"]
    base = os.path.dirname(file)
    path = _expand(a["path"], base)
    config = Config(
        file=file, path=path,
        pidfile=_expand(a["pidfile"], base) if a["pidfile"] else file + ".pid",
        syncmethod=a["syncmethod"], notifymethod=a["notifymethod"], pulllock=a["pulllock"],
        readfrequency=a["readfrequency"],
        ignorepath=_ignorepath(file, a["ignorepath"], path, warnings),
        # Unset, it is never below readfrequency: an original file with a long one still loads.
        maxwait=max(10.0, a["readfrequency"]) if a["maxwait"] is None else a["maxwait"],
        pushdelay=a["pushdelay"], pullinterval=a["pullinterval"],
        notifylevel=a["notifylevel"], hostname=a["hostname"].strip() or socket.gethostname(),
        socket=_expand(a["socket"], base) if a["socket"] else socket_for(path),
        commands=_commands(file, values["dvcs"]),
        xmpp=_xmpp(file, x, base, warnings, path, a["hostname"].strip() or socket.gethostname()))
    if config.maxwait < config.readfrequency:
        raise _bad(file, "autosync", "maxwait", "a number of seconds >= readfrequency (%g)"
                   % config.readfrequency, "%g" % config.maxwait)
    uses_xmpp = config.syncmethod == "xmpp" or config.notifymethod in ("xmpp", "all")
    if uses_xmpp:
        _check_account(file, config)
    return config


def _expand(value, base):
    """`~` and `$VARS` expanded; a relative path is taken from the config file's folder."""
    return os.path.normpath(os.path.join(base, os.path.expanduser(os.path.expandvars(value))))


def _ignorepath(file, value, path, warnings):
    """The whitespace-separated entries as paths relative to `path`."""
    entries = []
    for entry in value.split():
        relative = os.path.relpath(os.path.join(path, entry), path)
        if relative == ".." or relative.startswith("../"):
            warnings.append("%s: [autosync] ignorepath: %r is not below path, ignored"
                            % (file, entry))
        else:
            entries.append(relative)
    return entries


def _commands(file, dvcs):
    commands = {}
    for name, default in GIT_COMMANDS.items():
        command = default if dvcs[name] is None else dvcs[name]
        wanted = PLACEHOLDERS.get(name)
        found = command.count("%s")  # only a literal %s counts; %% is not an escape
        if command and wanted and found != wanted[0]:
            expected = "exactly %d %%s (%s)" % wanted if wanted[0] else "no %s"
            raise _bad(file, "dvcs", name, expected, "%d in %r" % (found, command), quote=False)
        commands[name] = command
    return commands


def _xmpp(file, x, base, warnings, path, host):
    if x["cafile"]:
        cafile = _expand(x["cafile"], base)
        if not os.path.isfile(cafile):
            raise _bad(file, "xmpp", "cafile", "an existing file of CA certificates", cafile)
    else:
        cafile = ""
    if x["tls"] == "off":
        warnings.append("%s: [xmpp] tls = off: the password and all messages travel unencrypted"
                        % file)
    username = x["username"]
    return Xmpp(
        username=username, password=x["password"], alsonotify=x["alsonotify"],
        host=x["host"] or username.partition("@")[2], port=x["port"], tls=x["tls"],
        cafile=cafile, priority=x["priority"],
        resource=x["resource"] or default_resource(path, host))


def default_resource(path, host):
    """autosync-HOST-XXXXXX: names the machine, and differs per folder, so that two
    folders on one host can share an account without taking each other's session."""
    folder = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:6]
    return "autosync-%s-%s" % (host.split(".")[0], folder)


def _check_account(file, config):
    """syncmethod or notifymethod uses XMPP: the account must be there and look right."""
    x = config.xmpp
    if not x.username:
        raise _bad(file, "xmpp", "username", ADDRESS, None)
    if not ADDRESS_RE.fullmatch(x.username):
        raise _bad(file, "xmpp", "username", ADDRESS, x.username)
    if not x.password:
        raise _bad(file, "xmpp", "password", "the password of username", None)
    notifies = config.notifymethod in ("xmpp", "all")
    if notifies and x.alsonotify and not ADDRESS_RE.fullmatch(x.alsonotify):
        raise _bad(file, "xmpp", "alsonotify", ADDRESS + " or nothing", x.alsonotify)


def _check_working_tree(file, path):
    if not os.path.exists(path):
        raise _bad(file, "autosync", "path", "an existing folder", "%r, which does not exist"
                   % path, quote=False)
    if not os.path.isdir(path):
        raise _bad(file, "autosync", "path", "a folder", "%r, which is not a folder" % path,
                   quote=False)
    if find_marker(path) is None:
        raise _bad(file, "autosync", "path", "a folder in a working tree (.git, .hg, .bzr, "
                   "_darcs, .svn or .fossil in it or above)", repr(path), quote=False)


def _check_permissions(file, config, warnings):
    mode = os.stat(file).st_mode
    if config.xmpp.password and mode & 0o077:
        warnings.append("%s is readable by others (mode %04o) and holds a password; chmod 600 it"
                        % (file, mode & 0o7777))


def _bad(file, section, key, expected, got, quote=True):
    """The one-line error for a key; `got` None means the key is missing."""
    if got is None:
        got = "nothing"
    elif quote:
        got = repr(got)
    return ConfigError("%s: [%s] %s: expected %s, got %s" % (file, section, key, expected, got))
