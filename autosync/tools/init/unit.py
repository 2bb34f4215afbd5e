"""The systemd user unit (init --service): its one template, which also makes the units
shipped in docs/systemd/ (tests/unit/test_service_files.py holds them to it), written and
enabled where a user manager answers."""
import os
import re
import shutil
import subprocess

from autosync.core import config
from autosync.tools.init.files import tilde
from autosync.tools.init.plan import Refused, say

TEMPLATE = """\
{header}
[Unit]
Description=dvcs-autosync: keep {what} in sync

[Service]
Type=simple
{execstart}
# The supervisor stops its programs itself on SIGTERM (committer last, so the
# commit in flight finishes); only what is left after the timeout gets SIGKILL.
KillMode=mixed
TimeoutStopSec=10
Restart=on-failure
RestartSec=5
# Not again and again for what a restart cannot mend: 2 is a config error (its one
# line is in the journal; also a bad command line), 127 no dvcs-autosync installed,
# 78 the synced folder was replaced by another one (a restart would sync that).
RestartPreventExitStatus=2 78 127
{identifier}

[Install]
WantedBy=default.target
"""

# The shipped units find the program however it was installed: on the user manager's
# PATH, else in ~/.local/bin, else in the README's venv.
SHIPPED_EXEC = """\
# The installed dvcs-autosync, however it was installed: on the user manager's PATH
# (a system install), else in ~/.local/bin (pip --user, pipx, or a link there), else
# in the README's venv ~/.local/autosync. ($$ is a $ for the shell.)
ExecStart=/bin/sh -c 'PATH="$$PATH:%h/.local/bin:%h/.local/autosync/bin"; exec dvcs-autosync "$$@"' dvcs-autosync {config}"""

SHIPPED = {
    "dvcs-autosync.service": TEMPLATE.format(
        header="# dvcs-autosync for the classic single config file ~/.autosync.\n"
               "# Install: copy to ~/.config/systemd/user/, then\n"
               "#   systemctl --user enable --now dvcs-autosync\n"
               "# For several folders use dvcs-autosync@.service instead. See "
               "docs/service.md.",
        what="the folder of ~/.autosync",
        execstart=SHIPPED_EXEC.format(config="%h/.autosync"),
        identifier="SyslogIdentifier=dvcs-autosync"),
    "dvcs-autosync@.service": TEMPLATE.format(
        header="# dvcs-autosync for one synced folder: instance NAME runs "
               "~/.config/autosync/NAME.\n"
               "# Install: copy to ~/.config/systemd/user/, then\n"
               "#   systemctl --user enable --now dvcs-autosync@NAME\n"
               "# See docs/service.md.",
        what="the folder of ~/.config/autosync/%i",
        execstart=SHIPPED_EXEC.format(config="%h/.config/autosync/%i"),
        identifier="# One journal identifier per folder, so `journalctl --user -f` tells "
                   "them apart.\nSyslogIdentifier=dvcs-autosync@%i"),
}


def name(plan):
    if plan.config == config.default_path():
        return "dvcs-autosync.service"
    slug = re.sub(r"[^A-Za-z0-9_.-]", "-", os.path.basename(plan.config)).strip(".-")
    return "dvcs-autosync-%s.service" % (slug or "config")


def path(plan):
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "systemd", "user", name(plan))


def text(plan):
    def arg(value):  # one word of ExecStart: systemd's quoting and specifiers
        value = value.replace("%", "%%").replace("$", "$$")
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    return TEMPLATE.format(
        header="# Written by dvcs-autosync init for %s (see docs/service.md)."
               % tilde(plan.config),
        what=tilde(plan.folder).replace("%", "%%"),
        execstart="ExecStart=%s %s" % (arg(plan.program), arg(plan.config)),
        identifier="SyslogIdentifier=dvcs-autosync")


def check(plan):
    """With --service: the program to start is found, and an existing unit is this one
    (or --force); plan.unit is where it goes."""
    if not plan.args.service:
        return
    if plan.program is None:
        raise Refused("--service: no installed dvcs-autosync found (install it first: "
                      "README, Install); nothing touched")
    where = path(plan)
    if os.path.lexists(where) and not plan.args.force:
        with open(where) as f:
            if f.read() != text(plan):
                raise Refused("%s exists: not overwritten (--force replaces it); nothing "
                              "touched" % where)
    plan.unit = where


def install(plan):
    """Write the unit; enable and start it where a user manager answers."""
    if not plan.unit:
        return
    os.makedirs(os.path.dirname(plan.unit), exist_ok=True)
    temp = "%s.%d.tmp" % (plan.unit, os.getpid())
    with open(temp, "w") as f:
        f.write(text(plan))
    os.replace(temp, plan.unit)
    say("Wrote the systemd user unit %s." % plan.unit)
    if not user_manager():
        say("No systemd user manager answers here (systemctl --user), so it is not enabled.")
        return
    unit = name(plan)
    for step in (["daemon-reload"], ["enable", "--now", unit]):
        proc = subprocess.run(["systemctl", "--user"] + step, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode:
            say("systemctl --user %s failed: %s" % (" ".join(step), proc.stdout.strip()))
            return
    say("Enabled and started %s: syncing runs now and at every login (journalctl "
        "--user -u %s shows its log)." % (unit, unit))
    plan.started = True


def user_manager():
    if not shutil.which("systemctl"):
        return False
    try:
        return subprocess.run(["systemctl", "--user", "show-environment"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
