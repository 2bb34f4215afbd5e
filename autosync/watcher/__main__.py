"""python -m autosync.watcher"""
import sys

from autosync.watcher.watcher import main

sys.exit(main())
