"""One job: ~/.autosync -> Config (read once, checked, defaults filled in); never writes.

Users keep the file the original dvcs-autosync read with Python's
RawConfigParser (indented continuation lines, `#` inside values, `key: value`),
which configobj cannot parse. core/ini.py reads it by RawConfigParser's rules
(tests compare the two), keeping each key's line for warnings; configobj gets
the values as a dict, over the defaults, and its validator converts them.
Every key's check and default is in one table, KEYS: the dataclasses take
their defaults from it, and a test holds the README's tables to it.
"""
import dataclasses
import difflib
import logging
import math
import hashlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import typing

from configobj import ConfigObj, flatten_errors
from configobj.validate import Validator, VdtTypeError, VdtValueError

from autosync.core import ini
from autosync.core.ini import ConfigError
from autosync.core.paths import NotPrivate, find_marker, socket_for

# The `largefileskeep` key (vcs/largefiles.py's expiring(), as the upkeep runs it, keeps to it).
AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w|y)", re.I)
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
AGE_EXPECTED = "an age such as 30d, 12w, 1y (s, m, h, d, w, y)"


def parse_age(text):
    """An age ("30d"; s, m, h, d, w, y) -> seconds. ValueError for anything else."""
    match = AGE.fullmatch(text.strip())
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * AGE_UNITS[match.group(2).lower()]


log = logging.getLogger("autosync.config")

SECONDS = "a number of seconds >= 0"
ADDRESS = "an XMPP address like user@example.org"
ZENITY = "zenity --entry --title=dvcs-autosync --text='What was this change?'"
WATCHCMD_DERIVED = "made from the remote's address"  # sshlink.default_watch
FINGERPRINT = "a SHA-256 fingerprint (64 hex digits) like sha256:AB:CD:...:EF, or nothing"
KEYRING = "keyring"  # [xmpp] password = keyring: it is in the desktop's keyring (core/keyring.py)


class Key(typing.NamedTuple):
    """A known key: its configobj check, its default, what a wrong value is told."""
    check: str
    default: object  # taken when the key is not set; None: the key must be set
    expected: str
    derived: str = ""  # how an empty default is worked out (as the README says it)
    placeholders: tuple = None  # a command: how many %s it holds (over all its lines), for what


def _command(default, count=None, what=""):
    return Key("string", default, "a command", "", None if count is None else (count, what))


# Every known key, and the one place its default is written: the dataclasses below
# take theirs from here, and tests check the README's tables against it.
KEYS = {
    "autosync": {
        "path": Key("string(min=1)", None, "the folder to keep in sync"),
        "pidfile": Key("string", "", "a file name", "the config file's path + `.pid`"),
        "syncmethod": Key("option('xmpp', 'ssh', 'none')", "xmpp", "xmpp, ssh or none"),
        "notifymethod": Key("option('desktop', 'xmpp', 'all', 'none')", "desktop",
                            "desktop, xmpp, all or none"),
        "pulllock": Key("option('conservative', 'optimized')", "conservative",
                        "conservative or optimized"),
        # Not set: a batch closes when its writers closed their files (watcher/batch.py).
        "readfrequency": Key("seconds_or_unset", "", SECONDS, "not set"),
        "ignorepath": Key("string", ".git .svn .hg", "paths below path"),
        "maxwait": Key("seconds", 10.0, SECONDS),  # not set: readfrequency if that is longer
        "pushdelay": Key("seconds", 0.0, SECONDS),
        "pullinterval": Key("seconds", 300.0, SECONDS + " (0: never)"),
        # While the XMPP link is up: the bound on what a lost announcement costs.
        "safetypull": Key("seconds", 600.0, SECONDS + " (0: never)"),
        "socket": Key("string", "", "a socket path", "`$XDG_RUNTIME_DIR/autosync/<id>.sock`"),
        "notifylevel": Key("option('quiet', 'normal', 'verbose')", "normal",
                           "quiet, normal or verbose"),
        "hostname": Key("string", "", "a name for this machine", "the host name"),
        # A notification's "Describe..." runs it; its output describes the change.
        "describecmd": Key("string", "", "a command, or off",
                           "`%s` when zenity is installed, else off" % ZENITY),
        "tray": Key("boolean", False, "yes or no"),
        # The repository's upkeep (maintenancecmd), at most this often (committer/maintenance.py).
        "maintenanceinterval": Key("seconds", 3600.0, SECONDS + " (0: never)"),
        # Files above this size go to git-annex (vcs/largefiles.py); "": off.
        "largefiles": Key("size_or_off", "", "a size such as 10mb (kb, mb, gb), or nothing "
                          "(off)"),
        # Annexed versions replaced longer ago than this may go for good, from the remote
        # and here (`dvcs-autosync expire`, vcs/largefiles.py); "": every version is kept.
        "largefileskeep": Key("age_or_off", "", AGE_EXPECTED + ", or nothing "
                              "(keep every version)"),
        # git's fsmonitor hook answered from the watcher's batches (committer/fsmonitor.py);
        # auto: on in a large tree, where it makes a commit faster.
        "fsmonitor": Key("option('auto', 'yes', 'no')", "auto", "auto, yes or no"),
    },
    # The git defaults; none reads git's (translatable) output. "" means "do not run".
    "dvcs": {
        "statuscmd": _command("git diff --cached --quiet", 0),
        "addcmd": _command("git add -A -- %s", 1, "the path"),
        "rmcmd": _command("git rm -r -q --cached --ignore-unmatch -- %s", 1, "the path"),
        "modifycmd": _command("git add -A -- %s", 1, "the path"),
        "movecmd": _command("git rm -r -q --cached --ignore-unmatch -- %s\ngit add -A -- %s",
                            2, "source, then destination"),
        "startupcmd": _command("git add -A", 0),
        "commitcmd": _command("git commit -q -m %s", 1, "the message"),
        "pushcmd": _command("git push -q", 0),
        "pullcmd": _command("git pull -q --no-rebase --no-edit", 0),
        "remoteurlcmd": _command("git config --get remote.origin.url", 0),
        # logcmd: one NUL-ended "REVISION UNIXTIME AUTHOR\nMESSAGE" per version of %s (a
        # path, or "."); restorecmd: at revision %s, the file %s on stdout, as checked out;
        # listcmd: at revision %s, the files at or below %s (a path, or "."), one NUL-ended
        # "MODE[ ...]<TAB>PATH" each (git ls-tree's format). (docs/beyond-git.md.)
        "logcmd": _command("git log -z '--format=%H %at %an%n%B' -- %s"),
        "listcmd": _command("git ls-tree -r -z %s -- %s", 2, "the revision, then the path"),
        "restorecmd": _command("git cat-file --filters %s:./%s"),
        "contextcmd": _command(""),
        # Rewords the last commit, not pushed yet, with `autosync-notify describe` ("": never).
        "amendcmd": _command("git commit -q --amend --only -m %s", 1, "the message"),
        # syncmethod = ssh: a long-lived command printing `REF REVISION` whenever the
        # remote moves; at most one %s, the remote's path. "": made from the remote's URL.
        "watchcmd": Key("string", "", "a command of one line with at most one %s (the "
                        "remote's path)", WATCHCMD_DERIVED),
        # The repository's upkeep, run by the committer between its commands, at most
        # every maintenanceinterval ("": never; committer/maintenance.py).
        "maintenancecmd": _command("git maintenance run --auto --quiet", 0),
    },
    "xmpp": {
        "username": Key("string", "", ADDRESS, "(required for XMPP)"),
        "password": Key("string", "", "a password", "(required for XMPP)"),
        "alsonotify": Key("string", "", ADDRESS),
        # The other person's account of a shared folder (docs/sharing.md): our pushes are
        # announced to it, and its announcements make us pull. Never more than that.
        "sharedwith": Key("string", "", "XMPP addresses separated by spaces or commas"),
        "host": Key("string", "", "a host name", "the domain of `username`"),
        "port": Key("integer(min=1, max=65535)", 5222, "a port number from 1 to 65535"),
        "tls": Key("option('required', 'off')", "required", "required or off"),
        "cafile": Key("string", "", "a file of CA certificates"),
        "fingerprint": Key("fingerprint", "", FINGERPRINT),
        "priority": Key("integer(min=-128, max=127)", 0, "a whole number from -128 to 127"),
        "resource": Key("string", "", "a resource name", "`autosync-HOST-XXXXXX`"),
    },
}
GIT_COMMANDS = {name: key.default for name, key in KEYS["dvcs"].items()}
# The original's git command strings (its .autosync-example; `git rm -r %s` from later
# copies of it), which drop-in configs carry. For what the committer runs them for they
# mean what the shipped ones mean: `git add P` stages the removals below P too (git 2.0
# on); rmcmd and movecmd's rm run for paths already gone from the folder (--cached only
# keeps a file made again meanwhile, -r takes a folder moved whole, --ignore-unmatch one
# never committed); -q only quiets git; a `git status` without "nothing to commit" is
# something staged. The committer runs the shipped string instead (shipped_form), so
# they take its fast paths: a folder moved is one rm and one add, not one of each per
# file; the quick commit; no `git status` per commit.
ORIGINAL_GIT_COMMANDS = {
    "statuscmd": ('git status | grep -iq "nothing to commit"',),
    "addcmd": ("git add %s",),
    "modifycmd": ("git add %s",),
    "rmcmd": ("git rm %s", "git rm -r %s"),
    "movecmd": ("git rm %s\ngit add %s", "git rm -r %s\ngit add %s"),
    "commitcmd": ("git commit -m %s",),
}


def shipped_form(name, command):
    """The shipped string for one of the original's (blanks as in ORIGINAL_GIT_COMMANDS:
    a line's own and its indentation do not count), else `command` as it is."""
    lines = [" ".join(line.split()) for line in command.split("\n") if line.strip()]
    return GIT_COMMANDS[name] if "\n".join(lines) in ORIGINAL_GIT_COMMANDS.get(name, ()) \
        else command
_A, _X = ({k: key.default for k, key in KEYS[name].items()} for name in ("autosync", "xmpp"))

WARNED = "AUTOSYNC_CONFIG_WARNED"  # set by the supervisor for the programs it starts

# Accepted and not used: the original's planned but never written sync server.
IGNORED_SECTIONS = ("autosync-server",)

ADDRESS_RE = re.compile(r"[^@/\s]+@[^@/\s]+")
# The account in .autosync-example and the README's Set up: copied, not filled in.
PLACEHOLDER_ACCOUNTS = ("you@example.org",)
NO_XMPP = {"xmpp": "none", "all": "desktop"}  # notifymethod without its XMPP part


@dataclasses.dataclass(repr=False)
class Xmpp:
    username: str = _X["username"]
    password: str = _X["password"]
    alsonotify: str = _X["alsonotify"]
    sharedwith: str = _X["sharedwith"]
    host: str = _X["host"]
    port: int = _X["port"]
    tls: str = _X["tls"]
    cafile: str = _X["cafile"]
    fingerprint: str = _X["fingerprint"]
    priority: int = _X["priority"]
    resource: str = _X["resource"]

    def __repr__(self):
        # The password must never reach a log, even through a debug repr.
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        shown["password"] = "***" if self.password else ""
        return "Xmpp(%s)" % ", ".join("%s=%r" % item for item in shown.items())


@dataclasses.dataclass
class Config:
    file: str = ""
    warnings: list = dataclasses.field(default_factory=list)
    path: str = ""  # required in a file
    pidfile: str = _A["pidfile"]
    syncmethod: str = _A["syncmethod"]
    notifymethod: str = _A["notifymethod"]
    pulllock: str = _A["pulllock"]
    readfrequency: typing.Optional[float] = None  # None: close-aware batches
    ignorepath: list = dataclasses.field(default_factory=_A["ignorepath"].split)
    maxwait: float = _A["maxwait"]
    pushdelay: float = _A["pushdelay"]
    pullinterval: float = _A["pullinterval"]
    safetypull: float = _A["safetypull"]
    socket: str = _A["socket"]
    notifylevel: str = _A["notifylevel"]
    tray: bool = _A["tray"]
    maintenanceinterval: float = _A["maintenanceinterval"]
    largefiles: str = _A["largefiles"]  # git-annex's size text ("10mb"), "" off
    largefileskeep: str = _A["largefileskeep"]  # an age ("30d"), "" keep all
    fsmonitor: str = _A["fsmonitor"]
    hostname: str = dataclasses.field(default_factory=lambda: socket.gethostname())
    describecmd: str = _A["describecmd"]
    commands: dict = dataclasses.field(default_factory=lambda: dict(GIT_COMMANDS))
    xmpp: Xmpp = dataclasses.field(default_factory=Xmpp)
    # syncmethod = none in an original configuration: the original's meaning, local
    # history only (commits; never a push nor a pull). Not a key: see local_only().
    localonly: bool = False


def default_path() -> str:
    return os.path.expanduser("~/.autosync")


def _default_socket(file, folder):
    try:
        return socket_for(folder)
    except NotPrivate as e:  # no private runtime folder: no default place for the socket
        raise ConfigError("%s: %s (or set socket = in [autosync] to a path in a folder "
                          "only you can enter)" % (file, e)) from None


def load(path: str, check_path: bool = True, warn: bool = None) -> Config:
    """Read, check and complete the configuration in `path`; raise ConfigError if unusable.
    warn: log the file's warnings (None: unless the supervisor said them, WARNED)."""
    file = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(file):
        raise ConfigError(_folder_given(file))
    warnings = []
    sections = ini.parse(file, ini.read_text(file), warnings,
                         secret=("xmpp",) + IGNORED_SECTIONS)
    hints = {}
    known = _known_keys(file, sections, warnings, hints)
    try:
        if "autosync" not in sections:
            raise _bad(file, "autosync", None, "a section [autosync] with path = FOLDER", None)
        values = _validate(file, known)
        config = _build(file, values, known, warnings)
    except ConfigError as e:
        raise _with_hint(e, hints) from None
    if check_path:
        _check_working_tree(file, config.path)
    _check_permissions(file, config, warnings)
    # Said once per start: the supervisor says them, the programs it starts do not.
    if warn is None:
        warn = not os.environ.get(WARNED)
    if warn:
        for warning in warnings:
            log.warning("%s", warning)
    config.warnings = warnings
    return config


def _known_keys(file, sections, warnings, hints):
    """Keep the known sections and keys; warn about the rest, with the nearest known name
    (typos would otherwise go unseen). `hints` gets, for each (section, key) or (section,
    None) a typo may stand for, what to add to the error should that one be missing."""
    known = {}
    for name, keys in sections.items():
        if name in IGNORED_SECTIONS:
            log.info("%s: section [%s] was never implemented; ignored", file, name)
        elif name not in KEYS:
            meant = _nearest(name, KEYS)
            advice = "; did you mean [%s]?" % meant if meant else ""
            if meant:
                hints.setdefault((meant, None), "[%s]: unknown section%s" % (name, advice))
            warnings.append("%s: [%s]: unknown section, ignored%s" % (file, name, advice))
        else:
            known[name] = {}
            for key, (value, number) in keys.items():
                if key in KEYS[name]:
                    known[name][key] = value
                    continue
                advice, meant = _unknown_key(name, key)
                if meant:
                    hints.setdefault(meant, "line %d: %s: unknown key%s" % (number, key, advice))
                warnings.append("%s: line %d: [%s] %s: unknown key, ignored%s"
                                % (file, number, name, key, advice))
    return known


def _nearest(name, names):
    """The known name `name` most likely misspells, or None."""
    found = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown_key(section, key):
    """What to say of an unknown key ('; did you mean ...?', or ''), and the (section, key)
    it probably stands for (or None)."""
    elsewhere = [name for name, keys in KEYS.items() if key in keys]
    if elsewhere:
        return "; it belongs in [%s]" % elsewhere[0], (elsewhere[0], key)
    meant = _nearest(key, KEYS[section])
    if meant:
        return "; did you mean %s?" % meant, (section, meant)
    return "", None


def _with_hint(error, hints):
    """A key or section reported missing, which a typo stands for: say so in the same line."""
    missing = getattr(error, "missing", None)
    hint = missing and (hints.get(missing) or hints.get((missing[0], None)))
    if not hint:
        return error
    return ConfigError("%s (%s)" % (error, hint))


def _folder_given(folder):
    """The error for a folder given where the config file goes, with what to run instead."""
    default = default_path()
    init = "dvcs-autosync init %s %s" % (_origin(folder) or "REMOTE", shlex.quote(folder))
    if os.path.isfile(default):
        return ("%s: a folder, where a config file is expected; to sync it, set `path = %s` "
                "in [autosync] of %s (or of another file) and run `dvcs-autosync` "
                "(or `dvcs-autosync --config FILE`); or set it up with `%s --config FILE`"
                % (folder, folder, default, init))
    write = "printf '[autosync]\\npath = %%s\\nsyncmethod = none\\n' %s > %s" % (
        shlex.quote(folder), default)
    return ("%s: a folder, where a config file is expected; to sync it, write the config "
            "file: %s, then run `dvcs-autosync` (to have changes pulled at once rather than "
            "every %g s, add [xmpp] with username and password: docs/xmpp.md); or set it "
            "all up with `%s` (README, Set up with init)"
            % (folder, write, _A["pullinterval"], init))


def _origin(folder):
    """The remote a clone in `folder` came from (quoted for a shell), or None."""
    try:
        out = subprocess.run(["git", "-C", folder, "config", "--get", "remote.origin.url"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return shlex.quote(os.fsdecode(out)) if out else None


def _validate(file, known):
    """Convert the values and fill in defaults with configobj; a bad value is a ConfigError."""
    if known["autosync"].get("syncmethod") == "autosync-server":
        raise _bad(file, "autosync", "syncmethod", "xmpp, ssh or none (autosync-server was never "
                   "implemented)", "autosync-server")
    # configobj gets a dict: the values as read, over the defaults of the keys not set.
    # (Defaults cannot go into its configspec: movecmd's holds a newline.)
    given = {name: {**{k: key.default for k, key in keys.items() if key.default is not None},
                    **known.get(name, {})} for name, keys in KEYS.items()}
    spec = []
    for name, keys in KEYS.items():
        spec.append("[%s]" % name)
        spec.extend("%s = %s" % (k, key.check) for k, key in keys.items())
    values = ConfigObj(given, configspec=spec, interpolation=False)
    results = values.validate(Validator({"seconds": _seconds, "seconds_or_unset": _seconds_or_unset,
                                          "fingerprint": fingerprint,
                                          "size_or_off": _size_or_off,
                                          "age_or_off": _age_or_off}),
                              preserve_errors=True)
    # Report the first bad key in the order of KEYS, so the message does not vary.
    errors = {(path[0], key) for path, key, _ in flatten_errors(values, results) if key}
    for name, keys in KEYS.items():
        for k, key in keys.items():
            if (name, k) in errors:
                raise _bad(file, name, k, key.expected, known.get(name, {}).get(k))
    return values


def _size_or_off(value):
    """configobj check: a size for git-annex ("10mb"), or "" (off)."""
    try:
        return parse_size(value)
    except ValueError:
        raise VdtValueError(value) from None


# The `largefiles` key (vcs/largefiles.py does the rest: the daemon's git settings, expire).
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(b|bytes?|kb|mb|gb|tb|kib|mib|gib|tib)?", re.I)


def parse_size(text):
    """The `largefiles` value -> git-annex's size text ("10mb"); "" for off.
    ValueError for anything else."""
    text = text.strip()
    if not text or text.lower() == "off":
        return ""
    match = SIZE.fullmatch(text)
    if not match:
        raise ValueError(text)
    number, unit = match.group(1), (match.group(2) or "b").lower()
    unit = "b" if unit.startswith("b") else unit
    return "%s%s" % (number, unit)


def needs_annex_commands(commands):
    """Why the push and pull commands cannot carry annexed content, or None."""
    for name in ("pushcmd", "pullcmd"):
        text = commands.get(name) or ""
        if "annex sync" not in text or "--content" not in text:
            return name
    return None


def _age_or_off(value):
    """configobj check: an age for largefileskeep ("30d"), or "" (keep every version)."""
    text = value.strip()
    if text:
        try:
            parse_age(text)
        except ValueError:
            raise VdtValueError(value) from None
    return text


def _seconds_or_unset(value):
    """configobj check: seconds, or None for a key left empty (not set)."""
    return None if value == "" else _seconds(value)


def _seconds(value):
    """configobj check: a finite number >= 0 (float() alone would take 'nan' and 'inf')."""
    try:
        number = float(value)
    except ValueError:
        raise VdtTypeError(value) from None
    if not math.isfinite(number) or number < 0:
        raise VdtValueError(value)
    return number


# How fingerprints are written: `sha256:AB:CD:...`, with or without `sha256:` (or `SHA-256`,
# or openssl's `sha256 Fingerprint=`), colons, blanks, in either case.
_FINGERPRINT_PREFIX = re.compile(r"sha-?256(\s*fingerprint)?\s*[:=]?", re.IGNORECASE)


def fingerprint(value):
    """configobj check: a SHA-256 fingerprint in a common spelling -> `sha256:AB:...`."""
    text = value.strip()
    if not text:
        return ""
    prefix = _FINGERPRINT_PREFIX.match(text)
    if prefix:
        text = text[prefix.end():]
    digits = re.sub(r"[\s:]", "", text)
    if not re.fullmatch(r"[0-9a-fA-F]{64}", digits):
        raise VdtValueError(value)
    return format_fingerprint(bytes.fromhex(digits))


def format_fingerprint(digest):
    """`sha256:AB:CD:...` of a SHA-256 digest (bytes)."""
    return "sha256:" + ":".join("%02X" % b for b in digest)


# The keys the original dvcs-autosync read (its example's); [autosync-server] aside.
ORIGINAL_KEYS = {
    "autosync": {"path", "pidfile", "syncmethod", "notifymethod", "pulllock", "readfrequency",
                 "ignorepath"},
    "dvcs": {"statuscmd", "addcmd", "rmcmd", "modifycmd", "movecmd", "startupcmd", "commitcmd",
             "pushcmd", "pullcmd", "remoteurlcmd"},
    "xmpp": {"username", "password", "alsonotify"},
}


def local_only(known):
    """Whether `syncmethod = none` keeps the original's meaning: local history only (it
    committed and never pushed nor pulled), not ours (push at once, pull every
    pullinterval). So in an original configuration: a file with the [dvcs] pushcmd and
    pullcmd the original required and no key the original did not read (init never
    writes [dvcs]; a file of ours says which it means by any key of ours, pullinterval
    above all). Pushing where the user never asked cannot be undone; not pushing can."""
    return known.get("autosync", {}).get("syncmethod") == "none" and \
        {"pushcmd", "pullcmd"} <= set(known.get("dvcs", {})) and \
        all(set(keys) <= ORIGINAL_KEYS.get(name, set()) for name, keys in known.items())


def _build(file, values, known, warnings):
    """The Config, with the defaults that depend on other keys and the checks across keys."""
    a, x = values["autosync"], values["xmpp"]
    base = os.path.dirname(file)
    path = _expand(a["path"], base)
    host = a["hostname"].strip() or socket.gethostname()
    config = Config(
        file=file, path=path,
        pidfile=_expand(a["pidfile"], base) if a["pidfile"] else file + ".pid",
        syncmethod=a["syncmethod"], notifymethod=a["notifymethod"], pulllock=a["pulllock"],
        readfrequency=a["readfrequency"],
        ignorepath=_ignorepath(file, a["ignorepath"], path, warnings),
        # Not set, it is never below readfrequency: an original file with a long one still loads.
        maxwait=a["maxwait"] if "maxwait" in known["autosync"] else max(a["maxwait"],
                                                                        a["readfrequency"] or 0),
        pushdelay=a["pushdelay"], pullinterval=a["pullinterval"], safetypull=a["safetypull"],
        notifylevel=a["notifylevel"], hostname=host, tray=a["tray"],
        maintenanceinterval=a["maintenanceinterval"], largefiles=a["largefiles"],
        largefileskeep=a["largefileskeep"],
        fsmonitor=a["fsmonitor"],
        # Empty: zenity's entry dialog if there is one; "off": no "Describe..." at all.
        describecmd="" if a["describecmd"].strip() == "off"
        else a["describecmd"] or (ZENITY if shutil.which("zenity") else ""),
        socket=_expand(a["socket"], base) if a["socket"] else _default_socket(file, path),
        commands=_commands(file, values["dvcs"]),
        xmpp=_xmpp(file, x, base, warnings, path, host), localonly=local_only(known))
    if config.localonly:
        config.pullinterval = 0.0  # the committer says so at start, and the status
    if config.readfrequency is not None and config.maxwait < config.readfrequency:
        raise _bad(file, "autosync", "maxwait", "a number of seconds >= readfrequency (%g)"
                   % config.readfrequency, "%g" % config.maxwait)
    if config.syncmethod == "xmpp" or config.notifymethod in ("xmpp", "all"):
        warnings.extend(_check_account(file, config))
    if config.largefiles and needs_annex_commands(config.commands):
        raise _bad(file, "autosync", "largefiles", "nothing, since %s does not carry "
                   "annexed content (use git-annex's: git annex sync ... --content; "
                   "docs/examples/git-annex.autosync)"
                   % needs_annex_commands(config.commands), a["largefiles"])
    if config.largefileskeep and needs_annex_commands(config.commands):
        raise _bad(file, "autosync", "largefileskeep", "nothing, since %s does not carry "
                   "annexed content (it applies to git-annex's versions; "
                   "docs/examples/git-annex.autosync)"
                   % needs_annex_commands(config.commands), a["largefileskeep"])
    if config.commands["watchcmd"].strip() and config.syncmethod != "ssh":
        warnings.append("%s: [dvcs] watchcmd: not used, since syncmethod is %s (not ssh)"
                        % (file, config.syncmethod))
    return config


def _expand(value, base, env=None):
    """`~` and `$VARS` expanded; a relative path is taken from the config file's folder.
    env: another process's environment (its HOME and variables), for a config file
    that process reads (supervisor.other_daemon); None: ours."""
    if env is None:
        value = os.path.expandvars(value)
    else:
        value = re.sub(r"\$(\w+)|\$\{(\w+)\}",
                       lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value)
        if (value == "~" or value.startswith("~/")) and env.get("HOME"):
            value = env["HOME"] + value[1:]
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


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
    for name, key in KEYS["dvcs"].items():
        command, wanted = dvcs[name], key.placeholders
        found = command.count("%s")  # only a literal %s counts; %% is not an escape
        if name == "watchcmd" and command and (found > 1 or "\n" in command.strip()):
            raise _bad(file, "dvcs", name, key.expected, repr(command), quote=False)
        if command and wanted and found != wanted[0]:
            expected = "exactly %d %%s (%s)" % wanted if wanted[0] else "no %s"
            raise _bad(file, "dvcs", name, expected, "%d in %r" % (found, command), quote=False)
        commands[name] = command
    return commands


def _xmpp(file, x, base, warnings, path, host):
    cafile = _expand(x["cafile"], base) if x["cafile"] else ""
    if cafile and not os.path.isfile(cafile):
        raise _bad(file, "xmpp", "cafile", "an existing file of CA certificates", cafile)
    if x["tls"] == "off":
        warnings.append("%s: [xmpp] tls = off: the password and all messages travel unencrypted"
                        % file)
        if x["fingerprint"]:
            warnings.append("%s: [xmpp] fingerprint: not used, since tls = off" % file)
    username = x["username"]
    return Xmpp(
        username=username, password=x["password"], alsonotify=x["alsonotify"],
        sharedwith=x["sharedwith"],
        host=x["host"] or username.partition("@")[2], port=x["port"], tls=x["tls"],
        cafile=cafile, fingerprint=x["fingerprint"], priority=x["priority"],
        resource=x["resource"] or default_resource(path, host))


def default_resource(path, host):
    """autosync-HOST-XXXXXX: names the machine, and differs per folder, so that two
    folders on one host can share an account without taking each other's session."""
    folder = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:6]
    return "autosync-%s-%s" % (host.split(".")[0], folder)


def _check_account(file, config):
    """syncmethod or notifymethod uses XMPP: the account must be there and look right.

    A value that is there but cannot be used (the original example's placeholders, with
    which the original started and synced without XMPP) switches that part off, with a
    warning; returns the warnings."""
    x = config.xmpp
    if not x.username:
        raise _bad(file, "xmpp", "username", ADDRESS, None)
    if not ADDRESS_RE.fullmatch(x.username):
        return [_xmpp_off(file, config, "username: %r is not an XMPP address" % x.username)]
    if x.username in PLACEHOLDER_ACCOUNTS:
        return [_xmpp_off(file, config, "username: %r is the example's placeholder: put in "
                          "your own XMPP account and its password" % x.username)]
    if not x.password:
        raise _bad(file, "xmpp", "password", "the password of username", None)
    warnings = []
    shared = [a for a in re.split(r"[\s,]+", x.sharedwith) if a]
    wrong = [a for a in shared if not ADDRESS_RE.fullmatch(a)]
    if wrong:
        warnings.append("%s: [xmpp] sharedwith: %s not an XMPP address; ignored" % (
            file, ", ".join(map(repr, wrong)) + (" is" if len(wrong) == 1 else " are")))
    x.sharedwith = " ".join(a.lower() for a in shared if a not in wrong)
    if x.alsonotify and not ADDRESS_RE.fullmatch(x.alsonotify):
        # The original sent there what was lost: notify nobody over XMPP.
        warning = ("%s: [xmpp] alsonotify: %r is not an XMPP address; ignored, so nobody gets "
                   "notifications over XMPP (notifymethod = %s)"
                   % (file, x.alsonotify, config.notifymethod))
        x.alsonotify = ""
        return warnings + [warning]
    return warnings


def _xmpp_off(file, config, why):
    """Switch XMPP off (syncmethod none, no notifications over XMPP); the warning."""
    off = ["pushes are not announced", "other machines' pushes are pulled every %g s "
           "(pullinterval)" % config.pullinterval if config.pullinterval
           else "other machines' pushes are never pulled (pullinterval = 0)"]
    config.syncmethod = "none"
    if config.notifymethod in ("xmpp", "all"):
        was, config.notifymethod = config.notifymethod, NO_XMPP[config.notifymethod]
        off.append("notifymethod %s works as %s" % (was, config.notifymethod))
    return "%s: [xmpp] %s; XMPP is off: %s" % (file, why, ", ".join(off))


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
    if config.xmpp.password not in ("", KEYRING) and mode & 0o077:
        warnings.append("%s is readable by others (mode %04o) and holds a password; chmod 600 it"
                        % (file, mode & 0o7777))


def _bad(file, section, key, expected, got, quote=True):
    """The one-line error for a key (or, key None, a section); `got` None: it is missing."""
    if key is None:
        error = ConfigError("%s: [%s]: expected %s, got no such section"
                            % (file, section, expected))
    else:
        error = ConfigError("%s: [%s] %s: expected %s, got %s" % (
            file, section, key, expected,
            "nothing" if got is None else repr(got) if quote else got))
    if got is None:
        error.missing = (section, key)  # a typo elsewhere may explain it (_with_hint)
    return error
