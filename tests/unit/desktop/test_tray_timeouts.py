"""The tray's own timeouts, beside the committer's (the tray in use: tests/integration/test_tray.py)."""
from autosync.committer import pausing
from autosync.desktop import tray


def test_the_tray_waits_for_a_pause_as_long_as_the_committer_may_take_to_pause():
    """A pause answers once the pull under way has ended (up to PAUSE_WAIT): the tray's
    queue gave up after 30 s, took the committer for gone and sent the pause again."""
    assert tray.PAUSE_TIMEOUT > pausing.PAUSE_WAIT
