#!/usr/bin/env bash
# The demo: installs what it needs, then syncs two folders for real through a
# bare git repository and a private XMPP server, in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install.sh
exec python3 tests/demo.py "$@"
