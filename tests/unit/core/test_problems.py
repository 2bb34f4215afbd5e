"""problems.py: what stops syncing, named, most pressing first, with what to do."""
from autosync.core import problems


def test_nothing_wrong_is_in_sync_or_syncing():
    assert problems.problems({"state": "idle"}) == []
    assert problems.headline({"state": "idle"}) == "in sync"
    assert problems.headline({"state": "pushing"}) == "syncing"
    assert problems.headline({"state": "idle", "pending": ["a"]}) == "syncing"
    assert problems.headline({"state": "idle", "waiting": "the remote is empty"}) == \
        "in sync: the remote is empty"


def test_each_failing_operation_is_named_with_what_to_do():
    status = {"state": "idle", "failing": {"pull": "pull: unreachable", "folder": "gone"},
              "watch": {"unwatched": 3, "problem": "raise fs.inotify.max_user_watches"}}
    listed = problems.problems(status)
    assert [p["name"] for p in listed] == ["folder", "watch", "pull"]
    assert listed[0]["error"] == "gone" and "put the synced folder back" in listed[0]["fix"]
    assert all(p["fix"] for p in listed)
    assert problems.headline(status).startswith("NOT syncing: gone - put the synced folder")
    assert problems.headline(status).endswith("(and 2 more problems)")


def test_a_pause_is_a_problem_with_its_end():
    status = {"state": "paused", "paused": {"since": 1, "until": 100}}
    assert problems.headline(status, when=lambda t: "at %d" % t) == \
        "NOT syncing: paused by the user until at 100 - dvcs-autosync resume"


def test_every_name_has_a_fix_and_a_place_in_the_order():
    assert set(problems.ORDER) == set(problems.FIX)


def test_the_link_s_fix_is_that_of_the_syncmethod():
    status = {"state": "idle", "failing": {"link": "link: Permission denied (publickey)."}}
    assert "[xmpp] username" in problems.problems(dict(status, syncmethod="xmpp"))[0]["fix"]
    ssh = problems.problems(dict(status, syncmethod="ssh"))[0]["fix"]
    assert "log in to the server with ssh" in ssh and "[xmpp]" not in ssh
    assert problems.problems(status)[0]["fix"] == problems.FIX["link"]  # an older committer


def test_the_ssh_link_s_fix_fits_ssh_s_words():
    def fix(error):
        return problems.problems({"state": "idle", "syncmethod": "ssh",
                                  "failing": {"link": error}})[0]["fix"]
    refused = fix("link: the watch command ended (exit 255): ssh: connect to host h port "
                  "22: Connection refused")
    assert refused.startswith("the server or the network") and "key" not in refused \
        and "autosync-remote" not in refused
    assert fix("link: ... (exit 255): Could not resolve hostname h").startswith("the server")
    assert fix("link: ... (exit 255): me@h: Permission denied (publickey).").startswith(
        "check that this machine can log in to the server with ssh")
    assert fix("link: ... (exit 127): sh: 1: exec: autosync-remote: not found").startswith(
        "install autosync-remote on the server")
    assert fix("link: something else") == problems.LINK_FIX["ssh"]


def test_a_refused_key_is_the_pull_s_fix_too():
    """A key the server refuses (removed from a shared folder): git's pull keeps only
    "Could not read from remote repository", the link holds ssh's words; both say so."""
    pull = "pull: pullcmd failed (exit 128): git fetch: fatal: Could not read from remote " \
           "repository."
    refused = {"state": "idle", "syncmethod": "ssh", "failing": {
        "pull": pull, "link": "link: ... (exit 255): me@h: Permission denied (publickey)."}}
    listed = problems.problems(refused)
    assert [p["fix"] for p in listed] == [problems.LOGIN_FIX, problems.LOGIN_FIX + problems.UNTIL]
    assert "you were removed from the share" in listed[0]["fix"]
    network = {"state": "idle", "syncmethod": "ssh", "failing": {
        "pull": pull, "link": "link: ... (exit 255): Connection refused"}}
    assert problems.problems(network)[0]["fix"] == problems.FIX["pull"]


def test_a_folder_away_is_told_how_to_move_it_and_a_rebase_how_to_end_it():
    away = {"state": "idle", "failing": {"folder": "folder: /home/u/Sync is gone; not "
                                                   "committing"}}
    fix = problems.problems(away)[0]["fix"]
    assert fix.startswith("put the synced folder back where it was; or, moved on purpose: "
                          "stop dvcs-autosync, run dvcs-autosync init REMOTE NEWFOLDER --force")
    assert "rebase" not in fix
    rebase = {"state": "idle", "failing": {"folder": "folder: the repository is in the middle "
                                                     "of a rebase: finish it (git rebase "
                                                     "--continue) or abort it"}}
    assert problems.problems(rebase)[0]["fix"] == problems.REBASE_FIX
