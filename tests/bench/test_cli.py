import json

import pytest
from click.testing import CliRunner

from attnlab.cli import main


@pytest.mark.parametrize(("args", "message"), [
    (["--seq-lens", "256,0"], "'0' is not a positive integer"),
    (["--seq-lens", "256,abc"], "'abc' is not a positive integer"),
    (["--seq-lens", "-5"], "'-5' is not a positive integer"),
    (["--seq-lens", ","], "expected positive integers separated by commas"),
    (["--backends", "math,fast"], "unknown backend 'fast'; valid backends: math, sdpa, chunked, flash, auto, "
                                  "numpy-math, numpy-chunked"),
    (["--heads", "3"], "--heads 3 must divide --d-model 512"),
    (["--d-model", "0"], "0 is not in the range x>=1"),
])
def test_bad_input_is_a_clear_usage_error(args, message):
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_help_lists_the_command():
    assert "bench" in CliRunner().invoke(main, ["--help"]).output


def test_quick_smoke(tmp_path):
    """The whole command, end to end, at tiny sizes: JSON out, files written, every case measured."""
    result = CliRunner().invoke(main, ["bench", "--quick", "--seq-lens", "16", "--d-model", "32", "--heads", "2",
                                       "--no-texts-shape", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["matmul"]["value"] > 0 and data["bandwidth"]["value"] > 0
    cases = data["cases"]
    assert len(cases) == 6 * 2 and {c["status"] for c in cases} == {"ok"}
    assert all(c["median_ms"] > 0 and c["peak_extra_mib"] >= 0 and c["percent_of_matmul"] > 0 for c in cases)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.json", "bench.md", "bench_memory_vs_T.png",
                                                          "bench_time_vs_T.png"]
    assert json.loads((tmp_path / "bench.json").read_text())["cases"] == cases
    assert (tmp_path / "bench_time_vs_T.png").read_bytes()[:4] == b"\x89PNG"
