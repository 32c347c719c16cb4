"""Head importance and pruning: the gradient importance against central differences of the loss, the ablation
against heads zeroed by hand (a hook on out_proj, no head mask given), the pruning curve against masks built here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.heads.importance import (
    ablation,
    gradient_importance,
    heads_shape,
    held_out_batches,
    mean_loss,
    pruning_curve,
    pruning_fractions,
    pruning_order,
)
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig
from references import scaled_by_hand


def gpt(dtype=torch.float32):
    torch.manual_seed(3)
    model = GPT(GPTConfig(vocab_size=30, context_length=10, d_model=24, num_layers=3, num_heads=4)).to(dtype)
    with torch.no_grad():  # weights of order 1, so that heads matter and differ
        for p in model.parameters():
            p.mul_(8 if p.dim() == 2 else 1)
    return model.eval()


def batches(count=3, dtype=torch.long):
    tokens = np.random.default_rng(0).integers(0, 30, 400)
    return held_out_batches(tokens, 10, 4, count, seed=1)


def test_gradient_importance_is_the_central_difference():
    model, data = gpt(torch.float64), batches()
    eps = 1e-6
    want = torch.zeros(3, 4, dtype=torch.float64)
    for x, y in data:
        for layer in range(3):
            for head in range(4):
                step = torch.zeros(3, 4, dtype=torch.float64)
                step[layer, head] = eps
                with torch.no_grad():
                    plus = model(x, targets=y, head_mask=1 + step).loss
                    minus = model(x, targets=y, head_mask=1 - step).loss
                want[layer, head] += abs(float(plus - minus) / (2 * eps))
    want /= len(data)
    torch.testing.assert_close(gradient_importance(model, data, normalise=False), want, atol=1e-7, rtol=1e-6)
    normalised = gradient_importance(model, data)
    torch.testing.assert_close(normalised, want / want.norm(dim=1, keepdim=True), atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(normalised.norm(dim=1), torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("build", [gpt, lambda: ModernDecoder(ModernDecoderConfig.from_preset(
    "tiny", vocab_size=30, context_length=10, num_layers=2)).eval()], ids=["gpt", "modern"])
def test_ablation_is_the_loss_with_the_head_zeroed_by_hand(build):
    model, data = build(), batches(2)
    layers, heads = heads_shape(model)
    base = mean_loss(model, data)
    got = ablation(model, data)
    modules = [block.attn for block in model.blocks]
    for layer, head in [(0, 0), (layers - 1, heads - 1), (1, 2)]:
        gate = torch.ones(layers, heads)
        gate[layer, head] = 0
        with torch.no_grad(), scaled_by_hand(modules, gate, modules[0].head_dim):
            want = sum(float(model(x, targets=y).loss) for x, y in data) / len(data) - base
        assert abs(float(got[layer, head]) - want) < 1e-5
    assert got.abs().max() > 1e-3  # the heads matter: the comparison is not of zeros


def test_the_pruning_curve_removes_the_least_important_heads_first():
    model, data = gpt(), batches(2)
    importance = torch.tensor([[0.5, 0.1, 0.9, 0.3], [0.2, 0.8, 0.05, 0.7], [0.6, 0.4, 0.95, 0.15]])
    assert pruning_order(importance)[:3] == [(1, 2), (0, 1), (2, 3)]
    points = pruning_curve(model, data, importance, step=0.25)
    assert [p.fraction for p in points] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [p.pruned for p in points] == [0, 3, 6, 9, 12]
    assert points[0].loss == pytest.approx(mean_loss(model, data))
    for point in points:
        gate = torch.ones(3, 4)
        for layer, head in pruning_order(importance)[:point.pruned]:
            gate[layer, head] = 0
        with torch.no_grad(), scaled_by_hand([b.attn for b in model.blocks], gate, 6):
            want = sum(float(model(x, targets=y).loss) for x, y in data) / len(data)
        assert point.loss == pytest.approx(want, abs=1e-5)


def test_ties_are_broken_by_position():
    assert pruning_order(torch.zeros(2, 2)) == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.parametrize("step", [0, 1, -0.1, 1.5, True, "0.1"])
def test_a_step_outside_zero_one_is_refused(step):
    with pytest.raises(ValueError, match=r"prune step must be a fraction in \(0, 1\), got"):
        pruning_fractions(step)


def test_fractions_end_at_one():
    assert pruning_fractions(0.3) == [0.0, 0.3, 0.6, 0.9, 1.0]
    assert pruning_fractions(0.5) == [0.0, 0.5, 1.0]


def test_a_model_without_heads_is_named():
    with pytest.raises(ValueError, match="Linear does not say how many layers and heads"):
        heads_shape(torch.nn.Linear(2, 2))


def test_held_out_text_shorter_than_a_window():
    with pytest.raises(ValueError, match="held-out split has 5 tokens"):
        held_out_batches(np.arange(5), 10, 2, 1, seed=0)
