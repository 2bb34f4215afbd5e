"""A run's figures, stored: one JSON file per run in tests/benchmarks/results/, which
table.py turns into docs/benchmark.md.

A file holds {"run": {...}, "rows": [...]}. "run" says when, where and how: started and
finished (UTC, ISO 8601), the command, the commit of the checkout, the machine (platform,
cores, the load average at the start and the end), the versions of git, prosody and
Syncthing; a run copied by hand from the journal says where from in "carried_over" (its
load as the journal gave it, in "load"). Each row is the table's row as the run printed
it (strings, as shown: "111 ms", "1.06x bare git"), with its measurement's name and
"met" true, false or null.

Rows come in blocks: a row whose label does not start with a space, and the indented
rows after it (its percentiles, phases, commits). A block's key is its first row's label
without the delays in brackets ("propagation, defaults (on close/0/10 s): median" ->
"propagation, defaults: median"), so a change of the shipped delays does not leave the
old row beside the new one. The newest run that made a block wins it, whole.
"""
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ROOT = os.path.dirname(os.path.dirname(HERE))

DELAYS = re.compile(r" \([^()]*/[^()]* s\)")  # describe()'s "(on close/0/10 s)"
FIELDS = ("name", "ours", "floor", "st1", "st10", "ratio", "aim", "met", "note")


def when(run):
    """A run's place in time, to sort by; a start given as a date only (a run copied from
    the journal, whose hour was not written down) counts as the end of that day."""
    started = run["run"].get("started", "")
    return started if "T" in started else started + "T~"


def key(name):
    """The label a row is known by from run to run: without the delays in brackets."""
    return DELAYS.sub("", name).strip()


def blocks(rows):
    """[(key, [rows])]: each top row with the indented rows after it."""
    found = []
    for r in rows:
        if r["name"].startswith(" ") and found and found[-1][1][0]["measurement"] == \
                r["measurement"]:
            found[-1][1].append(r)
        else:
            found.append((key(r["name"]), [r]))
    return found


def utc(seconds=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def checkout():
    """The commit of the checkout under test, with "+changes" if its product files differ."""
    def run(*args):
        return subprocess.run(("git", "-C", ROOT) + args, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
    commit = run("rev-parse", "--short", "HEAD") or "unknown"
    if run("status", "--porcelain", "--", "autosync", "bin", "hooks"):
        commit += "+changes"
    return commit


def start(argv, versions):
    """The "run" part of a results file, as the run starts."""
    return {"started": utc(), "command": " ".join(["tests/benchmark.py"] + argv),
            "commit": checkout(),
            "machine": {"platform": platform.platform(), "cores": len(os.sched_getaffinity(0)),
                        "load_start": load_average()},
            "python": sys.version.split()[0], **versions}


def finish(info):
    info["finished"] = utc()
    info["machine"]["load_end"] = load_average()
    return info


def default_path(info):
    return os.path.join(RESULTS, info["started"].replace(":", "") + ".json")


def write(path, info, rows):
    """The run and its rows (dicts with a "measurement") into `path`, as JSON."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    stored = [{"measurement": r["measurement"], **{f: r.get(f, "") for f in FIELDS}}
              for r in rows]
    with open(path + ".tmp", "w") as f:
        json.dump({"run": info, "rows": stored}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path


def load(folder=RESULTS):
    """Every stored run, oldest first; each {"run", "rows", "file"}."""
    runs = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        with open(path) as f:
            try:
                data = json.load(f)
            except ValueError as e:
                raise SystemExit("%s: not a results file: %s" % (path, e))
        if not isinstance(data, dict) or "run" not in data or "rows" not in data:
            raise SystemExit("%s: not a results file (no \"run\" and \"rows\")" % path)
        data["file"] = os.path.relpath(path, ROOT)
        runs.append(data)
    runs.sort(key=when)
    return runs
