"""Benchmark of the real dvcs-autosync suite, each figure beside bare git and Syncthing.

    python3 tests/benchmark.py [--quick] [--only NAME] [--sync xmpp|hook] [--no-peers] [--keep]
                               [--trials N] [--burst-trials N]
                               [--onechange-files N] [--onechange-trials N] [--onechange-thin]
                               [--annexscan-files N]
                               [--git-config K=V] [--setting K=V] [--results FILE]
    python3 tests/benchmark.py --table

Each run prints its table and stores its figures in tests/benchmarks/results/ (one
JSON file per run; --results FILE to store them elsewhere); --table rewrites
docs/benchmark.md, the table of current figures, from every stored run (table.py).

Not a test: nothing is asserted, the script exits 0 even when an aim is
missed. Everything runs in a temporary folder with a private HOME: real
supervisors (`python -m autosync.supervisor CONFIG`), real git, bare
remotes on disk, and (with --sync xmpp, the default) a private prosody on
127.0.0.1 (tests/prosody.py). Syncthing (Debian's `syncthing`), when
installed and not turned off with --no-peers, runs as two instances on
127.0.0.1 beside us. Our machines run at the product's shipped defaults (no
delay written in their config) and at the lowest settings (FAST). How each
figure is measured: tests/benchmarks/JOURNAL.md; today's figures: docs/benchmark.md.

Measurements (NAME for --only):
  propagation  a small file written on A until B has it, beside the bare-git floor and Syncthing;
               announced the chosen way (--sync), and over ssh (a private sshd, when installed):
               over the held connection, and (at the defaults) with a login per command as
               before it (ControlPath=none in the ssh command), beside the local-path floor
  burst        N small files untarred into A until B has them all (and until pushed)
  move         a folder of 2,000 files renamed on A until B has the move done, and the polls
               on B with a file under neither name; the shipped and the original's commands
  machines     8 machines on one account: a change on one until all 7 others have it
  slowwriter   a file written over 15 s: was a half-written version pushed before maxwait?
  scale        start-up time and memory on a large committed tree, beside `git status`;
               the disk a thin machine and a full one use after 1,000 commits of a 1 MB file
  onechange    one file changed in a committed tree of N files (N/100 folders) until B has it,
               beside bare git's add/commit/push/pull on the same tree (--onechange-files N)
  bigfile      a new 1 GB file, and a 1 MB edit inside a 50 MB file, until B has it, beside
               bare git and Syncthing; what each grows the history by (--big-trials N)
  home         a home folder's scale at --home-files N: start, memory, idle CPU, a rescan,
               a resume, a burst of new files, beside bare git (and Syncthing's start)
  annexscan    largefiles (git-annex) in a tree of N small files and 3 annexed 20 MB ones: one
               small change, A's pushcmd and B's pullcmd (the example's, and `sync --content`)
               beside bare git's push and pull; the daemon's own git-annex calls there
               (--annexscan-files N, repeatable; full: 10,000 and 100,000, --quick: 10,000)
  idle         CPU time of the whole suite over an idle period

The code: tests/benchmarks/, one module per measurement (named as above), the shared
machinery (machines, runs, Syncthing, timing, the printed table) in common.py, the stored
figures in results.py and the page made from them in table.py.
"""
import argparse
import importlib
import shutil
import sys
import tempfile
import time
import traceback

from . import results

# NAME for --only: (module, function), imported when run (--help and --table need no
# product): one module per measurement, beside this one.
MEASUREMENTS = {"propagation": ("propagation", "propagation"), "burst": ("burst", "burst"),
                "move": ("move", "move"),
                "machines": ("machines", "many_machines"),
                "slowwriter": ("slowwriter", "slow_writer"), "scale": ("scale", "scale"),
                "onechange": ("onechange", "onechange"), "home": ("home", "home"),
                "bigfile": ("bigfile", "bigfile"), "annexscan": ("annexscan", "annexscan"),
                "idle": ("idle", "idle")}


def measurement(name):
    module, function = MEASUREMENTS[name]
    return getattr(importlib.import_module("benchmarks." + module), function)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="tests/benchmark.py", description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes (5 trials, 2,000 files, 10,000-file tree, 10 s idle)")
    p.add_argument("--only", choices=sorted(MEASUREMENTS), action="append",
                   help="run only this measurement (may be given more than once)")
    p.add_argument("--sync", choices=("xmpp", "hook"), default="xmpp",
                   help="how machines learn of a push: a private prosody (default), or the "
                        "bare repository's post-receive hook")
    p.add_argument("--no-peers", action="store_true",
                   help="do not run Syncthing beside us (its columns stay empty)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument("--trials", type=int, metavar="N",
                   help="propagation trials at each setting (full: 20, --quick: 3)")
    p.add_argument("--burst-trials", type=int, metavar="N",
                   help="burst runs at each setting (full: 3, --quick: 1), at the same size")
    p.add_argument("--onechange-files", type=int, metavar="N",
                   help="onechange's tree (full: 100,000, --quick: 10,000; the issue's aim is "
                        "at 1,000,000)")
    p.add_argument("--onechange-trials", type=int, metavar="N",
                   help="onechange's trials (full: 10, --quick: 3)")
    p.add_argument("--onechange-thin", action="store_true",
                   help="onechange: the suite's two machines are thin (a promisor remote, "
                        "blob:none), as `init --thin` makes them")
    p.add_argument("--home-files", type=int, metavar="N",
                   help="home's tree (full: 100,000, --quick: 10,000; the issue's aims are "
                        "at 1,000,000)")
    p.add_argument("--big-trials", type=int, metavar="N",
                   help="bigfile's trials of each case (full: 3 new, 5 edits; --quick: 1, 3)")
    p.add_argument("--annexscan-files", type=int, metavar="N", action="append",
                   help="annexscan's tree, may be repeated (full: 10,000 and 100,000, "
                        "--quick: 10,000)")
    p.add_argument("--git-config", action="append", metavar="KEY=VALUE", default=[],
                   help="onechange: a git setting given to the suite's machines (through "
                        "GIT_CONFIG_COUNT), to measure a candidate; may be repeated")
    p.add_argument("--setting", action="append", metavar="KEY=VALUE", default=[],
                   help="onechange: an [autosync] key written into both machines' config "
                        "(such as fsmonitor=yes); may be repeated")
    p.add_argument("--results", metavar="FILE",
                   help="store this run's figures in FILE (default: a new file in "
                        "tests/benchmarks/results/, which --table reads)")
    p.add_argument("--table", action="store_true",
                   help="run nothing: rewrite docs/benchmark.md from the stored runs")
    args = p.parse_args(argv)
    if args.table:
        from . import table
        table.write()
        return 0
    from .common import (DELAY_KEYS, FAST, FULL, QUICK, SYNCTHING_DELAYS, Run,
                         autosync_config, describe, machine_description, print_table,
                         private_environment, row, syncthing_missing, version)
    sizes = dict(QUICK if args.quick else FULL)
    # Fewer runs at the same sizes, for a shared machine: the medians stay comparable.
    if args.trials:
        sizes["trials"] = args.trials
    if args.burst_trials:
        sizes["burst_trials"] = args.burst_trials
    if args.onechange_files:
        sizes["onechange_files"] = args.onechange_files
    if args.onechange_trials:
        sizes["onechange_trials"] = args.onechange_trials
    if args.home_files:
        sizes["home_files"] = args.home_files
    if args.big_trials:
        sizes["big_new_trials"] = sizes["big_edit_trials"] = args.big_trials
    if args.annexscan_files:
        sizes["annexscan_files"] = tuple(args.annexscan_files)
    sizes["onechange_thin"] = args.onechange_thin
    sizes["git_config"] = [tuple(kv.split("=", 1)) for kv in args.git_config]
    if any(len(kv) != 2 for kv in sizes["git_config"]):
        p.error("--git-config takes KEY=VALUE")
    sizes["settings"] = [tuple(kv.split("=", 1)) for kv in args.setting]
    if any(len(kv) != 2 for kv in sizes["settings"]):
        p.error("--setting takes KEY=VALUE")
    peers_missing = None if args.no_peers else syncthing_missing()
    info = results.start(argv, {
        "git": version("git", "--version").replace("git version ", ""),
        "prosody": version("dpkg-query", "-W", "-f", "${Version}", "prosody") or None,
        "syncthing": None if args.no_peers or peers_missing else
        version("syncthing", "--version").split(" (")[0], "sync": args.sync,
        "sizes": "quick" if args.quick else "full"})

    base = tempfile.mkdtemp(prefix="asbench-")
    private_environment(base)
    print("\n".join(machine_description()))
    defaults = {key: autosync_config.KEYS["autosync"][key].default for key in DELAY_KEYS}
    print("sync:    %s; sizes: %s" % (
        "XMPP through a private prosody on 127.0.0.1 (STARTTLS)" if args.sync == "xmpp"
        else "the bare repository's post-receive hook (autosync-notify pushed)",
        ("quick" if args.quick else "full") + (
            " (%d propagation trials, %d burst runs)" % (sizes["trials"], sizes["burst_trials"])
            if args.trials or args.burst_trials else "")))
    print("delays:  readfrequency/pushdelay/maxwait; defaults = the product's (%s); lowest = "
          "%s (maxwait not set)" % (describe(defaults),
                                   ", ".join("%s %s s" % kv for kv in FAST.items())))
    if args.no_peers:
        print("peers:   Syncthing not run (--no-peers)")
    elif peers_missing:
        print("peers:   " + peers_missing + "; its columns are skipped")
    else:
        print("peers:   %s, two instances on 127.0.0.1, fsWatcherDelayS %s" % (
            version("syncthing", "--version").split(" (")[0],
            " and ".join(map(str, SYNCTHING_DELAYS))))
    print("folder:  %s" % base)
    print()

    run = Run(base, args.sync)
    run.peers = not (args.no_peers or peers_missing)
    rows, recorded = [], []
    try:
        for name in MEASUREMENTS:
            if args.only and name not in args.only:
                continue
            print("running %s ..." % name, flush=True)
            started = time.monotonic()
            try:
                made = [r if isinstance(r, dict) else row(*r)
                        for r in measurement(name)(run, sizes)]
                rows += made
                # Only a measurement that finished is stored: a failure's row would stay
                # on the page beside the figures of the last run that worked.
                recorded += [dict(r, measurement=name) for r in made]
            except Exception as e:  # report and go on with the next measurement
                traceback.print_exc()
                rows.append((name, "failed: %s" % e, "", "", False))
            finally:
                run.stop()
            print("  done in %.0f s" % (time.monotonic() - started), flush=True)
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        run.close()
        # The table first: removing a 100,000-file tree takes a while.
        print()
        print_table(rows, peers=run.peers)
        print(flush=True)
        if recorded:
            results.finish(info)
            path = results.write(args.results or results.default_path(info), info, recorded)
            print("figures stored in %s%s" % (path, "" if args.results else
                                               " (tests/benchmark.py --table puts them in "
                                               "docs/benchmark.md)"), flush=True)
        if args.keep:
            print("kept %s" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0
