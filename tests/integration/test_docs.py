"""The documentation covers what the programs accept, and the README leads to all of it.

Fast, no daemon: the keys come from autosync/core/config.py's KEYS, the programs from
pyproject.toml's [project.scripts] and bin/, their options and subcommands from their own
argparse parsers, caught as docs/generate.py catches them for the man pages.

* every docs/*.md page is named in the README (as `docs/NAME.md`);
* every key of KEYS is a row of a key table (`| SECTION | `KEY` | ...`) in the README or
  a docs/ page;
* docs/commands.md has a section for every program, and for every subcommand of
  dvcs-autosync, whose text names each of its options, the choices its arguments take
  and its positional arguments;
* a section that a page names (`docs/PAGE.md`, "Title" or README, "Title") is there, and
  so is each page and section the code names (docs/PAGE.md, "Title" in a comment or a
  docstring of autosync/, tests/benchmarks/JOURNAL.md's sections too).
"""
import argparse
import glob
import os
import re
import sys

import pytest

from base import ROOT

sys.path.insert(0, os.path.join(ROOT, "docs"))
import generate  # noqa: E402
from autosync.core import config  # noqa: E402


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def pages():
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def documentation():
    """{path: text} of the README and every docs/ page."""
    return {path: read(path) for path in ["README"] + pages()}


# --- the README leads to every page ----------------------------------------------------

def unlinked(readme, names):
    return [name for name in names if not re.search(r"(?<![\w/.-])%s(?![\w.-])"
                                                    % re.escape(name), readme)]


def test_every_docs_page_is_linked_from_the_readme():
    assert "docs/benchmark.md" in pages()
    assert unlinked(read("README"), pages()) == []


def test_an_unlinked_page_is_named():
    readme = read("README").replace("`docs/history.md`", "`docs/history.mdx`")
    assert unlinked(readme, pages()) == ["docs/history.md"]


# --- every key is documented -----------------------------------------------------------

def key_rows(texts):
    """{(section, key)} of every key table row in texts: `| section | `key` | ...`."""
    rows = set()
    for text in texts:
        for m in re.finditer(r"^\| (\w[\w-]*) \| `(\w+)` \|", text, re.M):
            rows.add((m.group(1), m.group(2)))
    return rows


def undocumented_keys(docs):
    rows = key_rows(docs.values())
    return ["[%s] %s" % (section, name) for section, keys in config.KEYS.items()
            for name in keys if (section, name) not in rows]


def test_every_config_key_is_documented():
    assert sum(len(keys) for keys in config.KEYS.values()) > 40
    assert undocumented_keys(documentation()) == []


def test_a_key_missing_from_the_docs_is_named():
    docs = documentation()
    docs = {path: re.sub(r"^\| xmpp \| `priority` \|.*\n", "", text, flags=re.M)
            for path, text in docs.items()}
    assert undocumented_keys(docs) == ["[xmpp] priority"]


# --- every program, subcommand and option is documented --------------------------------

def sections(text):
    """[(heading, the text up to the next heading of the same or a higher level)]."""
    heads = [(m.start(), len(m.group(1)), m.group(2))
             for m in re.finditer(r"^(#+) (.*)$", text, re.M)]
    found = []
    for i, (start, level, title) in enumerate(heads):
        end = next((s for s, lv, _ in heads[i + 1:] if lv <= level), len(text))
        found.append((title, text[start:end]))
    return found


def section_of(text, program, word=None):
    """The text of the sections of docs/commands.md whose heading names `program` (or
    `program word`, or `program` and then `word`, as in "`dvcs-autosync log`, `restore`")."""
    parts = []
    for title, body in sections(text):
        names = re.findall(r"`([^`]+)`", title)
        if word is None and program in names:
            parts.append(body)
        elif word is not None and ("%s %s" % (program, word) in names or (
                any(n.startswith(program + " ") for n in names) and word in names)):
            parts.append(body)
    return "\n".join(parts)


def named(text, word):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(word), text, re.I) is not None


def missing_from(parser, text):
    """What of the parser's options, choices and positional arguments text never names
    (-h/--help is every program's, and said once at the top)."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            continue
        missing += [o for o in action.option_strings if not named(text, o)]
        if action.choices:
            missing += [str(c) for c in action.choices if not named(text, str(c))]
        if not action.option_strings and not action.choices:
            name = action.metavar or action.dest
            if not named(text, name):
                missing.append(name)
    return missing


def undocumented_commands(text):
    found, commands = generate.programs()
    missing = []
    for name, parser in found:
        part = section_of(text, name)
        if not part:
            missing.append(name)
        missing += ["%s %s" % (name, m) for m in missing_from(parser, part)]
    for word, parser in commands:
        part = section_of(text, "dvcs-autosync", word)
        if not part:
            missing.append("dvcs-autosync " + word)
        elif parser.prog.split()[0] == "autosync-notify":  # status, pause, ...: its messages
            part = section_of(text, "autosync-notify")
            missing += ["dvcs-autosync %s %s" % (word, m) for m in missing_from(parser, part)]
        else:
            missing += ["dvcs-autosync %s %s" % (word, m) for m in missing_from(parser, part)]
    # autosync-remote has no parser: its subcommands are in its usage line.
    from autosync.ssh import remote
    part = section_of(text, "autosync-remote")
    words = re.findall(r"autosync-remote (\w+)", remote.USAGE)
    assert words
    missing += ["autosync-remote " + w for w in words if "autosync-remote " + w not in part]
    return missing


def test_every_program_is_installed_and_in_bin():
    scripts = set(generate.scripts())
    launchers = {n for n in os.listdir(os.path.join(ROOT, "bin")) if not n.startswith(".")}
    assert scripts == launchers


def test_every_program_subcommand_and_option_is_documented():
    text = read("docs/commands.md")
    names = set(generate.scripts()) | set(os.listdir(os.path.join(ROOT, "bin")))
    assert [n for n in sorted(names) if not section_of(text, n)] == []
    assert undocumented_commands(text) == []


@pytest.mark.parametrize("option, named_", [
    ("--dry-run", "dvcs-autosync restore --dry-run"),
    ("--thin", "dvcs-autosync init --thin"),
    ("--timeout", "autosync-notify --timeout"),
    ("--host", "autosync-hgmerge --host"),
])
def test_an_undocumented_option_is_named(option, named_):
    text = read("docs/commands.md")
    assert undocumented_commands(text) == [] and option in text
    assert named_ in undocumented_commands(text.replace(option, ""))


def test_an_undocumented_subcommand_is_named():
    text = read("docs/commands.md").replace("### `dvcs-autosync expire`", "### Expiring")
    assert "dvcs-autosync expire" in undocumented_commands(text)


# --- a section named by another page is there ------------------------------------------

def headings(path, text):
    """The section titles of a page: Markdown's `#` lines, the README's underlined ones."""
    lines = text.splitlines()
    if path == "README":
        return [line for line, under in zip(lines, lines[1:])
                if re.fullmatch(r"-{3,}|={3,}", under)]
    return [re.sub(r"^#+ ", "", line) for line in lines if line.startswith("#")]


def broken_references(docs):
    """Each `docs/PAGE.md`, "Section" or README, "Section" whose page has no section
    starting with that title. docs/benchmark.md is left out as a source: it is written
    from the benchmark's output."""
    broken = []
    for path, text in docs.items():
        if path == "docs/benchmark.md":
            continue
        flat = re.sub(r"\s+", " ", text)
        for m in re.finditer(r'(`docs/[\w.-]+\.md`|README),? "([^"]+)"', flat):
            target, title = m.group(1).strip("`"), m.group(2)
            if target not in docs or not any(h.startswith(title)
                                             for h in headings(target, docs[target])):
                broken.append("%s: %s, %s" % (path, target, title))
    return broken


def test_every_section_named_by_a_page_is_there():
    docs = documentation()
    assert broken_references(docs) == []
    docs["docs/conflicts.md"] = docs["docs/conflicts.md"].replace(
        "\n## Conflict copies\n", "\n## Copies of conflicts\n")
    broken = broken_references(docs)
    assert broken and all(b.endswith("docs/conflicts.md, Conflict copies") for b in broken)
    assert "docs/original.md: docs/conflicts.md, Conflict copies" in broken


# --- a page or section named by the code is there ---------------------------------------

def code():
    """{path: text} of every module of autosync/, comment lines joined as one text."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "autosync", "**", "*.py"), recursive=True)):
        path = os.path.relpath(path, ROOT)
        found[path] = re.sub(r"\s*\n\s*(#\s?)?", " ", read(path))
    return found


def broken_code_references(sources, docs):
    """Each page the code names (docs/PAGE.md, tests/benchmarks/JOURNAL.md: any PATH.md
    of the checkout) that is not there, each such page followed by "Section" that has
    no section starting with that title, and each (README, Section) whose section is
    not in the README. docs: {path: text}, read from the checkout where a path is not
    in it."""
    broken = []
    for path, text in sources.items():
        for m in re.finditer(r'(?<![\w/.-])README, "?([A-Z][^)"]*)"?\)', text):
            if not any(h.startswith(m.group(1)) for h in headings("README", docs["README"])):
                broken.append("%s: README, %s" % (path, m.group(1)))
        for m in re.finditer(r'(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.md)(,? "([^"]+)")?', text):
            target, title = m.group(1), m.group(3)
            if target not in docs and os.path.isfile(os.path.join(ROOT, target)):
                docs[target] = read(target)
            if target not in docs:
                broken.append("%s: %s" % (path, target))
            elif title and not any(h.startswith(title) for h in headings(target, docs[target])):
                broken.append("%s: %s, %s" % (path, target, title))
    return broken


def test_every_page_and_section_named_by_the_code_is_there():
    docs = documentation()
    sources = code()
    assert broken_code_references(sources, docs) == []
    assert any('docs/protocol.md, "Status"' in text for text in sources.values())
    docs["docs/protocol.md"] = docs["docs/protocol.md"].replace("\n### Status", "\n### State")
    assert broken_code_references(sources, docs) == ["autosync/committer/status.py: "
                                                     "docs/protocol.md, Status"]
    readme = docs["README"]
    docs["README"] = readme.replace("\nInstall\n-------\n", "\nGetting it\n----------\n")
    assert any(b.endswith(": README, Install") for b in broken_code_references(sources, docs))
    docs["README"] = readme
    docs["docs/protocol.md"] = read("docs/protocol.md")
    named = {"autosync/x.py": '# (docs/gone.md; tests/benchmarks/JOURNAL.md, "No such one") '
                              '(docs/service.md, "Installing")'}
    assert broken_code_references(named, docs) == [
        "autosync/x.py: docs/gone.md",
        "autosync/x.py: tests/benchmarks/JOURNAL.md, No such one",
        "autosync/x.py: docs/service.md, Installing"]


# --- one page per topic ----------------------------------------------------------------

# Pages for developers: the others are a user's, and name no test.
DEVELOPERS = ("docs/internals.md", "docs/benchmark.md")
TEST_FILE = re.compile(r"tests/[\w/]*test_\w+\.py")


def pages_naming_tests(docs):
    return sorted(path for path, text in docs.items()
                  if path.startswith("docs/") and path not in DEVELOPERS
                  and TEST_FILE.search(text))


def test_the_test_lists_are_in_internals_not_in_a_user_s_page():
    docs = documentation()
    assert TEST_FILE.search(docs["docs/internals.md"])
    assert pages_naming_tests(docs) == []
    docs["docs/ssh.md"] += "\nTest: `tests/e2e/test_sync.py`.\n"
    assert pages_naming_tests(docs) == ["docs/ssh.md"]


def test_the_set_up_and_the_conflicts_each_have_one_page():
    """The README gives the set-up's commands and points to docs/ssh.md and docs/xmpp.md,
    which hold the steps; docs/behaviour.md points to docs/conflicts.md for the copies."""
    docs = documentation()
    readme = docs["README"]
    assert "docs/ssh.md" in readme and "docs/xmpp.md" in readme
    assert "## Setting it up" in docs["docs/ssh.md"] and "## Setting it up" in docs["docs/xmpp.md"]
    for step in ("`~/Sync` may be missing, empty", "(start from `.autosync-example`)"):
        assert [path for path, text in docs.items() if step in re.sub(r"\s+", " ", text)] \
            == ["docs/ssh.md" if "Sync" in step else "docs/xmpp.md"], step
    behaviour = [title for title, _ in sections(docs["docs/behaviour.md"])]
    conflicts = [title for title, _ in sections(docs["docs/conflicts.md"])]
    assert "Conflict copies" in conflicts and "Pulls that never overwrite your writes" in conflicts
    assert not set(behaviour) & set(conflicts)
    # the README's first screen: what it is, then the two commands
    first = readme[:readme.index("tests/run.sh")]
    assert "dvcs-autosync watches a folder" in first and "tests/demo.sh" in first


# --- the module map: a row for every module, a module for every row ---------------------

def module_map(text):
    """The module names of docs/internals.md's tables under "Rooms" (`core/cli.py`; a
    package's folder `tools/init/`), and the folders its headings name."""
    rooms = text[text.index("\n## Rooms"):]
    rooms = rooms[:rooms.index("\n## ", 1)]
    rows = re.findall(r"^\| `([^`]+)` \|", rooms, re.M)
    folders = re.findall(r"^### `autosync/([^`]*)`", rooms, re.M)
    return rows, folders


def map_mismatches(rows, folders, modules):
    """What the map and the tree disagree on: a module without a row (a package's
    __init__ and __main__ are its folder's), a row or a folder without a module."""
    def covered(module):
        return module in rows or any(r.endswith("/") and module.startswith(r) for r in rows)
    missing = ["no row: %s" % m for m in modules if not covered(m)
               and os.path.basename(m) not in ("__init__.py", "__main__.py")]
    gone = ["no module: %s" % r for r in rows if not any(
        m == r or (r.endswith("/") and m.startswith(r)) for m in modules)]
    gone += ["no folder: autosync/%s" % f for f in folders if f and not any(
        m.startswith(f) for m in modules)]
    return missing + gone


def test_the_module_map_has_a_row_for_every_module_and_a_module_for_every_row():
    base = os.path.join(ROOT, "autosync")
    modules = sorted(os.path.relpath(p, base) for p in glob.glob(
        os.path.join(base, "**", "*.py"), recursive=True))
    rows, folders = module_map(read("docs/internals.md"))
    assert len(rows) > 60 and "core/cli.py" in rows and "core/" in folders
    assert map_mismatches(rows, folders, modules) == []
    assert map_mismatches([r for r in rows if r != "core/cli.py"], folders, modules) == [
        "no row: core/cli.py"]
    assert map_mismatches(rows + ["core/gone.py"], folders, modules) == [
        "no module: core/gone.py"]
    assert map_mismatches(rows, folders, [m for m in modules if not m.startswith(
        "tools/init/")]) == ["no module: tools/init/"]
