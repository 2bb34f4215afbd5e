"""The benchmark (tests/benchmark.py is its entry point; `--help` says how to run it).

One module per measurement: propagation, burst, machines, slowwriter, scale, onechange,
home, bigfile, idle. Shared: common (machines, runs, Syncthing, timing, the printed
table), results (a run's figures as JSON in results/), table (docs/benchmark.md from
them), main (the command line). JOURNAL.md: the dated findings and how each figure is
measured.
"""
