"""The engine side of a pull: what is merged and written into the folder.

git.py (GitPull: a plain `git pull` made away from the working tree), finish.py
(any other `git pull` line's merge stopped on conflicts, finished), hg.py
(autosync-hgmerge: Mercurial's counterpart) and keep_both.py (the one policy
they all follow). Every write goes through fs/guarded.py's Writer. When a pull
runs and what is said of it is the committer's (committer/repository/pull.py).
Imports nothing here: hg.py loads no git module.
"""
