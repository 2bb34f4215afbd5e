"""dvcs-autosync's subcommand router: for each `dvcs-autosync WORD ...`, the main() that
takes it (with WORD first). supervisor.py routes by it.

Not in tools/__init__.py: the package's own start must import no tool, or `python -m
autosync.tools.notify` (what a post-receive hook runs) would load that tool twice.
"""
from autosync.tools import conflicts, expire, history, init, notify, page, share

COMMANDS = {"log": history.main, "restore": history.main,
            "conflicts": conflicts.main, "status": notify.main, "init": init.main,
            "expire": expire.main, "pause": notify.main, "resume": notify.main,
            "sync": notify.main, "pull": notify.main, "describe": notify.main,
            "open": page.main, "share": share.main}
