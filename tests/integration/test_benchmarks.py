"""The benchmark's code without running a measurement (no daemon): its modules import, its
command line answers, and docs/benchmark.md is what table.py makes of the stored runs."""
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

import benchmarks  # noqa: E402
from benchmarks import main, results, table  # noqa: E402

MEASUREMENTS = ["propagation", "burst", "move", "machines", "slowwriter", "scale", "onechange",
                "home", "bigfile", "annexscan", "idle"]


def all_modules():
    return sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))


STANDALONE = {"annex"}  # run by itself (python3 tests/benchmarks/annex.py), not by main yet


def test_one_module_per_measurement_and_the_shared_ones():
    assert set(all_modules()) == set(MEASUREMENTS) | STANDALONE | {"common", "main", "results",
                                                                  "table"}


@pytest.mark.parametrize("name", all_modules())
def test_every_module_imports(name):
    module = importlib.import_module("benchmarks." + name)
    assert module.__doc__, "benchmarks.%s says what it holds" % name


def test_every_measurement_is_a_function_of_its_own_module():
    assert list(main.MEASUREMENTS) == MEASUREMENTS
    for name in MEASUREMENTS:
        measure = main.measurement(name)
        assert callable(measure)
        assert measure.__module__ == "benchmarks." + main.MEASUREMENTS[name][0]


def run_script(*args):
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


def test_help_names_every_option_and_measurement():
    done = run_script("tests/benchmark.py", "--help")
    assert done.returncode == 0, done.stderr
    for option in ("--only", "--sync", "--trials", "--no-peers", "--quick", "--keep",
                   "--burst-trials", "--onechange-files", "--onechange-trials",
                   "--onechange-thin", "--home-files", "--big-trials", "--annexscan-files",
                   "--git-config",
                   "--setting", "--results", "--table"):
        assert option in done.stdout
    for name in MEASUREMENTS:
        assert name in done.stdout


def test_a_bad_option_is_one_clear_error():
    done = run_script("tests/benchmark.py", "--only", "nosuch")
    assert done.returncode == 2
    assert "invalid choice: 'nosuch'" in done.stderr


def test_key_leaves_out_the_delays_only():
    assert results.key("propagation, defaults (on close/0/10 s): median") == \
        "propagation, defaults: median"
    assert results.key("propagation, lowest (0/0.5/10 s), over ssh (held connection): median") \
        == "propagation, lowest, over ssh (held connection): median"
    assert results.key("scale: start until watching and idle (100000 files)") == \
        "scale: start until watching and idle (100000 files)"


def row(measurement, name, ours="", floor="", aim="", met=None, note="", **peer):
    return dict(peer, measurement=measurement, name=name, ours=ours, floor=floor, aim=aim,
                met=met, note=note)


def store(folder, started, load, rows, name=None):
    info = {"started": started, "finished": started[:11] + "23:59:00Z", "command":
            "tests/benchmark.py", "commit": "abc1234", "git": "2.39.5",
            "machine": {"platform": "Linux", "cores": 2, "load_start": [load, 0, 0],
                        "load_end": [load, 0, 0]}}
    return results.write(os.path.join(folder, name or started.replace(":", "") + ".json"),
                         info, rows)


def sample(folder):
    """An old run of propagation and idle, and a newer one of propagation only, at other
    shipped delays: its aim missed, one of its indented rows with an aim."""
    store(folder, "2026-12-01T10:00:00Z", 0.5, [
        row("propagation", "propagation, defaults (5/1/10 s): median", "6.17 s", "83 ms",
            "<= floor + 0.25 s", False, st1="797 ms", st10="9.80 s"),
        row("propagation", "  90th percentile", "6.24 s", "160 ms"),
        row("idle", "idle CPU over 60 s (4 processes)", "0.02 %", "", "< 1 %", True)])
    store(folder, "2026-12-03T10:00:00Z", 3.0, [
        row("propagation", "propagation, defaults (on close/0/10 s): median", "111 ms",
            "43 ms", "<= floor + 0.25 s", True, "20 trials"),
        row("propagation", "  90th percentile", "117 ms", "53 ms"),
        row("propagation", "  trials lost", "1", "0", "0", False)])


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("| ") and
            not line.startswith("| measurement") and not line.startswith("| ---")]


def test_the_table_takes_the_newest_block_and_keeps_a_row_not_run_again(tmp_path):
    sample(str(tmp_path))
    text = table.render(results.load(str(tmp_path)))
    rows = table_rows(text)
    assert rows == [
        "| propagation, defaults (on close/0/10 s): median | 111 ms | 43 ms |  | "
        "<= floor + 0.25 s | yes | 20 trials | 2026-12-03 (2) | 2 cores, load 3.0 |",
        "| &nbsp;&nbsp;trials lost | 1 | 0 |  | 0 | **no** |  | 2026-12-03 (2) | "
        "2 cores, load 3.0 |",
        "| idle CPU over 60 s (4 processes) | 0.02 % |  |  | < 1 % | yes |  | "
        "2026-12-01 (1) | 2 cores, load 0.5 |"]
    # Each run shown is listed, with its file, oldest first.
    assert "1. 2026-12-01 10:00 to 23:59 UTC, commit abc1234" in text
    assert "2026-12-01T100000Z.json" in text and "2026-12-03T100000Z.json" in text
    assert len(text.splitlines()) <= table.LIMIT


def test_an_older_block_is_not_mixed_into_a_newer_one(tmp_path):
    """The newer run made no '90th percentile' with an aim and no Syncthing column: the
    old run's Syncthing figures must not show beside the new figures."""
    sample(str(tmp_path))
    text = table.render(results.load(str(tmp_path)))
    assert "797 ms" not in text and "6.17 s" not in text


def test_a_page_from_many_runs_stays_within_the_limit(tmp_path):
    for day in range(1, 10):
        store(str(tmp_path), "2026-11-%02dT10:00:00Z" % day, 1.0, [
            row(m, "%s row %d" % (m, n), "1 s", "2 s", "<= 3 s", True)
            for m in MEASUREMENTS for n in range(day % 3 + 1)])
    text = table.render(results.load(str(tmp_path)))
    assert len(table_rows(text)) == 3 * len(MEASUREMENTS)
    assert len(text.splitlines()) <= table.LIMIT


def test_table_py_as_a_script_writes_the_page(tmp_path):
    sample(str(tmp_path / "runs"))
    out = tmp_path / "page.md"
    done = run_script("tests/benchmarks/table.py", "--results", str(tmp_path / "runs"),
                      "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == table.render(results.load(str(tmp_path / "runs")))


def test_a_broken_results_file_is_named(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SystemExit) as e:
        results.load(str(tmp_path))
    assert "bad.json: not a results file" in str(e.value)


def test_docs_benchmark_md_is_the_table_of_the_stored_runs():
    with open(os.path.join(ROOT, "docs", "benchmark.md")) as f:
        page = f.read()
    assert page == table.render(results.load()), \
        "docs/benchmark.md is not what `tests/benchmark.py --table` makes: run it"
    assert len(page.splitlines()) <= table.LIMIT
