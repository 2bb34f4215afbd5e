"""A folder of 2,000 files renamed on A until B has the move done (`--only move`).

Issue 32, item 1: a big move lands as a move. On B a poller lists the old and the new
folder back to back (every 10 ms) during the whole move and counts the polls in which a
file was under neither name. Beside bare git (mv, add -A, commit, push; the other
clone's pull, polled the same way) and Syncthing (the rename in A's folder). Ours at
the shipped command strings, and at the original dvcs-autosync's (its two-line
`movecmd`, which drop-in users keep; tests/data/original-autosync-example).
"""
import os
import threading
import time

from .common import (PROFILES, ROOT, SyncthingPair, git, make_remote, median, peer_cells,
                     row, secs, start_pair, wait_for)

FILES = 2_000
PER_FOLDER = 100
TRIALS = 3
POLL = 0.01
LIMIT = 300
ORIGINAL = os.path.join(ROOT, "tests", "data", "original-autosync-example")


def original_dvcs():
    """The original example's [dvcs] section, as it is written there."""
    with open(ORIGINAL) as f:
        text = f.read()
    return text[text.index("[dvcs]"):text.index("[xmpp]")]


def make_folder(root, top, tag):
    """FILES small files under root/top, PER_FOLDER to a subfolder; their relative names."""
    names = []
    for n in range(FILES):
        rel = "d%02d/f%04d.txt" % (n // PER_FOLDER, n)
        path = os.path.join(root, top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("%s file %d\n" % (tag, n))
        names.append(rel)
    return names


def present(root, top):
    """The relative names of the files under root/top now (a listing per subfolder)."""
    found = set()
    try:
        subs = os.listdir(os.path.join(root, top))
    except OSError:
        return found
    for sub in subs:
        try:
            found.update(sub + "/" + n for n in os.listdir(os.path.join(root, top, sub))
                         if not n.startswith("."))
        except OSError:
            pass
    return found


class Watch:
    """Polls root for the old and the new folder until stopped: polls, and those in which
    some file was under neither name (and the longest run of them, in seconds)."""

    def __init__(self, root, old, new, names):
        self.root, self.old, self.new, self.names = root, old, new, set(names)
        self.polls = self.absent = 0
        self.longest = 0.0
        self.stopped = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        since = None
        while not self.stopped:
            now = time.monotonic()
            # the old folder first: a file renamed between the two listings is in both
            # (a false "under neither name" would need the other order)
            seen = present(self.root, self.old)
            seen |= present(self.root, self.new)
            self.polls += 1
            if self.names - seen:
                self.absent += 1
                since = now if since is None else since
                self.longest = max(self.longest, time.monotonic() - since)
            else:
                since = None
            time.sleep(POLL)

    def stop(self):
        self.stopped = True
        self.thread.join(10)


def moved(root, old, new):
    return not os.path.exists(os.path.join(root, old)) and len(present(root, new)) == FILES


def move(run, sizes):
    """The folder renamed on A until B has every file under the new name and none under
    the old, at the shipped command strings and the original's, beside bare git and
    Syncthing (fsWatcherDelayS 1); the polls on B with a file under neither name."""
    defaults = PROFILES["defaults"]
    sides = {"shipped": {"done": [], "absent": [], "polls": [], "longest": []},
             "original": {"done": [], "absent": [], "polls": [], "longest": []},
             "floor": {"done": [], "absent": [], "polls": [], "longest": []},
             "st1": {"done": [], "absent": [], "polls": [], "longest": []}}
    pairs = {}
    for name in ("shipped", "original"):
        remote = make_remote(os.path.join(run.base, "move-%s.git" % name))

        def prepare(machine, name=name):
            if name == "original":
                with open(machine.config, "a") as f:
                    f.write(original_dvcs())
        pairs[name] = start_pair(run, "move-" + name, remote, defaults, prepare=prepare)
    floor_remote = make_remote(os.path.join(run.base, "move-floor.git"))
    floor = [os.path.join(run.base, "move-floor-" + n) for n in ("a", "b")]
    for clone in floor:
        git("clone", "-q", floor_remote, clone)
    st = None
    if run.peers:
        try:
            st = SyncthingPair(run, "move", 1)
        except Exception as e:  # ours still count
            print("  ! Syncthing failed: %s" % e)

    def record(side, watch, started, ended):
        watch.stop()
        if ended is None:
            print("  ! %s: not moved on B within %d s" % (side, LIMIT))
            return
        sides[side]["done"].append(ended - started)
        sides[side]["absent"].append(watch.absent)
        sides[side]["polls"].append(watch.polls)
        sides[side]["longest"].append(watch.longest)

    def ours(side, i):
        a, b = pairs[side]
        old, new = "m%d-old" % i, "m%d-new" % i
        names = make_folder(a.path, old, "%s %d" % (side, i))
        if not wait_for(lambda: len(present(b.path, old)) == FILES and a.settled() and
                        b.settled(), LIMIT, 0.05):
            print("  ! %s: the folder did not reach B within %d s" % (side, LIMIT))
            return
        watch = Watch(b.path, old, new, names)
        started = time.monotonic()
        os.rename(os.path.join(a.path, old), os.path.join(a.path, new))
        ended = time.monotonic() if wait_for(lambda: moved(b.path, old, new), LIMIT,
                                             0.005) else None
        record(side, watch, started, ended)
        wait_for(lambda: a.settled() and b.settled(), 60, 0.1)

    def bare(i):
        old, new = "m%d-old" % i, "m%d-new" % i
        names = make_folder(floor[0], old, "floor %d" % i)
        git("add", "-A", cwd=floor[0])
        git("commit", "-q", "-m", "folder", cwd=floor[0])
        git("push", "-q", cwd=floor[0])
        git("pull", "-q", "--no-rebase", cwd=floor[1])
        watch = Watch(floor[1], old, new, names)
        started = time.monotonic()
        os.rename(os.path.join(floor[0], old), os.path.join(floor[0], new))
        git("add", "-A", cwd=floor[0])
        git("commit", "-q", "-m", "move", cwd=floor[0])
        git("push", "-q", cwd=floor[0])
        git("pull", "-q", "--no-rebase", cwd=floor[1])
        record("floor", watch, started, time.monotonic() if moved(floor[1], old, new)
               else None)

    def syncthing(i):
        old, new = "m%d-old" % i, "m%d-new" % i
        names = make_folder(st.a.folder, old, "syncthing %d" % i)
        if not wait_for(lambda: len(present(st.b.folder, old)) == FILES, LIMIT, 0.05):
            print("  ! Syncthing: the folder did not reach B within %d s" % LIMIT)
            return
        wait_for(st.idle, 60, 0.1)
        watch = Watch(st.b.folder, old, new, names)
        started = time.monotonic()
        os.rename(os.path.join(st.a.folder, old), os.path.join(st.a.folder, new))
        ended = time.monotonic() if wait_for(lambda: moved(st.b.folder, old, new), LIMIT,
                                             0.005) else None
        record("st1", watch, started, ended)
        wait_for(st.idle, 60, 0.1)

    steps = [("shipped", lambda i: ours("shipped", i)), ("original", lambda i: ours("original", i)),
             ("floor", bare)] + ([("st1", syncthing)] if st else [])
    for i in range(TRIALS):
        order = steps[i % len(steps):] + steps[:i % len(steps)]  # each goes first in turn
        for name, step in order:
            print("  trial %d: %s ..." % (i, name), flush=True)
            step(i)
            print("    %s: %s, %s polls of %s with a file under neither name" % (
                name, secs(sides[name]["done"][-1]) if len(sides[name]["done"]) > i else "-",
                sides[name]["absent"][-1] if len(sides[name]["absent"]) > i else "-",
                sides[name]["polls"][-1] if len(sides[name]["polls"]) > i else "-"), flush=True)
    for a, b in pairs.values():
        run.stop(a, b)
    if st:
        st.stop()

    rows = []
    floor_done = median(sides["floor"]["done"])
    peers = {1: sides["st1"]["done"]} if st else {}
    label = "move of a folder of %d files, defaults (%s), %s command strings: the mv until " \
            "done on B: median"
    for name, words in (("shipped", "the shipped"), ("original", "the original's")):
        side = sides[name]
        mine = median(side["done"])
        ratio = mine / floor_done if mine and floor_done else None
        rows.append(row(label % (FILES, "on close/0/10 s", words), secs(mine), secs(floor_done),
                        "<= 2x bare git", ratio is not None and ratio <= 2,
                        "%.2fx bare git; %d trials" % (ratio, len(side["done"]))
                        if ratio else "", **peer_cells(peers, mine)))
        absent = sum(side["absent"])
        rows.append(row("  polls on B (every 10 ms) with a file under neither name, %s "
                        "command strings: of all trials" % words,
                        "%d of %d" % (absent, sum(side["polls"])),
                        "%d of %d" % (sum(sides["floor"]["absent"]),
                                      sum(sides["floor"]["polls"])),
                        "0", absent == 0 and bool(side["polls"]),
                        "longest %s (bare git %s, Syncthing %s)" % (
                            secs(max(side["longest"] or [0])),
                            secs(max(sides["floor"]["longest"] or [0])),
                            secs(max(sides["st1"]["longest"] or [0])) if st else "-"),
                        st1="%d of %d" % (sum(sides["st1"]["absent"]),
                                          sum(sides["st1"]["polls"])) if st else ""))
    return rows
