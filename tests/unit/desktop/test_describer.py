"""describer.py: describecmd's output as a description, one dialog at a time."""
import threading

from autosync.desktop.describer import Describer


def test_the_output_is_one_clean_line(tmp_path):
    d = Describer("printf 'Holiday\\n  photos  '", str(tmp_path), None)
    assert d.usable and d.ask() == "Holiday photos"


def test_cancelled_empty_or_no_command_gives_nothing(tmp_path):
    assert Describer("false", str(tmp_path), None).ask() is None  # the dialog was cancelled
    assert Describer("true", str(tmp_path), None).ask() is None   # nothing typed
    none = Describer("", str(tmp_path), None)
    assert not none.usable and none.ask() is None


def test_a_second_dialog_is_not_opened_while_one_is(tmp_path):
    d = Describer("sleep 1; echo first", str(tmp_path), None)
    answers = []
    first = threading.Thread(target=lambda: answers.append(d.ask()))
    first.start()
    while not d.asking.locked():
        pass
    assert d.ask() is None
    first.join()
    assert answers == ["first"]
