"""Conflict copies: their names, as every merge makes them and the tools and tray read them.

When two machines changed the same file, both versions are kept: the newer
one at the path, the other beside it as a conflict copy named
`name (conflict from HOST YYYY-MM-DD HHMMSS).ext` (HOST made the version in
the copy, at that time). In a shared folder (docs/sharing.md), when the two
versions were made by two people (their commits' authors differ), the copy
names its person too: `name (conflict from PERSON on HOST YYYY-MM-DD HHMMSS).ext`,
PERSON the author's name; one person's own machines keep the first form. Read
back, the host is what follows the last " on " (a host name from the system
has no space), the person what precedes it. "Newer" is the side whose last change touching the
path is later, ties broken by the larger commit (changeset) id: it depends
on the two commits only, so every machine picks the same winner and they
converge instead of trading copies.

The policy that picks the newer and names the other is vcs/pull/keep_both.py;
the names are here, where the tools and the tray read them. This module runs no
DVCS command.
"""
import collections
import logging
import os
import re
import time

from autosync.core.messages import printable
from autosync.core.paths import METADATA

log = logging.getLogger("autosync.copies")

BOTH_SIDES = "both sides"   # the "host" of the winner's copy when a folder took the name


def copy_name(path, host, stamp, free, clock=time.localtime, person=None):
    """`dir/name (conflict from HOST 2026-12-03 101502).ext`, the first one free(name) accepts;
    the time as `clock` gives it (time.gmtime: the same name on every machine). With
    `person` (another person made the copy's version): `... from PERSON on HOST ...`."""
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    if stem.startswith(".") and not ext:  # .bashrc: the whole name is the stem
        stem, ext = base, ""
    when = time.strftime("%Y-%m-%d %H%M%S", clock(stamp))
    host = host.replace("/", "_")
    if person:
        host = "%s on %s" % (person_words(person), host)
    for n in range(1, 1000):
        extra = "" if n == 1 else " %d" % n
        tail = " (conflict from %s %s%s)%s" % (host, when, extra, ext)
        name = os.path.join(folder, _fit(stem, NAME_MAX - len(os.fsencode(tail))) + tail)
        if free(name):
            return name
    raise RuntimeError("no free conflict name for %s" % path)


def person_words(person):
    """A commit author's name as a copy's name shows it: no slash, no control character."""
    return "".join("_" if c == "/" or not c.isprintable() else c for c in person).strip()


def person_of(author):
    """The name part of git's `Name <email>` (or a bare name)."""
    return author.partition(" <")[0].strip() if author else author


def other_person(winner, loser):
    """The person to name in a copy holding `loser`'s version: its author's name when
    the winner's author is somebody else (compared by the whole `Name <email>`, either
    part differing), else None (one person's machines, or an author not known)."""
    if not winner or not loser or winner == loser:
        return None
    return person_of(loser) or None


NAME_MAX = 255  # bytes of one file name on Linux file systems


def _fit(stem, room):
    """The stem cut to at most `room` bytes, whole characters (a copy of a copy of a
    long name would pass the file system's limit and stall the merge)."""
    while len(os.fsencode(stem)) > room and len(stem) > 1:
        stem = stem[:-max(1, (len(os.fsencode(stem)) - room) // 4)]
    return stem


Copy = collections.namedtuple("Copy", "copy path host time person", defaults=(None,))
# copy_name's pattern; the greedy stem takes a copy of a copy as a copy of a copy.
COPY_NAME = re.compile(r"(?P<stem>.+) \(conflict from (?P<host>.+) "
                       r"(?P<when>\d{4}-\d\d-\d\d \d{6})(?: \d+)?\)(?P<ext>[^/]*)", re.S)


def made_by(copy):
    """Who made a copy's version, as people read it: `PERSON on HOST`, or HOST."""
    return "%s on %s" % (copy.person, copy.host) if copy.person else copy.host


def read_copy_name(rel):
    """copy_name read back: a conflict copy's path -> Copy (its original's path, the host
    and unix time of the version it holds), or None for any other name."""
    folder, base = os.path.split(rel)
    found = COPY_NAME.fullmatch(base)
    if not found:
        return None
    try:
        stamp = time.mktime(time.strptime(found.group("when"), "%Y-%m-%d %H%M%S"))
    except (ValueError, OverflowError):
        return None
    person, on, host = found.group("host").rpartition(" on ")
    return Copy(rel, os.path.join(folder, found.group("stem") + found.group("ext")),
                host, stamp, (person or None) if on else None)


def find_copies(folder):
    """Every conflict copy below `folder` (DVCS metadata skipped), sorted by path."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in METADATA)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            copy = read_copy_name(os.path.relpath(os.path.join(root, name), folder))
            if copy:
                found.append(copy)
    return sorted(found)


def told(copy):
    """The one log line of a conflict copy made ({"path", "copy", "host"}, maybe "person")."""
    by = copy["host"] if not copy.get("person") else "%s on %s" % (copy["person"], copy["host"])
    log.warning("conflict in %s: kept the newer version, the other (from %s) as %s",
                printable(copy["path"]), printable(by), printable(copy["copy"]))
