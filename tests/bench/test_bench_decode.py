"""benchmarks/bench_decode.py: each case's limit is the read bandwidth measured just before and just after it, and
the table's fractions are its steps/s over that limit and over the run's best reading. (The figures are for a quiet
machine; here the bookkeeping, with readings and rows made up.)"""

import argparse
import re

import pytest

from attnlab.bench.machine import Limit, MachineFacts
from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_decode") as module:
        yield module


def reading(gb_per_s: float) -> Limit:
    return Limit(gb_per_s, gb_per_s, gb_per_s, "GB/s", "Tensor.sum over 512 MiB fp32")


def test_a_case_runs_under_the_higher_of_the_readings_around_it(bench, monkeypatch):
    after = iter([reading(50.0), reading(40.0)])
    monkeypatch.setattr(bench, "read_bandwidth", lambda repeats: next(after))
    reads = [reading(30.0)]
    first = bench.bracketed(lambda: {"tps": 1.0}, reads)
    second = bench.bracketed(lambda: {"tps": 2.0}, reads)
    assert first == {"tps": 1.0, "read": 50.0} and second == {"tps": 2.0, "read": 50.0}
    assert [r.value for r in reads] == [30.0, 50.0, 40.0]  # the reading after a case is the one before the next


def test_the_table_gives_each_rows_fraction_of_its_own_limit_and_of_the_best(bench):
    args = argparse.Namespace(quick=False, prompt=32, new=96, repeats=3, case_budget=60.0, threads=None,
                              train_iters=1000, torchao=False, plain=True)
    facts = MachineFacts("cpu", 2, 2, 1.0, "3", "t", "n")
    # 20 steps/s over 1 GB: 20 GB/s, half of a 40 GB/s limit and a quarter of the run's best, 80 GB/s
    speed = [dict(model="m", batch=1, variant="HF generate (fp32)", tps=20.0, ratio=1.0, n=96, bytes=10**9,
                  same="–", read=40.0),
             dict(model="m", batch=8, variant="attnlab eager", tps=240.0, ratio=12.0, n=96, bytes=10**9,
                  same=True, read=60.0)]
    text = bench.write(args, facts, reading(100.0), [reading(v) for v in (40.0, 80.0, 60.0)], speed, [], "up")
    rows = [line for line in text.splitlines() if line.startswith("| m |")]
    assert [re.findall(r"(\d+) %", row) for row in rows] == [["50", "25"], ["50", "38"]]
    assert "3 readings from 40.0 to 80.0 GB/s (median 60.0, best **80.0**)" in text


def test_the_int4_targets_are_checked_against_the_runs_own_rows(bench):
    def row(model, batch, variant, tps):
        return dict(model=model, batch=batch, variant=variant, tps=tps)

    speed = [row("a", 1, "attnlab int8", 100.0), row("a", 1, "attnlab int4", 120.0),
             row("a", 8, "attnlab int4", 1.0),  # batch 8 is no target
             row("b", 1, "attnlab int8", 100.0), row("b", 1, "attnlab int4", 60.0),
             row("b", 1, "attnlab plain int4", 500.0),  # the plain path is no target either
             row("c", 1, "attnlab int8", 100.0), dict(model="c", batch=1, variant="attnlab int4", failed="E")]
    qual = [dict(model=bench.TRAINED, scheme="int8", fp32=8.0, ppl=8.01, change=0.125, note=""),
            dict(model=bench.TRAINED, scheme="int4", fp32=8.0, ppl=8.1, change=1.25, note=""),
            dict(model="a (loaded, random weights)", scheme="int4", fp32=9.0, ppl=9.0, change=0.0, note="")]
    lines = bench.targets(speed, qual)
    rows = [line.split(" | ") for line in lines if line.startswith("| int4")]
    assert [(r[1], r[2].split(" (")[0], r[3]) for r in rows] == [
        ("a", "1.20×", "✓ |"), ("b", "0.60×", "✗ |"), ("c", "not measured", "– |"), (bench.TRAINED, "+1.25 %", "✗ |")]
