"""Writes the manual pages (OUT/man/), the bash completion (OUT/bash-completion/dvcs-autosync)
and the zsh one (OUT/zsh/_dvcs-autosync) from what the programs and the docs already say:

* a program's page and completion from its own argparse parser (the one its --help
  prints), caught as the program builds it: nothing is written twice, so they cannot
  drift apart (autosync-remote, which has no parser, from its USAGE and the docstring
  paragraph its --help prints);
* autosync(5) from docs/configuration.md, its table of keys (which
  tests/integration/test_config.py holds to autosync/core/config.py's KEYS) under "Keys", with
  each key's expected value from KEYS.

    python3 docs/generate.py OUT

Nothing it writes is kept in the repository: debian/rules runs it at each build (with
Debian's libraries, which the parsers' modules import), so a page is never older than
the option it describes. tests/integration/test_generated.py checks what it writes.
"""
import argparse
import os
import re
import shlex
import sys
import tomllib

os.environ["COLUMNS"] = "1000"  # argparse wraps usage to the terminal: one line each (roff fills)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from autosync import __version__  # noqa: E402
from autosync.core import config  # noqa: E402

SOURCE = "dvcs-autosync " + __version__
# What `pause` takes (autosync/core/pause.py's parse_duration reads each), offered after it.
DURATIONS = ("30m", "1h", "2h", "1d")
# A message that takes a value of its own: the values completed after it.
AFTER = {"pause": DURATIONS}
# The programs' modules, by their name in pyproject.toml's [project.scripts].
DESCRIBED_ELSEWHERE = {"autosync-remote"}  # no parser: see remote_page()


class _Caught(Exception):
    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def caught(call):
    """The ArgumentParser that call() builds and parses with, taken before it parses."""
    real = argparse.ArgumentParser.parse_args

    def catch(self, args=None, namespace=None):
        raise _Caught(self)
    argparse.ArgumentParser.parse_args = catch
    try:
        call()
    except _Caught as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args = real
    raise RuntimeError("%r parsed no command line" % call)


def project():
    """pyproject.toml's [project] table."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def scripts():
    """{program: "module:function"} as pyproject.toml installs them."""
    return project()["scripts"]


def entry(target):
    import importlib
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def subparser(parser, word):
    """The parser of `word` when `parser` holds subcommands (history's log and restore),
    with the words it is given there (add_parser's help) as its description."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and word in action.choices:
            sub = action.choices[word]
            for choice in action._choices_actions:
                if choice.dest == word and not sub.description:
                    sub.description = choice.help
            return sub
    return parser


def programs():
    """[(program, parser)] for every program with a parser, and [(word, parser)] for
    each `dvcs-autosync WORD` (tools/commands.py, the supervisor's router)."""
    from autosync.tools.commands import COMMANDS
    found = []
    for name, target in sorted(scripts().items()):
        if name not in DESCRIBED_ELSEWHERE:
            main = entry(target)
            found.append((name, caught(lambda: main([]))))
    commands = []
    for word, main in COMMANDS.items():
        commands.append((word, subparser(caught(lambda: main([word])), word)))
    return found, commands


def delegated(word, parser):
    """Whether `dvcs-autosync WORD` is autosync-notify's (status, pause, sync, ...): its
    parser is autosync-notify's whole one, the message being WORD itself."""
    return not parser.prog.endswith(" " + word)


# --- roff ------------------------------------------------------------------------------

def roff(text):
    """Plain text as roff: backslashes and dashes escaped, no line starting a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.split("\n"))


def inline(markdown):
    """One paragraph of Markdown: `code` bold, *words* italic, the rest plain."""
    parts = re.split(r"(`[^`]*`)", markdown)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("\\fB" + roff(part[1:-1]) + "\\fR")
        else:
            text = roff(part)
            out.append(re.sub(r"\*([^*\s][^*]*)\*", r"\\fI\1\\fR", text))
    return "".join(out)


def markdown(text, top=".SH"):
    """docs/ Markdown (headings, paragraphs, `*` lists, ``` blocks) as roff lines."""
    lines, out, paragraph = text.split("\n"), [], []

    def flush():
        if paragraph:
            joined = " ".join(paragraph)
            if joined.startswith("* "):
                out.extend([".IP \\(bu 2", inline(joined[2:])])
            else:
                out.extend([".PP", inline(joined)])
            paragraph.clear()
    block = None
    for line in lines:
        if block is not None:
            if line.startswith("```"):
                out.extend([".PP", ".RS 4", ".nf"] + [roff(b) for b in block] + [".fi", ".RE"])
                block = None
            else:
                block.append(line)
            continue
        if line.startswith("```"):
            flush()
            block = []
        elif line.startswith("#"):
            flush()
            level, title = len(line) - len(line.lstrip("#")), line.lstrip("#").strip()
            out.append((top if level <= 2 else ".SS") + ' "%s"' % roff(title.upper()
                                                                     if level <= 2 else title))
        elif not line.strip():
            flush()
        elif line.startswith("* "):
            flush()
            paragraph.append(line)
        else:
            paragraph.append(line.strip())
    flush()
    return out


def header(name, section, title):
    return ['.\\" Written by docs/generate.py from %s: do not edit.' % title,
            '.TH %s %s "" "%s" "%s"' % (name.upper(), section, SOURCE,
                                        "File Formats" if section == "5" else "User Commands"),
            ".nh", ".ad l"]


def usage(parser):
    text = parser.format_usage().strip()
    return text[len("usage: "):] if text.startswith("usage: ") else text


def what(parser, name):
    """A parser's description for NAME: without the "PROGRAM: " (or "PROGRAM [ARGS]: ") a
    module docstring starts with, and without its full stop. dvcs-autosync's is the
    package's own (pyproject.toml's description): its docstring is for developers."""
    if name == "dvcs-autosync":
        text = project()["description"]
        return (text[:1].lower() + text[1:]).rstrip(".")
    text = parser.description or name
    if text.startswith(name + " ") or text.startswith(name + ":"):
        text = text.partition(": ")[2] or text
    return text.split("\n")[0].rstrip(".")


def synopsis(lines):
    return [".SH SYNOPSIS"] + [part for line in lines for part in (".PP", roff(line))]


def actions(parser):
    """(invocation, help) of each option and argument, as --help shows them."""
    formatter = parser._get_formatter()
    shown = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action,
                                                         argparse._SubParsersAction):
            continue
        invocation = formatter._format_action_invocation(action)
        shown.append((invocation, formatter._expand_help(action) if action.help else ""))
    return shown


def options(parser):
    out = []
    for invocation, text in actions(parser):
        out.extend([".TP", "\\fB%s\\fR" % roff(invocation), roff(text) if text else ""])
    return [line for line in out if line != ""]


def program_page(name, parser, commands=()):
    out = header(name, "1", "the program's argparse parser")
    out += [".SH NAME", "%s \\- %s" % (roff(name), roff(what(parser, name)))]
    # autosync-notify's messages (status, pause, ...) in one line: their parser is its own.
    notify = [word for word, sub in commands if delegated(word, sub)]
    lines = [usage(sub) for word, sub in commands if not delegated(word, sub)]
    if notify:
        lines.append("dvcs-autosync {%s} [ARG] [autosync-notify's options]" % ",".join(notify))
    out += synopsis([usage(parser)] + lines)
    out += [".SH DESCRIPTION", ".PP", roff(parser.description or name)]
    if parser.epilog:
        out += [".PP", roff(parser.epilog)]
    out += [".SH OPTIONS"] + options(parser)
    if commands:
        out.append(".SH COMMANDS")
        for word, sub in commands:
            out += [".SS %s" % roff(word), ".PP", roff(sub.description or word)]
            if word == "status":
                out += ["The same as \\fBautosync\\-notify status\\fR; see "
                        "\\fBautosync\\-notify\\fR(1) for its options."]
            else:
                out += options(sub)
    out += [".SH FILES", ".TP", "\\fI~/.autosync\\fR",
            "the configuration file unless another is named; see \\fBautosync\\fR(5)"]
    out += see_also(name)
    return "\n".join(out) + "\n"


def see_also(name):
    pages = ["dvcs-autosync(1)", "autosync-notify(1)", "autosync-remote(1)", "autosync(5)"]
    pages = [p for p in pages if not p.startswith(name + "(")]
    return [".SH SEE ALSO", ", ".join("\\fB%s\\fR(%s)" % (roff(p[:-3]), p[-2])
                                       for p in pages),
            ".PP", "The README and /usr/share/doc/dvcs\\-autosync/."]


def remote_page():
    """autosync-remote(1) from what its --help prints: USAGE and its docstring's paragraph."""
    from autosync.ssh import remote
    # The paragraphs after the usage that its --help prints.
    text = remote.__doc__.split("\n\n", 2)[2]
    out = header("autosync-remote", "1", "autosync/ssh/remote.py's usage and docstring")
    out += [".SH NAME", "autosync\\-remote \\- %s" % inline(
        remote.__doc__.split("\n", 1)[0].split(": ", 1)[1].rstrip("."))]
    out += synopsis([remote.USAGE[len("usage: "):]])
    out += [".SH DESCRIPTION"]
    for paragraph in text.split("\n\n"):
        out += [".PP", inline(" ".join(paragraph.split()))]
    out += see_also("autosync-remote")
    return "\n".join(out) + "\n"


KEY_ROW = re.compile(r"^\| (\w+) \| `(\w+)` \| (.*?) \| (.*) \| (orig\.|new) \|$")


def config_page():
    """autosync(5): docs/configuration.md, its table of keys as a list under "Keys"."""
    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows = [KEY_ROW.match(line) for line in lines]
    rows = [m.groups() for m in rows if m and m.group(1) in config.KEYS]
    # The tables themselves are not Markdown that markdown() knows: the keys are keys().
    doc = "\n".join(line for line in lines if not line.startswith("|")) + "\n"
    out = header("autosync", "5", "docs/configuration.md")
    out += [".SH NAME", "autosync \\- the configuration file of dvcs\\-autosync",
            ".SH SYNOPSIS", "\\fI~/.autosync\\fR, \\fI~/.config/autosync/NAME\\fR"]
    body = doc.split("\n", 1)[1]  # without "# Configuration"
    intro, _, rest = body.partition("\n## ")
    out += [".SH DESCRIPTION"] + markdown(intro)
    for part in ("## " + rest).split("\n## "):
        part = part[3:] if part.startswith("## ") else part
        title, _, text = part.partition("\n")
        out += markdown("## " + title + "\n" + text)
        if title == "Keys":
            out += keys(rows)
    out += see_also("autosync")
    return "\n".join(out) + "\n"


def keys(rows):
    out = []
    for section in config.KEYS:
        out.append(".SS [%s]" % section)
        for sect, name, default, meaning, _ in rows:
            if sect != section:
                continue
            key = config.KEYS[section].get(name)
            default = default if default.startswith("(") else "(default: %s)" % default
            out += [".TP", "\\fB%s\\fR %s" % (roff(name), inline(default)),
                    inline(meaning[:1].upper() + meaning[1:]) + "."]
            if key is not None and key.expected.lower() not in meaning.lower():
                out[-1] += " Value: %s." % roff(key.expected)
    return out


# --- bash completion -------------------------------------------------------------------

def words(parser):
    """(options, {option: its choices or None when it takes a value}, positional choices)."""
    flags, takes, choices = [], {}, []
    for action in parser._actions:
        if action.option_strings:
            flags += action.option_strings
            if action.nargs != 0:
                for o in action.option_strings:
                    takes[o] = list(action.choices) if action.choices else None
        elif action.choices and not isinstance(action, argparse._SubParsersAction):
            choices += list(action.choices)
    return flags, takes, choices


def function_name(name, prefix="_autosync_"):
    return prefix + re.sub(r"\W", "_", name)


def completion_function(name, parser, positional=True, commands=(), after=None):
    """`after`: {word: the values completed after it} (a message's own value)."""
    flags, takes, choices = words(parser)
    choices = (choices if positional else []) + list(commands)
    out = ["%s() {" % function_name(name), "    local cur=$1 prev=$2", "    case $prev in"]
    for word, values in (after or {}).items():
        out.append("        %s) [[ $cur == -* ]] || { COMPREPLY=($(compgen -W %s -- \"$cur\"));"
                   " return; } ;;" % (word, shlex.quote(" ".join(values))))
    for option, values in takes.items():
        if values:
            out.append("        %s) COMPREPLY=($(compgen -W %s -- \"$cur\")); return ;;"
                       % (option, shlex.quote(" ".join(values))))
        else:  # a value: a file name unless it has choices (-o default completes files)
            out.append("        %s) return ;;" % option)
    out += ["    esac",
            "    if [[ $cur == -* ]]; then",
            "        COMPREPLY=($(compgen -W %s -- \"$cur\"))" % shlex.quote(" ".join(flags)),
            "    else",
            "        COMPREPLY=($(compgen -W %s -- \"$cur\"))" % shlex.quote(" ".join(choices)),
            "    fi", "}"]
    return out


def completion():
    found, commands = programs()
    out = ["# bash completion for dvcs-autosync's programs. Written by docs/generate.py",
           "# from the programs' own argparse parsers: do not edit.", ""]
    words_ = [word for word, _ in commands]
    for name, parser in found:
        out += completion_function(name, parser, commands=words_ if name == "dvcs-autosync"
                                   else (), after=AFTER if name == "autosync-notify"
                                   else None) + [""]
    for word, parser in commands:
        # `dvcs-autosync status` (pause, sync, ...) is autosync-notify's parser, its
        # message already given: only the message's own value follows (pause's duration).
        own = not delegated(word, parser)
        out += completion_function("dvcs-autosync " + word, parser, positional=own,
                                   after=None if own else {
                                       w: v for w, v in AFTER.items() if w == word}) + [""]
    out += ["# The word after the program (or after dvcs-autosync's subcommand) names the",
            "# function; for dvcs-autosync, the first word that is a subcommand.",
            "_autosync_complete() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}",
            "    local program=${1##*/} fn i",
            "    fn=_autosync_${program//[^a-zA-Z0-9]/_}",
            "    if [[ $program == dvcs-autosync ]]; then",
            "        for ((i = 1; i < COMP_CWORD; i++)); do",
            "            case ${COMP_WORDS[i]} in",
            "                %s) fn=_autosync_dvcs_autosync_${COMP_WORDS[i]}; break ;;"
            % "|".join(words_),
            "            esac",
            "        done",
            "    fi",
            "    COMPREPLY=()",
            "    $fn \"$cur\" \"$prev\"",
            "}",
            "complete -o default -F _autosync_complete %s"
            % " ".join(name for name, _ in found)]
    return "\n".join(out) + "\n"


# --- zsh completion --------------------------------------------------------------------

def zsh_words(text, limit=70):
    """Help as an _arguments description: its first clause, the characters _arguments
    reads ([ ] : \\) escaped."""
    text = re.split(r"(?<=[.;])\s|\s\(", " ".join((text or "").split()))[0].rstrip(".;")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + "..."
    return re.sub(r"([\[\]:\\])", r"\\\1", text)


FILE_LIKE = re.compile(r"config|socket|file|folder|path|remote|arg", re.I)


def zsh_values(action):
    """What follows an option or stands for an argument: its choices; a file name where
    its name says it may be one (bash, with -o default, completes file names wherever
    it has no choices); else nothing but its name (a number, a time, a text)."""
    if action.choices:
        return "(%s)" % " ".join(shlex.quote(str(c)) for c in action.choices)
    return "_files" if FILE_LIKE.search("%s %s" % (action.metavar, action.dest)) else " "


def zsh_specs(parser, positional=True, after=None):
    """_arguments' specs, each shell-quoted, for every option string and argument;
    `after`: {message: the values its argument takes} (pause's duration)."""
    formatter = parser._get_formatter()
    specs = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        helped = "" if action.help == argparse.SUPPRESS else zsh_words(
            formatter._expand_help(action) if action.help else "")
        if action.option_strings:
            again = "*" if isinstance(action, (argparse._AppendAction,
                                               argparse._CountAction)) else ""
            for option in action.option_strings:
                if action.nargs == 0:
                    specs.append("%s%s[%s]" % (again, option, helped))
                else:
                    name = zsh_words(action.metavar or action.dest.upper())
                    specs.append("%s%s%s[%s]:%s:%s" % (
                        again, option, "=" if option.startswith("--") else "+", helped, name,
                        zsh_values(action)))
        elif positional:
            name = zsh_words(action.metavar or action.dest)
            many = {"*": "*", "+": "*", "?": ":"}.get(action.nargs, "")
            values = zsh_values(action)
            if after and many == "*" and not action.choices:  # the message's value
                values = "{%s else %s; fi}" % (" ".join(
                    "if [[ $words[CURRENT-1] == %s ]]; then compadd -- %s;" % (
                        word, " ".join(shlex.quote(v) for v in vals))
                    for word, vals in after.items()), values.strip() or ":")
            specs.append("%s:%s:%s" % (many, name, values))
    return [shlex.quote(s) for s in specs]


def zsh_function(name, parser, positional=True, commands=(), after=None, value=None):
    """A function completing one program (or `dvcs-autosync WORD`) with _arguments;
    with `commands`, the first word may also be one of them, and once one is on the
    line its own function takes over from it. `after`: as zsh_specs; `value`: the values
    of the one argument of an autosync-notify message given as `dvcs-autosync WORD`."""
    out = ["%s() {" % function_name(name, "_autosync_zsh_")]
    specs = zsh_specs(parser, positional, after)
    if value:
        specs.append(shlex.quote("::duration:(%s)" % " ".join(value)))
    if commands:
        out += ["    local i",
                "    for (( i = 2; i < CURRENT; i++ )); do",
                "        case $words[i] in",
                "            (%s)" % "|".join(word for word, _ in commands),
                "                words=(\"${(@)words[i,-1]}\"); (( CURRENT -= i - 1 ))",
                "                %s$words[1]; return ;;" % function_name(name + " ",
                                                                     "_autosync_zsh_"),
                "        esac",
                "    done",
                "    local -a commands=("]
        out += ["        %s" % shlex.quote("%s:%s" % (word, zsh_words(
            sub.description if sub.prog.endswith(" " + word) and sub.description else
            "as %s %s" % (sub.prog, word)))) for word, sub in commands]
        out += ["    )"]
        specs = [s for s in specs if not s.lstrip("'").startswith((":", "*:"))] + [
            shlex.quote("1: :{_describe -t commands command commands; _files}"),
            shlex.quote("*: :_files")]
    out.append("    _arguments -s : \\")
    out += ["        %s \\" % s for s in specs[:-1]] + ["        %s" % specs[-1]] \
        if specs else []
    out.append("}")
    return out


def zsh_completion():
    found, commands = programs()
    out = ["#compdef %s" % " ".join(name for name, _ in found),
           "# zsh completion for dvcs-autosync's programs. Written by docs/generate.py from",
           "# the programs' own argparse parsers: do not edit.", ""]
    for name, parser in found:
        out += zsh_function(name, parser, commands=commands if name == "dvcs-autosync"
                            else (), after=AFTER if name == "autosync-notify"
                            else None) + [""]
    for word, parser in commands:
        # `dvcs-autosync status` (pause, sync, ...) is autosync-notify's parser, its
        # message already given: its arguments are not those of the word, but the
        # message's own value (pause's duration) follows.
        out += zsh_function("dvcs-autosync " + word, parser,
                            positional=not delegated(word, parser),
                            value=AFTER.get(word) if delegated(word, parser) else None) + [""]
    out += ["# The program being completed names the function (zsh's $service).",
            "_autosync_zsh_${service//[^a-zA-Z0-9]/_} \"$@\""]
    return "\n".join(out) + "\n"


# --- all of it --------------------------------------------------------------------------

def files():
    """{path below OUT: text} of everything this writes."""
    found, commands = programs()
    written = {}
    for name, parser in found:
        page = program_page(name, parser, commands if name == "dvcs-autosync" else ())
        written["man/%s.1" % name] = page
    written["man/autosync-remote.1"] = remote_page()
    written["man/autosync.5"] = config_page()
    written["bash-completion/dvcs-autosync"] = completion()
    written["zsh/_dvcs-autosync"] = zsh_completion()
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description="Write the man pages and the bash and zsh "
                                            "completions.")
    p.add_argument("out", metavar="OUT", help="the folder to write them into")
    args = p.parse_args(argv)
    for path, text in files().items():
        path = os.path.join(args.out, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
