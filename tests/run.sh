#!/usr/bin/env bash
# The test command: installs what the tests need (tests/install.sh: into a venv
# of the system's /usr/bin/python3), then runs them all with that venv's Python.
# Extra arguments go to pytest (e.g. tests/run.sh -k conflict -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install.sh
venv=${AUTOSYNC_VENV:-/opt/autosync-test/venv}
# The venv's programs on PATH (some tests run `dvcs-autosync` by name, as users do),
# running this checkout's code, not the copy installed in the venv (which may be
# another checkout's): the programs the tests start inherit both.
export PATH="$venv/bin:$PATH"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# The checkout's code compiled once, as pip and dpkg compile an install: with
# PYTHONDONTWRITEBYTECODE set (some CI machines set it) every daemon a test starts
# compiled every module again, a quarter of an end-to-end test's CPU time.
"$venv/bin/python3" -m compileall -q -j 0 autosync >/dev/null
# `tests/run.sh unit`: only the unit tier (tests/unit: no daemon, prosody, sshd or D-Bus).
if [ "${1:-}" = unit ]; then
    shift
    set -- tests/unit -n "${AUTOSYNC_TEST_WORKERS:-2}" "$@"
fi
if [ $# -gt 0 ]; then
    exec "$venv/bin/python3" -m pytest -q -m "not slow" "$@"
fi
# Everything but the slow tests, four at a time (pytest-xdist): much of an end-to-end
# test's time is spent waiting on the daemons it started (with three, the two cores
# were busy 80% of the run: 869 CPU s in 543 s), so four share two cores;
# the longest first, dealt out evenly (tests/run_order.py). Then the tests
# that change what the whole machine shares (pytest.ini: alone), which the others would see, by themselves.
workers=${AUTOSYNC_TEST_WORKERS:-4}
"$venv/bin/python3" -m pytest -q -m "not slow and not alone" -n "$workers" --dist worksteal
exec "$venv/bin/python3" -m pytest -q -m "alone and not slow"
