"""python -m autosync.web"""
import sys

from autosync.web.server import main

sys.exit(main())
