"""The keep-both policy every merge follows: the newer version at the path, the other beside it.

"Newer" is the side whose last change touching the path is later, ties broken
by the larger commit (changeset) id: it depends on the two commits only, so
every machine picks the same winner and they converge instead of trading
copies. The copy's name is core/copies.py's (copy_name).

The policy is written here once (keep_both) for every DVCS: git's merge in
the working tree (vcs/pull/finish.py), git's merge in objects (vcs/pull/git.py) and
Mercurial's (vcs/pull/hg.py) each supply only "the two versions and their last
change" and "write a version" (a Place). This module runs no DVCS command.
"""
import logging
import typing

from autosync.core.copies import BOTH_SIDES, copy_name, other_person, told
from autosync.core.messages import printable

log = logging.getLogger("autosync.copies")  # (its lines as before the policy moved here)


class Place(typing.Protocol):
    """What a DVCS's merge supplies to keep_both. A version is whatever the DVCS
    writes back (a blob's mode and id, hg's flags and bytes); None is "deleted"."""

    def last_change(self, side: str, version) -> tuple:
        """(time, commit id, host, author) of the last commit on `side` ("ours" or
        "theirs") that touched this version's path; author: `Name <email>`, or None
        when not known (a 3-tuple is read as author not known)."""

    def taken(self, rel: str) -> bool:
        """Is there something at rel already (so a copy may not take the name)?"""

    def is_folder(self, rel: str) -> bool:
        """Has a folder taken the conflicted path's name meanwhile?"""

    def holds(self, rel: str, version) -> bool:
        """Does rel already hold exactly this version (a copy written before a crash)?"""

    def write(self, rel: str, version) -> None:
        """Put the version at rel."""


def keep_both(path, ours, theirs, place):
    """Settle one conflicted path, keeping every version -> (the conflict copy as
    {"path", "copy", "host"} or None, the paths written).

    * both sides have a version: the newer at the path (or, when a folder took the
      name, at a copy named for "both sides"), the other beside it as a conflict
      copy; a name that already holds the loser is used again (a crash before the
      commit), the loser written first; the copy names the loser's person when the
      two versions' authors differ (a shared folder, docs/sharing.md);
    * one side deleted it, the other changed it: the change stays;
    * both deleted it: nothing to write."""
    if ours is not None and theirs is not None:
        mine, other = place.last_change("ours", ours), place.last_change("theirs", theirs)
        ours_wins = mine[:2] > other[:2]
        win, lose = (ours, theirs) if ours_wins else (theirs, ours)
        loser, winner = (other, mine) if ours_wins else (mine, other)
        stamp, host = loser[0], loser[2]
        person = other_person(winner[3] if len(winner) > 3 else None,
                              loser[3] if len(loser) > 3 else None)
        target = path
        if place.is_folder(path):
            target = copy_name(path, BOTH_SIDES, stamp, lambda n: not place.taken(n))
        copy = copy_name(path, host, stamp, lambda n: n != target and (
            not place.taken(n) or place.holds(n, lose)), person=person)
        place.write(copy, lose)
        place.write(target, win)
        made = {"path": path, "copy": copy, "host": host}
        if person:
            made["person"] = person
        told(made)
        return made, [copy, target]
    if ours is not None or theirs is not None:
        place.write(path, ours if ours is not None else theirs)
        log.warning("%s was changed on one side and deleted on the other: kept",
                    printable(path))
        return None, [path]
    return None, []
