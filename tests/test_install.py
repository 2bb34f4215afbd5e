"""`pip install .` into a venv made by the distribution's own /usr/bin/python3.

Debian 12's pip (23.0, no `wheel` package) used to fall back to the deprecated
`setup.py install`; with a `build/` folder left from an earlier wheel build it
then installed launchers whose first line was `#!python`, which do not run.
Here a copy of the checkout, with such a stale build/ folder in it, is
installed into a fresh venv, and each program's --help runs from the venv.
The real checkout is never written. pip fetches setuptools (and the
dependencies) from the package index: about 15 seconds.
"""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.e2e

SYSTEM_PYTHON = "/usr/bin/python3"
PROGRAMS = {
    "dvcs-autosync": "supervisor",
    "autosync-committer": "committer",
    "autosync-watcher": "watcher",
    "autosync-xmpp": "xmpp",
    "autosync-desktop": "desktop",
    "autosync-tray": "tray",
    "autosync-notify": "notify",
    "autosync-hgmerge": "hgmerge",
}
# What a checkout holds that is not the project's own source.
NOT_SOURCE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "*.pyc", "venv", ".venv")


def checkout_version():
    about = {}
    with open(os.path.join(ROOT, "autosync", "__init__.py")) as f:
        exec(f.read(), about)
    return about["__version__"]


def stale_build(tree, python_version):
    """The build/ folder an earlier wheel build of an older version leaves behind."""
    build = tree / "build"
    scripts = build / ("scripts-%s" % python_version)
    scripts.mkdir(parents=True)
    for name, module in PROGRAMS.items():
        # A wheel build writes `#!python`; only a wheel installer fixes it.
        (scripts / name).write_text("#!python\nimport sys\nfrom autosync.%s import main\n"
                                    "sys.exit(main())\n" % module)
        (scripts / name).chmod(0o755)
    lib = build / "lib" / "autosync"
    shutil.copytree(tree / "autosync", lib)
    (lib / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (lib / "obsolete.py").write_text("# a module since removed from the source\n")
    # Newer than the source: setuptools copies a module only over an older one.
    future = 4102444800  # 2100-01-01
    for path in lib.iterdir():
        os.utime(path, (future, future))
    (build / "bdist.linux-x86_64").mkdir()


def run(argv, **kwargs):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          **kwargs)


def test_pip_install_into_a_system_python_venv_gives_programs_that_run(tmp_path):
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.fail("%s is missing: the distribution's own Python 3" % SYSTEM_PYTHON)
    # Nothing of the checkout or of the test's own Python may leak in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_USER",
                        "PIP_REQUIRE_VIRTUALENV")}
    version = run([SYSTEM_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                  env=env)
    assert version.returncode == 0, version.stdout

    tree = tmp_path / "checkout"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    stale_build(tree, version.stdout.strip())

    venv = tmp_path / "venv"
    made = run([SYSTEM_PYTHON, "-m", "venv", str(venv)], env=env)
    assert made.returncode == 0, ("install the Debian package python3-venv\n" + made.stdout)
    python = str(venv / "bin" / "python3")

    pip = run([python, "-m", "pip", "install", "--disable-pip-version-check", "."],
              cwd=str(tree), env=env)
    assert pip.returncode == 0, pip.stdout
    # Built as a wheel, never through the deprecated `setup.py install`.
    # (pyinotify, which publishes only a source archive, still gets that
    # notice from pip 23.0 without `wheel`: it has no launchers to break.)
    assert "Building wheel for dvcs-autosync" in pip.stdout, pip.stdout
    ours = [line for line in pip.stdout.splitlines() if "dvcs-autosync" in line]
    assert not [line for line in ours if "DEPRECATION" in line or "setup.py install" in line], \
        pip.stdout

    for name in PROGRAMS:
        launcher = venv / "bin" / name
        with open(launcher) as f:
            first = f.readline().strip()
        assert first.startswith("#!" + str(venv / "bin" / "python")), (name, first)
        shown = run([str(launcher), "--help"], cwd=str(tmp_path), env=env)
        assert shown.returncode == 0, (name, shown.stdout)
        assert "usage: " + name in shown.stdout, (name, shown.stdout)

    # The installed package is the checkout's, nothing of the stale build/.
    probe = ("import os, autosync; print(autosync.__version__); "
             "print(sorted(os.listdir(os.path.dirname(autosync.__file__))))")
    installed = run([python, "-c", probe], cwd=str(tmp_path), env=env)
    assert installed.returncode == 0, installed.stdout
    installed_version, files = installed.stdout.splitlines()
    assert installed_version == checkout_version()
    assert "obsolete.py" not in files
    assert "supervisor.py" in files
