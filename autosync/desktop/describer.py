"""describecmd: asking the user what a change was, and telling the committer.

Used by a commit notification's "Describe..." action (desktop/notifier.py) and the
tray's "Describe the last change" (desktop/tray.py). The command runs through
vcs/commands.py (no shell for a file name); its output goes through
messages.check_text, as `autosync-notify describe TEXT` does.
"""
import logging
import threading

from autosync.core import protocol
from autosync.vcs.commands import CommandFailed, Template
from autosync.core.messages import check_text

log = logging.getLogger("autosync.describe")

DIALOG_TIMEOUT = 3600.0  # seconds describecmd (a dialog the user answers) may take


class Describer:
    """Runs describecmd and sends what it prints to the committer: the same as
    `autosync-notify describe TEXT`. One dialog at a time."""

    def __init__(self, command, folder, socket_path):
        self.template = Template("describecmd", command or "")
        self.folder, self.socket_path = folder, socket_path
        self.asking = threading.Lock()

    @property
    def usable(self):
        return not self.template.empty

    def start(self, rev=None):
        """In a thread: the dialog waits for the user, the caller must not. rev: the
        commit the text is for (the notification's), or None: the last one."""
        threading.Thread(target=self.run, args=(rev,), name="describe", daemon=True).start()

    def ask(self):
        """The user's text, or None (no command, a dialog already open, cancelled, unusable)."""
        if not self.usable or not self.asking.acquire(blocking=False):
            return None
        try:
            return check_text(self.template.output(cwd=self.folder, timeout=DIALOG_TIMEOUT))
        except CommandFailed as e:  # a dialog cancelled exits non-zero
            log.info("no description: %s", e)
        except ValueError as e:
            log.info("no description: describecmd's output: %s", e)
        finally:
            self.asking.release()
        return None

    def run(self, rev=None):
        text = self.ask()
        if text is None:
            return
        request = {"cmd": "describe", "text": text}
        if rev:
            request["rev"] = rev
        try:
            reply = protocol.ask(self.socket_path, request, timeout=60.0)
        except (protocol.NoDaemon, protocol.Untrusted, protocol.ProtocolError, OSError) as e:
            log.warning("the description %r was not sent: %s", text, e)
            return
        if reply.get("ok"):
            log.info("described the %s commit%s: %s", reply.get("to"),
                     " " + reply["rev"][:12] if reply.get("rev") else "", text)
        else:
            log.warning("the committer refused the description: %s", reply.get("error"))
