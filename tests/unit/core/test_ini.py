"""ini.py: the original's file syntax, read as RawConfigParser reads it."""
import configparser
import random

import pytest

from autosync.core import ini
from autosync.core.ini import ConfigError


# Lines to build files from, each a case RawConfigParser has a rule for.
PIECES = ["[a]", "[b]", "[a b]", "[]", "[[x]]", "  [c]", "x = 1", "X: 2", "y=", "a:b=c",
          "key =   spaced   ", "k = v # h", "z = '''" + '"""', "x = 1 \\", "é = é",
          " cont", "\tcont2", "", "  ", "# c", "  ; c", "junk", "= v", "  = w"]


def test_reader_agrees_with_rawconfigparser_on_generated_files():
    """Values, and the line of the first syntax error, as RawConfigParser(strict=False) has them.

    (Not compared: [DEFAULT], which is an ordinary section here, see below.)"""
    rnd = random.Random(9)
    for _ in range(3000):
        text = "\n".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 10)))
        text += rnd.choice(["", "\n"])
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read_string(text)
            want = {s: dict(parser.items(s)) for s in parser.sections()}
        except configparser.MissingSectionHeaderError as e:
            want = "line %d" % e.lineno
        except configparser.ParsingError as e:
            want = "line %d" % e.errors[0][0]
        try:
            got = {s: {k: v for k, (v, _) in keys.items()}
                   for s, keys in ini.parse("f", text, []).items()}
        except ConfigError as e:
            got = str(e).split(":")[1].strip()
        assert got == want, text


def test_a_malformed_line_in_a_secret_section_is_not_echoed():
    text = "[xmpp]\nusername = me@example.org\nhunter2\n"
    with pytest.raises(ConfigError) as e:
        ini.parse("f", text, [], secret=("xmpp",))
    assert str(e.value) == ("f: line 3: expected 'key = value' or a [section] header, "
                            "got a line that is neither")
    with pytest.raises(ConfigError) as e:
        ini.parse("f", text, [])
    assert "'hunter2'" in str(e.value)


def test_text_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"[autosync]\npath = caf\xe9\n")
    with pytest.raises(ConfigError) as e:
        ini.read_text(str(path))
    assert str(e.value) == "%s: line 2: expected UTF-8 text, got bytes that are not" % path
    with pytest.raises(ConfigError) as e:
        ini.read_text(str(tmp_path / "missing"))
    assert str(e.value) == "%s: cannot read: No such file or directory" % (tmp_path / "missing")


def test_a_key_set_twice_and_a_section_again_warn_with_their_lines():
    warnings = []
    parsed = ini.parse("f", "[a]\nx = 1\n[b]\n[a]\nX = 2\n", warnings)
    assert parsed == {"a": {"x": ("2", 5)}, "b": {}}
    assert warnings == ["f: line 4: section [a] appears again; its keys are merged",
                        "f: line 5: [a] x is set again; the last value counts"]
