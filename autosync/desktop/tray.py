"""autosync-tray: the folder's state as an icon in the desktop's tray, with a menu.

The icon, tooltip and menu (Sync now, Pause/Resume, Describe the last change,
Recent changes, Open folder, Open history) are a StatusNotifierItem on the D-Bus session bus
(desktop/sni.py). What they show comes from the committer's events (client.Subscription,
no polling; a `status` request each time it subscribes, so it follows a
restarted committer), folded by traystate.View. The menu's requests go back
over the socket from threads of their own (client.RequestQueue), so a long
sync never stalls the bus; the describe dialog and xdg-open run in threads too.

Without a session bus it says so once and connects again with backoff; without
a StatusNotifierWatcher (no tray on the desktop) it says so once and registers
when one appears. SIGTERM and SIGINT only queue a stop.
"""
import logging
import select
import subprocess
import sys
import threading

from autosync.core import cli, client, protocol
from autosync.vcs import commands
from autosync.desktop import traystate
from autosync.core.copies import find_copies
from autosync.vcs.history import History, HistoryError
from autosync.core.retry import one_line
from autosync.desktop.describer import Describer
from autosync.desktop.sni import Bus, Item
from autosync.core.stopflag import StopFlag

log = logging.getLogger("autosync.tray")

_STOP = object()
PAUSE_TIMEOUT = 660.0  # seconds a pause or resume is waited for: longer than PAUSE_WAIT


class Tray:
    """The loop: committer events and bus messages in, icon, tooltip and menu out."""

    def __init__(self, cfg, describecmd=None):
        self.cfg = cfg
        self.describer = Describer(describecmd, cfg.path, cfg.socket)
        self.view = traystate.View(cfg.path)
        self.item = Item(self.view, self.describer.usable, self.act)
        self.bus = Bus(self.item)
        self.inbox = client.Inbox()
        self.events = client.Subscription(cfg.socket, lambda e: self.inbox.put(("event", e)),
                                          on_subscribed=self._fetch_status, logger=log,
                                          name="tray-events",
                                          on_lost=lambda why: self.inbox.put(("lost", why)))
        # Two queues: a pause must not wait behind a long sync. A pause answers once
        # what was under way has ended (a long pull: up to pausing.PAUSE_WAIT); with a
        # shorter timeout the tray took it as the committer gone and sent it again.
        self.syncs = client.RequestQueue(cfg.socket, 660.0, logger=log, name="tray-syncs")
        self.requests = client.RequestQueue(cfg.socket, PAUSE_TIMEOUT, logger=log,
                                            name="tray-requests")

    def run(self):
        """Until stop()."""
        for part in (self.events, self.syncs, self.requests):
            part.start()
        threading.Thread(target=self._read_folder, name="tray-start", daemon=True).start()
        shown = self.item.looks()
        try:
            while True:
                wait = self.bus.connect_if_due()
                ready = [self.inbox] + ([self.bus] if self.bus.conn is not None else [])
                select.select(ready, [], [], wait)
                for kind, value in self.inbox.take():
                    if kind is _STOP:
                        return
                    getattr(self.view, kind)(value)
                self.bus.drain()
                shown = self._announce(shown, self.item.refresh())
        finally:
            for part in (self.events, self.syncs, self.requests):
                part.close()
            self.bus.close()
            # The inbox stays open: a thread still delivering must not write into a
            # descriptor number that something else got meanwhile.

    def stop(self):
        """Make run() return; safe from another thread and from a signal handler."""
        self.inbox.put((_STOP, None))

    def _announce(self, before, menu_changed):
        after = self.item.looks()
        if self.bus.conn is not None and self.bus.registered:
            self.bus.send(self.item.signals(before, after, menu_changed))
        return after

    def act(self, name):
        """A menu item was clicked (on the loop's thread: nothing here may block)."""
        log.info("menu: %s", name)
        if name == "sync":
            self.syncs.put("sync", {"cmd": "sync", "timeout": 600})
        elif name == "pause":  # the label says what the committer's state makes it
            self.requests.put("pause", {"cmd": "resume"} if self.view.paused else {"cmd": "pause"})
        elif name == "describe":
            threading.Thread(target=self._describe, name="tray-describe", daemon=True).start()
        elif name == "open":
            threading.Thread(target=self._open, name="tray-open", daemon=True).start()
        elif name == "history":
            threading.Thread(target=self._history, name="tray-history", daemon=True).start()

    def _describe(self):
        """Ask the user (describecmd) what the last change was, and tell the committer."""
        last = self.view.last_commit or {}  # the change the menu names, read before asking
        text = self.describer.ask()
        if text:
            request = {"cmd": "describe", "text": text}
            if last.get("rev"):
                request["rev"] = last["rev"]
            self.requests.put("describe", request)

    def _open(self):
        try:
            # No timeout: xdg-open may run the file manager itself until it is closed.
            done = subprocess.run(["xdg-open", self.cfg.path], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as e:
            log.warning("cannot open %s: %s", self.cfg.path, one_line(e))
            return
        if done.returncode:
            log.warning("xdg-open %s failed (exit %d): %s", self.cfg.path, done.returncode,
                        one_line(done.stderr.decode("utf-8", "replace") or "no message"))

    def _history(self):
        """The history page in the browser: `dvcs-autosync open` for this folder's config."""
        try:
            done = subprocess.run([sys.executable, "-m", "autosync.supervisor", "open",
                                   "--config", self.cfg.file], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.warning("cannot open the history page: %s", one_line(e))
            return
        if done.returncode:
            log.warning("dvcs-autosync open failed (exit %d): %s", done.returncode,
                        one_line(done.stderr.decode("utf-8", "replace") or "no message"))

    def _fetch_status(self):
        """Right after each subscription: the committer's status, afresh."""
        try:
            reply = protocol.ask(self.cfg.socket, {"cmd": "status"},
                                 timeout=client.CONNECT_TIMEOUT,
                                 connect_timeout=client.CONNECT_TIMEOUT)
        except client.FAILURES as e:
            log.info("no status from the committer: %s", one_line(e))
            return
        if reply.get("ok"):
            self.inbox.put(("status", reply.get("status") or {}))

    def _read_folder(self):
        """Once at start, read-only: the conflict copies there, the last few changes."""
        self.inbox.put(("found_copies", [c.copy for c in find_copies(self.cfg.path)]))
        try:
            self.inbox.put(("history", History(self.cfg).versions(".")))
        except (HistoryError, commands.CommandFailed) as e:
            log.info("no recent changes from the log: %s", one_line(e))


def main(argv=None):
    cfg = cli.start("autosync-tray", __doc__, argv)
    tray = Tray(cfg, cfg.describecmd)
    StopFlag(wake=tray.stop).install(wake_fd=tray.inbox.wake_w)
    tray.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
