#!/usr/bin/env python3
"""Benchmark of the real dvcs-autosync suite, each figure beside bare git and Syncthing.

The entry point; the code is in tests/benchmarks/ (one module per measurement, the
shared machinery in common.py), `--help` says how to run it. Not a test: pytest does
not collect it. Today's figures: docs/benchmark.md; `--table` rewrites that page.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the benchmarks package

from benchmarks.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
