"""python -m autosync.committer"""
import sys

from autosync.committer.committer import main

sys.exit(main())
