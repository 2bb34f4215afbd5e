"""The order tests run in (conftest.py's pytest_collection_modifyitems): the longest
files first, then the other end-to-end tests, the rest, and the unit tier last."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/
E2E = os.path.join(HERE, "e2e") + os.sep


# The files whose tests take longest (ten seconds and more on a 2-core machine, by
# pytest --durations) run first: a long test begun last ended the parallel run alone for
# a minute or more. Then the other end-to-end tests, the rest, and the unit tier.
# tests/run.sh's workers (--dist worksteal) each take an equal run of the list and then
# steal from the end of the others': the sorted tests are dealt out like cards, one pile
# per worker, so that each run begins with its share of the long ones.
LONGEST_FIRST = ("integration/test_maintenance.py", "e2e/test_mercurial.py",
                 "integration/test_largefiles.py", "e2e/test_pull_race.py",
                 "e2e/test_restricted_annex.py", "e2e/test_xmpp_sync.py", "e2e/test_random.py",
                 "e2e/test_debian.py", "e2e/test_pull_lock.py", "integration/test_hgmerge.py",
                 "e2e/test_install.py", "integration/test_progress_programs.py",
                 "e2e/test_faults.py", "e2e/test_annex.py", "integration/test_watcher.py",
                 "integration/test_link.py", "e2e/test_original_config.py",
                 "e2e/test_keep_both.py", "e2e/test_pulled_moves.py",
                 "integration/test_gitpull.py", "e2e/test_history_page.py")
UNIT = os.path.join(HERE, "unit") + os.sep


def run_order(item):
    path = str(item.fspath)
    rel = os.path.relpath(path, HERE)
    if rel in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(rel))
    return (1 if path.startswith(E2E) else 3 if path.startswith(UNIT) else 2, 0)
