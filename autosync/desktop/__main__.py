"""python -m autosync.desktop"""
import sys

from autosync.desktop.notifier import main

sys.exit(main())
