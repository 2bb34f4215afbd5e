"""See dvcs-autosync sync two folders for real, in a throwaway temporary folder.

Makes a bare git repository and two clones of it ("laptop" and "desktop"),
starts a private prosody XMPP server on 127.0.0.1, runs the whole suite on
each clone, then changes files on one machine and shows them arriving on the
other. Run it through tests/demo.sh, which installs what it needs first and
runs this with the venv's Python: the programs are the venv's own launchers.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from prosody import Prosody  # noqa: E402  (the tests' private server, reused)

PASSWORD = "demo-password"


def git(*args, cwd=None):
    return subprocess.run(("git",) + args, cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def make_repositories(base):
    remote = os.path.join(base, "remote.git")
    git("init", "-q", "--bare", "-b", "main", remote)
    clones = {}
    for name in ("laptop", "desktop"):
        path = os.path.join(base, name)
        git("clone", "-q", remote, path)
        git("config", "user.name", "Demo on " + name, cwd=path)
        git("config", "user.email", "demo@example.org", cwd=path)
        clones[name] = path
    laptop = clones["laptop"]
    with open(os.path.join(laptop, "README"), "w") as f:
        f.write("A folder kept in sync by dvcs-autosync.\n")
    git("add", "README", cwd=laptop)
    git("commit", "-q", "-m", "first", cwd=laptop)
    git("push", "-q", "origin", "HEAD:main", cwd=laptop)
    git("pull", "-q", "origin", "main", cwd=clones["desktop"])
    git("branch", "-q", "--set-upstream-to=origin/main", cwd=clones["desktop"])
    return remote, clones


def write_config(base, name, path, server, jid):
    config = os.path.join(base, name + ".autosync")
    with open(config, "w") as f:
        f.write(f"""[autosync]
path = {path}
syncmethod = xmpp
notifymethod = none
hostname = {name}

[xmpp]
username = {jid}
password = {PASSWORD}
host = 127.0.0.1
port = {server.port}
cafile = {server.cafile}
resource = {name}
""")
    os.chmod(config, 0o600)
    return config


def wait_for(check, what, timeout=30.0):
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.02)
    raise SystemExit("demo: gave up waiting for %s (see the logs in the temporary folder)" % what)


def has(path, content=None):
    def check():
        if content is None:
            return not os.path.exists(path)
        try:
            with open(path) as f:
                return f.read() == content
        except OSError:
            return False
    return check


def program(name):
    """The installed program `name`: the launcher beside this Python (a venv's bin/)."""
    launcher = os.path.join(os.path.dirname(sys.executable), name)
    if not os.access(launcher, os.X_OK):
        raise SystemExit("demo: %s is not installed beside %s; run tests/demo.sh"
                         % (name, sys.executable))
    return launcher


def status(config):
    return subprocess.run([program("autosync-notify"), "--config", config, "status"],
                          capture_output=True, text=True).stdout


def run_demo(base):
    server = Prosody(os.path.join(base, "prosody"))
    jid = server.register("me", PASSWORD)
    server.start()
    print("private XMPP server on 127.0.0.1:%d, account %s" % (server.port, jid))
    remote, clones = make_repositories(base)
    print("bare repository %s, clones %s" % (remote, ", ".join(clones.values())))
    procs = []
    try:
        configs = {}
        for name, path in clones.items():
            configs[name] = write_config(base, name, path, server, jid)
            log = open(os.path.join(base, name + ".log"), "w")
            procs.append(subprocess.Popen([program("dvcs-autosync"), configs[name]],
                                          stdout=log, stderr=log))
        for name, config in configs.items():
            wait_for(lambda: "state:       idle" in status(config), name + " to start")
        time.sleep(1.0)  # let both XMPP listeners log in and see each other
        laptop, desktop = clones["laptop"], clones["desktop"]
        steps = [
            ("write notes.txt on the laptop", lambda: open(os.path.join(laptop, "notes.txt"), "w")
             .write("hello from the laptop\n"),
             has(os.path.join(desktop, "notes.txt"), "hello from the laptop\n"), "the desktop"),
            ("edit notes.txt on the desktop", lambda: open(os.path.join(desktop, "notes.txt"), "a")
             .write("and from the desktop\n"),
             has(os.path.join(laptop, "notes.txt"), "hello from the laptop\nand from the desktop\n"),
             "the laptop"),
            ("rename it to ideas.txt on the laptop", lambda: os.rename(
                os.path.join(laptop, "notes.txt"), os.path.join(laptop, "ideas.txt")),
             has(os.path.join(desktop, "ideas.txt"),
                 "hello from the laptop\nand from the desktop\n"), "the desktop"),
            ("delete it on the desktop", lambda: os.unlink(os.path.join(desktop, "ideas.txt")),
             has(os.path.join(laptop, "ideas.txt")), "the laptop"),
        ]
        for what, act, arrived, where in steps:
            act()
            seconds = wait_for(arrived, what)
            print("%-40s -> on %s after %.2f s" % (what, where, seconds))
        print("\nautosync-notify status on the laptop:\n" + status(configs["laptop"]))
        print("history in the bare repository:")
        print(git("--git-dir", remote, "log", "--format=  %h %s", "main"))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    p.add_argument("--keep", action="store_true", help="keep the temporary folder to look at")
    args = p.parse_args()
    base = tempfile.mkdtemp(prefix="autosync-demo-")
    try:
        run_demo(base)
    finally:
        if args.keep:
            print("kept %s (logs: laptop.log, desktop.log)" % base)
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
