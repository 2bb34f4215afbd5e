"""autosync-committer: the only program that touches the repository (and autosync-hgmerge, which its Mercurial pull runs)."""
