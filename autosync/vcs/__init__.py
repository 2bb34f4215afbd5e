"""The DVCS engine: git run, pulled, merged, noted, measured.

What the programs (committer, watcher, tools, ...) ask of the repository, as git's
library is to its builtin commands. Imports only fs/ (the folder itself: every write into
it) and core/ (the base), never a program.
"""
