#!/usr/bin/env python3
"""docs/benchmark.md, the table of current figures, made from the stored runs.

    python3 tests/benchmarks/table.py [--results DIR] [--out FILE]
    python3 tests/benchmark.py --table          (the same)

For each block of rows (results.py), the newest run that made it; blocks no run has
made again keep their run's date. Shown: every block's first row, and the indented
rows that have an aim (commits made, failed pulls, ...); the rest stays in the JSON.
"""
import argparse
import os
import sys

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import results  # noqa: E402

PAGE = os.path.join(results.ROOT, "docs", "benchmark.md")
ORDER = ("propagation", "burst", "move", "machines", "slowwriter", "scale", "onechange",
         "home", "bigfile", "annex", "annexscan", "idle")
LIMIT = 150  # lines: the page is a table, the journal holds the rest

WHAT = """\
* propagation: a small file written on A until B has it (XMPP, and over ssh where sshd is
  installed); bare git: write, add, commit, push, pull in a second clone.
* burst: 10,000 small files untarred into A until B has them all.
* move: a folder of 2,000 files renamed on A until B has the move done; B polled every
  10 ms for a file under neither name; the shipped and the original's command strings.
* machines: 8 machines on one account: a change on one until all 7 others have it.
* slowwriter: a file written over 15 s: was a half-written version pushed before maxwait?
* scale: start-up, memory and idle CPU on a 100,000-file tree; a thin machine's disk.
* onechange: one file changed in a committed tree of N files until B has it.
* home: a home folder's scale: start, memory, idle CPU, a rescan, a resume, a burst.
* bigfile: a new 1 GB file, and a 1 MB edit inside a 50 MB file, until B has it; plain git,
  and largefiles (git-annex) over a path remote, over ssh (and with git-annex's own ssh), and
  with git-annex's default key.
* annex: a 200 MB file saved 10 times with largefiles (git-annex): the disk of each machine
  and of the remote after the sync and after expire (tests/benchmarks/annex.py, standalone).
* annexscan: largefiles (git-annex) in a tree of 10,000 and 100,000 small files: one small
  change, the push and pull commands beside bare git's push and pull.
* idle: CPU of the whole suite over an idle minute."""

HOW = """\
```
export PYTHONPATH=$PWD                       # from the checkout's root
python3 tests/benchmark.py --only burst      # a run: prints its table and stores its
                                             # figures in tests/benchmarks/results/
python3 tests/benchmark.py --table           # rewrites this page from every stored run
git add tests/benchmarks/results docs/benchmark.md
```

A block of rows (a measurement's row and its indented rows) is replaced only by a newer
run that made the same row; the key is its label without the delays in brackets. A row
nobody measured again keeps its date; a row the code no longer makes stays until its
results file is removed. `--results FILE` stores a run elsewhere (a trial that should not
reach this page). Runs marked *carried over* were copied by hand from the journal when
this page was made; their figures are as the journal gives them."""


def current(runs):
    """[(measurement, [(run, block rows)])], the newest run's block for each key."""
    chosen = {}
    for number, run in enumerate(runs):  # oldest first: a newer run replaces the block
        for k, rows in results.blocks(run["rows"]):
            chosen[rows[0]["measurement"], k] = (number, rows)
    by_measurement = {}
    for (measurement, k), (number, rows) in chosen.items():
        by_measurement.setdefault(measurement, []).append((number, k, rows))
    known = [m for m in ORDER if m in by_measurement]
    out = []
    for measurement in known + sorted(set(by_measurement) - set(known)):
        entries = by_measurement[measurement]
        # In the order of the newest run that made any of them, then the older runs'.
        position = {}
        for number in sorted({n for n, _, _ in entries}, reverse=True):
            for i, (k, _) in enumerate(results.blocks(runs[number]["rows"])):
                position.setdefault(k, (len(position), i))
        entries.sort(key=lambda e: position[e[1]])
        out.append((measurement, [(runs[n], rows) for n, _, rows in entries]))
    return out


def cell(text):
    return str(text if text is not None else "").replace("|", "\\|").strip()


def load_text(run):
    machine = run["run"].get("machine", {})
    if run["run"].get("load"):
        return run["run"]["load"]
    start, end = machine.get("load_start"), machine.get("load_end")
    if start and end:
        return "%.1f-%.1f" % (start[0], end[0]) if start[0] != end[0] else "%.1f" % start[0]
    return "not recorded"


def render(runs):
    """The page's text."""
    table = current(runs)
    used = sorted({id(run): run for _, blocks in table for run, _ in blocks}.values(),
                  key=results.when)
    number = {id(run): i + 1 for i, run in enumerate(used)}
    shown = {True: "yes", False: "**no**", None: ""}
    lines = ["# Benchmark: the current figures", "",
             "Made by `tests/benchmark.py --table` from the runs stored in",
             "`tests/benchmarks/results/` (how: at the end); do not edit it by hand. Each row",
             "is a measurement's latest figures: ours (`tests/benchmark.py` runs the real suite",
             "on real clones), bare git doing the same work by hand (the floor), Syncthing",
             "(two instances on 127.0.0.1, `fsWatcherDelayS` 1 / 10) where it ran, the aim and",
             "whether it was met, and the run's date and machine. The machine is shared and",
             "noisy: compare figures of one run, not across runs. How each figure is measured,",
             "and the dated findings behind them: [the journal](../tests/benchmarks/JOURNAL.md).",
             "", "| measurement | autosync | bare git | Syncthing 1 s / 10 s | aim | met | note "
             "| date (run) | machine |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, blocks in table:
        for run, rows in blocks:
            info = run["run"]
            when = "%s (%d)" % (info.get("started", "?")[:10], number[id(run)])
            machine = "%s cores, load %s" % (info.get("machine", {}).get("cores", "?"),
                                             load_text(run))
            for i, r in enumerate(rows):
                if i and not (r.get("aim") or r.get("st1") or r.get("st10")):
                    continue
                name = r["name"].strip() if not i else r["name"]
                peers = " / ".join(cell(r.get(k)) or "-" for k in ("st1", "st10")) \
                    if r.get("st1") or r.get("st10") else ""
                lines.append("| " + " | ".join([
                    cell(name) if not i else "&nbsp;&nbsp;" + cell(name), cell(r.get("ours")),
                    cell(r.get("floor")), peers, cell(r.get("aim")), shown[r.get("met")],
                    cell(r.get("note")), when, machine]) + " |")
    lines += ["", "## Runs", ""]
    for run in used:
        info = run["run"]
        machine = info.get("machine", {})
        when = info.get("when") or "%s to %s UTC" % (
            info.get("started", "?")[:16].replace("T", " "), info.get("finished", "?")[11:16])
        text = "%d. %s, commit %s: `%s`; %s%s cores, load %s; git %s" % (
            number[id(run)], when, info.get("commit", "?"), info.get("command", "?"),
            machine["platform"] + ", " if machine.get("platform") else "",
            machine.get("cores", "?"), load_text(run), info.get("git", "?"))
        if info.get("syncthing"):
            text += "; Syncthing %s" % info["syncthing"]
        if info.get("carried_over"):
            text += "; *carried over* from %s" % info["carried_over"]
        lines.append(text + " (`%s`)." % run["file"])
    lines += ["", "## What each measurement is", "", WHAT, "", "## How to update it", "", HOW]
    return "\n".join(lines) + "\n"


def write(out=PAGE, folder=results.RESULTS):
    runs = results.load(folder)
    if not runs:
        raise SystemExit("no stored runs in %s" % folder)
    text = render(runs)
    with open(out, "w") as f:
        f.write(text)
    count = text.count("\n")
    print("%s: %d lines from %d runs" % (os.path.relpath(out), count, len(runs)))
    if count > LIMIT:
        print("  ! more than %d lines: the page is meant to be read at a glance" % LIMIT)
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", default=results.RESULTS, metavar="DIR",
                   help="the stored runs (default: tests/benchmarks/results)")
    p.add_argument("--out", default=PAGE, metavar="FILE", help="default: docs/benchmark.md")
    args = p.parse_args(argv)
    write(args.out, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
