"""The tests' own shape: no test imports another test.

A test module (test_*.py, anywhere below tests/) and conftest.py are pytest's to load.
What tests share lives in the support modules beside them (base.py, helpers.py,
fakes.py, repos.py, terminal.py, service_units.py, run_order.py, sshd.py, prosody.py,
dbus_session.py, unitguard.py), which any test imports. A test that imports another
(or conftest.py as a module) runs that module a second time under another name, makes
a reader hunt for a helper among the tests, and ties the tiers together: a unit test
then breaks with a middle-tier file. This fails on every such import, anywhere below
tests/ (inside functions too, and in `pytest_plugins`), with the file and line.
"""
import ast
import os
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files():
    for folder, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, TESTS), path


def is_test(module):
    """Is this top-level module name a test module or a conftest?"""
    return module == "conftest" or module.startswith("test_")


def imported(tree):
    """(line, top-level module name) of every module the tree imports, wherever (not the
    relative imports of a package's own modules), and every module `pytest_plugins`
    names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module.split(".")[0]
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets):
            names = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) \
                else [node.value]
            for name in names:
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    yield node.lineno, name.value.split(".")[0]


def imports_of_tests():
    """"file:line imports module" for every import of a test module or a conftest."""
    out = []
    for rel, path in python_files():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        out.extend("%s:%d imports %s" % (rel, line, module)
                   for line, module in imported(tree) if is_test(module))
    return out


def test_no_test_imports_another_test_or_a_conftest():
    assert imports_of_tests() == []


def test_the_check_sees_a_test_imported(tmp_path, monkeypatch):
    (tmp_path / "unit").mkdir()
    (tmp_path / "conftest.py").write_text("from base import git\nfrom unitguard import x\n")
    (tmp_path / "base.py").write_text("import os\n")
    (tmp_path / "unit" / "test_a.py").write_text(
        "from fakes import config\n\n\ndef test_x():\n    import conftest\n"
        "    from test_b import helper\n")
    (tmp_path / "test_b.py").write_text(
        "import test_c.sub\npytest_plugins = ['repos', 'test_d']\nfrom . import test_e\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", str(tmp_path))
    assert imports_of_tests() == [
        "test_b.py:1 imports test_c", "test_b.py:2 imports test_d",
        os.path.join("unit", "test_a.py") + ":5 imports conftest",
        os.path.join("unit", "test_a.py") + ":6 imports test_b"]
