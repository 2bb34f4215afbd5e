"""The git settings syncing relies on, whatever the user's git configuration says.

Every command the suite runs (the configured command strings included) gets
these through git's GIT_CONFIG_COUNT/KEY/VALUE environment variables, which
git reads after the system, global and repository files: they override all
three, and `-c` on a command line still overrides them. Anything not listed
stays the user's: identity, signing, hooks, credential helpers, filters
(lfs, annex, gcrypt), remotes. docs/behaviour.md lists these with the same reasons.
"""
import dataclasses
import os

# (key, value, why syncing needs it). Order matters only for readers.
SETTINGS = (
    ("pull.rebase", "false", "a pull merges: a rebase stops mid-way on a conflict"),
    ("pull.ff", "true", "a pull fast-forwards when it can and merges when it must "
                        "(pull.ff=only refuses divergent branches)"),
    ("merge.ff", "true", "merges are allowed (merge.ff=only refuses them)"),
    ("merge.autoStash", "false", "a stash popped after a merge can leave conflict markers "
                                 "where no merge records them"),
    ("merge.conflictStyle", "merge", "the conflict markers a killed merge may leave are "
                                     "the plain ones the suite recognises"),
    ("merge.renames", "true", "a file renamed on one machine and edited on another merges"),
    ("rerere.enabled", "false", "a remembered resolution must not replace keeping both "
                                "versions"),
    ("diff.renames", "true", "commit messages record moves as moves"),
    ("status.renames", "true", "the same, for the original's statuscmd"),
    ("status.showUntrackedFiles", "normal", "new files count as changes"),
    ("status.short", "false", "the original's statuscmd greps git's long status text"),
    ("status.branch", "false", "the same"),
    ("commit.verbose", "false", "commits are made with -m and no editor"),
    ("log.showSignature", "false", "history (logcmd) is parsed; signature checks would "
                                   "interleave their text"),
    ("maintenance.auto", "false", "git's own upkeep after a commit or fetch would run "
                                  "beside the daemon's next command; the daemon runs "
                                  "maintenancecmd itself, between its commands"),
    ("gc.autoDetach", "false", "that upkeep ends before the daemon's next command starts"),
    ("color.ui", "never", "output is parsed, never shown on a terminal"),
    ("annex.resolvemerge", "false", "git-annex's pull (`git annex sync`) leaves a merge "
                                    "that stopped on conflicts to the daemon, which keeps "
                                    "both versions of a big file as of any other, newer at "
                                    "the path, and says so (vcs/pull/finish.py); git-annex's "
                                    "own renamed both to NAME.variant-XXXX, unannounced"),
    # Big files (issue 32; tests/benchmark.py `bigfile`, tests/benchmarks/JOURNAL.md): each step
    # git takes on a big file (add, push, the server's receive, its send, the pull) spent
    # its time deflating again data that does not compress and searching for deltas.
    ("core.bigFileThreshold", "16m", "a file over 16 MB is streamed into a pack as it is "
                                     "added and never searched for deltas (git's default, "
                                     "512 MB, compares each new version of a 50 MB file "
                                     "with the old one at every push and pull); a binary "
                                     "one changed on two machines keeps both versions "
                                     "without git's merge reading it (vcs/pull/bigmerge.py)"),
    ("pack.compression", "0", "a big file is stored as it is, not deflated at every step "
                              "(storing is several times faster than zlib on data that "
                              "does not compress); git has no per-size level, so text in "
                              "packs (pushes, fetches, git gc) is stored uncompressed; "
                              "small files added or pulled one by one stay compressed "
                              "(core.looseCompression)"),
    ("fetch.unpackLimit", "1", "a pulled pack is kept as it came, not unpacked and deflated "
                               "again file by file; git gc joins the packs"),
) + tuple(("color.%s" % what, "never", "the same, where a command has its own colour key")
          for what in ("diff", "status", "branch", "grep", "decorate", "showBranch",
                       "interactive", "remote", "push", "transport", "advice"))

# Settings for large trees, measured (issue 21, tests/benchmark.py `onechange`, and the
# committer's commands for one change run interleaved on clones of one 100,000-file tree;
# tests/benchmarks/JOURNAL.md) and NOT set here, with why. Only a setting that helps measurably and
# changes nothing for the user's command strings and tools would go into SETTINGS.
NOT_SET = (
    ("core.splitIndex", "true",
     "helps (one change's add + commit at 100,000 files) but the index it "
     "writes carries git's mandatory 'link' extension, which libgit2 (shell prompts, GUIs, "
     "cargo...) refuses to read; it stays the user's choice"),
    ("core.untrackedCache", "true",
     "speeds up `git status` only; the commands syncing runs (diff --cached, "
     "add, commit, ls-files --others) do not use it, and it trusts folder mtimes"),
    ("index.version", "4",
     "applies only to a new index, never to an existing clone's, and saves little"),
    ("feature.manyFiles", "true",
     "index.version=4 plus core.untrackedCache: the same as those two"),
)

# Plain environment variables: they beat the config files (core.pager, core.editor,
# pager.<command>) too. Nothing may wait for a pager, an editor or a password prompt.
VARIABLES = {
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
    "GIT_TERMINAL_PROMPT": "0",
}

@dataclasses.dataclass(frozen=True)
class GitEnvironment:
    """What this run of git adds to SETTINGS and VARIABLES, made once by whoever owns it
    (the committer from its config and folder, init for its first commit, a poll for
    its remote) and handed to everything that runs git for it (commands.environment's
    `git`). Frozen: nothing changes it once made (dataclasses.replace makes another).
    All None (PLAIN): the user's own.

    excludes: the excludes file the committer writes (ignorepath, editors' files, nested
    repositories, unreadable files), read as core.excludesFile.
    largefiles: annex.largefiles for git-annex under these commands (the `largefiles`
    key, vcs/largefiles.py's rule).
    annex_backend: annex.backend beside it (vcs/largefiles.py's BACKEND unless the user
    chose one).
    ssh_command: GIT_SSH_COMMAND reaching the remote (vcs/remote.py, git_ssh_command:
    the held connection).
    annex_git_ssh: git-annex takes that ssh too (GIT_ANNEX_USE_GIT_SSH=1), not a login of
    its own per command (vcs/largefiles.py's annex_through_git_ssh)."""

    excludes: str = None
    largefiles: str = None
    ssh_command: str = None
    annex_backend: str = None
    annex_git_ssh: bool = False

    def settings(self):
        """(key, value) of every git setting, ours last."""
        out = [(key, value) for key, value, _ in SETTINGS]
        if self.excludes:
            out.append(("core.excludesFile", self.excludes))
        if self.largefiles:
            out.append(("annex.largefiles", self.largefiles))
        if self.annex_backend:
            out.append(("annex.backend", self.annex_backend))
        return out

    def variables(self, env):
        """The variables to add to `env` (a copy of os.environ): ours come after any
        GIT_CONFIG_* the user set, so they win over those too."""
        settings = self.settings()
        try:
            count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
        except ValueError:
            count = 0  # not a number: git would refuse it; ours replace it
        out = dict(VARIABLES)
        if self.ssh_command:
            out["GIT_SSH_COMMAND"] = self.ssh_command
            if self.annex_git_ssh:
                out["GIT_ANNEX_USE_GIT_SSH"] = "1"
        for i, (key, value) in enumerate(settings, start=count):
            out["GIT_CONFIG_KEY_%d" % i] = key
            out["GIT_CONFIG_VALUE_%d" % i] = value
        out["GIT_CONFIG_COUNT"] = str(count + len(settings))
        return out

    def more_settings(self, pairs, env=None):
        """Variables adding (key, value) `pairs` after these settings, for one command
        (commands.environment's `extra`): the fsmonitor hook goes only to some commands."""
        count = int(self.variables(dict(os.environ if env is None else env))
                    ["GIT_CONFIG_COUNT"])
        out = {"GIT_CONFIG_COUNT": str(count + len(pairs))}
        for i, (key, value) in enumerate(pairs, start=count):
            out["GIT_CONFIG_KEY_%d" % i] = key
            out["GIT_CONFIG_VALUE_%d" % i] = value
        return out


# Nothing added: the settings above and the user's own excludes, annex and ssh.
PLAIN = GitEnvironment()
