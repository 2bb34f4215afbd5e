"""hgmerge.py (autosync-hgmerge): the Mercurial example's merge that keeps both
versions, run by hand on real Mercurial clones of one central repository."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from base import tree
from base import hg

pytestmark = pytest.mark.skipif(not shutil.which("hg"), reason="needs Mercurial (hg)")


def hgmerge(path, *args, env=None):
    return subprocess.run([sys.executable, "-m", "autosync.vcs.pull.hg"] + list(args), cwd=path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_mercurial_both_sides_pick_the_same_winner(tmp_path, central):
    """The winner depends on the changesets only, not on which machine merges; what is
    printed is read back by hgmerge.reported, one entry per conflict copy."""
    from autosync.vcs.pull import hg as module
    clones = []
    for name, text in (("x", b"from x\n"), ("y", b"from y\n")):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        with open(os.path.join(path, "f.txt"), "wb") as f:
            f.write(text)
        hg("add", "-q", "f.txt", cwd=path)
        hg("commit", "-q", "-m", "autosync on %s: 1 added" % name, cwd=path)
        clones.append(path)
    x, y = clones
    hg("pull", "-q", y, cwd=x)
    hg("pull", "-q", x, cwd=y)
    results = []
    for path in (x, y):
        done = hgmerge(path, "--host", "merger")
        assert done.returncode == 0, done.stderr
        made = module.reported(done.stdout)
        assert len(made) == 1 and made[0]["path"] == "f.txt"
        assert "conflict in f.txt" in done.stderr
        with open(os.path.join(path, "f.txt"), "rb") as f:
            results.append((f.read(), made[0]["host"]))
        assert hg("resolve", "-l", cwd=path) == "" and hg("status", cwd=path) == ""
        assert hg("log", "-r", ".", "-T", "{desc|firstline}", cwd=path) == \
            "autosync on merger: merged, 1 conflicts"
    assert results[0] == results[1]  # same content at the path, same host in the copy name
    # Nothing more to do: a second run changes nothing and prints nothing.
    again = hgmerge(x)
    assert again.returncode == 0 and again.stdout == ""


def test_mercurial_half_done_merge_is_finished(tmp_path, central):
    """A merge left with unresolved files (a crash) is finished by the next run."""
    clones = []
    for name in ("x", "y"):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        with open(os.path.join(path, "README"), "w") as f:
            f.write("changed on %s\n" % name)
        hg("commit", "-q", "-m", "autosync on %s: 1 modified" % name, cwd=path)
        clones.append(path)
    x, y = clones
    hg("pull", "-q", y, cwd=x)
    from autosync.vcs.pull.hg import MERGE
    merge = subprocess.run(("hg",) + MERGE, cwd=x,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert merge.returncode == 1  # unresolved: markers in README
    done = hgmerge(x)
    assert done.returncode == 0, done.stderr
    x_files = {p: c for p, c in tree(type("M", (), {"path": x})).items()}
    assert len(x_files) == 2 and all(b"<<<<<<<" not in c for c in x_files.values())
    assert hg("log", "-r", "p2()", "-T", "x", cwd=x) == "" and hg("resolve", "-l", cwd=x) == ""


def test_mercurial_update_refuses_to_merge_uncommitted_changes(tmp_path, central):
    """Behind the head with a local edit of a file the pull changed: no markers, exit 1
    (the daemon then commits the edit and pulls again, which merges)."""
    x, y = str(tmp_path / "x"), str(tmp_path / "y")
    hg("clone", "-q", central, x)
    hg("clone", "-q", central, y)
    with open(os.path.join(y, "README"), "w") as f:
        f.write("from y\n")
    hg("commit", "-q", "-m", "autosync on y: 1 modified", cwd=y)
    hg("push", "-q", cwd=y)
    with open(os.path.join(x, "README"), "w") as f:
        f.write("from x, not committed\n")
    hg("pull", "-q", cwd=x)
    assert hgmerge(x).returncode == 1
    with open(os.path.join(x, "README")) as f:
        assert f.read() == "from x, not committed\n"
    hg("commit", "-q", "-m", "autosync on x: 1 modified", cwd=x)
    done = hgmerge(x, "--host", "x")
    assert done.returncode == 0, done.stderr
    assert len(hgmerge_reported(done.stdout)) == 1


def hgmerge_reported(output):
    from autosync.vcs.pull.hg import reported
    return reported(output)


def test_mercurial_every_kind_of_conflict_keeps_both_versions(tmp_path, central):
    """Both sides changed while apart, in every way (edited on both, edited on one and
    removed on the other, added on both, a binary, a text changed in different places):
    the newer side's version stays at the path, the other beside it, a mergeable text is
    merged, and the merge is one commit that names each copy. (The daemons' part, pull
    then autosync-hgmerge, is tests/e2e/test_mercurial.py's.)"""
    import re
    import socket
    import time
    from helpers import every_kind_kept
    host = socket.gethostname()
    base = str(tmp_path / "base")
    hg("clone", "-q", central, base)
    start = {"notes.txt": b"base of notes\n", "gone-on-a.txt": b"base of gone-on-a\n",
             "gone-on-b.txt": b"base of gone-on-b\n", "pic.bin": b"\x89PNG\0base\xff",
             "merged.txt": b"one\ntwo\nthree\nfour\nfive\n"}
    for name, data in start.items():
        with open(os.path.join(base, name), "wb") as f:
            f.write(data)
    hg("add", "-q", cwd=base)
    hg("commit", "-q", "-m", "autosync on %s: 5 added" % host, cwd=base)
    hg("push", "-q", cwd=base)

    def side(name, edits, removed):
        path = str(tmp_path / name)
        hg("clone", "-q", central, path)
        for rel, data in edits.items():
            with open(os.path.join(path, rel), "wb") as f:
                f.write(data)
        os.unlink(os.path.join(path, removed))
        hg("addremove", "-q", cwd=path)
        hg("commit", "-q", "-m", "autosync on %s: changed" % host, cwd=path)
        return path

    # b's commit first, so that it is the older one.
    b = side("b", {"notes.txt": b"b's notes\n", "gone-on-a.txt": b"b changed this\n",
                   "new.txt": b"b made this\n", "pic.bin": b"\x89PNG\0from b\xfe",
                   "merged.txt": b"one\ntwo\nthree\nfour\nfive by b\n"}, "gone-on-b.txt")
    time.sleep(1.1)  # commit dates have one-second resolution
    a = side("a", {"notes.txt": b"a's notes\n", "gone-on-b.txt": b"a changed this\n",
                   "new.txt": b"a made this\n", "pic.bin": b"\x89PNG\0from a\xfd",
                   "merged.txt": b"one by a\ntwo\nthree\nfour\nfive\n"}, "gone-on-a.txt")
    hg("pull", "-q", b, cwd=a)
    done = hgmerge(a, "--host", host)
    assert done.returncode == 0, done.stderr
    files = tree(type("M", (), {"path": a}))
    every_kind_kept(files)
    assert files["merged.txt"] == b"one by a\ntwo\nthree\nfour\nfive by b\n"
    assert len(files) == 10  # README + 6 files + 3 copies: no .orig, nothing else
    assert hg("status", cwd=a) == "" and hg("resolve", "-l", cwd=a) == ""
    assert hg("heads", "-T", "x", cwd=a) == "x"
    tip = {f: subprocess.run(["hg", "cat", "-r", ".", "path:" + f], cwd=a, check=True,
                             stdout=subprocess.PIPE).stdout
           for f in hg("files", "-r", ".", cwd=a).splitlines()}
    assert tip == files  # committed as it is on disk
    assert not re.search(r"^(<<<<<<<|>>>>>>>)", hg("log", "-p", "--git", cwd=a), re.M)
    message = hg("log", "-r", ".", "-T", "{desc}", cwd=a)
    assert message.startswith("autosync on %s: merged, 3 conflicts" % host)
    assert sorted(message.splitlines()[2:]) == sorted(
        "conflict: %s (other version kept as %s)" % (p.split(" (")[0] + os.path.splitext(p)[1], p)
        for p in files if "(conflict from" in p)


def test_the_working_copy_is_found_from_a_folder_inside_it_as_hg_root_finds_it(tmp_path):
    from autosync.vcs.pull import hg as module
    root = tmp_path / "wc"
    (root / ".hg").mkdir(parents=True)
    (root / "a" / "b").mkdir(parents=True)
    assert module.working_copy_root(str(root / "a" / "b")) == os.path.realpath(root)
    assert module.working_copy_root(str(root)) == os.path.realpath(root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises(module.Failed, match="no Mercurial working copy"):
        module.working_copy_root(str(outside))
    done = hgmerge(str(outside))
    assert done.returncode == 1 and done.stderr.startswith("autosync-hgmerge: no Mercurial")


def test_mercurial_newer_is_the_side_that_changed_the_path_last(tmp_path, central):
    """The winner is the side whose last commit changing the path is newer, not the side
    with the newest commit: a changed X, then b changed X, then a changed only Y: b's X
    stays at the path. (hg reads `listfile0:/dev/stdin` once per matcher it builds, and
    `hg log` builds two: the second found no pattern and matched every file.)"""
    import time
    base = str(tmp_path / "base")
    hg("clone", "-q", central, base)
    for name in ("X.txt", "Y.txt"):
        with open(os.path.join(base, name), "w") as f:
            f.write("base\n")
    hg("add", "-q", cwd=base)
    hg("commit", "-q", "-m", "autosync on base: 2 added", cwd=base)
    hg("push", "-q", cwd=base)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for path, name, text in ((a, "X.txt", "a's X\n"), (b, "X.txt", "b's X\n"),
                             (a, "Y.txt", "a's Y\n")):
        if not os.path.exists(path):
            hg("clone", "-q", central, path)
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
        hg("commit", "-q", "-m", "autosync on %s: 1 modified" % os.path.basename(path), cwd=path)
        time.sleep(1.1)  # commit dates have one-second resolution
    hg("pull", "-q", b, cwd=a)
    done = hgmerge(a, "--host", "a")
    assert done.returncode == 0, done.stderr
    made = hgmerge_reported(done.stdout)
    assert [(c["path"], c["host"]) for c in made] == [("X.txt", "a")]
    files = tree(type("M", (), {"path": a}))
    assert files["X.txt"] == b"b's X\n" and files[made[0]["copy"]] == b"a's X\n"
    assert files["Y.txt"] == b"a's Y\n"


# --- the number of hg runs does not grow with the number of conflicting files ---------------

# An `hg` first on PATH that writes down its arguments (one JSON list a line) and becomes
# the real hg: nothing of the arguments goes through a shell.
COUNTING_HG = """#!%(python)s
import json, os, sys
with open(%(log)r, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
os.execv(%(hg)r, [%(hg)r] + sys.argv[1:])
"""

# Names hg is given only as `path:` patterns on stdin, and that hg cat -o's file name
# template (%p) must not expand: spaces, quotes, a leading dash, non-ASCII, % and {}.
HOSTILE = ["with space.txt", "it's \"quoted\".txt", "-leading dash.txt", "ünïcödé.txt",
           "100% {node} %p.txt", "glob:*.txt", "sub dir/-x.bin"]


def counting_hg(tmp_path, tag):
    """-> (an environment with COUNTING_HG first on PATH, a function that answers the hg
    runs so far, each its arguments)."""
    wrapper = tmp_path / (tag + "-bin")
    wrapper.mkdir()
    log = str(tmp_path / (tag + "-hg-runs"))
    with open(str(wrapper / "hg"), "w") as f:
        f.write(COUNTING_HG % {"python": sys.executable, "log": log, "hg": shutil.which("hg")})
    os.chmod(str(wrapper / "hg"), 0o755)

    def runs():
        if not os.path.exists(log):
            return []
        with open(log) as f:
            return [json.loads(line) for line in f]
    return dict(os.environ, PATH=str(wrapper) + os.pathsep + os.environ["PATH"]), runs


def test_mercurial_a_pull_without_a_merge_costs_three_hg_runs_or_one(tmp_path, central):
    """A pull that only moves the working copy forward: 3 hg runs (what the parents and
    heads are, which is the other's ancestor, update), before 5; a pull that brought
    nothing: 1, before 2."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    hg("clone", "-q", central, a)
    hg("clone", "-q", central, b)
    with open(os.path.join(b, "new.txt"), "w") as f:
        f.write("from b\n")
    hg("add", "-q", "new.txt", cwd=b)
    hg("commit", "-q", "-m", "autosync on b: 1 added", cwd=b)
    hg("push", "-q", cwd=b)
    hg("pull", "-q", cwd=a)
    env, runs = counting_hg(tmp_path, "pull")
    done = hgmerge(a, env=env)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert [r[2] for r in runs()] == ["log", "log", "update"]
    with open(os.path.join(a, "new.txt")) as f:
        assert f.read() == "from b\n"
    assert hg("log", "-r", ".", "-T", "{node}", cwd=a) == hg("log", "-r", "tip", "-T", "{node}",
                                                            cwd=b)
    done = hgmerge(a, env=env)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert len(runs()) == 3 + 1


def snapshot(folder):
    """{path: ("link", target) or (content, executable)} of a folder without .hg."""
    found = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != ".hg"]
        for name in files:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, folder)
            if os.path.islink(full):
                found[rel] = ("link", os.readlink(full))
            else:
                with open(full, "rb") as f:
                    found[rel] = (f.read(), bool(os.stat(full).st_mode & 0o100))
    return found


def counted_merge(tmp_path, central, tag, names, other_kinds):
    """Both sides change every one of names (b first, so a's versions are newer); with
    other_kinds, also a symlink and an executable changed on both, a file b deleted and a
    changed, and a file a renamed and changed and b changed. a pulls b and runs
    autosync-hgmerge through a counting hg -> (its hg runs, a's files, what was made:
    {path: (a's version, b's version or None)})."""
    import time
    host = "merger"
    base = str(tmp_path / (tag + "-base"))
    hg("clone", "-q", central, base)
    names = [tag + "/" + n for n in names]
    extra = {"link": tag + "/link", "exe": tag + "/run me.sh", "gone": tag + "/gone.txt",
             "old": tag + "/old name.txt", "new": tag + "/new name.txt"}

    def write(folder, rel, data, mode=0o644):
        full = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        os.chmod(full, mode)

    def link(folder, rel, target):
        full = os.path.join(folder, rel)
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(target, full)

    for n in names:
        write(base, n, b"base of %s\n" % n.encode())
    if other_kinds:
        link(base, extra["link"], "target of base")
        write(base, extra["exe"], b"#!/bin/sh\necho base\n", 0o755)
        write(base, extra["gone"], b"base of gone\n")
        write(base, extra["old"], b"base of the renamed\n")
    hg("addremove", "-q", cwd=base)
    hg("commit", "-q", "-m", "autosync on base: added", cwd=base)
    hg("push", "-q", cwd=base)

    def side(who):
        path = str(tmp_path / (tag + "-" + who))
        hg("clone", "-q", central, path)
        for n in names:  # binary on both sides for the .bin, text for the others
            write(path, n, b"%s's %s\n" % (who.encode(), n.encode())
                  + (b"\0\xff" if n.endswith(".bin") else b""))
        if other_kinds:
            link(path, extra["link"], "target of " + who)
            write(path, extra["exe"], b"#!/bin/sh\necho %s\n" % who.encode(), 0o755)
            if who == "b":
                os.unlink(os.path.join(path, extra["gone"]))
                write(path, extra["old"], b"b changed the renamed\n")
            else:
                write(path, extra["gone"], b"a changed gone\n")
                hg("mv", "-q", extra["old"], extra["new"], cwd=path)
                write(path, extra["new"], b"a renamed and changed this\n")
        hg("addremove", "-q", cwd=path)
        hg("commit", "-q", "-m", "autosync on %s: changed" % who, cwd=path)
        return path

    b = side("b")
    time.sleep(1.1)  # commit dates have one-second resolution: a's are newer
    a = side("a")
    hg("pull", "-q", b, cwd=a)

    env, hg_runs = counting_hg(tmp_path, tag)
    done = hgmerge(a, "--host", host, env=env)
    assert done.returncode == 0, done.stderr
    runs = hg_runs()

    made = {n: ((b"a's %s\n" % n.encode(), False), (b"b's %s\n" % n.encode(), False))
            for n in names}
    for n in names:
        if n.endswith(".bin"):
            made[n] = tuple((v[0] + b"\0\xff", False) for v in made[n])
    if other_kinds:
        made[extra["link"]] = (("link", "target of a"), ("link", "target of b"))
        made[extra["exe"]] = ((b"#!/bin/sh\necho a\n", True), (b"#!/bin/sh\necho b\n", True))
        made[extra["gone"]] = ((b"a changed gone\n", False), None)
        made[extra["new"]] = ((b"a renamed and changed this\n", False),
                              (b"b changed the renamed\n", False))
    return runs, a, made


def test_mercurial_hg_runs_do_not_grow_with_the_conflicting_files(tmp_path, central):
    """One conflicting file, then 12 of every kind with hostile names: the second merge
    runs hg twice more (the lookups of a rename and a deletion, once for all), not 8
    times a file; every version is kept byte for byte, and no file name is on an hg
    command line."""
    import re
    from helpers import STAMP
    one_runs, one, _ = counted_merge(tmp_path, central, "one", ["notes.txt"], False)
    many_runs, many, made = counted_merge(tmp_path, central, "many", HOSTILE + ["notes.txt"],
                                          True)
    assert len(made) == 12
    # The same runs for 12 files as for one, and 2 more: `status` and `files` on b's side,
    # which has neither the renamed file's new name nor the file it deleted (at most 2 a
    # side: 4). Before, 8 runs a file: 19 and 107; now 14 and 16.
    assert len(many_runs) == len(one_runs) + 2, (len(one_runs), len(many_runs))
    assert len(one_runs) <= 14, one_runs
    for runs in (one_runs, many_runs):  # each side's versions written by one hg cat
        assert sum(1 for r in runs if "cat" in r) == 2
    said = "\n".join(" ".join(r) for r in many_runs)
    assert not [n for n in made if n in said]

    files = snapshot(many)
    for path, (newer, older) in made.items():
        assert files.pop(path) == newer, path
        if older is None:
            continue
        stem, ext = os.path.splitext(path)
        copy = re.compile(re.escape(stem) + r" \(conflict from b %s\)" % STAMP
                          + re.escape(ext) + "$")
        found = [p for p in files if copy.match(p)]
        assert len(found) == 1, (path, found)
        assert files.pop(found[0]) == older, path
    assert set(files) == {"README", "one/notes.txt"}  # nothing else: no .orig, no old name
    assert hg("status", cwd=many) == "" and hg("resolve", "-l", cwd=many) == ""
    message = hg("log", "-r", ".", "-T", "{desc}", cwd=many)
    assert message.startswith("autosync on merger: merged, 11 conflicts")
    assert len(message.splitlines()) == 2 + 11
    assert not [n for n in os.listdir(os.path.join(many, ".hg")) if "autosync" in n]
