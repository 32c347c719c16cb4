"""The experiments with a known answer: their inputs and metrics against the definitions written out, and (slow) the
findings themselves: the induction circuit's K-composition, the dates model's month heads."""

from __future__ import annotations

import datetime as dt

import pytest
import torch

from attnlab.heads.induction import InductionConfig, train_induction
from attnlab.heads.induction_circuit import induction_circuit, induction_pair, previous_token_scores, repeat_metric

TINY = dict(vocab_size=24, context_length=20, d_model=16, num_heads=2, steps=4, batch_size=4, eval_interval=2,
            eval_batch=8)


def test_the_induction_pair_breaks_every_repeat_and_keeps_the_second_half():
    config = InductionConfig()
    clean, corrupt = induction_pair(config, batch=16)
    half = config.half
    assert torch.equal(clean[:, :half], clean[:, half:]) and torch.equal(corrupt[:, half:], clean[:, half:])
    for row in corrupt.tolist():
        first, second = row[:half], row[half:]
        assert len(set(first)) == half and not set(first) & set(second)  # distinct, and nothing repeats


def test_the_repeat_metric_is_the_mean_log_probability_of_each_successor():
    g = torch.Generator().manual_seed(0)
    half, vocab = 5, 11
    clean = torch.randint(0, vocab, (3, 2 * half), generator=g)
    logits = torch.randn(3, 2 * half, vocab, generator=g)
    by_hand = [torch.log_softmax(logits[b, i], -1)[clean[b, i + 1]]
               for b in range(3) for i in range(half, 2 * half - 1)]
    assert abs(float(repeat_metric(clean, half)(logits)) - float(torch.stack(by_hand).mean())) < 1e-6


def test_previous_token_scores_read_the_weight_one_position_back():
    from patching_models import make

    model = make("attention-only")
    ids = torch.randint(0, 40, (2, 9))
    with torch.no_grad():
        weights = model(ids, return_weights=True).attentions
    expected = torch.stack([torch.stack([a[:, h, i, i - 1] for i in range(1, 9)]).mean() for a in weights
                            for h in range(4)]).reshape(2, 4)
    torch.testing.assert_close(previous_token_scores(model, ids), expected, atol=1e-6, rtol=0)


def test_a_short_run_gives_every_analysis_of_both_models(one_thread):
    config = InductionConfig(**TINY)
    result = induction_circuit(config, train_induction(config, snapshots=True))
    one, two = result["models"]["1-layer"], result["models"]["2-layer"]
    assert len(one["patching"]) == 1 and len(two["patching"]) == 2 and one["paths_from_layer_0"] == {}
    assert set(two["paths_from_layer_0"]) == {0, 1}
    assert [e["step"] for e in result["training"]] == [0, 2, 4]
    lengths = len(two["patching_by_position"][0][0])
    assert lengths == 2 * config.half


@pytest.mark.slow
def test_the_finding_layer_1_heads_make_the_prediction_and_layer_0_feeds_their_keys(one_thread):
    """The default experiment (800 steps): the heads restoring the most are layer 1's; the layer-0 head losing the
    most loses it through the keys, far more than through the queries or the values; the one-layer model has no
    later layer to feed."""
    config = InductionConfig()
    result = induction_circuit(config, train_induction(config, snapshots=True))
    two = result["models"]["2-layer"]
    patching = torch.tensor(two["patching"])
    assert patching[1].max() > 0.3 and patching[0].max() < 0.05
    paths = two["paths_from_layer_0"]
    lost = {site: max(max(paths[s][site][0]) for s in paths) for site in ("query", "key", "value")}
    assert lost["key"] > 0.3 and lost["query"] < 0.02 and lost["value"] < 0.02
    assert result["models"]["1-layer"]["paths_from_layer_0"] == {}
    before = next(e for e in result["training"] if e["step"] == 350)
    assert before["key_path"] < 0.05 < result["training"][-1]["key_path"]


def test_the_month_pair_and_its_metric(tmp_path):
    pytest.importorskip("babel", reason="the dates task needs attnlab[seq2seq]")
    from attnlab.data.tasks import get_task
    from attnlab.data.tokenizer import CharTokenizer
    from attnlab.heads.month_heads import month_metric, month_pair, month_sources

    clean_sources, corrupt_sources = month_sources()
    assert clean_sources[0] == "15 juillet 2031" and corrupt_sources[0] == "15 août 2031"
    vocab = CharTokenizer.from_texts([get_task("dates").alphabet()])
    clean, corrupt = month_pair(vocab, clean_sources, corrupt_sources)
    assert clean[0].shape == corrupt[0].shape and torch.equal(clean[1], corrupt[1])
    assert vocab.decode(clean[1][0, 1:].tolist()) == "2031-07-15"
    assert vocab.decode([i for i in corrupt[0][0].tolist() if i != 0]) == "15 août 2031"
    metric, position = month_metric(vocab, dt.date(2031, 7, 15), dt.date(2031, 8, 15))
    assert position == 6  # the decoder has read "<bos>2031-0" and writes the month's second digit
    logits = torch.zeros(7, 11, vocab.vocab_size)
    logits[:, 6, int(vocab.encode("7")[0])] = 2.0
    logits[:, 6, int(vocab.encode("8")[0])] = -1.0
    assert float(metric(logits)) == 3.0
