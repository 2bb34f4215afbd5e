"""tests/install.sh with the distribution's own /usr/bin/python3 (PATH=/usr/bin:/bin).

Debian 12/13 and Ubuntu 24.04 refuse `pip install` into the system's Python
(PEP 668), so the demo's and the tests' installs must go into a venv of it and
leave its site-packages as they were. Here a copy of the checkout is installed
by its own tests/install.sh into a fresh venv, the demo's way first, then the
tests' way into the same venv (as a newcomer runs tests/demo.sh, then
tests/run.sh), with nothing on PATH but /usr/bin and /bin; the folders a `pip
install` outside a venv would write into (the system Python's /usr/local ones, root's
user site) are listed before and after, and what the installer installs (the names in
the venv) must not have changed there. Only those: the machine may install packages
beside the run, the product's Debian package among them.

Debian 12's pip (23.0, no `wheel` package) used to fall back to the deprecated
`setup.py install`; with a `build/` folder left from an earlier wheel build it
then installed launchers whose first line was `#!python`, which do not run.
So the copy has such a stale build/ folder in it, and each program's --help
runs from the venv. The real checkout is never written. pip fetches
setuptools (and the dependencies) from the package index: about 20 seconds.
"""
import glob
import os
import shutil
import subprocess

import pytest

from base import ROOT


SYSTEM_PYTHON = "/usr/bin/python3"
PROGRAMS = {
    "dvcs-autosync": "supervisor",
    "autosync-committer": "committer",
    "autosync-watcher": "watcher",
    "autosync-xmpp": "xmpp",
    "autosync-sshlink": "sshlink",
    "autosync-remote": "remote",
    "autosync-desktop": "desktop",
    "autosync-tray": "tray",
    "autosync-notify": "notify",
    "autosync-hgmerge": "hgmerge",
    "autosync-web": "web",
}
# What a checkout holds that is not the project's own source.
NOT_SOURCE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "*.pyc", "venv", ".venv")
# What pip needs to reach its index here (a proxy, a local mirror, certificates); nothing else
# of the test's environment (PYTHONPATH, VIRTUAL_ENV, a pyenv PATH) goes in.
PASSED_ON = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
             "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
ASIDE = ("PIP_USER", "PIP_REQUIRE_VIRTUALENV", "PIP_TARGET", "PIP_PREFIX")


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


def installer_could_write(env):
    """The folders a `pip install` outside a venv writes into (the system Python's purelib,
    platlib and scripts folders: /usr/local on Debian, where apt never writes; root's user
    site and bin). The distribution's own folders (/usr/lib/python3/dist-packages) are not
    among them: packages installed beside the run change those."""
    where = run([SYSTEM_PYTHON, "-c", "import site, sysconfig; p = sysconfig.get_paths(); "
                 "print('\\n'.join([p['purelib'], p['platlib'], p['scripts'], "
                 "site.getusersitepackages(), site.getuserbase() + '/bin']))"], env=env)
    assert where.returncode == 0, where.stdout
    return sorted(set(where.stdout.split()))


def listed(folders):
    """Every file and folder below `folders`, with its size and time."""
    listing = {}
    for top in folders:
        for folder, _, files in os.walk(top):
            for name in files + [""]:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                listing[path] = (info.st_size, info.st_mtime_ns)
    return listing


def installers(listing, folders, names):
    """The part of a listing that belongs to what the installer installs (`names`: the
    top-level entries of the venv's site-packages and bin): what a `pip install` outside
    a venv would have changed. Other processes' packages (a Debian package of this very
    product, anything being installed meanwhile) are not the installer's."""
    def top(path):
        folder = max((f for f in folders if path == f or path.startswith(f.rstrip("/") + "/")),
                     key=len)
        return os.path.relpath(path, folder).split(os.sep)[0]
    return {path: seen for path, seen in listing.items() if top(path) in names}


def installed_names(venv):
    """What the installer put into the venv: the top-level names in its site-packages
    and bin (__pycache__ aside), the names it would have used outside a venv."""
    names = set()
    for folder in glob.glob(str(venv / "lib" / "python3*" / "site-packages")) + [
            str(venv / "bin")]:
        names.update(os.listdir(folder))
    return names - {"__pycache__", "python", "python3"} - {
        n for n in names if n.startswith("python3.") or n.startswith("activate")}


def test_install_sh_uses_a_venv_of_the_system_python_and_leaves_it_untouched(tmp_path):
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.fail("%s is missing: the distribution's own Python 3" % SYSTEM_PYTHON)
    home = tmp_path / "newcomer"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k in PASSED_ON or (k.startswith("PIP_") and k not in ASIDE)}
    env.update(PATH="/usr/bin:/bin", HOME=str(home), LANG="C.UTF-8")
    version = run([SYSTEM_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                  env=env)
    assert version.returncode == 0, version.stdout

    tree = tmp_path / "checkout"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    stale_build(tree, version.stdout.strip())
    venv = tmp_path / "venv"
    env["AUTOSYNC_VENV"] = str(venv)
    folders = installer_could_write(env)
    before = listed(folders)  # compared below by the names the installer used

    demo = run(["bash", str(tree / "tests" / "install.sh"), "--demo"], cwd=str(home), env=env)
    assert demo.returncode == 0, demo.stdout
    # The venv is the system Python's (not a pyenv's or the test's own).
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "home = /usr/bin\n" in cfg, cfg
    python = str(venv / "bin" / "python3")
    assert os.path.realpath(python) == os.path.realpath(SYSTEM_PYTHON)
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
    no_pytest = run([python, "-c", "import pytest"], env=env)
    assert no_pytest.returncode != 0, "the demo's install needs no pytest"

    # The tests' install, into the same venv: pytest comes in, nothing is made twice.
    tests = run(["bash", str(tree / "tests" / "install.sh")], cwd=str(home), env=env)
    assert tests.returncode == 0, tests.stdout
    assert "making a venv" not in tests.stdout
    has_pytest = run([python, "-c", "import pytest, autosync.supervisor"], cwd=str(tmp_path),
                     env=env)
    assert has_pytest.returncode == 0, has_pytest.stdout
    # A second run finds everything there and installs nothing.
    again = run(["bash", str(tree / "tests" / "install.sh")], cwd=str(home), env=env)
    assert (again.returncode, again.stdout) == (0, "")

    names = installed_names(venv)
    assert {"autosync", "dvcs-autosync", "autosync-notify"} <= names, sorted(names)
    assert installers(listed(folders), folders, names) == installers(before, folders, names)
