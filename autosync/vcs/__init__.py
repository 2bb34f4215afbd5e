"""The DVCS engine: git run, pulled, merged, noted, measured; every write into the folder.

What the programs (committer, watcher, tools, ...) ask of the repository, as git's
library is to its builtin commands. Imports only core/ (the base), never a program.
"""
