#!/bin/bash
# Run some tests as on a machine that has more than the test made (issue 41, item 6):
# the product's Debian package installed (its programs in /usr/bin), an original
# dvcs-autosync running (a stand-in script, on its own ~/.autosync), and packages being
# installed into the system's site-packages while the tests run. All of it is private
# to a mount and PID namespace (root, unshare): the machine itself is not changed, and
# the tests see only the namespace's processes.
#
#   sudo tests/beside.sh [PYTEST ARGS]      e.g.
#   sudo tests/beside.sh tests/unit/test_service_files.py tests/integration/test_init.py \
#       tests/e2e/test_install.py -k "exec_start or without_the_program or original_run_by_python3 or install_sh"
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "$1" != --inside ]; then
    exec unshare -m -p -f --mount-proc --propagation private "$0" --inside "$@"
fi
shift
ns=$(mktemp -d /tmp/autosync-beside.XXXXXX)
mkdir -p "$ns"/{bin-upper,bin-work,site-upper,site-work,original,home,amw}
mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$ns/bin-upper,workdir=$ns/bin-work" /usr/bin
for program in dvcs-autosync autosync-committer autosync-watcher autosync-xmpp autosync-notify \
               autosync-sshlink autosync-remote autosync-hgmerge autosync-desktop autosync-tray \
               autosync-web; do
    printf '#!/bin/sh\necho "the installed %s (Debian package)" >&2\nexit 0\n' "$program" \
        > /usr/bin/$program
    chmod 755 /usr/bin/$program
done
printf '#!/usr/bin/python\n# stand-in for the original (imports pyinotify, jabberbot)\nimport time\nwhile True:\n    time.sleep(3600)\n' \
    > "$ns/original/dvcs-autosync"
printf '[autosync]\npath = %s/amw\n' "$ns" > "$ns/home/.autosync"
HOME=$ns/home python3 "$ns/original/dvcs-autosync" "$ns/home/.autosync" &
site=/usr/lib/python3/dist-packages
mount -t overlay overlay -o "lowerdir=$site,upperdir=$ns/site-upper,workdir=$ns/site-work" $site
( for i in $(seq 1 200); do sleep 3; mkdir -p $site/beside_pkg; echo "# $i" > $site/beside_pkg/m$i.py; done ) &
cd "$here"
export PATH=/opt/autosync-test/venv/bin:$PATH PYTHONPATH=$here
python3 -m pytest -q -p no:cacheprovider "$@"
