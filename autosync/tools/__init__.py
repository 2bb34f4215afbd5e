"""The command-line tools: autosync-notify, dvcs-autosync log/restore/conflicts/init."""
