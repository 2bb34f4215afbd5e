"""A program run on a pseudo-terminal, and what the terminal shows in the end: for the
tests of progress on a terminal (tests/unit/tools/test_progress.py and the programs'
own, tests/integration/test_progress_programs.py, tests/integration/test_largefiles.py)."""
import os
import pty
import subprocess

ERASE = "\r\033[K"  # carriage return, erase to the end of the line: a line written over


def on_a_terminal(argv):
    """argv run with a pseudo-terminal as its stdin, stdout and stderr -> (status, what
    the terminal received, as text)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, COLUMNS="200"))
    os.close(slave)
    received = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the last holder of the terminal's other side is gone
            break
        if not data:
            break
        received.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(received).decode("utf-8", "replace")


def lasting(text):
    """What the terminal shows in the end, as text: of each row what the last erase
    (carriage return, erase to the end of the line) left (the terminal sends each
    newline back as CR LF)."""
    return "\n".join(row.split(ERASE)[-1] for row in text.split("\r\n"))
