"""End-to-end: two machines that both cloned an empty remote and both had files before
their first sync converge, every file kept (issue 19: before, "refusing to merge unrelated
histories" for ever, with status "idle"). Real daemons, a real bare remote."""
import pytest

from base import Machine, git, tree, wait_until
from helpers import write
from helpers import EmptyRemote



# The shipped pullcmd and the original's (both the guarded pull), and a `git pull` that
# runs as a command (an option the guarded pull does not take: --log).
PULLCMDS = [None, "git pull", "git pull --no-rebase --no-edit --log"]


@pytest.mark.parametrize("pullcmd", PULLCMDS)
def test_two_machines_that_both_began_on_an_empty_remote_converge_keeping_everything(
        tmp_path, pullcmd):
    remote = EmptyRemote(tmp_path / "empty.git")
    dvcs = {"pullcmd": pullcmd} if pullcmd else None
    a, b = (Machine(tmp_path, n, remote, dvcs) for n in ("a", "b"))
    # Before either machine ever synced: files of its own, and one path in both.
    for m in (a, b):
        write(m, "notes.txt", b"notes written on %s\n" % m.name.encode())
        write(m, "only-%s/file.txt" % m.name, b"%s's own file\n" % m.name.encode())
    try:
        a.start()
        wait_until(lambda: remote.head(), 30, 0.1, "a's first push")
        b.start()

        def converged():
            for m in (a, b):
                m.notify("pull", check=False)
            heads = {git("rev-parse", "HEAD", cwd=m.path).strip() for m in (a, b)}
            return heads == {remote.head()} and not a.dirty() and not b.dirty()
        wait_until(converged, 90, 0.5, "both machines to hold the remote's head")
        files = tree(a)
        assert files == tree(b)
        assert files["only-a/file.txt"] == b"a's own file\n"
        assert files["only-b/file.txt"] == b"b's own file\n"
        copies = [p for p in files if p.startswith("notes") and p != "notes.txt"]
        assert len(copies) == 1, files
        assert sorted([files["notes.txt"], files[copies[0]]]) == \
            [b"notes written on a\n", b"notes written on b\n"]
        for m in (a, b):
            status = m.status()
            assert status["problems"] == [] and not status.get("unpushed"), status
        assert "unrelated histories" not in a.logtext() + b.logtext() or pullcmd == PULLCMDS[2]
    finally:
        a.stop(), b.stop()
