#!/usr/bin/env bash
# The test command: installs what the tests need, then runs them all.
# Extra arguments go to pytest (e.g. tests/run.sh -k conflict -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install.sh
exec python3 -m pytest -q -m "not slow" "$@"
