"""A conflict copy keeps the attributes of the path it came from.

A copy has a name of its own (copies.copy_name), so a rule naming its file
(`secrets.env filter=git-crypt`, `/notes.txt eol=crlf`) does not apply to it:
git would write the copy as the stored blob (ciphertext, an LFS pointer) and
store a copy of local cleartext unencrypted. Where a copy's attributes differ
from its original's in what changes its content (CONTENT), the copy gets a
rule of its own, before it is written or stored: one line naming it alone,
at the end of the .gitattributes of its folder (the deepest file's last
matching line wins, as git reads them), giving it its original's attributes.
The rule is history like any other: every machine writes and stores the copy
as it does its original. Where that file cannot be written (a symbolic link,
a file the user changes at that moment), the line goes into the repository's
own info/attributes instead, which applies here only: the copy is stored
through its original's filter all the same (never cleartext), and the log
says that other machines write it as stored.
"""
import logging
import os
import subprocess

from autosync.core.messages import printable
from autosync.vcs.commands import environment, why
from autosync.vcs.git import git
from autosync.vcs.git_environment import PLAIN

log = logging.getLogger("autosync.copyrules")

RULES = ".gitattributes"
# The attributes that change what is written or stored for a path (gitattributes(5)).
CONTENT = ("filter", "text", "eol", "ident", "working-tree-encoding", "crlf")
GLOB = b"*?[\\"


def attributes(folder, paths, cached=False, env=None, cwd=None, gitenv=PLAIN):
    """{path: {attribute: "set" | "unset" | value}}: every attribute specified for each
    path (`git check-attr -a`, the names on stdin); `cached`: by the index's
    .gitattributes only (env may name another index), else the working tree's first."""
    if not paths:
        return {}
    args = ["check-attr", "-a", "-z", "--stdin"] + (["--cached"] if cached else [])
    proc = subprocess.run(["git"] + args, cwd=cwd or folder, env=environment(env, gitenv),
                          input=b"".join(os.fsencode(p) + b"\0" for p in paths),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode:
        raise RuntimeError("git check-attr: %s" % " | ".join(
            why(proc.stderr.decode(errors="replace"))))
    out = proc.stdout
    found = {p: {} for p in paths}
    fields = out.split(b"\0")
    for path, attr, value in zip(fields[0::3], fields[1::3], fields[2::3]):
        found.setdefault(os.fsdecode(path), {})[attr.decode("utf-8", "replace")] = \
            value.decode("utf-8", "replace")
    return found


def pattern(rel):
    """A path as a gitattributes pattern that matches it alone, relative to the folder
    of the .gitattributes it is in: anchored, glob characters escaped, C-quoted (a name
    with spaces, quotes or control characters)."""
    globbed = b"/" + b"".join(b"\\" + bytes([c]) if bytes([c]) in GLOB else bytes([c])
                             for c in os.fsencode(rel))
    quoted = b"".join(b"\\" + bytes([c]) if c in b'"\\' else
                      b"\\%03o" % c if c < 0x20 or c == 0x7f else bytes([c]) for c in globbed)
    return b'"' + quoted + b'"'


def words(original, on_copy):
    """The attributes that give a copy its original's (`original`, `on_copy`: as
    attributes() gives them), as a rule's words; None when none of CONTENT differs."""
    if all(original.get(a) == on_copy.get(a) for a in CONTENT):
        return None
    said = []
    for attr in sorted(set(original) | set(on_copy)):
        value = original.get(attr)
        if value == on_copy.get(attr):
            continue
        said.append("!" + attr if value is None else attr if value == "set" else
                    "-" + attr if value == "unset" else "%s=%s" % (attr, value))
    return " ".join(said).encode()


def needed(folder, pairs, cached=False, env=None, cwd=None, gitenv=PLAIN):
    """[(original, copy)] -> {the copy's folder's .gitattributes: [(copy, words)]} for
    the copies that lack their original's content attributes."""
    found = attributes(folder, sorted({p for pair in pairs for p in pair}), cached=cached,
                       env=env, cwd=cwd, gitenv=gitenv)
    rules = {}
    for original, copy in pairs:
        said = words(found.get(original, {}), found.get(copy, {}))
        if said is not None:
            rules.setdefault(os.path.join(os.path.dirname(copy), RULES), []).append(
                (copy, said))
    return rules


def with_rules(text, own):
    """A folder's .gitattributes text with the rules for its copies `own` ([(copy,
    words)]) added at its end."""
    if text and not text.endswith(b"\n"):
        text += b"\n"
    return text + b"".join(pattern(os.path.basename(copy)) + b" " + said + b"\n"
                           for copy, said in own)


def in_info(gitdir, prefix, own):
    """Where a folder's .gitattributes cannot take them: the rules for `own` ([(copy,
    words)], paths below `prefix`, the folder's place in the working tree) in the
    repository's info/attributes, which applies on this machine only."""
    info = os.path.join(gitdir, "info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "attributes"), "ab") as f:
        f.write(b"".join(pattern(os.path.join(prefix, copy)) + b" " + said + b"\n"
                         for copy, said in own))
    log.warning("conflict copy %s: the rule that gives it its original's attributes could "
                "not be written into the .gitattributes beside it; it is in "
                ".git/info/attributes (this machine stores the copy as its original, "
                "through its filters; other machines write it as stored)",
                ", ".join(printable(c) for c, _ in own[:3]))


def keep(folder, original, copy, gitenv=PLAIN):
    """For a merge stopped in the working tree: before the copy of `original` is written
    at `copy`, its rule is added at the end of the .gitattributes beside it (appended,
    never through a link; a missing file made). -> [that .gitattributes] to stage with
    the copy; [] when no rule was needed, or it went into info/attributes."""
    written = []
    for rel, own in needed(folder, [(original, copy)], gitenv=gitenv).items():
        try:
            append(os.path.join(folder, rel), own)
            written.append(rel)
        except OSError:
            gitdir = os.fsdecode(git(folder, "rev-parse", "--absolute-git-dir",
                                     gitenv=gitenv).strip())
            prefix = os.fsdecode(git(folder, "rev-parse", "--show-prefix",
                                     gitenv=gitenv).strip())
            in_info(gitdir, prefix, own)
    return written


def append(path, own):
    """The rules for `own` added at the end of the file at path (made if missing, never
    through a symbolic link): an append, which changes no byte already there."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        size = os.fstat(fd).st_size
        last = os.pread(fd, 1, size - 1) if size else b""
        data = with_rules(last, own)[len(last):]
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
