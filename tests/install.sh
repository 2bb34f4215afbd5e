#!/usr/bin/env bash
# Installs what the demo (`--demo`) or the tests (no argument) need:
#   * Debian packages through apt: for the demo git, prosody, openssl (the
#     private server's certificate) and python3-venv; for the tests also
#     Mercurial, git-annex, git-remote-gcrypt, GnuPG, D-Bus, systemd-analyze,
#     openssh (a private sshd for syncmethod = ssh), man-db, zsh (its completion is
#     tried), Chromium and chromium-driver (the history page's browser tests); the
#     Debian package's build tools (dpkg-dev, debhelper, dh-python, lintian) and the Debian libraries
#     it runs on (tests/e2e/test_debian.py), GNOME Keyring (a real Secret Service);
#   * the project (and for the tests pytest) into a venv of the system's own
#     /usr/bin/python3, $AUTOSYNC_VENV (default /opt/autosync-test/venv, where
#     an ordinary user can run it: the tests start the daemon as `nobody`).
# The system's Python is never written to: Debian 12/13 and Ubuntu 24.04 refuse
# `pip install` outside a venv (PEP 668). A second run with nothing changed
# installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=tests
case "${1:-}" in
    --demo) mode=demo ;;
    "") ;;
    *) echo "usage: tests/install.sh [--demo]" >&2; exit 2 ;;
esac
venv=${AUTOSYNC_VENV:-/opt/autosync-test/venv}
python=/usr/bin/python3  # the distribution's own, whatever python3 is first on PATH

packages=(git prosody openssl python3-venv)
[ $mode = demo ] || packages+=(mercurial git-annex git-remote-gcrypt gnupg dbus systemd
                               desktop-file-utils procps tar openssh-server openssh-client
                               man-db dpkg-dev debhelper dh-python pybuild-plugin-pyproject
                               python3-all python3-setuptools lintian python3-pyinotify
                               python3-configobj python3-jeepney python3-pathspec python3-six
                               python3-jinja2 gnome-keyring zsh chromium chromium-driver)
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

if [ ! -x "$venv/bin/python3" ]; then
    echo "making a venv of $python in $venv"
    "$python" -m venv "$venv"
fi

# What is installed is noted in the venv: the sources' checksum and the extras.
extras=""
[ $mode = demo ] || extras="[test]"
stamp="$venv/.autosync-installed"
sources=$(find autosync -name '*.py' | LC_ALL=C sort | xargs sha256sum pyproject.toml setup.py README |
          sha256sum | cut -d' ' -f1)
read -r had_sources had_extras 2>/dev/null < "$stamp" || true
if [ "${had_sources:-}" = "$sources" ]; then
    [ -z "$extras" ] || [ "${had_extras:-}" = "[test]" ] && exit 0  # already there
    # The demo's install, then the tests': add only the test extra's requirements
    # (as the installed metadata names them), without building the project again.
    requirements=$("$venv/bin/python3" -c '
import re
from importlib.metadata import requires
for line in requires("dvcs-autosync") or ():
    requirement, _, marker = line.partition(";")
    if re.search(r"extra *== *.test.", marker):
        print(requirement.strip())')
    echo "installing the tests' requirements into $venv:" $requirements
    env -u PYTHONPATH "$venv/bin/python3" -m pip install -q --disable-pip-version-check $requirements
    chmod -R a+rX "$venv"
    echo "$sources $extras" > "$stamp"
    exit 0
fi
[ "${had_extras:-}" = "[test]" ] && extras="[test]"  # pip keeps pytest anyway: say so
echo "installing dvcs-autosync$extras into $venv"
rm -f "$stamp"
# Not editable: the demo runs what a user installs. The tests run the checkout's own
# code (tests/run.sh sets PYTHONPATH), so each checkout tests itself.
env -u PYTHONPATH "$venv/bin/python3" -m pip install -q --disable-pip-version-check ".$extras"
chmod -R a+rX "$venv"
# The launchers pip wrote there must run (tests/integration/test_install.py does the same
# in a fresh venv, from a copy of the checkout with a stale build/ folder).
for program in dvcs-autosync autosync-committer autosync-watcher autosync-xmpp autosync-sshlink \
               autosync-remote \
               autosync-desktop autosync-tray autosync-notify autosync-hgmerge autosync-web; do
    env -u PYTHONPATH "$venv/bin/$program" --help >/dev/null ||
        { echo "$program --help failed in $venv" >&2; exit 1; }
done
echo "$sources $extras" > "$stamp"
