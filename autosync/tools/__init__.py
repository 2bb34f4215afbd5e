"""The command-line tools: autosync-notify, dvcs-autosync log/restore/conflicts/init/expire.

COMMANDS is dvcs-autosync's subcommand router (supervisor.py routes by it): for each
`dvcs-autosync WORD ...`, the main() that takes it (with WORD first).
"""
from autosync.tools import conflicts, expire, history, init, notify

COMMANDS = {"log": history.main, "restore": history.main,
            "conflicts": conflicts.main, "status": notify.main, "init": init.main,
            "expire": expire.main, "pause": notify.main, "resume": notify.main,
            "sync": notify.main, "pull": notify.main, "describe": notify.main}
