"""The original's file syntax: INI text -> {section: {key: (value, line)}}.

The original dvcs-autosync read ~/.autosync with Python's RawConfigParser:
indented continuation lines, `#` inside values, `key: value`, a key set
twice. configobj cannot parse that, so this module reads it by
RawConfigParser's rules (tests compare the two), keeping each key's line
number for warnings. What the keys mean is core/config.py's.
"""
import re


class ConfigError(Exception):
    """A configuration that cannot be used; str() is one line naming file, section and key."""

# RawConfigParser's own patterns: a header is [anything]; the key ends at the first = or :.
SECTION_LINE = re.compile(r"\[(?P<name>.+)\]")
KEY_LINE = re.compile(r"(?P<key>.*?)\s*[=:]\s*(?P<value>.*)$")


def read_text(file):
    """The file's text, newlines as Python's text files give them; one-line errors."""
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError("%s: cannot read: %s" % (file, e.strerror or e)) from None
    try:
        text = data.decode("utf-8-sig")  # a BOM from a Windows editor is not content
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError("%s: line %d: expected UTF-8 text, got bytes that are not"
                          % (file, line)) from None
    # Universal newlines, as Python's text files give RawConfigParser.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse(file, text, warnings, secret=()):
    """Read `text` by RawConfigParser's rules into {section: {key: (value, line number)}}.

    A line indented deeper than the key line continues its value, joined with
    a newline; comment lines (`#` or `;`, even indented) are skipped, also
    between continuation lines; blank lines inside a value are kept and those
    at its end dropped; `#` inside a value is kept; keys are lowercased. A
    malformed line in a `secret` section is not echoed (it may be a password).
    """
    sections = {}  # section -> key -> (its line number, its value's lines)
    section = value = None  # value: the lines of the key being read
    indent = 0
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped.startswith(("#", ";")):
            continue
        if not stripped:
            if value is not None:
                value.append("")
            continue
        this_indent = len(line) - len(line.lstrip())
        if value is not None and this_indent > indent:
            value.append(stripped)
            continue
        indent = this_indent
        header = SECTION_LINE.match(stripped)
        if header:
            section, value = header.group("name"), None
            if section in sections:
                warnings.append("%s: line %d: section [%s] appears again; its keys are merged"
                                % (file, number, section))
            sections.setdefault(section, {})
            continue
        option = KEY_LINE.match(stripped)
        if section is None or not option or not option.group("key"):
            expected = ("a [section] header before any key" if section is None
                        else "'key = value' or a [section] header")
            # A malformed line where passwords live might be one: do not echo it.
            got = "a line that is neither" if section in secret else repr(stripped[:60])
            raise ConfigError("%s: line %d: expected %s, got %s" % (file, number, expected, got))
        key = option.group("key").rstrip().lower()
        if key in sections[section]:
            # The original (Python 2) let the last one win; Python 3 would refuse.
            warnings.append("%s: line %d: [%s] %s is set again; the last value counts"
                            % (file, number, section, key))
        value = [option.group("value")]
        sections[section][key] = (number, value)
    return {name: {k: ("\n".join(v).rstrip(), n) for k, (n, v) in keys.items()}
            for name, keys in sections.items()}
