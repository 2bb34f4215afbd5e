"""python -m autosync.xmpp"""
import sys

from autosync.xmpp.listener import main

sys.exit(main())
