"""Inference-time fused projections: one matmul over the stacked weights equals the separate maps, the stacked copy
follows the weights, and nothing is fused where calling the maps could differ (training, autograd, hooks)."""

import pytest
import torch
from torch import nn

from attnlab.attention import AttentionSpec, GroupedQueryAttention, MultiHeadAttention
from attnlab.fast.attention import FastAttention
from attnlab.fast.feedforward import FastSwiGLU
from attnlab.fast.projections import fixed_weights, fused_map
from attnlab.layers.swiglu import SwiGLU


def modules():
    """Each plain module's fast twin (sharing its parameters)."""
    torch.manual_seed(0)
    return {"mha": FastAttention.from_module(MultiHeadAttention(32, 32, None, 0.0, 4, qkv_bias=True)),
            "gqa": FastAttention.from_module(GroupedQueryAttention(AttentionSpec(32, 32, 4, num_kv_heads=2))),
            "swiglu": FastSwiGLU.from_module(SwiGLU(32, 48))}


def stacked(fused):
    """The stacked weight of a fused map of plain linears."""
    return fused.keywords["weight"]


def maps(module):
    return (module.gate_proj, module.up_proj) if isinstance(module, SwiGLU) else \
        (module.W_query, module.W_key, module.W_value)


@pytest.mark.parametrize("name", ["mha", "gqa", "swiglu"])
def test_the_fused_inference_path_equals_the_separate_maps(name):
    module = modules()[name]
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        separate = module(x)  # training mode: the maps called one by one (stacked, for MHA, with autograd off)
        module.eval()
        fused = module(x)
        assert fused_map(module, *maps(module)) is not None  # it did run fused
    torch.testing.assert_close(fused, separate, rtol=1e-5, atol=1e-6)


def test_the_stacked_copy_is_made_once_and_rebuilt_when_a_weight_changes():
    module = modules()["mha"].eval()
    with torch.no_grad():
        first = fused_map(module, *maps(module))
        assert stacked(fused_map(module, *maps(module))) is stacked(first)  # kept, not stacked again
        module.W_key.weight.mul_(2)  # in place: the version counter moves
        second = fused_map(module, *maps(module))
        torch.testing.assert_close(stacked(second)[32:64], module.W_key.weight)
        module.load_state_dict({k: torch.zeros_like(v) for k, v in module.state_dict().items()})
        assert stacked(fused_map(module, *maps(module))).abs().sum() == 0


def test_within_a_fixed_weights_span_the_copy_is_checked_once_then_trusted():
    module = modules()["mha"].eval()
    with torch.no_grad():
        before = fused_map(module, *maps(module))
        with fixed_weights():
            module.W_key.weight.mul_(2)  # changed before the span's first use: that use sees it
            first = fused_map(module, *maps(module))
            assert stacked(first) is not stacked(before)
            torch.testing.assert_close(stacked(first)[32:64], module.W_key.weight)
            module.W_key.weight.mul_(2)  # the span promises no change: the copy is no longer checked
            assert stacked(fused_map(module, *maps(module))) is stacked(first)
        with fixed_weights():  # a new span checks again
            torch.testing.assert_close(stacked(fused_map(module, *maps(module)))[32:64], module.W_key.weight)
        module.W_key.weight.mul_(2)  # outside any span: checked at every call
        torch.testing.assert_close(stacked(fused_map(module, *maps(module)))[32:64], module.W_key.weight)


def test_nothing_is_fused_in_training_with_autograd_or_with_a_hook():
    module = modules()["mha"]
    with torch.no_grad():
        assert fused_map(module, *maps(module)) is None  # training mode
    module.eval()
    assert fused_map(module, *maps(module)) is None  # autograd on
    module.W_value.register_forward_hook(lambda m, args, out: out * 0)
    with torch.no_grad():
        assert fused_map(module, *maps(module)) is None
        out = module(torch.randn(1, 3, 32))
    assert isinstance(module.W_value, nn.Linear) and out.shape == (1, 3, 32)


@pytest.mark.parametrize("optimizer", ["fused", "foreach"])
def test_an_optimizer_step_between_two_evaluations_is_seen(optimizer):
    """A trainer evaluates, trains a step, evaluates again: the second evaluation must use the new weights. An
    optimizer's fused or foreach kernels update weights in place without moving their version counters, so the
    copy is dropped by the training step's forward, not trusted on its version."""
    from attnlab.fast import swap_modules
    from attnlab.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = swap_modules(GPT(GPTConfig(vocab_size=32, context_length=16, d_model=32, num_layers=2, num_heads=4,
                                       dropout=0.0)))
    x = torch.randint(0, 32, (2, 16), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, **{optimizer: True})
    for _ in range(2):
        model.eval()
        with torch.no_grad():
            fused = model(x).logits  # through the stacked copy
        with torch.enable_grad():
            plain = model(x).logits  # autograd on: the three maps, called one by one
        torch.testing.assert_close(fused, plain.detach(), rtol=0, atol=1e-5)
        model.train()
        model(x, targets=x).loss.backward()
        opt.step()
        opt.zero_grad()


def test_a_cast_after_the_copy_was_made_is_seen():
    """``module.to(dtype)`` swaps each parameter's ``.data`` (same object, same version): the copy is remade."""
    m = FastAttention.from_module(MultiHeadAttention(8, 8, num_heads=2, qkv_bias=True)).eval()
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        m(x)
        m.to(torch.bfloat16)
        out = m(x.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16


@pytest.mark.parametrize("name", ["mha", "gqa", "swiglu"])
def test_while_compile_traces_the_plain_maps_run_side_by_side(name, monkeypatch):
    """No stacked copy in a graph: each plain map through attnlab's product (its CPU kernel where it applies, not
    torch's slower one for a few rows), the outputs side by side; a hooked map is called as it is."""
    module = modules()[name].eval()
    x = torch.randn(2, 1, 32)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    with torch.no_grad():
        fused = fused_map(module, *maps(module))
        torch.testing.assert_close(fused(x), torch.cat([m(x) for m in maps(module)], -1), atol=1e-6, rtol=0)
        assert not module.__dict__.get("_fused_inference")  # nothing kept
        maps(module)[0].register_forward_hook(lambda *_: None)
        assert fused_map(module, *maps(module)) is None
