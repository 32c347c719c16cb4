import itertools
import math

import pytest
import torch

from attnlab.models import GPT, GPTConfig
from attnlab.training import configure_optimizer, lr_at
from attnlab.training.optim import inverse_sqrt_lr


@pytest.mark.parametrize(("step", "expected"), [
    (0, 1e-3 * 1 / 10),          # warm-up: (step + 1) / warmup_iters of the peak
    (9, 1e-3),                   # the last warm-up step reaches the peak
    (10, 1e-3),                  # cosine starts at the peak
    (55, 1e-4 + 0.5 * (1 + math.cos(math.pi * 0.5)) * 9e-4),  # half-way: the mean of peak and floor
    (100, 1e-4),                 # the end of the decay
    (500, 1e-4),                 # and after it, the floor
])
def test_lr_schedule_hand_values(step, expected):
    assert lr_at(step, 1e-3, 1e-4, warmup_iters=10, decay_iters=100) == pytest.approx(expected, rel=1e-12)


def test_lr_schedule_is_monotone_after_warmup():
    lrs = [lr_at(s, 1e-3, 1e-4, 10, 100) for s in range(10, 120)]
    assert all(a >= b for a, b in itertools.pairwise(lrs))


def test_weight_decay_on_matrices_only():
    model = GPT(GPTConfig.from_preset("tiny", vocab_size=11, context_length=8))
    opt = configure_optimizer(model, 1e-3, 0.1, (0.9, 0.99))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    names = {id(p): n for n, p in model.named_parameters()}  # named_parameters lists a tied weight once
    assert len(decay["params"]) + len(no_decay["params"]) == len(names)
    assert any("bias" in names[id(p)] for p in no_decay["params"])
    assert id(model.tok_emb.weight) in {id(p) for p in decay["params"]}


def test_decay_shrinks_only_matrices():
    """With zero gradients, AdamW's only move is the decay: w <- w (1 - lr * wd) for matrices, nothing else."""
    model = GPT(GPTConfig.from_preset("tiny", vocab_size=11, context_length=8))
    opt = configure_optimizer(model, 0.5, 0.1, (0.9, 0.99))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        factor = (1 - 0.5 * 0.1) if p.dim() >= 2 else 1.0
        torch.testing.assert_close(p.detach(), before[n] * factor, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("step", [0, 1, 399, 3999, 4000, 4001, 10_000, 100_000])
def test_inverse_sqrt_schedule_is_the_papers_formula(step):
    # "Attention Is All You Need" §5.3: lrate = d_model^-0.5 · min(n^-0.5, n · warmup^-1.5), n = step + 1
    d_model, warmup = 512, 4000
    n = step + 1
    paper = d_model**-0.5 * min(n**-0.5, n * warmup**-1.5)
    assert inverse_sqrt_lr(step, (d_model * warmup) ** -0.5, warmup) == pytest.approx(paper, rel=1e-12)


def test_inverse_sqrt_schedule_peaks_at_the_end_of_warmup():
    lrs = [inverse_sqrt_lr(s, 1e-3, 10) for s in range(40)]
    assert max(lrs) == lrs[9] == pytest.approx(1e-3, rel=1e-12)
    assert all(a < b for a, b in itertools.pairwise(lrs[:10])) and all(a > b for a, b in itertools.pairwise(lrs[9:]))
    assert lrs[39] == pytest.approx(1e-3 * math.sqrt(10 / 40), rel=1e-12)  # 1/√n after the peak
    with pytest.raises(ValueError, match=r"warmup_iters: .* at least 1 warm-up step, got 0"):
        inverse_sqrt_lr(5, 1e-3, 0)
