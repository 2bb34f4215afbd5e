"""vcs/copyrules.py: a conflict copy's own rule names it alone (any name git can hold),
and gives it its original's attributes, read back by git itself."""
import os

from autosync.vcs import copyrules
from base import git

NAMES = ["secrets (conflict from a 2026-12-07 193204).env", 'we"ird*[x]\\y\n.env',
         " lead.env", "#hash.env", "!bang.env", "é ü.env", "tab\there.env"]


def test_a_copy_s_rule_names_it_alone_and_gives_it_its_original_s_attributes(tmp_path):
    folder = str(tmp_path)
    git("init", "-q", folder)
    os.mkdir(os.path.join(folder, "sub"))
    with open(os.path.join(folder, "sub", ".gitattributes"), "wb") as f:
        f.write(b"secrets.env filter=crypt diff=crypt\n*.env text -ident")   # no newline
    pairs = [("sub/secrets.env", "sub/" + n) for n in NAMES]
    rules = copyrules.needed(folder, pairs)
    assert list(rules) == ["sub/.gitattributes"]
    copyrules.append(os.path.join(folder, "sub", ".gitattributes"), rules["sub/.gitattributes"])
    found = copyrules.attributes(folder, ["sub/secrets.env", "sub/other.env", "sub/wexird.env"] +
                                 [c for _, c in pairs])
    for _, copy in pairs:
        assert found[copy] == found["sub/secrets.env"], copy
    assert found["sub/other.env"] == found["sub/wexird.env"] == {"text": "set", "ident": "unset"}
    assert copyrules.needed(folder, pairs) == {}   # nothing more to say
    assert copyrules.needed(folder, [("sub/other.env", "sub/other (conflict).env")]) == {}


def test_where_the_folder_s_rules_are_a_link_the_rule_stays_on_this_machine(tmp_path):
    folder = str(tmp_path / "r")
    git("init", "-q", folder)
    with open(str(tmp_path / "elsewhere"), "w") as f:
        f.write("secrets.env filter=crypt\n")
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(folder, ".gitattributes"))
    with open(os.path.join(folder, ".git", "info", "attributes"), "w") as f:
        f.write("secrets.env filter=crypt\n")
    copy = "secrets (conflict from a 2026-12-07 193204).env"
    assert copyrules.keep(folder, "secrets.env", copy) == []
    assert open(str(tmp_path / "elsewhere")).read() == "secrets.env filter=crypt\n"  # not written through
    assert copyrules.attributes(folder, [copy])[copy] == {"filter": "crypt"}
