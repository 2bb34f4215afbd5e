"""web/folders.py: what the page reads and says, without a daemon."""
from autosync.web import folders
from fakes import config


def test_the_big_files_rule_is_said_only_with_largefiles(tmp_path):
    assert folders.big_files(folders.SyncedFolder(config(tmp_path))) is None
    said = folders.big_files(folders.SyncedFolder(config(tmp_path, largefiles="10mb")))
    assert "10mb or more" in said and "every version is kept" in said
    said = folders.big_files(folders.SyncedFolder(config(tmp_path, largefiles="10mb",
                                                         largefileskeep="30d")))
    assert "more than 30d ago are dropped" in said


def test_a_diff_and_what_counts_as_text():
    assert folders.diff("a\nb\n", "a\nc\n") == [("hunk", "@@ -1,2 +1,2 @@"), ("same", " a"),
                                                ("del", "-b"), ("add", "+c")]
    assert folders.as_text(b"caf\xc3\xa9\n") == "caf\u00e9\n"
    assert folders.as_text(b"\x00\x01binary") is None and folders.as_text(b"\xff\xfe") is None
    png = b"\x89PNG\r\n\x1a\n...."
    assert folders.image_type("a.PNG", png) == "image/png"
    assert folders.image_type("a.png", b"<svg/>") is None  # by its bytes too
    assert folders.image_type("a.svg", b"<svg/>") is None  # never an SVG (it may script)
