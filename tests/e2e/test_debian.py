"""The Debian package, as debian/ builds it: from a clean clone of this checkout
(`git clone`, so what is committed; one build per commit, see built()),
debian/get-xmpppy (the one step that takes the
network: xmpppy's release from PyPI) then `dpkg-buildpackage -us -uc -b` with the
system's tools only on PATH; lintian finds no error in it.

The packages' files are unpacked (`dpkg -x`) into a folder, and every program there
runs its --help with the system's Python and Debian's own libraries (python3-configobj
and the rest), the package's modules found in the unpacked tree. The test marked
`alone` installs them for real (`apt-get install ./*.deb`: it changes the machine's
/usr, so tests/run.sh runs it by itself), runs every program from /usr/bin and the
README's demo (tests/demo.py, two folders synced through the installed programs), and
purges them again.
"""
import fcntl
import glob
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from base import ROOT

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES = ("dvcs-autosync", "python3-autosync", "autosync-remote", "python3-xmpp")
TOOLS = {"dpkg-buildpackage": "dpkg-dev", "dh": "debhelper", "dh_python3": "dh-python",
         "lintian": "lintian"}


def system_env(**extra):
    """The environment of a user's shell with nothing of the tests' venv or checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=SYSTEM_PATH, LC_ALL="C.UTF-8", **extra)
    return env


def run(argv, **kwargs):
    kwargs.setdefault("env", system_env())
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **kwargs)
    assert result.returncode == 0, "%s failed (%d):\n%s" % (" ".join(argv), result.returncode,
                                                             result.stdout[-4000:])
    return result.stdout


@pytest.fixture(scope="module")
def built():
    """{package: its .deb}, built from a clean clone of the checkout's commit. Built once
    per commit: the tests of this file in tests/run.sh's parallel run and in its run of
    the `alone` tests share one build (a clone of the same commit builds the same)."""
    for tool, package in TOOLS.items():
        if shutil.which(tool, path=SYSTEM_PATH) is None:
            pytest.fail("%s is missing: install the Debian package %s (tests/install.sh)"
                        % (tool, package))
    commit = run(["git", "-C", ROOT, "rev-parse", "HEAD"]).strip()
    cache = pathlib.Path(tempfile.gettempdir()) / ("autosync-deb-%d" % os.getuid())
    cache.mkdir(mode=0o700, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it
        base = cache / commit
        if not (base / "built").exists():
            for old in cache.iterdir():
                if old.is_dir():
                    shutil.rmtree(old)
            base.mkdir()
            build(base)
            (base / "built").touch()
    debs = {}
    for path in glob.glob(str(base / "*.deb")):
        debs[os.path.basename(path).split("_")[0]] = path
    assert sorted(debs) == sorted(PACKAGES)
    return debs


def build(base):
    source = base / "dvcs-autosync"
    run(["git", "clone", "-q", ROOT, str(source)])
    # pip of the Python running the tests (the venv's), as debian/get-xmpppy documents.
    run([str(source / "debian" / "get-xmpppy")],
        env=system_env(PIP="%s -m pip" % sys.executable))
    run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=str(source))


def contents(deb):
    listing = run(["dpkg-deb", "--contents", deb])
    return {line.split()[5].lstrip(".") for line in listing.splitlines()}


def test_lintian_finds_no_error(built):
    changes = glob.glob(os.path.join(os.path.dirname(built["dvcs-autosync"]), "*.changes"))
    lintian = subprocess.run(["lintian"] + changes, env=system_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout
    errors = [line for line in lintian.splitlines() if line.startswith("E:")]
    assert errors == [], lintian


def test_each_package_holds_its_part(built):
    debs = built
    suite = contents(debs["dvcs-autosync"])
    for path in ("/usr/bin/dvcs-autosync", "/usr/bin/autosync-notify",
                 "/usr/lib/systemd/user/dvcs-autosync.service",
                 "/usr/lib/systemd/user/dvcs-autosync@.service",
                 "/usr/share/dvcs-autosync/dvcs-autosync.desktop",
                 "/usr/share/dvcs-autosync/hooks/post-commit",
                 "/usr/share/doc/dvcs-autosync/examples/autosync-example",
                 "/usr/share/man/man1/dvcs-autosync.1.gz", "/usr/share/man/man5/autosync.5.gz",
                 "/usr/share/bash-completion/completions/dvcs-autosync",
                 "/usr/share/bash-completion/completions/autosync-notify",
                 "/usr/share/zsh/vendor-completions/_dvcs-autosync"):
        assert path in suite, path
    assert "/usr/bin/autosync-remote" not in suite
    # Every page debian/ lists is installed as documentation, under its own name (a doc
    # named history* is not a changelog), and the changelog is debian/changelog.
    doc = "/usr/share/doc/dvcs-autosync/"
    with open(os.path.join(ROOT, "debian", "dvcs-autosync.docs")) as f:
        for page in f.read().split():
            name = doc + os.path.basename(page)
            assert name in suite or name + ".gz" in suite, name
    assert doc + "changelog.gz" in suite
    changelog = subprocess.run("dpkg-deb --fsys-tarfile %s | tar -xO .%schangelog.gz | gzip -d"
                               % (shlex.quote(debs["dvcs-autosync"]), doc), shell=True,
                               env=system_env(), stdout=subprocess.PIPE, check=True).stdout
    with open(os.path.join(ROOT, "debian", "changelog"), "rb") as f:
        assert changelog == f.read()
    remote = contents(debs["autosync-remote"])
    assert {"/usr/bin/autosync-remote", "/usr/share/man/man1/autosync-remote.1.gz"} <= remote
    assert "/usr/lib/python3/dist-packages/autosync/ssh/remote.py" in contents(
        debs["python3-autosync"])
    assert "/usr/lib/python3/dist-packages/xmpp/client.py" in contents(debs["python3-xmpp"])
    # A server needs git and the modules, not the desktop's libraries.
    depends = run(["dpkg-deb", "--field", debs["autosync-remote"], "Depends"])
    modules = run(["dpkg-deb", "--field", debs["python3-autosync"], "Depends"])
    assert "git" in depends and "python3-autosync" in depends
    assert not re.search(r"jeepney|configobj|xmpp|pathspec", depends + modules)
    suite_depends = run(["dpkg-deb", "--field", debs["dvcs-autosync"], "Depends"])
    for name in ("git", "python3-pyinotify", "python3-configobj", "python3-jeepney",
                 "python3-pathspec", "python3-xmpp"):
        assert re.search(r"(^|, )%s\b" % name, suite_depends), name


def programs(root):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "usr", "bin", "*")))


def test_every_unpacked_program_runs_its_help_on_debians_libraries(built, tmp_path):
    debs = built
    root = tmp_path / "root"
    for deb in debs.values():
        run(["dpkg-deb", "-x", deb, str(root)])
    site = str(root / "usr" / "lib" / "python3" / "dist-packages")
    env = system_env(PYTHONPATH=site)
    names = programs(str(root))
    assert "dvcs-autosync" in names and "autosync-remote" in names and len(names) == 11
    for name in names:
        launcher = str(root / "usr" / "bin" / name)
        assert open(launcher).readline().strip() == "#!/usr/bin/python3", name
        out = run([launcher, "--help"], env=env, cwd=str(tmp_path))
        assert out.startswith("usage: " + name), (name, out)
    # The modules came from the unpacked tree, the libraries from Debian's packages.
    where = run(["/usr/bin/python3", "-c", "import autosync.supervisor, autosync.web.app, xmpp, "
                 "configobj, jeepney, jinja2, pathspec, pyinotify as p; "
                 "print(autosync.__file__, xmpp.__file__); print(configobj.__file__, "
                 "jeepney.__file__, jinja2.__file__, pathspec.__file__, p.__file__)"],
                env=env, cwd=str(tmp_path)).split()
    assert where[0].startswith(site + "/autosync/") and where[1].startswith(site + "/xmpp/")
    assert all(path.startswith("/usr/lib/python3/dist-packages/") for path in where[2:]), where


def installed():
    listing = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n"]
                             + list(PACKAGES), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.endswith(" installed")}


@pytest.mark.alone
def test_apt_installs_the_packages_and_the_demo_syncs_with_the_installed_programs(built,
                                                                                    tmp_path):
    if os.geteuid() != 0:
        pytest.skip("apt-get install needs root")
    debs = built
    before = installed()
    assert not before, "already installed here (%s): not touching them" % ", ".join(before)
    env = system_env(DEBIAN_FRONTEND="noninteractive")
    try:
        run(["apt-get", "install", "-y", "-q", "--no-install-recommends"]
            + sorted(debs.values()), env=env)
        assert installed() == set(PACKAGES)
        listed = run(["dpkg", "-L", "dvcs-autosync", "autosync-remote"]).split()
        names = sorted(os.path.basename(p) for p in listed if p.startswith("/usr/bin/"))
        assert len(names) == 11
        for name in names:
            assert shutil.which(name, path=SYSTEM_PATH) == "/usr/bin/" + name
            out = run([name, "--help"], cwd=str(tmp_path))
            assert out.startswith("usage: " + name), (name, out)
        # The demo runs the programs beside the Python it runs on: /usr/bin's. From
        # another folder than the checkout, so that `python3 -m autosync...` (how the
        # supervisor starts its programs) finds only the installed modules.
        where = run(["/usr/bin/python3", "-c", "import autosync; print(autosync.__file__)"],
                    cwd=str(tmp_path))
        assert where.startswith("/usr/lib/python3/dist-packages/autosync/"), where
        out = run(["/usr/bin/python3", os.path.join(ROOT, "tests", "demo.py")],
                  cwd=str(tmp_path))
        assert "delete it on the desktop" in out and "-> on the laptop" in out, out
        assert run(["man", "-w", "autosync"]).strip() == "/usr/share/man/man5/autosync.5.gz"
        # The completion bash loads for autosync-notify (a link to dvcs-autosync's file).
        completes = run(["bash", "-c", "source /usr/share/bash-completion/completions/"
                         "autosync-notify && complete -p autosync-notify"])
        assert "-F _autosync_complete" in completes
        # The user units are there to enable, enabled for no one by the install.
        assert os.path.exists("/usr/lib/systemd/user/dvcs-autosync.service")
        assert not os.path.lexists("/etc/systemd/user/default.target.wants/"
                                   "dvcs-autosync.service")
    finally:
        subprocess.run(["dpkg", "--purge"] + list(PACKAGES), env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not installed()
