#!/usr/bin/env bash
# The test command: installs what the tests need (tests/install.sh: into a venv
# of the system's /usr/bin/python3), then runs them all with that venv's Python.
# Extra arguments go to pytest (e.g. tests/run.sh -k conflict -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install.sh
# This checkout's code, not the copy installed in the venv (which may be another
# checkout's): the programs the tests start inherit it.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "${AUTOSYNC_VENV:-/opt/autosync-test/venv}/bin/python3" -m pytest -q -m "not slow" "$@"
