"""The systemd user units and the XDG autostart entry in docs/systemd/.

`systemd-analyze verify` (Debian package systemd) and `desktop-file-validate`
(desktop-file-utils) check them for real; a broken copy of each proves that
the check can fail. Each unit's ExecStart is run as systemd would run it, for
each way of installing, against a config with an error: it must find the
program and end with the status the unit does not restart on.
"""
import os
import shutil
import subprocess

import pytest

from service_units import AUTOSTART, PLAIN, TEMPLATE, UNITS, service_section


def tool(name, package):
    path = shutil.which(name)
    if path is None:
        pytest.fail("%s is missing: install the Debian package %s" % (name, package))
    return path


def verify(unit, tmp_path):
    """systemd-analyze's complaints about a user unit ('' when it has none), and its status."""
    # A user manager needs a private runtime directory; %h is $HOME (a tmp one here).
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), SYSTEMD_LOG_LEVEL="notice")
    result = subprocess.run([tool("systemd-analyze", "systemd"), "verify", "--user", "--man=no",
                             str(unit)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return result.returncode, result.stdout.strip()


def broken_copy(tmp_path, source, old, new):
    text = open(source).read()
    assert old in text
    copy = tmp_path / "broken" / os.path.basename(source)
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(text.replace(old, new))
    return copy


@pytest.mark.parametrize("unit", [TEMPLATE, PLAIN], ids=os.path.basename)
def test_systemd_analyze_verify_passes(unit, tmp_path):
    # verify exits 0 on settings it ignores (an unknown key, a bad value):
    # only silence means a clean unit.
    assert verify(unit, tmp_path) == (0, "")


@pytest.mark.parametrize("old, new", [
    ("Restart=on-failure", "Restart=sometimes"),  # a bad value: rc 0, but a complaint
    ("KillMode=mixed", "KilMode=mixed"),  # an unknown key: rc 0, but a complaint
    ("ExecStart=/bin/sh", "ExecStart=/nonexistent/sh"),  # fatal: rc 1
    ("%h/.config", "%Q/.config"),  # an unknown specifier: fatal
])
def test_verify_catches_a_broken_unit(old, new, tmp_path):
    assert verify(broken_copy(tmp_path, TEMPLATE, old, new), tmp_path) != (0, "")


def test_one_instance_per_config_file_under_dot_config():
    service = service_section(TEMPLATE)["Service"]
    # %i, not %I: unescaping would turn the '-' of "my-notes" into a '/'.
    assert service["ExecStart"].endswith(" dvcs-autosync %h/.config/autosync/%i")
    assert service["Restart"] == "on-failure"
    assert service["KillMode"] == "mixed"
    assert service["SyslogIdentifier"] == "dvcs-autosync@%i"
    assert service_section(TEMPLATE)["Install"]["WantedBy"] == "default.target"


def test_the_plain_unit_runs_the_classic_config():
    service = service_section(PLAIN)["Service"]
    assert service["ExecStart"].endswith(" dvcs-autosync %h/.autosync")
    assert service["Restart"] == "on-failure"


def test_the_shipped_units_are_init_s_template():
    """One template makes the unit `init --service` writes and both shipped units: a
    setting changed in one place is changed in all three."""
    from autosync.tools.init import unit
    for name, text in unit.SHIPPED.items():
        with open(os.path.join(UNITS, name)) as f:
            assert f.read() == text, "docs/systemd/%s is not unit.SHIPPED's" % name
    assert "KillMode=mixed" in unit.TEMPLATE and "{execstart}" in unit.TEMPLATE


def test_the_autostart_entry_is_valid(tmp_path):
    validate = tool("desktop-file-validate", "desktop-file-utils")
    result = subprocess.run([validate, AUTOSTART], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert (result.returncode, result.stdout) == (0, "")
    entry = service_section(AUTOSTART)["Desktop Entry"]
    assert entry["Exec"] == "dvcs-autosync"
    broken = broken_copy(tmp_path, AUTOSTART, "Type=Application", "Type=Program")
    assert subprocess.run([validate, str(broken)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0
