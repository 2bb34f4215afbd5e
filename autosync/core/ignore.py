"""What is never synced, as the watcher decides it for each path.

The user's ignorepath, the DVCS metadata folders, editors' temporary, swap
and lock files (EDITOR_JUNK, which vcs/excludes.py gives git's own scans too), and
every .gitignore on the way down, with git's rule that the deepest one that
has an opinion wins.
The watcher, history and rewind use it; it imports nothing that runs git.
"""
import os
import re

import pathspec

from autosync.core.paths import METADATA

# Editors' temporary, backup, swap and lock files (vim, emacs, gedit, kate,
# LibreOffice), as gitignore patterns. ("\\#": a leading "#" is a comment.)
EDITOR_JUNK = ("*~", "*.swp", "*.swx", "*.swo", ".*.sw?", "4913", "\\#*#", ".#*", ".~lock.*#",
               ".goutputstream-*", "*.kate-swp", "*.tmp.[0-9]*")

EDITOR_JUNK_SPEC = pathspec.GitIgnoreSpec.from_lines(EDITOR_JUNK)
# The same patterns as one regular expression (pathspec's, their groups made plain): a
# name is matched once, not once per pattern (at 1,000,000 files, half the watcher's start).
EDITOR_JUNK_RE = re.compile("|".join("(?:%s)" % re.sub(r"\(\?P<\w+>", "(?:", p.regex.pattern)
                                     for p in EDITOR_JUNK_SPEC.patterns if p.include))


class Ignore:
    """Decides which paths are never synced: ignorepath, metadata, editor junk, .gitignore."""

    def __init__(self, root, ignorepath=()):
        self.root = root
        self.prefixes = [p.strip("/") for p in ignorepath if p.strip("/")]
        self.specs = {}  # folder -> its .gitignore's spec (None when it has none)
        self.plain = {}  # folder -> True when neither it nor a folder above has a .gitignore

    def spec(self, folder):
        if folder not in self.specs:
            files = [os.path.join(self.root, folder, ".gitignore")]
            if folder == "":
                files.append(os.path.join(self.root, ".git", "info", "exclude"))
            lines = []
            for name in files:
                try:
                    with open(name, encoding="utf-8", errors="surrogateescape") as f:
                        lines += f.read().splitlines()
                except OSError:
                    pass
            spec = pathspec.GitIgnoreSpec.from_lines(lines)
            # A file of comments only is no file: skip it on the hot path.
            useful = any(p.include is not None for p in spec.patterns)
            self.specs[folder] = spec if useful else None
        return self.specs[folder]

    def forget(self, folder):
        """A .gitignore changed: read it again next time."""
        self.specs.pop(folder, None)
        self.plain.clear()  # (the folders below it too)

    def no_gitignore_down_to(self, folder):
        """Whether no .gitignore from the top down to `folder` has a pattern: then only
        the fixed rules decide (the common case, looked up once per folder)."""
        if folder not in self.plain:
            above = folder.rpartition("/")[0] if folder else None
            self.plain[folder] = self.spec(folder) is None and (
                above is None or self.no_gitignore_down_to(above))
        return self.plain[folder]

    def __call__(self, rel, isdir=False):
        parts = rel.split("/")
        if METADATA.intersection(parts) or EDITOR_JUNK_RE.match(parts[-1]):
            return True
        if any(rel == p or rel.startswith(p + "/") for p in self.prefixes):
            return True
        if self.no_gitignore_down_to(rel.rpartition("/")[0]):
            return False
        # git's rule: a path is ignored if it or a folder above it is, and the
        # deepest .gitignore that has an opinion wins.
        for depth in range(1, len(parts) + 1):
            is_dir = isdir or depth < len(parts)
            verdict = None
            for cut in range(depth):
                spec = self.spec("/".join(parts[:cut]))
                if spec is not None:
                    local = "/".join(parts[cut:depth]) + ("/" if is_dir else "")
                    result = spec.check_file(local)
                    if result.include is not None:
                        verdict = result.include
            if verdict:
                return True
        return False
