#!/usr/bin/env bash
# Installs what the demo and the tests need: Debian packages for the real
# parts (git, prosody, Mercurial, git-annex, git-remote-gcrypt, GnuPG, D-Bus,
# systemd-analyze) and the project itself with pytest (editable, through
# pyproject.toml; and into a venv of the system's /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(git prosody mercurial git-annex git-remote-gcrypt gnupg dbus systemd
          desktop-file-utils openssl procps tar python3-venv)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# The system's own python3 with the suite's dependencies, in a venv that an
# ordinary user can run: the tests start the daemon as `nobody` with it.
if [ ! -x /opt/autosync-test/venv/bin/python3 ]; then
    /usr/bin/python3 -m venv /opt/autosync-test/venv
fi
/opt/autosync-test/venv/bin/python3 -m pip install -q --disable-pip-version-check .
chmod -R a+rX /opt/autosync-test
# The launchers pip wrote there must run (tests/test_install.py does the same
# in a fresh venv, from a copy of the checkout with a stale build/ folder).
for program in dvcs-autosync autosync-committer autosync-watcher autosync-xmpp \
               autosync-desktop autosync-tray autosync-notify autosync-hgmerge; do
    env -u PYTHONPATH "/opt/autosync-test/venv/bin/$program" --help >/dev/null ||
        { echo "$program --help failed in /opt/autosync-test/venv" >&2; exit 1; }
done
