"""benchmarks/bench_single_query.py: both forms of both products are timed for each buffer and size, and the ratio
columns are the matmul's time over the elementwise one's. (The figures are for a quiet machine; here a smoke run.)"""

import re
import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_single_query.py"


def test_a_quick_run_writes_a_row_per_buffer_and_size(tmp_path):
    out = tmp_path / "single_query.md"
    result = subprocess.run([sys.executable, str(PATH), "--quick", "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if re.match(r"\| (rows|positions) first", line)]
    assert [row.split("|")[1].strip() for row in rows] == ["rows first", "positions first"]
    for row in rows:
        cells = [float(c) for c in row.split("|")[4:10]]
        for matmul, elementwise, ratio in (cells[0:3], cells[3:6]):
            rounding = 0.05 / elementwise * (1 + matmul / elementwise) + 0.005  # times to 0.1, ratios to 0.01
            assert matmul > 0 and elementwise > 0 and abs(ratio - matmul / elementwise) <= rounding
