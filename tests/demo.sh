#!/usr/bin/env bash
# The demo: installs what it needs (tests/install.sh --demo: git, prosody and the
# product in a venv of the system's /usr/bin/python3), then syncs two folders for
# real through a bare git repository and a private XMPP server, in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install.sh --demo
# The venv's Python runs the demo, which runs the programs the venv holds.
exec env -u PYTHONPATH "${AUTOSYNC_VENV:-/opt/autosync-test/venv}/bin/python3" tests/demo.py "$@"
