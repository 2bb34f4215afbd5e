"""autosync-notify: tell a running dvcs-autosync something, or ask how it is.

Run from inside a synced folder (as git runs hooks) it finds that folder's
daemon by itself; elsewhere the daemon of ~/.autosync, else the only daemon
this user runs (status: every one); --config or --socket name another one.
"""
import argparse
import glob
import json
import os
import sys

from autosync import __version__
from autosync.core import cli, problems, underway
from autosync.vcs import sizes
from autosync.core.messages import check_text, escaped, printable
from autosync.core.pause import parse_duration
from autosync.core.paths import find_socket, runtime_dir
from autosync.core.protocol import NoDaemon, ProtocolError, Untrusted, answers, ask

EXIT_ERROR, EXIT_USAGE, EXIT_NO_DAEMON = 1, 2, 3


def parse(argv):
    p = argparse.ArgumentParser(prog="autosync-notify", description=__doc__.strip().split("\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--config", help="the daemon's configuration file")
    where.add_argument("--socket", help="the daemon's control socket")
    where.add_argument("--all", action="store_true",
                       help="status: every daemon this user runs (also the default outside "
                            "any synced folder)")
    p.add_argument("--json", action="store_true", help="print the reply as JSON, for scripts")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for sync or pull to finish (default 600)")
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    p.add_argument("message", choices=["status", "sync", "pull", "pushed", "pause", "resume",
                                       "describe"])
    p.add_argument("words", nargs="*", metavar="ARG",
                   help="pushed URL: the address that was pushed to; pause DURATION: 90s, "
                        "30m, 2h, 1d (none: until resumed); describe TEXT: what the change was "
                        "(`-`: read from standard input, out of other users' `ps`)")
    args = p.parse_args(argv)
    takes = {"pushed": 1, "pause": 1, "describe": None}.get(args.message, 0)
    if takes is not None and len(args.words) > takes:
        p.error("%s takes %s" % (args.message, "no argument" if not takes else "one argument"))
    if args.message == "describe" and not args.words:
        p.error("describe needs the TEXT that says what the change was")
    if args.all and args.message != "status":
        p.error("--all goes with status only")
    return args


def request_for(args):
    """The request a command line asks for; ValueError (one line) for a bad argument."""
    request = {"cmd": args.message}
    if args.message == "pushed" and args.words:
        request["url"] = args.words[0]
    if args.message in ("sync", "pull", "describe"):
        request["timeout"] = args.timeout
    if args.message == "pause":
        request["seconds"] = parse_duration(args.words[0]) if args.words else None
    if args.message == "describe":
        # `-`: the text on stdin, since every local user can read a command line.
        words = [sys.stdin.read()] if args.words == ["-"] else args.words
        request["text"] = check_text(" ".join(words))
    return request


def socket_path(args):
    if args.socket:
        return args.socket
    if args.config:
        return cli.load(args.config, check_path=False).socket
    env = os.environ.get("AUTOSYNC_SOCKET")
    return env or find_socket(os.getcwd())


def default_socket():
    """The socket of ~/.autosync's daemon, when that config and its socket exist."""
    default = os.path.expanduser("~/.autosync")
    if not os.path.isfile(default):
        return None
    from autosync.core import config  # (not at the top: cli.load says why)
    try:
        own = config.load(default, check_path=False).socket
    except config.ConfigError:
        return None
    return own if own and os.path.exists(own) else None


def every_socket():
    """The sockets of this user's daemons: the default place, and ~/.autosync's own."""
    try:
        found = sorted(glob.glob(os.path.join(glob.escape(runtime_dir()), "*.sock")))
    except OSError:  # no private runtime folder (paths.NotPrivate): no daemon uses it
        found = []
    own = default_socket()
    if own and own not in found:
        found.append(own)
    return found


def running():
    """The sockets of this user's daemons that answer (a dead one's file is left out)."""
    alive = []
    for path in every_socket():
        try:
            if answers(path, timeout=2.0):
                alive.append(path)
        except (Untrusted, OSError):
            continue
    return alive


def elsewhere():
    """Outside any synced folder: ~/.autosync's daemon, else the only daemon this user
    runs. -> (socket, None), or (None, why not) in one line."""
    own = default_socket()
    if own:
        return own, None
    alive = running()
    if len(alive) == 1:
        return alive[0], None
    if not alive:
        return None, "no dvcs-autosync daemon runs for %s or a folder above it, nor for " \
                     "~/.autosync, nor any other of this user's" % os.getcwd()
    folders = []
    for path in alive:
        try:
            folders.append(ask(path, {"cmd": "status"}, timeout=5)["status"]["path"])
        except (NoDaemon, Untrusted, OSError, ValueError, ProtocolError, KeyError, TypeError):
            folders.append(path)
    return None, "%d dvcs-autosync daemons run (%s): say which with --config, or run this " \
                 "inside its synced folder" % (len(alive), ", ".join(map(str, folders)))


def all_status(as_json):
    """status for every daemon this user runs: one block each (JSON: a list)."""
    replies = []
    for path in every_socket():
        try:
            reply = ask(path, {"cmd": "status"}, timeout=10)
        except (NoDaemon, Untrusted, OSError, ValueError, ProtocolError):
            continue  # a socket left by a daemon that is gone, or not ours
        if reply.get("ok"):
            replies.append(reply["status"])
    if as_json:
        print(json.dumps(replies, indent=2, sort_keys=True))
    elif not replies:
        print("autosync-notify: no dvcs-autosync daemon runs for this user", file=sys.stderr)
    else:
        print("\n\n".join(status_text(s) for s in replies))
    return 0 if replies else EXIT_NO_DAEMON


def link_text(status):
    link = status.get("link")
    if status.get("localonly"):
        return "none: history kept here only (%s)" % problems.LOCAL_ONLY
    if link is None:
        return "not used (syncmethod = none: other machines' changes come every pullinterval)"
    failing = (status.get("failing") or {}).get("link")
    over = " over ssh" if status.get("syncmethod") == "ssh" else ""
    polled = status.get("link_polled")
    held = status.get("link_held")
    held = "" if link != "up" or held is None else ", one connection held" if held else \
        ", no connection held (every command logs in by itself)"  # the ssh link's
    if link == "up" and polled:  # the server cannot run the watch: git ls-remote instead
        why = status.get("link_why") or "the server cannot run the watch"
        return "polled every %g s%s (git ls-remote: %s)%s" % (polled, over, why, held)
    return link + over + held + (" (%s)" % failing if failing and link != "up" else "")


def status_text(status):
    commit, push = status.get("last_commit"), status.get("last_push")
    lines = [
        problems.headline(status, when=cli.show_time),
        "folder:      %s (on %s)" % (status.get("path"), status.get("host")),
        "state:       %s" % status.get("state"),
    ] + (["progress:    %s" % underway.text(status["progress"], when=cli.show_time)]
         if status.get("progress") else []) + [
        "link:        %s" % link_text(status),
        "paused:      %s" % (paused_text(status["paused"]) if status.get("paused") else "no"),
        "pending:     %d paths%s" % (len(status.get("pending") or []),
                                     " and a look at the whole folder"
                                     if status.get("rescan") else ""),
        "last commit: %s" % ("%s  %s" % (cli.show_time(commit["time"]), commit.get("message", ""))
                             if commit else "none yet"),
        "last push:   %s" % ("%s  to %s" % (cli.show_time(push["time"]), push.get("url") or "?")
                             if push else "none yet"),
        "unpushed:    %d commits" % status.get("unpushed", 0),
        "history:     %s" % sizes.text(status.get("history")),
        "last error:  %s" % (status.get("last_error") or "none"),
        "watches:     %s" % ((status.get("watch") or {}).get("problem") or "every folder watched"),
    ]
    for problem in problems.problems(status)[1:]:
        lines.append("also:        %s - %s" % (problem["error"], problem["fix"]))
    for conflict in status.get("conflicts") or []:
        lines.append("conflict:    %s" % printable(conflict))
    for path in status.get("writing") or []:
        lines.append("writing:     %s (open for writing: committed once closed)" % printable(path))
    for path in status.get("held_back") or []:
        lines.append("held back:   %s (cannot be committed; see last error)" % printable(path))
    for folder in status.get("nested_repositories") or []:
        lines.append("nested repository: %s (not synced; see the README)" % printable(folder))
    mass = status.get("mass_delete")
    if mass:
        lines.append("mass delete: %d of %d files removed at %s; undo: %s"
                     % (mass["count"], mass["total"], cli.show_time(mass["time"]),
                        mass["restore"]))
    # Names are quoted above; an error or a commit message from another machine acts on
    # no terminal either.
    return "\n".join(map(escaped, lines))


def paused_text(paused):
    """'since 2024-05-01 14:30:00 until 16:30:00' (or 'until resumed')."""
    return "since %s until %s" % (cli.show_time(paused["since"]), cli.show_time(paused["until"])
                                  if paused.get("until") else "resumed")


def reply_text(reply):
    """What a pause, resume, describe or deferred pull did, in one line (or "")."""
    if "paused" in reply:  # which folder: the one of ~/.autosync, or of the folder you are in
        return "paused %s%s" % (printable(reply["path"]) + ": " if reply.get("path") else "",
                                paused_text(reply["paused"]))
    if "resumed" in reply:
        return "resumed: syncing again" if reply["resumed"] else "not paused"
    if reply.get("to") == "last":
        return "described the last commit%s (not pushed yet)" % (
            " " + reply["rev"][:12] if reply.get("rev") else "")
    if reply.get("to") == "note":
        return "described %s (pushed already: a note that travels with it): %s" % (
            reply.get("rev", "")[:12], reply.get("subject", ""))
    if reply.get("to") == "next":
        return "the text goes at the top of the next commit"
    return reply.get("deferred", "")


def main(argv=None):
    args = parse(argv)
    if args.all:
        return all_status(args.json)
    path = socket_path(args)
    if not path and args.message == "status":  # outside any synced folder: all of them
        return all_status(args.json)
    if not path:
        path, why = elsewhere()
    if not path:
        print("autosync-notify: %s" % why, file=sys.stderr)
        return EXIT_NO_DAEMON
    try:
        request = request_for(args)
    except ValueError as e:
        print("autosync-notify %s: %s" % (args.message, e), file=sys.stderr)
        return EXIT_USAGE
    try:
        reply = ask(path, request, timeout=args.timeout + 5)
    except NoDaemon as e:
        print("autosync-notify: %s" % e, file=sys.stderr)
        return EXIT_NO_DAEMON
    except Untrusted as e:
        print("autosync-notify: %s" % e, file=sys.stderr)
        return EXIT_ERROR
    except (OSError, ValueError, ProtocolError) as e:
        print("autosync-notify: talking to %s failed: %s" % (path, e), file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(reply.get("status", reply), indent=2, sort_keys=True))
    elif not reply.get("ok"):
        print(escaped("autosync-notify: %s" % reply.get("error")), file=sys.stderr)
    elif args.message == "status":
        print(status_text(reply["status"]))
    else:
        said = reply_text(reply)
        if said:
            print(escaped(said))
    return 0 if reply.get("ok") else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
