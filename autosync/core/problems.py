"""What stops syncing now, by name, with what the user can do about it.

One place for the readable status, `status --json`, the tray and the
notifications. The committer keeps `failing` in its status: {name: error}
for each operation whose last try failed (set when it fails, dropped when it
next works). From that, the pause, the watcher's report and the XMPP link,
`problems(status)` lists what stops syncing, most pressing first, and
`headline(status)` says it in one line: "in sync", "syncing", or
"NOT syncing: WHY - WHAT TO DO".
"""

# name -> what the user can do. The error says why; these say what next.
FIX = {
    "folder": "put the synced folder back where it was; or, moved on purpose: stop "
              "dvcs-autosync, run dvcs-autosync init REMOTE NEWFOLDER --force (with --config "
              "FILE if it runs on one) and start it again; syncing resumes by itself once "
              "the folder is back",
    "paused": "dvcs-autosync resume",
    "commit": "see the error (git's own hint is in it); tried again by itself",
    "merge": "see the error; tried again by itself",
    "watch": "see the error; folders without a watch are rescanned meanwhile",
    "push": "check the remote and the network (the error has the remote's words); pushed "
            "by itself once it works",
    "pull": "check the remote and the network; pulled by itself once it works",
    "unsafe": "someone who can push to the remote pushed it (a compromised machine, or a "
              "tool that writes trees by hand): look at it (git log --stat FETCH_HEAD), "
              "then remove that path in a commit there and push; nothing else is pulled "
              "until then",
    "unwritten": "free space, or fix what the error names (a folder's permissions, a file "
                 "where a folder must go); the pull is tried again by itself, and no commit "
                 "of this machine undoes the other machine's version meanwhile",
    "link": "check [xmpp] username, password and the server's certificate; until then "
            "other machines' changes come only every pullinterval",
}
# The link's fix depends on what the link is (the status's syncmethod).
LINK_FIX = {
    "xmpp": FIX["link"],
    "ssh": "check that this machine can log in to the remote's server with ssh without a "
           "password, and that autosync-remote is installed there (docs/ssh.md); until then "
           "other machines' changes come only every pullinterval",
}
# The `folder` problem that is a rebase left half-done in the repository, not a folder away.
REBASE_FIX = "finish the rebase or abort it, as the error says; syncing resumes by itself"
UNTIL = "; until then other machines' changes come only every pullinterval"
# A restricted key's forced command refused what was asked (its words, the same in
# ssh/watch.py's REFUSED_BY_KEY and autosync-remote serve's).
REFUSED_BY_KEY = "this key may only sync"
FORCED_FIX = ("refused by the forced command of this key's line in the server's "
              "authorized_keys (it allows another repository, or another version's watch): "
              "replace it with the line dvcs-autosync init prints for this folder, or give "
              "this folder a key of its own (git config core.sshCommand 'ssh -i KEY'); "
              "tried again by itself, over a new login")
# The same line refusing this version's watch (it allows git's fetch and push): polled.
POLLED_FIX = ("replace the key's line in the server's authorized_keys with the one "
              "dvcs-autosync init prints for this folder (it allows another version's watch)")
# A key the server refuses: the login, or (a shared folder, docs/sharing.md) a removal.
LOGIN_FIX = ("check that this machine can log in to the server with ssh without a password "
             "(its key in the server's authorized_keys, the server in known_hosts); in a "
             "folder another person shares with you, a refused key means you were removed "
             "from the share (what you have stays here; docs/sharing.md)")
# ssh's words for a failure -> what that failure asks for (the first that matches).
SSH_FIX = (
    ((REFUSED_BY_KEY,), FORCED_FIX + UNTIL),
    (("Connection refused", "Connection timed out", "No route to host", "Network is "
      "unreachable", "Could not resolve hostname", "Connection reset", "Connection closed by",
      "timed out during banner exchange"),
     "the server or the network: check that the server is up and runs sshd, and that this "
     "machine reaches it; the link comes back by itself" + UNTIL),
    (("Permission denied", "Host key verification failed", "REMOTE HOST IDENTIFICATION"),
     LOGIN_FIX + UNTIL),
    (("autosync-remote: not found", "autosync-remote: command not found", "exit 127"),
     "install autosync-remote on the server (docs/ssh.md), or set syncmethod = none" + UNTIL),
)


def link_fix(syncmethod, error):
    """What to do about the link's `error`: for ssh, what its words point at."""
    if syncmethod == "ssh":
        for words, fix in SSH_FIX:
            if any(w in (error or "") for w in words):
                return fix
    return LINK_FIX.get(syncmethod, FIX["link"])


def folder_fix(error):
    """What to do about the `folder` problem: a rebase to end, or a folder to bring back
    (or, moved on purpose, the config to point at its new place)."""
    return REBASE_FIX if "rebase" in (error or "") else FIX["folder"]


ORDER = tuple(FIX)  # most pressing first
BUSY = ("starting", "committing", "pushing", "pulling")


def problems(status):
    """[{"name", "error", "fix"}] of what stops syncing now, most pressing first."""
    found = dict(status.get("failing") or {})
    paused = status.get("paused")
    if paused:
        found["paused"] = "paused by the user" + (" until %s" % paused["until"]
                                                  if paused.get("until") else "")
    watch = status.get("watch")
    if watch and watch.get("unwatched"):
        found["watch"] = watch.get("problem") or "%d folders have no watch" % watch["unwatched"]
    fixes = dict(FIX, link=link_fix(status.get("syncmethod"), found.get("link")),
                 folder=folder_fix(found.get("folder")))
    # A refused key: git keeps only its own last line ("Could not read from remote
    # repository"), the link has ssh's words (a removal from a shared folder, above all).
    refused_key = "Permission denied (publickey" in str(found.get("link") or "")
    for name in ("push", "pull"):  # the remote's words name its key's forced command
        error = str(found.get(name) or "")
        if REFUSED_BY_KEY in error:
            fixes[name] = FORCED_FIX
        elif "Permission denied (publickey" in error or (
                refused_key and "Could not read from remote repository" in error):
            fixes[name] = LOGIN_FIX
    return [{"name": name, "error": str(found[name]), "fix": fixes[name]}
            for name in ORDER if name in found]


LOCAL_ONLY = ("syncmethod = none in an original configuration, as for the original: never "
              "a push nor a pull; add pullinterval = 300 to [autosync] to sync")


def headline(status, when=str):
    """The status in one line; `when` shows a unix time (a pause's end)."""
    listed = problems(dict(status, paused=_shown(status.get("paused"), when)))
    if listed:
        first = listed[0]
        more = " (and %d more problem%s)" % (len(listed) - 1, "" if len(listed) == 2 else "s") \
            if len(listed) > 1 else ""
        return "NOT syncing: %s - %s%s" % (first["error"], first["fix"], more)
    if status.get("localonly"):  # its commits are never pushed: unpushed says nothing
        return "committing" if status.get("state") in BUSY or status.get("pending") or \
            status.get("rescan") else "history kept here only (%s)" % LOCAL_ONLY
    if status.get("state") in BUSY or status.get("pending") or status.get("rescan") \
            or status.get("unpushed"):
        return "syncing"
    if status.get("waiting"):
        return "in sync: %s" % status["waiting"]
    return "in sync"


def _shown(paused, when):
    if not paused:
        return paused
    return dict(paused, until=when(paused["until"]) if paused.get("until") else None)
