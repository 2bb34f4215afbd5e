"""dvcs-autosync: everything about the package is in pyproject.toml but its license.

This file keeps a `build/` folder left from an earlier build out of the
next one: setuptools copies a module into build/lib only when the source is
newer, and ships whatever else it finds there (a module since removed, say).
"""
import os
import shutil

import setuptools
from setuptools import setup
from setuptools.command.build_py import build_py


class fresh_build_py(build_py):
    def run(self):
        if not getattr(self, "editable_mode", False):
            shutil.rmtree(os.path.join(self.build_lib, "autosync"), ignore_errors=True)
        super().run()


# setuptools 77 on takes an SPDX expression (the License-Expression field); Debian 12's
# 66 refuses that in pyproject.toml and knows only the free-text License field.
if int(setuptools.__version__.split(".")[0]) >= 77:
    LICENSE = {"license_expression": "GPL-2.0-or-later"}
else:
    LICENSE = {"license": "GPL-2.0-or-later"}

setup(cmdclass={"build_py": fresh_build_py}, **LICENSE)
