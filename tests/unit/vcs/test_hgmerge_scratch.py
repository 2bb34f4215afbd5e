"""The scratch folder of the Mercurial merge (autosync.vcs.pull.hg): what a killed merge
left is removed at the next one."""
import os


def test_a_scratch_folder_a_killed_merge_left_goes_at_the_next_merge(tmp_path):
    """A merge killed (kill -9) leaves its scratch folder in .hg: the next one removes it
    once it is an hour old; a younger one may be a merge still running, and stays."""
    from autosync.vcs.pull import hg as hgmerge
    store = tmp_path / ".hg"
    store.mkdir()
    old, young = store / "autosync-hgmerge-old1", store / "autosync-hgmerge-young"
    for folder in (old, young):
        (folder / "ours").mkdir(parents=True)
        (folder / "ours" / "a.txt").write_text("a version\n")
    os.utime(old, (os.path.getmtime(old) - 2 * hgmerge.LEFT_AFTER,) * 2)
    made = hgmerge.scratch(str(tmp_path))
    assert not old.exists() and young.exists() and os.path.isdir(made)
    assert os.path.basename(made).startswith("autosync-hgmerge-")
