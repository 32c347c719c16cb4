"""benchmarks/bench_families.py: a row per family with both libraries' rates and their ratio, the cache's bytes
(asserted equal to the formula by the script), and the delta rule's two forms. (The figures are for a quiet
machine; here a smoke run.)"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_families.py"


def test_a_quick_run_writes_a_row_per_family_and_the_ratios_are_the_rates(tmp_path):
    out = tmp_path / "families.md"
    result = subprocess.run([sys.executable, str(PATH), "--quick", "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and " / " in line
            and not line.startswith("| family")]
    assert [row.split("|")[1].strip() for row in rows] == ["DiffLlama", "SmolLM3", "Qwen3.5 (DeltaNet 3:1)",
                                                           "Qwen3-Next (DeltaNet 3:1, MoE)", "DeepSeek-V3 (MLA, MoE)",
                                                           "Gemma 4 (shared KV, PLE)",
                                                           "Kimi Linear (KDA 3:1 + MLA, MoE)"]
    for row in rows:
        cells = [c.strip() for c in row.split("|")[2:8]]
        for rates, ratio in zip(cells[::2], cells[1::2], strict=True):
            ours, theirs = (float(r.replace(",", "")) for r in rates.split(" / "))
            assert abs(float(ratio) - ours / theirs) <= 0.5 / theirs * (1 + ours / theirs) + 0.005
    for decay in ("per head", "per channel"):
        assert re.search(rf"^\| {decay} \| 64 \| [\d.]+ \| [\d.]+ \| [\d.]+× \| ", text, flags=re.M)
