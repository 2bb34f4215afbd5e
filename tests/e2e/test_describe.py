"""autosync-notify describe end to end: real git, the real suite, a bare remote on disk.

The text goes on top of our last commit while it is not pushed (amendcmd), and on top
of the next commit once it is; `dvcs-autosync log` shows it."""
import os
import subprocess


from base import git
from helpers import commits_made, log_of, subject



def write(machine, rel, text):
    with open(os.path.join(machine.path, rel), "w") as f:
        f.write(text)


def test_describe_before_and_after_the_push(machines, remote):
    a = machines("a", pushdelay="60")  # a minute to describe the commit before it goes
    write(a, "tax.txt", "2025\n")
    commits_made(a, 1)
    before = git("rev-parse", "HEAD", cwd=a.path).strip()
    out = a.notify("describe", "Tax", "forms", "for", "2025").stdout
    assert out.startswith("described the last commit ") and "(not pushed yet)" in out
    after = git("rev-parse", "HEAD", cwd=a.path).strip()
    assert after != before and out.split()[4] == after.decode()[:12]
    assert subject(a.path).startswith("Tax forms for 2025 (autosync on ")
    assert subject(a.path).endswith(": 1 added)")
    assert git("show", "--name-only", "--format=", "HEAD", cwd=a.path).split() == [b"tax.txt"]
    assert a.status()["last_commit"]["message"].startswith("Tax forms for 2025 (")
    assert remote.commit_count() == 1  # nothing went out yet

    a.notify("sync")
    assert remote.log("-1", "--format=%s").startswith("Tax forms for 2025 (autosync on ")
    pushed = git("--git-dir", remote.path, "rev-parse", "main").strip()
    # Pushed: never rewritten; the next text waits for the next commit.
    assert a.notify("describe", "Holiday photos").stdout.strip() == \
        "the text goes at the top of the next commit"
    assert git("rev-parse", "HEAD", cwd=a.path).strip() == pushed
    write(a, "beach.jpg", "sand\n")
    a.notify("sync")
    assert remote.log("-1", "--format=%s").startswith("Holiday photos (autosync on ")
    assert subprocess.run(["git", "--git-dir", remote.path, "merge-base", "--is-ancestor",
                           pushed, "main"]).returncode == 0  # the pushed commit stays as it was

    folder = log_of(a)
    assert "-- Holiday photos" in folder and "-- Tax forms for 2025" in folder
    one = log_of(a, os.path.join(a.path, "tax.txt"))
    assert "added  -- Tax forms for 2025" in one


def test_describe_refuses_what_is_not_one_line(machines):
    a = machines("a")
    result = a.notify("describe", "bell\x07", check=False)
    assert result.returncode == 2 and "one printable line" in result.stderr
    assert a.notify("describe", check=False).returncode == 2


def test_without_amendcmd_the_text_always_waits_for_the_next_commit(machines, remote):
    a = machines("a", pushdelay="60", dvcs={"amendcmd": ""})
    write(a, "a.txt", "a\n")
    commits_made(a, 1)
    first = subject(a.path)
    assert a.notify("describe", "Draft").stdout.strip() == \
        "the text goes at the top of the next commit"
    assert subject(a.path) == first
    write(a, "b.txt", "b\n")
    commits_made(a, 2)
    assert subject(a.path).startswith("Draft (autosync on ")


def test_a_describe_naming_no_revision_or_an_unknown_one(machines, remote):
    """rev must be hex digits; one that is no commit here goes on the next commit."""
    from autosync.core.config import load
    from autosync.core.protocol import connect
    a = machines("a")
    conn = connect(load(a.config).socket)
    try:
        reply = conn.request({"cmd": "describe", "text": "x", "rev": "not hex"}, timeout=30)
        assert reply["ok"] is False and "rev must be a revision's hex digits" in reply["error"]
        reply = conn.request({"cmd": "describe", "text": "Later", "rev": "ab" * 20}, timeout=30)
        assert reply == {"ok": True, "to": "next"}
    finally:
        conn.close()
    write(a, "n.txt", "n\n")
    a.notify("sync")
    assert remote.log("-1", "--format=%s").startswith("Later (autosync on ")
