"""benchmarks/bench_versions.py: both versions run every case they are given, in turn, and the table says so.

The figures are for a quiet machine (the lead's); here one cheap case, two rounds, against HEAD.
"""

import re
import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_versions.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PATH), *args], capture_output=True, text=True)


def test_a_case_against_head_gives_a_row_with_its_ratio():
    result = run("--base", "HEAD", "--cases", "generate_overhead", "--rounds", "2", "--reps", "1")
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("| generate_overhead ")]
    base, new, ratio = map(float, re.findall(r"\d+\.\d+", row))
    assert base > 0 and new > 0 and abs(ratio - new / base) < 2e-3


def test_an_unknown_case_is_named():
    result = run("--cases", "nope")
    assert result.returncode == 2 and "unknown cases ['nope']" in result.stderr


def test_the_beam_search_parts_run_by_name_and_not_by_default():
    result = run("--base", "HEAD", "--cases", "beam_setup_tiny,beam_steps_tiny", "--rounds", "2", "--reps", "1",
                 "--workers", "1")
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip() for line in result.stdout.splitlines() if line.startswith("| beam_")}
    assert rows == {"beam_setup_tiny", "beam_steps_tiny"}
    default = " ".join(run("--help").stdout.split()).split("the measured figures:")[1]  # argparse wraps lines
    assert "beam_search_cached" in default and "beam_steps" not in default
