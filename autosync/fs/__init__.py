"""The folder itself: every write the product makes into it, and every check of a file still open.

Between the engine and the base: imports only core/ (and itself), no version control. The
engine (vcs/), the programs and the tools stand on it: the guarded writer (guarded.py),
the bytes a killed write had moved aside (leftovers.py), the files some process holds open
for writing (stillopen.py).
"""
