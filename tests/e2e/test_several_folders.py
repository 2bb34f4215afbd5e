"""End-to-end: two folders, two config files, two dvcs-autosync side by side.
Their pidfiles and sockets are their own, and autosync-notify run inside
each folder finds that folder's daemon."""
import json
import os
import subprocess
import sys


from autosync.core.config import load
from base import Machine, Remote, wait_until



def notify_from(folder, *args):
    """autosync-notify with no --config or --socket, run where a user (or a git hook) would."""
    return subprocess.run([sys.executable, "-m", "autosync.tools.notify"] + list(args), cwd=folder,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)


def test_two_folders_run_side_by_side(tmp_path, remote):
    photos_remote = Remote(tmp_path / "photos-remote.git")
    work = Machine(tmp_path, "work", remote)
    photos = Machine(tmp_path, "photos", photos_remote)
    try:
        work.start(), photos.start()
        pidfiles = [work.config + ".pid", photos.config + ".pid"]
        assert [int(open(p).read()) for p in pidfiles] == [work.proc.pid, photos.proc.pid]
        sockets = [load(m.config).socket for m in (work, photos)]
        assert sockets[0] != sockets[1] and all(os.path.exists(s) for s in sockets)

        # From inside each folder (and a folder below it), the right daemon answers.
        os.makedirs(os.path.join(photos.path, "2024", "summer"))
        for m, folder in ((work, work.path), (photos, photos.path),
                          (photos, os.path.join(photos.path, "2024", "summer"))):
            result = notify_from(folder, "--json", "status")
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout)["path"] == m.path
        # Outside both (and with --all anywhere): every daemon of this user, both among them.
        for folder, args in ((str(tmp_path), ()), (work.path, ("--all",))):
            outside = notify_from(folder, "--json", *args, "status")
            assert outside.returncode == 0, outside.stderr
            assert {work.path, photos.path} <= {s["path"] for s in json.loads(outside.stdout)}
        assert notify_from(folder, "sync", "--all").returncode == 2

        # Each folder syncs to its own remote only.
        with open(os.path.join(work.path, "plan.txt"), "w") as f:
            f.write("work\n")
        with open(os.path.join(photos.path, "2024", "summer", "beach.jpg"), "w") as f:
            f.write("sand\n")
        wait_until(lambda: work.settled(remote) and photos.settled(photos_remote), 30, 0.1,
                   "both folders to settle")
        assert set(remote.files()) == {b"README", b"plan.txt"}
        assert set(photos_remote.files()) == {b"README", b"2024/summer/beach.jpg"}

        # A second daemon for the same config is refused; the first goes on.
        again = subprocess.run([sys.executable, "-m", "autosync.supervisor", work.config],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=30)
        assert again.returncode == 1 and "already running" in again.stderr
        assert work.status()["state"] == "idle"
    finally:
        work.stop(), photos.stop()
    assert not any(os.path.exists(p) for p in pidfiles + sockets)
