"""Start-up, memory and idle CPU on a large committed tree; the disk a thin and a full machine use after 1,000 commits of a 1 MB file (`--only scale`)."""
import os
import subprocess
import time

from .common import (FULL, cpu_seconds, git, make_remote, make_tree, median, memory, secs,
                      serve_partial_clones, tree_bytes)


def scale(run, sizes):
    """Start-up on a large committed tree until watched and idle; memory; idle CPU there."""
    files, folders = sizes["tree_files"], sizes["tree_folders"]
    started = time.monotonic()
    remote = make_remote(os.path.join(run.base, "scale.git"),
                         lambda seed: make_tree(seed, files, folders))
    a = run.machine("scale-a", remote)
    print("  (tree of %d files made, committed and cloned in %.0f s)"
          % (files, time.monotonic() - started))

    status_times = []
    for _ in range(4):
        started = time.monotonic()
        git("status", "--porcelain", cwd=a.path)
        status_times.append(time.monotonic() - started)
    status_times = status_times[1:]  # the first one only warms the cache

    a.start()
    ready = a.wait_ready(300)
    line = a.watching_line()
    watcher_says = line.split(": ", 2)[-1] if line else "?"
    time.sleep(1.0)  # let whatever start-up left over finish before measuring memory
    rows_mem = memory(a.proc.pid)
    rss = sum(r[2] for r in rows_mem) / 1024
    pss = sum(r[3] for r in rows_mem) / 1024
    detail = ", ".join("%s %.0f" % (r[1], r[2] / 1024) for r in rows_mem)

    seconds = sizes["tree_idle_seconds"]
    cpu_before, t_before = cpu_seconds(a.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(a.proc.pid) - cpu_before) / (time.monotonic() - t_before) * 100
    run.stop(a)

    return [
        ("scale: start until watching and idle (%d files)" % files, secs(ready),
         secs(median(status_times)) + " (git status)", "", None),
        ("scale: the watcher's own line", watcher_says, "", "", None),
        ("scale: memory, sum of RSS (MB)", "%.0f MB" % rss, "", "< 150 MB", rss < 150,
         "PSS %.0f MB; %s" % (pss, detail)),
        ("scale: idle CPU on that tree (%d s)" % seconds, "%.2f %%" % cpu, "", "< 1 %",
         cpu < 1),
    ] + history_disk(run, sizes)


def history_disk(run, sizes):
    """The disk a thin machine (`init --thin`: a partial clone, --filter=blob:none) and a
    full one use after N commits of a 1 MB file that does not compress (1,000; 50 with
    --quick). The remote's history is written with `git fast-import` (no work tree); the
    clones are what `init` makes (--no-local: a local clone would ignore the filter)."""
    commits = 1000 if sizes["tree_files"] >= FULL["tree_files"] else 50
    remote = os.path.join(run.base, "history.git")
    git("init", "-q", "--bare", "-b", "main", remote)
    serve_partial_clones(remote)
    started = time.monotonic()
    proc = subprocess.Popen(("git", "--git-dir", remote, "-c", "gc.auto=0", "fast-import",
                             "--quiet"), stdin=subprocess.PIPE)
    for i in range(commits):
        data, message = os.urandom(1_000_000), b"version %d\n" % i
        proc.stdin.write(b"blob\nmark :%d\ndata %d\n" % (2 * i + 1, len(data)) + data + b"\n")
        proc.stdin.write(b"commit refs/heads/main\nmark :%d\ncommitter bench <b@x> %d +0000\n"
                         b"data %d\n%s" % (2 * i + 2, 1_700_000_000 + i, len(message), message))
        if i:
            proc.stdin.write(b"from :%d\n" % (2 * i))
        proc.stdin.write(b"M 100644 :%d big.bin\n\n" % (2 * i + 1))
    proc.stdin.close()
    proc.wait()
    made = time.monotonic() - started
    used = {}
    for kind, options in (("full", []), ("thin", ["--filter=blob:none"])):
        folder = os.path.join(run.base, "history-%s" % kind)
        started = time.monotonic()
        git("clone", "-q", "--no-local", *options, remote, folder)
        used[kind] = (tree_bytes(os.path.join(folder, ".git")), time.monotonic() - started)
    mb = lambda n: "%.1f MB" % (n / 1e6)
    print("  (%d commits of a 1 MB file written in %.0f s; clones: full %.1f s, thin %.1f s)"
          % (commits, made, used["full"][1], used["thin"][1]))
    return [
        ("scale: .git after %d commits of a 1 MB file: thin machine" % commits,
         mb(used["thin"][0]), mb(used["full"][0]) + " (full clone)", "", None,
         "the remote %s; thin = init --thin (a partial clone), plus the 1 MB file in the "
         "folder on both" % mb(tree_bytes(remote))),
    ]
