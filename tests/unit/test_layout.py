"""The package's shape: one folder per program, over the engine, over the base; who may
import whom.

Four floors, and imports only go down (or stay on the floor's own room):
  programs: supervisor.py and one folder per program (watcher, committer, xmpp, ssh, web,
            desktop, tools)
  vcs/:     the DVCS engine (git run, pulled, merged, noted)
  fs/:      the folder itself (every write into it, every check of a file still open),
            no version control
  core/:    the base (config, paths, the socket, retry, commit messages, ...)
A program's folder imports only vcs/, fs/, core/ and itself. The exceptions, each for a
reason, are in ALLOWED, by the one name imported: a door is one function (`from
autosync.ssh.watch import probe`), never a whole program; anything else fails here,
with the import that crossed.
No module cycle either, counting the imports made inside functions.
"""
import ast
import os
import sys

import autosync

ROOT = os.path.dirname(autosync.__file__)
PROGRAMS = {"watcher", "committer", "xmpp", "ssh", "desktop", "tools", "web", "supervisor"}
FLOORS = {"core": 0, "fs": 1, "vcs": 2}  # every program: 3 (above them all)
ALLOWED = {
    # A tool may ask a link whether it would work (one function each link program offers,
    # the link's own judgement): init tries the remote's watch once before it chooses
    # syncmethod (and prints the restricted key's line the watch allows) ...
    ("tools", "ssh.watch.probe"),
    # ... and the XMPP account's login once.
    ("tools", "xmpp.session.probe"),
    # The supervisor is the top program: `dvcs-autosync WORD ...` goes to the tool's main()
    # (tools/commands.py, the subcommand router).
    ("supervisor", "tools.commands.COMMANDS"),
}
ROUTER = ("supervisor", "tools.commands.COMMANDS")
# Class names the package still defines more than once (one class per name, issue 34):
SAME_NAME = {
    # guarded's (a write refused) and init's (init refuses to start): init's is renamed
    # once the branch that adds raises of it (ssh, issue 33) is merged
    "Refused": 2,
}
# The longest a module and a class may be, in lines (issue 42): past them a file or a
# class holds more than one job; split it into parts with one job each, as the
# committer (committer/*.py) and its repository (committer/repository/) were.
MODULE_LINES = 700
CLASS_LINES = 450


def modules():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT), path


def room(rel):
    """core, fs, vcs, a program's folder, or the top-level module's own name (supervisor,
    __init__)."""
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".py") else first


def floor(room_):
    return FLOORS.get(room_, len(FLOORS))


def imported(path):
    """The autosync modules a file imports (anywhere in it, inside functions too), as
    dotted names below autosync: `from autosync.core import cli` is core.cli."""
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "autosync":
                for alias in node.names:
                    if not alias.name.startswith("__"):  # __version__
                        yield alias.name
            elif node.module.startswith("autosync."):
                for alias in node.names:
                    yield node.module[len("autosync."):] + "." + alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autosync."):
                    yield alias.name[len("autosync."):]


def crossings():
    """(from room, to room, file, module) of every import that leaves its room and does
    not go to a lower floor."""
    out = []
    for rel, path in modules():
        here = room(rel)
        for name in imported(path):
            there = name.split(".")[0]
            if there == here or floor(there) < floor(here):
                continue
            out.append((here, there, rel, name))
    return out


def graph():
    """{module: the package's modules it imports}, modules as dotted names below autosync
    (`core.cli`; a folder's __init__ is the folder's name)."""
    names = {}
    for rel, path in modules():
        name = rel[:-3].replace(os.sep, ".")
        names[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    out = {}
    for name, path in names.items():
        deps = set()
        for imported_name in imported(path):
            # `from autosync.core.config import load` names core.config.load: its module
            while imported_name and imported_name not in names:
                imported_name = imported_name.rpartition(".")[0]
            if imported_name and imported_name != name:
                deps.add(imported_name)
        out[name] = deps
    return out


def cycles(edges):
    """The strongly connected groups of more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_package_is_the_base_the_engine_and_one_folder_per_program():
    rooms = {room(rel) for rel, _ in modules()}
    assert rooms == PROGRAMS | {"core", "fs", "vcs", "__init__"}


def test_the_base_imports_nothing_outside_core():
    assert [c for c in crossings() if c[0] == "core"] == []


def test_the_folder_floor_imports_only_the_base():
    assert [c for c in crossings() if c[0] == "fs"] == []


def test_the_engine_imports_only_the_folder_floor_and_the_base():
    assert [c for c in crossings() if c[0] == "vcs"] == []


def test_a_program_imports_only_the_engine_the_base_and_itself():
    bad = ["%s imports autosync.%s" % (rel, name) for here, there, rel, name in crossings()
           if (here, name) not in ALLOWED]
    assert bad == []


def test_the_exceptions_are_still_needed():
    # an exception nobody uses any more is a door left open: close it
    used = {(here, name) for here, _, _, name in crossings()}
    assert ALLOWED <= used


def test_at_most_two_doors_each_one_function():
    # between program folders (the supervisor's router aside): "would this link work?"
    doors = ALLOWED - {ROUTER}
    assert len(doors) <= 2
    for _, name in doors:
        module, _, function = name.rpartition(".")
        path = os.path.join(ROOT, *module.split(".")) + ".py"
        tree = ast.parse(open(path).read(), path)
        assert function in {node.name for node in tree.body
                            if isinstance(node, ast.FunctionDef)}, name


def test_no_module_cycle():
    assert cycles(graph()) == []


def classes():
    """{class name: the files defining a class of that name (at any depth)}."""
    out = {}
    for rel, path in modules():
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(rel)
    return out


def test_one_class_per_name():
    # two classes of one name make a reader (and a grep) take one for the other
    twice = {name: len(files) for name, files in classes().items() if len(files) > 1}
    assert twice == SAME_NAME


def sizes():
    """(lines, what) of every module and every class (at any depth, from its `class`
    line to its last), `what` as "core/config.py" or "core/config.py: Config"."""
    out = []
    for rel, path in modules():
        text = open(path).read()
        out.append((len(text.splitlines()), rel))
        for node in ast.walk(ast.parse(text, path)):
            if isinstance(node, ast.ClassDef):
                out.append((node.end_lineno - node.lineno + 1, "%s: %s" % (rel, node.name)))
    return out


def oversized():
    """"what: N lines, over LIMIT" of every module and class longer than its limit."""
    limit = {False: MODULE_LINES, True: CLASS_LINES}  # by "is it a class"
    return sorted("%s: %d lines, over %d" % (what, lines, limit[": " in what])
                  for lines, what in sizes() if lines > limit[": " in what])


def test_no_module_over_700_lines_and_no_class_over_450():
    assert oversized() == []


def test_the_check_sees_a_long_module_and_a_long_class(tmp_path, monkeypatch):
    fake = tmp_path / "autosync" / "core"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("x = 1\n" * MODULE_LINES)
    (fake / "b.py").write_text("x = 1\n" * MODULE_LINES + "y = 2\n")
    (fake / "c.py").write_text("class Short:\n" + "    x = 1\n" * (CLASS_LINES - 1))
    (fake / "d.py").write_text("class Outer:\n    class Long:\n" +
                               "        x = 1\n" * CLASS_LINES)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path / "autosync"))
    assert oversized() == [
        "%s: %d lines, over %d" % (os.path.join("core", "b.py"), MODULE_LINES + 1, MODULE_LINES),
        "%s: Long: %d lines, over %d" % (os.path.join("core", "d.py"), CLASS_LINES + 1,
                                          CLASS_LINES),
        "%s: Outer: %d lines, over %d" % (os.path.join("core", "d.py"), CLASS_LINES + 2,
                                           CLASS_LINES)]


def test_the_check_sees_a_crossing(tmp_path, monkeypatch):
    # the check itself: a watcher module that imports the committer, an engine module
    # that imports a program, a folder-floor module that imports the engine and a base
    # module that imports the folder floor are caught; the engine's import of the folder
    # floor is not
    fake = tmp_path / "autosync"
    for folder in ("watcher", "vcs", "fs", "core"):
        (fake / folder).mkdir(parents=True)
    (fake / "watcher" / "x.py").write_text("from autosync.committer import repository\n")
    (fake / "vcs" / "y.py").write_text("def f():\n    from autosync.tools import history\n"
                                       "from autosync.fs import guarded\n")
    (fake / "fs" / "w.py").write_text("from autosync.vcs.git import git\n")
    (fake / "core" / "z.py").write_text("import autosync.fs.guarded\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(fake))
    assert sorted(crossings()) == [
        ("core", "fs", os.path.join("core", "z.py"), "fs.guarded"),
        ("fs", "vcs", os.path.join("fs", "w.py"), "vcs.git.git"),
        ("vcs", "tools", os.path.join("vcs", "y.py"), "tools.history"),
        ("watcher", "committer", os.path.join("watcher", "x.py"), "committer.repository")]


def test_the_check_sees_a_cycle_hidden_in_a_function(tmp_path, monkeypatch):
    fake = tmp_path / "autosync"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "a.py").write_text("from autosync.core import b\n")
    (fake / "core" / "b.py").write_text("def f():\n    from autosync.core.c import g\n")
    (fake / "core" / "c.py").write_text("def g():\n    import autosync.core.a\n")
    (fake / "core" / "d.py").write_text("from autosync.core import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(fake))
    assert cycles(graph()) == [["core.a", "core.b", "core.c"]]


# --- parts handed in, not patched in (issue 34) ---------------------------------------------

ENVIRON_WRITES = {"os.environ.update", "os.environ.pop", "os.environ.setdefault",
                  "os.environ.clear", "os.putenv", "os.unsetenv"}


def patches():
    """(file, line, what) of every place a module changes state it does not own: a
    `global` statement (module state set from a function: the settings every caller
    then gets unasked), an assignment to (or del of) an attribute of another module or
    of what it holds (`git_environment._excludes = ...`, `os.environ[K] = ...`), and
    os.environ changed by a call. A part gets what it needs handed in instead."""
    out = []
    for rel, path in modules():
        tree = ast.parse(open(path).read(), path)
        imported_names = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    name = alias.asname or alias.name
                    imported_names.add(name.split(".")[0] if isinstance(node, ast.Import)
                                       else name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                out.append((rel, node.lineno, "global " + ", ".join(node.names)))
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                base = target
                while isinstance(base, (ast.Subscript, ast.Attribute)) and \
                        not (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)):
                    base = base.value
                if isinstance(base, ast.Attribute) and base.value.id in imported_names:
                    out.append((rel, node.lineno, ast.unparse(target)))
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ENVIRON_WRITES:
                out.append((rel, node.lineno, ast.unparse(node.func)))
    return sorted(out)


def test_no_module_patches_another_or_keeps_state_set_from_outside():
    assert patches() == []


def test_the_check_sees_a_patch(tmp_path, monkeypatch):
    fake = tmp_path / "autosync"
    (fake / "vcs").mkdir(parents=True)
    (fake / "vcs" / "a.py").write_text(
        "_ssh = None\n\n\ndef use(text):\n    global _ssh\n    _ssh = text\n")
    (fake / "vcs" / "b.py").write_text(
        "import os\nfrom autosync.vcs import a\n\n\ndef f(x):\n    a._ssh = x\n"
        "    os.environ['K'] = x\n    del os.environ['K']\n    os.environ.update(K=x)\n"
        "    x.y = 1\n    local = {}\n    local['k'] = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(fake))
    a, b = os.path.join("vcs", "a.py"), os.path.join("vcs", "b.py")
    assert patches() == [(a, 5, "global _ssh"), (b, 6, "a._ssh"), (b, 7, "os.environ['K']"),
                         (b, 8, "os.environ['K']"), (b, 9, "os.environ.update")]


def test_every_package_folder_is_installed():
    """pyproject.toml lists the packages by name: a folder missing there is missing from
    every pip and Debian install, while the checkout's tests still find it."""
    import tomllib
    with open(os.path.join(os.path.dirname(ROOT), "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    folders = {os.path.relpath(top, os.path.dirname(ROOT)).replace(os.sep, ".")
               for top, _, names in os.walk(ROOT) if "__init__.py" in names}
    assert folders == listed
