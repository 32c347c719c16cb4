"""benchmarks/bench_seq2seq.py, end to end at toy sizes: every part runs and the report says what it measured.

The figures themselves (3-minute runs) are in benchmarks/results/seq2seq.md; here a few seconds of training.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_seq2seq.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_seq2seq", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_seq2seq"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["bench_seq2seq"]


def test_quick_run_writes_every_part(bench, tmp_path, one_thread):
    out = tmp_path / "seq2seq.md"
    res = bench.main(["--quick", "--minutes", "0.05", "--tasks", "dates", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    for heading in ("## A. Exact match", "## B. Training speed", "## C. Beam 4", "--quick smoke run"):
        assert heading in text
    (quality,) = res["quality"]
    assert quality["task"] == "dates" and quality["n_eval"] == 50 and quality["steps"] >= 1
    assert quality["config"].time_budget == 0.05 and 0 < quality["last_lr"] <= quality["config"].learning_rate
    assert all(0.0 <= quality[k][0] <= 1.0 for k in ("greedy", "beam4"))
    speed, cache = res["speed"], res["cache"]
    # the torch model and attnlab's copy of it start from the same loss: the comparison is of one model
    assert speed["first_loss"][0] == pytest.approx(speed["first_loss"][1], abs=1e-4)
    assert speed["ratio"] > 0 and cache["ratio"] > 0
    assert cache["same_tokens"] and cache["max_score_diff"] <= 1e-5


def test_unknown_task_is_a_usage_error(bench, tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--tasks", "poems", "--out", str(tmp_path / "x.md")])


def test_the_reference_is_torchs_transformer_with_a_tied_embedding(bench):
    ref = bench.TorchSeq2Seq(20, 16, 2, 1, 1, 32, 12)
    assert isinstance(ref.body, torch.nn.Transformer) and ref.head.weight is ref.embedding.weight
