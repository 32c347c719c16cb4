"""The induction experiment's parts: the prefix-matching score against a loop over captured weights, the data, the
in-context learning score; and a short run's record."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.heads.attention_only import AttentionOnlyConfig, AttentionOnlyTransformer
from attnlab.heads.induction import (
    EvalData,
    InductionConfig,
    icl_positions,
    icl_score,
    prefix_matching_scores,
    results,
    train_induction,
)
from attnlab.heads.repeated_tokens import check_half, repeated_halves, repeated_span_batch
from attnlab.inspect import capture


def loop_score(weights: list[torch.Tensor], tokens: list[int]) -> list[list[float]]:
    """The definition, written out: for each query in the second half, find the earlier occurrence of its token and
    read the weight on the position right after it; average over the queries. ``weights``: per layer ``(H, T, T)``."""
    half = len(tokens) // 2
    scores = []
    for a in weights:
        row = []
        for h in range(a.shape[0]):
            total, count = 0.0, 0
            for i in range(half, 2 * half):
                earlier = [j for j in range(i) if tokens[j] == tokens[i]]
                assert len(earlier) == 1  # distinct tokens: one earlier occurrence
                total += a[h, i, earlier[0] + 1].item()
                count += 1
            row.append(total / count)
        scores.append(row)
    return scores


def test_prefix_matching_score_equals_the_loop_over_captured_weights():
    torch.manual_seed(1)
    model = AttentionOnlyTransformer(AttentionOnlyConfig(vocab_size=20, context_length=12, d_model=16, num_layers=2,
                                                         num_heads=2))
    with torch.no_grad():  # sharper attention than the initialisation's, so the weights differ from head to head
        for p in model.parameters():
            p.mul_(20 if p.dim() == 2 else 1)
    sequences = repeated_halves(3, 6, 20, torch.Generator().manual_seed(4))
    by_loop = torch.tensor([loop_score(capture(model, s.tolist()).attentions, s.tolist()) for s in sequences])
    with torch.no_grad():
        weights = model(sequences, return_weights=True).attentions
    torch.testing.assert_close(prefix_matching_scores(weights, 6), by_loop.mean(dim=0), atol=1e-6, rtol=0)
    assert by_loop.std() > 0.01  # the heads really differ: the comparison is not between constants


def perfect_head_model(config: InductionConfig) -> AttentionOnlyTransformer:
    """One layer, one head, built by hand to attend from each query of the second half exactly to the token after its
    earlier occurrence, and from the first half to itself. By position alone (the token embeddings are zero): on the
    repeated halves every evaluation uses, the place to look is fixed. Positions are one-hot (d_model = T), so after the
    LayerNorm the query of position i is ``a · e_target(i)`` and the key of position j is ``a · e_j - b · 1``; the
    scores differ by ``100 · a² / √T`` (about 570) between the target and any other key: a weight of 1.0 in float32."""
    t, half = config.context_length, config.half
    model = AttentionOnlyTransformer(AttentionOnlyConfig(config.vocab_size, t, t, num_layers=1, num_heads=1))
    target = [i if i < half else i - half + 1 for i in range(t)]
    with torch.no_grad():
        model.tok_emb.weight.zero_()
        model.pos_emb.weight.copy_(torch.eye(t))
        attn = model.blocks[0].attn
        attn.W_key.weight.copy_(torch.eye(t))
        attn.W_query.weight.zero_()
        attn.W_query.weight[target, range(t)] = 100.0
    return model.eval()


def test_a_perfect_induction_head_scores_one():
    """Every query of the second half is a real one: the hand-built perfect head scores 1, not (half - 1) / half (a
    padded zero row in place of the last query, averaged in, once capped it at 15/16)."""
    config = InductionConfig()
    model = perfect_head_model(config)
    data = EvalData(config)
    with torch.no_grad():
        weights = model(data.halves, return_weights=True).attentions[0]
    queries = torch.arange(config.half, 2 * config.half)
    assert torch.equal(weights[:, 0, queries, queries - config.half + 1], torch.ones(config.eval_batch, config.half))
    evaluation = data.evaluate(model, 0, config.half)
    assert evaluation.prefix_matching == [[1.0]]
    # the repeated half's loss is still read from the second half's first half - 1 predictions (the last predicts
    # nothing): the model's own loss on those tokens
    with torch.no_grad():
        logits = model(data.halves).logits
    expected = torch.nn.functional.cross_entropy(logits[:, config.half:-1].flatten(0, 1),
                                                 data.halves[:, config.half + 1:].flatten())
    assert abs(evaluation.repeated_loss - float(expected)) < 1e-6


def test_repeated_halves_repeat_distinct_tokens():
    seq = repeated_halves(5, 7, 10, torch.Generator().manual_seed(0))
    assert seq.shape == (5, 14)
    assert torch.equal(seq[:, :7], seq[:, 7:])
    assert all(len(set(row[:7].tolist())) == 7 for row in seq)


@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1), st.integers(15, 64), st.integers(2, 4))
def test_every_training_sequence_repeats_a_span_at_a_distance(seed, context_length, min_span):
    inputs, targets = repeated_span_batch(8, context_length, 50, torch.Generator().manual_seed(seed), min_span,
                                          copies=1)
    assert inputs.shape == targets.shape == (8, context_length)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    full = torch.cat([inputs, targets[:, -1:]], dim=1)
    k, n = min_span, context_length + 1
    for row in full.tolist():  # some k tokens come again at least k tokens later
        assert any(row[i:i + k] == row[j:j + k] for i in range(n - 2 * k + 1) for j in range(i + k, n - k + 1))


def test_icl_positions_are_the_papers_ratio():
    assert icl_positions(500) == (49, 499)   # the paper's 50th and 500th tokens
    assert icl_positions(32) == (2, 29)
    losses = torch.arange(32, dtype=torch.float32)
    assert icl_score(losses) == 29 - 2
    with pytest.raises(ValueError, match="at least 10 tokens, got 9"):
        icl_positions(9)


@pytest.mark.parametrize(("half", "words"), [
    (1, ["at least 4 tokens", "a half of 1"]),
    (20, ["2 × 20 tokens", "context_length=32"]),
])
def test_a_repeated_half_that_cannot_be_made_is_named(half, words):
    with pytest.raises(ValueError) as info:
        check_half(half, vocab_size=64, context_length=32)
    assert all(w in str(info.value) for w in words)


def test_too_small_a_vocabulary_for_distinct_tokens():
    with pytest.raises(ValueError, match="draws 16 distinct tokens, but the vocabulary has only 8"):
        InductionConfig(vocab_size=8)


def test_too_short_a_context():
    with pytest.raises(ValueError, match="at least 4 tokens"):
        InductionConfig(context_length=2)


TINY = dict(vocab_size=24, context_length=20, d_model=16, num_heads=2, steps=6, batch_size=4, eval_interval=3,
            eval_batch=8)


def test_a_short_run_records_every_evaluation_and_is_reproducible(one_thread):
    config = InductionConfig(**TINY)
    seen = []
    first = results(config, train_induction(config, on_eval=lambda name, e: seen.append((name, e.step))))
    assert seen == [(m, s) for m in ("1-layer", "2-layer") for s in (0, 3, 6)]
    assert set(first["models"]) == {"1-layer", "2-layer"}
    for name, layers in (("1-layer", 1), ("2-layer", 2)):
        model = first["models"][name]
        scores = torch.tensor(model["prefix_matching"])
        assert scores.shape == (layers, 2) and ((scores >= 0) & (scores <= 1)).all()
        assert [e["step"] for e in model["history"]] == [0, 3, 6]
        assert model["prefix_matching"] == model["history"][-1]["prefix_matching"]
        assert model["icl_score"] == model["history"][-1]["icl_score"]
    assert results(config, train_induction(config)) == first  # fixed seed, fixed steps: the same numbers


@pytest.mark.slow
def test_the_finding_two_layers_form_an_induction_head_in_a_phase_change_one_layer_none():
    """The default experiment (800 steps, about 45 s of one core): the two-layer model's best head passes 0.5, and
    its in-context learning score and its loss on the repeated half fall at that same evaluation more than at any
    other; every head of the one-layer model stays under 0.2."""
    config = InductionConfig()
    result = results(config, train_induction(config))
    one, two = result["models"]["1-layer"], result["models"]["2-layer"]
    assert max(max(row) for e in one["history"] for row in e["prefix_matching"]) < 0.2
    assert one["phase_change_step"] is None
    assert max(max(row) for row in two["prefix_matching"]) > 0.5
    step = two["phase_change_step"]
    assert step is not None
    history = two["history"]
    at = next(i for i, e in enumerate(history) if e["step"] == step)
    for key in ("icl_score", "repeated_loss"):
        falls = [history[i][key] - history[i + 1][key] for i in range(len(history) - 1)]
        steepest = max(range(len(falls)), key=falls.__getitem__)
        assert abs(steepest + 1 - at) <= 1, (key, history[steepest + 1]["step"], step)  # the same evaluation, ±1
    assert two["icl_score"] < history[at - 1]["icl_score"] - 0.5
    assert two["repeated_loss"] < 0.5 * history[at - 1]["repeated_loss"]
