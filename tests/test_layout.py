"""The package's shape: one folder per program around core/, and who may import whom.

A program's folder imports only core/ (and itself). The exceptions, each for a
reason, are in ALLOWED; anything else fails here, with the import that crossed.
"""
import ast
import os
import sys

import autosync

ROOT = os.path.dirname(autosync.__file__)
WINGS = {"watcher", "committer", "xmpp", "ssh", "desktop", "tools"}
ALLOWED = {
    # the tray shows the recent changes at start: the log reader of `dvcs-autosync log`
    ("desktop", "tools"),
}
# (dvcs-autosync's subcommands are loaded by name: supervisor.COMMANDS, not an import.)


def modules():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT), path


def room(rel):
    """core, a wing, or the top-level module's own name (supervisor, __init__)."""
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".py") else first


def imported(path):
    """The autosync modules a file imports, as dotted names below autosync."""
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "autosync":
                for alias in node.names:
                    if not alias.name.startswith("__"):  # __version__
                        yield alias.name
            elif node.module.startswith("autosync."):
                yield node.module[len("autosync."):]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autosync."):
                    yield alias.name[len("autosync."):]


def crossings():
    out = []
    for rel, path in modules():
        here = room(rel)
        for name in imported(path):
            there = name.split(".")[0]
            if there in (here, "core"):
                continue
            out.append((here, there, rel, name))
    return out


def test_the_package_is_core_and_one_folder_per_program():
    rooms = {room(rel) for rel, _ in modules()}
    assert rooms == WINGS | {"core", "supervisor", "__init__"}


def test_core_imports_nothing_outside_core():
    assert [c for c in crossings() if c[0] == "core"] == []


def test_a_program_s_folder_imports_only_core_and_itself():
    bad = ["%s imports autosync.%s" % (rel, name) for here, there, rel, name in crossings()
           if (here, there) not in ALLOWED]
    assert bad == []


def test_the_exceptions_are_still_needed():
    # an exception nobody uses any more is a door left open: close it
    used = {(here, there) for here, there, _, _ in crossings()}
    assert ALLOWED <= used


def test_the_check_sees_a_crossing(tmp_path, monkeypatch):
    # the check itself: a watcher module that imports the committer is caught
    fake = tmp_path / "autosync"
    (fake / "watcher").mkdir(parents=True)
    (fake / "watcher" / "x.py").write_text("from autosync.committer import repository\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(fake))
    assert crossings() == [("watcher", "committer", os.path.join("watcher", "x.py"),
                            "committer")]
