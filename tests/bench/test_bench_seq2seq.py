"""benchmarks/bench_seq2seq.py, end to end at toy sizes: every part runs and the report says what it measured.

The figures themselves (3-minute runs) are in benchmarks/results/seq2seq.md; here a few seconds of training.
"""

import pytest
import torch

from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_seq2seq") as module:
        yield module


def test_quick_run_writes_every_part(bench, tmp_path, one_thread):
    out = tmp_path / "seq2seq.md"
    res = bench.main(["--quick", "--minutes", "0.05", "--tasks", "dates", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    for heading in ("## A. Exact match", "## B. Training speed", "## C. Beam 4", "--quick smoke run"):
        assert heading in text
    (quality,) = res["quality"]
    assert quality["task"] == "dates" and quality["steps"] >= 1 and list(quality["sets"]) == ["random"]
    assert all(0.0 <= score[0] <= 1.0 and score[3] == 50 for score in quality["sets"]["random"].values())
    assert quality["config"].time_budget == 0.05 and 0 < quality["last_lr"] <= quality["config"].learning_rate
    speed, cache = res["speed"], res["cache"]
    # the torch model and attnlab's copy of it start from the same loss: the comparison is of one model
    assert speed["first_loss"][0] == pytest.approx(speed["first_loss"][1], abs=1e-4)
    assert speed["ratio"] > 0 and cache["ratio"] > 0
    # beside the fast twins (the trainer's, beam_search's default), the book's modules: their own rows, same tokens
    assert speed["plain_ratio"] > 0 and cache["plain_ratio"] > 0
    for row in ("| attnlab Transformer, plain |", "| with caches, plain |", "| without, plain |"):
        assert row in text
    assert cache["same_tokens"] and cache["max_score_diff"] <= 1e-5


def test_numbers_are_scored_on_random_and_round_held_out_sets(bench, tmp_path, one_thread):
    from attnlab.data import get_task

    out = tmp_path / "seq2seq.md"
    res = bench.main(["--quick", "--steps", "30", "--tasks", "numbers", "--skip-speed", "--out", str(out)])
    (quality,) = res["quality"]
    assert quality["steps"] == 30 and quality["step_ms"] is None and quality["config"].time_budget is None
    assert list(quality["sets"]) == ["random", "round"]
    assert [quality["sets"]["round"][k][3] for k in ("greedy", "beam4")] == [100, 100]  # 80 fixed + 20 sampled
    # the bench scores the library's round set, not a copy of its own
    assert bench.eval_sets("numbers", quick=True)["round"] == get_task("numbers").round_held_out(20)
    text = out.read_text(encoding="utf-8")
    assert "| numbers | random | 50 |" in text and "| numbers | round | 100 |" in text and "after 30 steps" in text
    assert "Load average (1 min) at the start" in text


@pytest.mark.parametrize("args", [["--tasks", "poems"], ["--steps", "0"], ["--threads", "0"]])
def test_bad_arguments_are_usage_errors(bench, tmp_path, args):
    with pytest.raises(SystemExit):
        bench.main([*args, "--out", str(tmp_path / "x.md")])


def test_the_reference_is_torchs_transformer_with_a_tied_embedding(bench):
    ref = bench.TorchSeq2Seq(20, 16, 2, 1, 1, 32, 12)
    assert isinstance(ref.body, torch.nn.Transformer) and ref.head.weight is ref.embedding.weight
