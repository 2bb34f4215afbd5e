"""No file name and no user text on any command line (issue 18, item 6).

Every local user can read every process's /proc/PID/cmdline. A separate
process reads all of them, as fast as it can, while the real suite on two
machines adds, modifies, moves, removes, merges a conflict, restores and
describes files with unmistakable names; none of them may appear. A process
that lives a few milliseconds (git commit-tree) can slip between two looks, so
`git` and `hg` are also wrapped on PATH by a script that records every command
line they are given: that record is complete."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from base import wait_until
from base import hg


SECRET = "secret-salary-2026"   # in every file and folder name
TEXT = "Zebra-bonus-payroll"    # the description

# Reads every /proc/*/cmdline until its stdin closes; prints "PID\tCMDLINE" (repr) per
# new sighting of the marks, then "sweeps N" so the test knows it looked often enough.
SPY = r"""
import os, sys, threading
marks = [m.encode() for m in os.environ["SPY_MARKS"].split()]   # not in our own argv
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
seen, sweeps = set(), 0
while not stop.is_set():
    sweeps += 1
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                line = f.read()
        except OSError:
            continue
        if any(m in line for m in marks) and (pid, line) not in seen and ours(pid):
            seen.add((pid, line))
            print("%s\t%r" % (pid, line), flush=True)
print("sweeps %d" % sweeps, flush=True)
"""
# Only the test's own processes count (another test run beside it, by another pytest
# worker, may use the same marks): those below the test's process, or gone before their
# parents could be read (counted, to be safe).
SPY = SPY.replace("while not stop", """def ours(pid):
    root = os.environ["SPY_ROOT"]
    while pid not in ("0", "1"):
        if pid == root:
            return True
        try:
            with open("/proc/%s/stat" % pid) as f:
                pid = f.read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            return True
    return False
while not stop""", 1)


class Spy:
    """The reader process. `mine`: the command lines the test itself ran (the user's own
    `dvcs-autosync restore PATH`), which their forked children carry too until they exec."""

    def __init__(self, *marks):
        self.proc = subprocess.Popen([sys.executable, "-c", SPY], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, SPY_MARKS=" ".join(marks),
                                              SPY_ROOT=str(os.getpid())))
        self.mine = set()

    def run(self, argv, input=None):
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.mine.add(repr(b"".join(os.fsencode(a) + b"\0" for a in argv)))
        out, err = proc.communicate(input, timeout=60)
        assert proc.returncode == 0, (argv, out, err)
        return out

    def finish(self):
        """-> ([(pid, cmdline)] seen in processes the suite started, sweeps made)."""
        out, _ = self.proc.communicate("", timeout=30)
        lines = out.splitlines()
        sweeps = int(lines[-1].split()[1])
        hits = [tuple(l.split("\t", 1)) for l in lines[:-1]]
        return [(pid, line) for pid, line in hits if line not in self.mine], sweeps


WRAPPER = """#!/bin/sh
# Records this command line (NUL-ended arguments, then a newline), then runs the real one.
printf '%%s\\0' "$0" "$@" >> %(log)s
printf '\\n' >> %(log)s
exec %(real)s "$@"
"""


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """-> a function giving every git and hg command line run since, as bytes."""
    folder = tmp_path / "wrapped"
    folder.mkdir()
    log = folder / "argv.log"
    log.write_bytes(b"")
    for name in ("git", "hg"):
        real = shutil.which(name)
        if real:
            wrapper = folder / name
            wrapper.write_text(WRAPPER % {"log": log, "real": real})
            wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", "%s%s%s" % (folder, os.pathsep, os.environ["PATH"]))
    return log.read_bytes


def assert_private(spy, recorded):
    leaks, sweeps = spy.finish()
    assert sweeps > 10, "the reader looked too seldom to mean anything"
    assert leaks == [], "\n".join("%s: %s" % hit for hit in leaks)
    lines = recorded().split(b"\n")
    assert len(lines) > 20   # the wrappers did run
    marks = [m.encode() for m in (SECRET, TEXT)]
    assert [l for l in lines if any(m in l for m in marks)] == []


def write(machine, rel, text):
    full = os.path.join(machine.path, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def settle(machine, remote):
    wait_until(lambda: machine.settled(remote), 30, 0.05, "%s to settle" % machine.name)


def test_no_file_name_or_text_on_any_command_line(recorded, machines, remote, commands):
    a, b = machines("a", "b", dvcs=commands, pushdelay="0")
    spy = Spy(SECRET, TEXT)
    old = "%s-1.txt" % SECRET
    new = "%s-2.txt" % SECRET
    folder = "%s-folder" % SECRET

    write(a, old, "pay\n")                              # added
    settle(a, remote)
    write(a, old, "more pay\n")                         # modified
    settle(a, remote)
    os.rename(os.path.join(a.path, old), os.path.join(a.path, new))   # moved
    write(a, folder + "/%s-3.txt" % SECRET, "three\n")
    settle(a, remote)
    os.rename(os.path.join(a.path, folder), os.path.join(a.path, folder + "-moved"))
    settle(a, remote)
    os.unlink(os.path.join(a.path, new))                 # removed
    settle(a, remote)
    # restored: log, list and the file's content at an old revision
    spy.run([sys.executable, "-m", "autosync.supervisor", "restore",
             os.path.join(a.path, new), "--config", a.config])
    settle(a, remote)
    assert a.read(new) == b"more pay\n"

    # merged: both machines change one file while apart; b's push is refused, its pull
    # keeps both versions (a merge commit naming the file and its conflict copy)
    b.notify("pull")
    write(a, new, "a's pay\n")
    settle(a, remote)
    write(b, new, "b's pay\n")
    settle(b, remote)
    assert any("conflict" in n and SECRET in n for n in os.listdir(b.path))

    # described: the text, given on stdin, reworded onto the last commit, not pushed
    # yet (amendcmd); the next commit's message (commitcmd) is checked above
    a.settings["pushdelay"] = "30"
    a.write_config()
    a.stop()
    a.start()
    write(a, "%s-4.txt" % SECRET, "four\n")
    wait_until(lambda: (a.status().get("unpushed") or 0) > 0, 20, what="a's commit")
    out = spy.run([sys.executable, "-m", "autosync.tools.notify", "--config", a.config,
                   "describe", "-"], input=TEXT)
    assert out.startswith("described the last commit"), out
    a.notify("sync")
    assert TEXT in remote.log("-1", "--format=%s")

    time.sleep(0.2)
    assert_private(spy, recorded)
    assert b"commit-tree" in recorded()   # the merge was made


@pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")
def test_autosync_hgmerge_keeps_names_off_command_lines(tmp_path, central, recorded):
    """autosync-hgmerge looks at, writes, adds and resolves a file changed on two clones,
    and commits a message naming it and its conflict copy: all through stdin."""
    clones = []
    for name in ("x", "y"):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        with open(os.path.join(path, SECRET + ".txt"), "w") as f:
            f.write("from %s\n" % name)
        hg("add", "-q", "-I", "glob:*", cwd=path)   # by pattern: no name on our command line
        hg("commit", "-q", "-m", "autosync on %s: 1 added" % name, cwd=path)
        clones.append(path)
    x, y = clones
    hg("pull", "-q", y, cwd=x)
    spy = Spy(SECRET)
    spy.run([sys.executable, "-m", "autosync.vcs.pull.hg", "--host", "merger", x])
    assert len([n for n in os.listdir(x) if n.startswith(SECRET)]) == 2   # it merged
    assert_private(spy, recorded)
