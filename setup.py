"""dvcs-autosync: keep a folder in sync through a version-control repository you own."""
import glob

from setuptools import setup

from autosync import __version__

setup(
    name="dvcs-autosync",
    version=__version__,
    description="Keep a folder in sync between machines through git (or any DVCS)",
    license="GPL-2.0-or-later",
    python_requires=">=3.9",
    packages=["autosync"],
    scripts=sorted(glob.glob("bin/*")),
    install_requires=[
        "configobj>=5.0",
        "pyinotify>=0.9.6",
        "pathspec>=0.11",
        "xmpppy>=0.7.4",
        "jeepney>=0.8",
        # pyinotify imports asyncore, which left the standard library in 3.12.
        "pyasyncore; python_version >= '3.12'",
    ],
    extras_require={"test": ["pytest>=7"]},
)
