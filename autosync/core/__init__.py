"""The base every program stands on: config, paths, the socket and its clients, retry, commit messages.

Imports nothing outside core/: the folder floor (fs/), the engine (vcs/) and the programs
stand on it."""
