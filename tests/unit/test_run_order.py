"""The run order (tests/run_order.py, which conftest.py applies): the longest files first
(tests/run.sh hands tests out one at a time), a file named there that moved or went
would quietly lose its place."""
import os

import run_order


def test_every_file_named_longest_first_exists():
    missing = [rel for rel in run_order.LONGEST_FIRST
               if not os.path.isfile(os.path.join(run_order.HERE, rel))]
    assert missing == []


def test_longest_first_then_end_to_end_then_the_rest_then_the_unit_tier():
    class Item:
        def __init__(self, rel):
            self.fspath = os.path.join(run_order.HERE, rel)

    order = ["unit/core/test_ini.py", "integration/test_watcher.py",
             "integration/test_cli.py", "e2e/test_sync.py", "integration/test_maintenance.py",
             "e2e/test_mercurial.py"]
    items = sorted((Item(rel) for rel in order), key=run_order.run_order)
    assert [os.path.relpath(str(i.fspath), run_order.HERE) for i in items] == [
        "integration/test_maintenance.py", "e2e/test_mercurial.py",
        "integration/test_watcher.py", "e2e/test_sync.py", "integration/test_cli.py",
        "unit/core/test_ini.py"]
