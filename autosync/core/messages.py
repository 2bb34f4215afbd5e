"""The commit message the daemon writes, and everything that reads it back.

Written by the committer; read by `dvcs-autosync log` (what happened to a
file in each version), by the `pulled` event (which hosts a pull brought
changes from) and by conflict handling (the host in a conflict copy's name).
The format, one commit:

    autosync on HOST: 2 added, 1 moved          <- the summary line
                                                 <- blank
    NOTE                                         <- e.g. "rescan" (only beside a summary)
    added: notes.txt                             <- one line per file, at most MESSAGE_LINES
    moved: new/a.txt (from old/a.txt)
    ... and 3 more
    CONTEXT                                      <- contextcmd's output, when configured

and a merge that kept both versions of files: `autosync on HOST: merged, N conflicts`
with one `conflict: PATH (other version kept as COPY)` line each.

A commit the user described (`autosync-notify describe TEXT`) has the text at
the top, the summary in brackets after it, so that a one-line log shows both
and every reader still finds the host:

    TEXT (autosync on HOST: 2 added, 1 moved)
"""
import re

ACTIONS = ("added", "modified", "removed", "moved")
MESSAGE_LINES = 200  # files named in one commit message; the rest are counted
SUMMARY = re.compile(r"autosync on (?P<host>[^\s:]+): (?P<summary>.*)")
# The last " (autosync on ...)" of a line: the user's text may hold brackets too.
DESCRIBED = re.compile(r"(?P<text>.*) \((?P<head>autosync on [^\s:]+: .*)\)")
# Characters of one line that a user or a tool puts in a commit message: a description,
# a sync's or a restore's note (committer, history, settle all use this one).
TEXT_MAX = 300


def printable(path):
    r"""A name as it is shown anywhere (status, the log, notifications, commit messages,
    every tool's output and errors): as git's core.quotePath shows it. Unchanged when
    every character is printable and none is `"` or a backslash; else in double quotes
    with C escapes (\n, \t, \", \\; other controls, DEL, C1 and other unprintable
    characters as their UTF-8 bytes in octal: \033; a byte that is not UTF-8 as itself
    in octal). So a terminal acts on nothing in it, and it stays one line."""
    path = str(path)
    if path.isprintable() and '"' not in path and "\\" not in path:
        return path
    return '"' + "".join(map(_quoted, path)) + '"'


_UNQUOTE = re.compile(r'\\([0-7]{3}|.)', re.S)
_C_LETTERS = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


def unquoted(text):
    """A name as printable() showed it -> the name (read back from a commit message);
    text that is not in double quotes is the name as it is."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text

    def byte(found):
        c = found.group(1)
        if len(c) == 3:
            return bytes([int(c, 8) & 0xFF])
        return bytes([_C_LETTERS[c]]) if c in _C_LETTERS else c.encode("utf-8", "surrogateescape")
    parts, at = [], 1
    for found in _UNQUOTE.finditer(text, 1, len(text) - 1):
        parts += [text[at:found.start()].encode("utf-8", "surrogateescape"), byte(found)]
        at = found.end()
    parts.append(text[at:-1].encode("utf-8", "surrogateescape"))
    return b"".join(parts).decode("utf-8", "surrogateescape")


def escaped(text):
    """Free text (an error, a log line) that may hold a name not quoted by printable():
    every character a terminal would act on written as printable() writes it; newlines
    and tabs kept."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch in "\n\t" or ch.isprintable() else _quoted(ch) for ch in text)


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v",
              "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def _quoted(ch):
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch]
    if ch.isprintable():
        return ch
    if "\udc80" <= ch <= "\udcff":  # a byte that was not UTF-8 (surrogateescape)
        return "\\%03o" % (ord(ch) - 0xDC00)
    return "".join("\\%03o" % b for b in ch.encode("utf-8", "surrogatepass"))


def check_text(text):
    """A description as given (describe request, describecmd's output) -> one clean line;
    ValueError (one line) if it is not text one can put in a message."""
    if not isinstance(text, str):
        raise ValueError("text must be a string")
    text = " ".join(text.split())  # a dialog's newline or a tab is a blank
    if not text or not text.isprintable() or len(text) > TEXT_MAX:
        raise ValueError("text must be one printable line of 1 to %d characters" % TEXT_MAX)
    return text


def split_subject(subject):
    """(the user's text or None, the summary line) of a message's first line."""
    subject = subject.strip()
    found = DESCRIBED.fullmatch(subject)
    if found and SUMMARY.fullmatch(found.group("head")):
        return found.group("text"), found.group("head")
    return None, subject


def described(message, text):
    """`message` with `text` at its top (after a text it has already: "old; new")."""
    subject, newline, rest = message.partition("\n")
    old, head = split_subject(subject)
    return "%s (%s)" % ("%s; %s" % (old, text) if old else text, head) + newline + rest


def commit_message(host, changes, note=None, context=None, text=None):
    counts = {a: 0 for a in ACTIONS}
    lines = []
    for change in changes:
        counts[change["action"]] += 1
        if change["action"] == "moved":
            lines.append("moved: %s (from %s)" % (printable(change["path"]),
                                                  printable(change["src"])))
        else:
            lines.append("%s: %s" % (change["action"], printable(change["path"])))
    summary = ", ".join("%d %s" % (n, a) for a, n in counts.items() if n)
    head = "autosync on %s: %s" % (host, summary or note or "changes")
    if len(lines) > MESSAGE_LINES:
        lines[MESSAGE_LINES:] = ["... and %d more" % (len(lines) - MESSAGE_LINES)]
    body = ([note] if note and summary else []) + lines + ([context] if context else [])
    message = head + ("\n\n" + "\n".join(body) if body else "")
    return described(message, text) if text else message


# merge_message's line for one copy, read back (by the machines that pull the merge).
MERGED_COPY = re.compile(r"conflict: (.+) \(other version kept as (.+)\)")


def merge_message(host, copies):
    """The commit that finishes a merge; copies: [{"path", "copy"}] kept beside each other."""
    lines = ["conflict: %s (other version kept as %s)" % (printable(c["path"]),
                                                          printable(c["copy"]))
             for c in copies]
    message = "autosync on %s: merged%s" % (host, ", %d conflicts" % len(copies) if copies else "")
    return message + ("\n\n" + "\n".join(lines) if lines else "")


def host_of(subject):
    """The host a summary line names, or None for a commit made by hand."""
    found = SUMMARY.match(split_subject(subject)[1])
    return found.group("host") if found else None


def text_of(message):
    """The user's description of a commit, or None."""
    return split_subject(message.lstrip("\n").partition("\n")[0])[0]


def action_of(message, rel, folder_like):
    """(host, action) of one version of `rel`, read from its commit message.

    A commit made by hand, or one that does not list the path, says "changed";
    its host is then unknown (the caller falls back to the author)."""
    lines = message.strip("\n").split("\n")
    head = SUMMARY.fullmatch(split_subject(lines[0])[1])
    host = head.group("host") if head else None
    if folder_like:
        return host, head.group("summary") if head else lines[0].strip()
    # Messages written before names were quoted as git quotes them held them raw when
    # printable, else as Python's ascii() wrote them: those are read too.
    for name in dict.fromkeys((printable(rel), rel if rel.isprintable() else ascii(rel))):
        found = _action_in(lines[1:], name)
        if found:
            return host, found
    return host, "changed"


def _action_in(lines, name):
    for line in lines:
        if line in ("added: " + name, "modified: " + name, "removed: " + name):
            return line.partition(":")[0]
        if line.startswith("moved: " + name + " (from "):
            return "moved from " + line[len("moved: " + name + " (from "):-1]
        if line.startswith("moved: ") and line.endswith(" (from %s)" % name):
            return "moved to " + line[len("moved: "):-len(" (from %s)" % name)]
        if line.startswith("conflict: " + name + " ("):  # a merge that kept both versions
            return "conflict " + line[len("conflict: " + name + " "):]
    return None
