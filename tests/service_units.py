"""The systemd units and the autostart entry shipped in docs/systemd/, read as systemd
reads them: for their own tests (tests/unit/test_service_files.py) and the
supervisor's (tests/integration/test_supervisor.py, each unit's ExecStart run)."""
import configparser
import os
import re
import shlex

from base import ROOT

UNITS = os.path.join(ROOT, "docs", "systemd")
TEMPLATE = os.path.join(UNITS, "dvcs-autosync@.service")
PLAIN = os.path.join(UNITS, "dvcs-autosync.service")
AUTOSTART = os.path.join(UNITS, "dvcs-autosync.desktop")


def service_section(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read(path)
    return parser


def exec_start(unit, home, instance):
    """The unit's ExecStart as systemd runs it: specifiers expanded, `$$` made `$`, split."""
    line = service_section(unit)["Service"]["ExecStart"]
    line = re.sub(r"%.", lambda m: {"%h": home, "%i": instance, "%%": "%"}[m.group()], line)
    assert "$" not in line.replace("$$", ""), "a variable systemd would expand: %s" % line
    return shlex.split(line.replace("$$", "$"))


def not_restarted_on(unit):
    return {int(code) for code in
            service_section(unit)["Service"]["RestartPreventExitStatus"].split()}


# Where each way of installing puts dvcs-autosync (README "Install", docs/service.md).
INSTALLS = {
    "venv": ".local/autosync/bin",  # python3 -m venv ~/.local/autosync; pip install .
    "pip --user": ".local/bin",  # also pipx, or a link to a venv's launcher
    "system": None,  # /usr/bin or /usr/local/bin: on the user manager's PATH
}
