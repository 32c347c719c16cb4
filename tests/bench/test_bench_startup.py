"""benchmarks/bench_startup.py's bookkeeping: how a step ended (exited, stopped by ``timeout``, or past its own
timeout), what it left in the cache directory, the lines of a tree and the share of ``attnlab/fast``, and the
report. (The start-up figures are for a quiet machine; here commands whose ending does not depend on its speed.)"""

import sys

import pytest

from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_startup") as module:
        yield module


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_step_that_exits_gives_its_code_its_note_and_the_files_it_left(bench, tmp_path):
    cache = tmp_path / "cache"
    code = (f"import pathlib, sys; p = pathlib.Path({str(cache)!r}) / 'a' / 'lock'; p.parent.mkdir(parents=True); "
            "p.write_text('x'); print('note: fp32 products run on torch kernels', file=sys.stderr)")
    step = bench.run_step("one", python(code), {}, 600, cache)
    assert (step.code, step.left, step.note, step.outcome) == (0, 1, "note: fp32 products run on torch kernels",
                                                               "exited 0")
    failed = bench.run_step("two", python("import sys; print('Error: no such checkpoint', file=sys.stderr); "
                                          "sys.exit(3)"), {}, 600, tmp_path / "none")
    assert (failed.code, failed.left, failed.outcome, failed.note) == (3, 0, "exited 3", "Error: no such checkpoint")


def test_a_step_past_its_timeout_is_stopped_and_said_not_to_finish(bench, tmp_path):
    step = bench.run_step("hangs", python("import time; time.sleep(600)"), {}, 0.5, tmp_path)
    assert step.code is None and step.outcome == "did not finish in 0.5 s" and step.seconds < 600


def test_a_step_under_timeout_TERM_is_reported_as_stopped_by_it(bench, tmp_path):
    step = bench.run_step("killed", ["timeout", "-s", "TERM", "0.2", *python("import time; time.sleep(600)")], {},
                          600, tmp_path)
    assert step.code == 124 and step.outcome == f"stopped by `timeout -s TERM {bench.KILL_AFTER}`"


def test_lines_are_counted_in_sources_and_the_fast_package_apart(bench, tmp_path):
    src = tmp_path / "src"
    (src / "attnlab" / "fast" / "kernels").mkdir(parents=True)
    (src / "attnlab" / "models.py").write_text("a = 1\n\nb = 2\n", encoding="utf-8")
    (src / "attnlab" / "fast" / "linear.py").write_text("x = 1\n", encoding="utf-8")
    (src / "attnlab" / "fast" / "kernels" / "k.cpp").write_text("int f();\n\n", encoding="utf-8")
    (src / "attnlab" / "locale.mo").write_bytes(b"\x00\x01")  # not a source
    (src / "attnlab" / "faster.py").write_text("y = 2\n", encoding="utf-8")  # not in attnlab/fast/
    assert bench.count_lines(src) == bench.Lines(files=4, lines=7, nonblank=5, fast=3, fast_nonblank=2)


def test_the_report_has_a_row_per_step_and_per_tree(bench):
    steps = {"this tree": [bench.Step("sample 20 tokens, nothing built", 3.21, 0, 600, 0, "note: fp32 ..."),
                           bench.Step("a sample killed 6 s in", 6.0, 124, 600, 0, "")],
             "de041e5": [bench.Step("sample 20 tokens after the kill", 600.0, None, 600, 2, "")]}
    lines = {"this tree": bench.Lines(10, 1000, 900, 250, 200), "de041e5": bench.Lines(9, 800, 700, 0, 0)}
    text = bench.report(steps, lines, "python benchmarks/bench_startup.py --base de041e5", "CPU: x", (1, 2, 3),
                        quick=False)
    assert "| this tree | sample 20 tokens, nothing built | 3.2 | exited 0 | 0 | note: fp32 ... |" in text
    assert "| this tree | a sample killed 6 s in | 6.0 | stopped by `timeout -s TERM 6` | 0 | – |" in text
    assert "| de041e5 | sample 20 tokens after the kill | 600.0 | did not finish in 600 s | 2 | – |" in text
    assert "| this tree | 10 | 1,000 | 900 | 250 | 200 | 25.0 % |" in text
    assert "| de041e5 | 9 | 800 | 700 | 0 | 0 | 0.0 % |" in text
    assert "Command: `python benchmarks/bench_startup.py --base de041e5`." in text
    assert "## A." not in bench.report({}, lines, "c", "CPU: x", (1, 2, 3), quick=True)  # --lines-only


def test_a_lines_only_run_writes_this_trees_lines(bench, tmp_path):
    out = bench.main(["--lines-only", "--out", str(tmp_path / "startup.md")])
    (row,) = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| this tree |")]
    files, lines, _, fast, *_ = (int(cell.replace(",", "")) for cell in row.split(" | ")[1:6])
    assert files > 100 and lines > fast > 0  # attnlab.fast is there, and a part of src/


def test_a_timeout_no_longer_than_the_kill_is_refused(bench, tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--timeout", "6", "--out", str(tmp_path / "x.md")])
    assert not (tmp_path / "x.md").exists()
