"""benchmarks/bench_linear.py: every way is timed for every shape, rows of x and thread count, and the ratio column
is the kernel's rate over the sum's. (The figures are for a quiet machine; here a smoke run.)"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.fast import kernels

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_linear.py"


def test_a_quick_run_writes_a_row_per_case(tmp_path):
    if kernels.why_not_buildable() is not None:
        pytest.skip(f"attnlab's CPU kernels cannot run here: {kernels.why_not_buildable()}")
    kernels.build()
    out = tmp_path / "linear.md"
    result = subprocess.run([sys.executable, str(PATH), "--quick", "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if re.match(r"\| \d+ \| \(", line)]
    threads = [int(row.split("|")[1]) for row in rows]
    assert threads[0] == 1 and all(threads.count(n) == 2 * 2 for n in threads)  # shapes × rows of x, per threads
    for row in rows:
        total, kernel, _, ratio = map(float, row.split("|")[4:8])
        rounding = 0.05 / total * (1 + kernel / total) + 0.005  # the rates are printed to 0.1, the ratio to 0.01
        assert total > 0 and kernel > 0 and abs(ratio - kernel / total) <= rounding
