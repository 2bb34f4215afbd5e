"""End-to-end: two Mercurial clones of one central repository, kept in sync by
the real suite with docs/examples/mercurial.autosync's commands. The central
repository's changegroup hook tells the daemons that a push arrived."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, Machine, tree, wait_until

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")]

EXAMPLES = os.path.join(ROOT, "docs", "examples")


def hg(*args, cwd=None):
    return subprocess.run(("hg",) + args, cwd=cwd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout.decode()


def dvcs_autosync(*args):
    return subprocess.run([sys.executable, "-m", "autosync.supervisor"] + list(args),
                          check=True, stdout=subprocess.PIPE, text=True).stdout


def example_dvcs_section(name="mercurial.autosync"):
    """The [dvcs] section of an example in docs/examples, as written (continuation lines and all)."""
    text = open(os.path.join(EXAMPLES, name)).read()
    return text[text.index("\n[dvcs]"):text.index("\n[xmpp]")]


def use_example(machine, name):
    """Rewrite a conftest Machine's config: its [autosync] settings, the example's [dvcs]."""
    lines = ["[autosync]"] + ["%s = %s" % kv for kv in machine.settings.items()]
    with open(machine.config, "w") as f:
        f.write("\n".join(lines) + "\n" + example_dvcs_section(name))


class HgMachine(Machine):
    """A Machine whose folder is an hg clone and whose commands are the example's."""

    def __init__(self, base, name, central):
        self.name, self.central = name, central
        self.path = str(base / name)
        self.config = str(base / (name + ".autosync"))
        self.log = str(base / (name + ".log"))
        hg("clone", "-q", central, self.path)
        self.settings = dict(path=self.path, syncmethod="none", notifymethod="none",
                             readfrequency="0.2", maxwait="3", pushdelay="0", pullinterval="0",
                             ignorepath=".hg")
        self.proc = None
        self.write_config()

    def write_config(self):
        use_example(self, "mercurial.autosync")

    def dirty(self):
        return hg("status", cwd=self.path).splitlines()

    def settled(self, central):
        s = self.status()
        if s.get("state") != "idle" or s.get("pending") or s.get("unpushed") or self.dirty():
            return False
        return hg("id", "-i", "-r", ".", cwd=self.path) == hg("id", "-i", "-r", "tip", cwd=central)

    def files(self):
        return tree(self)


@pytest.fixture
def central(tmp_path, private_home):
    with open(os.path.join(str(private_home), ".hgrc"), "w") as f:
        f.write("[ui]\nusername = Test <test@example.org>\n")
    path = str(tmp_path / "central")
    hg("init", path)
    seed = str(tmp_path / "seed")
    hg("clone", "-q", path, seed)
    with open(os.path.join(seed, "README"), "w") as f:
        f.write("synced folder\n")
    hg("add", "-q", "README", cwd=seed)
    hg("commit", "-q", "-m", "first", cwd=seed)
    hg("push", "-q", cwd=seed)
    return path


def notify_hook(central, machines):
    """What a user puts in the central repository's .hg/hgrc (like hooks/post-receive)."""
    notify = "PYTHONPATH=%s %s -m autosync.notify" % (ROOT, sys.executable)
    calls = "; ".join("%s --config %s pushed >/dev/null 2>&1" % (notify, m.config)
                      for m in machines)
    with open(os.path.join(central, ".hg", "hgrc"), "a") as f:
        f.write("[hooks]\nchangegroup.autosync = %s; true\n" % calls)


def test_two_mercurial_clones_stay_in_sync(tmp_path, central):
    a, b = HgMachine(tmp_path, "a", central), HgMachine(tmp_path, "b", central)
    notify_hook(central, (a, b))
    try:
        a.start(), b.start()

        def same(what):
            wait_until(lambda: a.settled(central) and b.settled(central)
                       and a.files() == b.files(), 40, 0.1, what)

        def write(m, rel, data):
            os.makedirs(os.path.dirname(os.path.join(m.path, rel)), exist_ok=True)
            with open(os.path.join(m.path, rel), "wb") as f:
                f.write(data)

        write(a, "notes/todo.txt", b"buy milk\n")
        photo = os.urandom(4096)
        write(a, "photo.jpg", photo)
        same("a's new files to reach b")
        assert b.files()["notes/todo.txt"] == b"buy milk\n"

        # An edit and a removal on b (hg tracks the edit itself: modifycmd is empty).
        write(b, "notes/todo.txt", b"buy milk\nand bread\n")
        os.unlink(os.path.join(b.path, "photo.jpg"))
        same("b's edit and removal to reach a")
        assert a.files() == {"README": b"synced folder\n", "notes/todo.txt": b"buy milk\nand bread\n"}

        os.rename(os.path.join(a.path, "notes"), os.path.join(a.path, "lists"))
        same("a's move to reach b")
        assert b.files()["lists/todo.txt"] == b"buy milk\nand bread\n"
        assert not os.path.exists(os.path.join(b.path, "notes"))
        assert hg("files", "-r", "tip", cwd=central).split() == ["README", "lists/todo.txt"]
        # Recorded as a rename, so the file's history goes on under its new name.
        assert "lists/todo.txt (notes/todo.txt)" in hg(
            "log", "-r", "tip", "--template", "{file_copies}", cwd=central)
        assert "moved: lists/todo.txt (from notes/todo.txt)" in hg(
            "log", "-r", "tip", "--template", "{desc}", cwd=central)

        # The example's logcmd and restorecmd: a removed file comes back and syncs.
        log = dvcs_autosync("log", os.path.join(a.path, "photo.jpg"), "--config", a.config)
        assert [line.split()[4:] for line in log.splitlines()] == [["removed"], ["added"]]
        dvcs_autosync("restore", os.path.join(a.path, "photo.jpg"), "--config", a.config)
        same("the restored photo to reach b")
        assert b.files()["photo.jpg"] == photo
    finally:
        a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()


def test_the_mercurial_example_restores_a_removed_folder(tmp_path, central):
    a, b = HgMachine(tmp_path, "a", central), HgMachine(tmp_path, "b", central)
    notify_hook(central, (a, b))
    try:
        a.start(), b.start()

        def same(what):
            wait_until(lambda: a.settled(central) and b.settled(central)
                       and a.files() == b.files(), 40, 0.1, what)

        notes = os.path.join(a.path, "notes")
        os.makedirs(os.path.join(notes, "old"))
        for rel, data in (("todo.txt", b"buy milk\n"), ("old/list.txt", b"bread\n"),
                          ("run.sh", b"#!/bin/sh\n")):
            with open(os.path.join(notes, rel), "wb") as f:
                f.write(data)
        os.chmod(os.path.join(notes, "run.sh"), 0o755)
        os.symlink("todo.txt", os.path.join(notes, "latest"))
        same("a's notes to reach b")
        wanted = a.files()
        shutil.rmtree(notes)
        same("the removal to reach b")
        assert "notes/todo.txt" not in b.files()
        commits = len(hg("log", "-T", "x\n", cwd=central).split())

        out = dvcs_autosync("restore", notes, "--config", a.config)
        assert out.splitlines()[:4] == ["brought back notes/%s" % n for n in
                                        ("latest", "old/list.txt", "run.sh", "todo.txt")]
        same("the restored folder to reach b")
        assert a.files() == b.files() == wanted
        assert os.readlink(os.path.join(b.path, "notes", "latest")) == "todo.txt"
        assert os.stat(os.path.join(b.path, "notes", "run.sh")).st_mode & 0o111
        assert len(hg("log", "-T", "x\n", cwd=central).split()) == commits + 1
        assert "restore of notes as it was at " in hg("log", "-r", "tip", "--template", "{desc}",
                                                       cwd=central)
    finally:
        a.stop(), b.stop()
    assert "Traceback" not in a.logtext() + b.logtext()
