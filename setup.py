"""dvcs-autosync: everything about the package is in pyproject.toml.

This file only keeps a `build/` folder left from an earlier build out of the
next one: setuptools copies a module into build/lib only when the source is
newer, and ships whatever else it finds there (a module since removed, say).
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class fresh_build_py(build_py):
    def run(self):
        if not getattr(self, "editable_mode", False):
            shutil.rmtree(os.path.join(self.build_lib, "autosync"), ignore_errors=True)
        super().run()


setup(cmdclass={"build_py": fresh_build_py})
