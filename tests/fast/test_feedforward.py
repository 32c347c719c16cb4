"""The feed-forward networks' fast twins (``fast.feedforward``): GELU's σ form in a compiled CPU graph is the same
function as torch's tanh form, to rounding; the twins equal the plain networks."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.fast.feedforward import FastFeedForward, FastSwiGLU
from attnlab.layers import FeedForward, SwiGLU


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_the_feed_forward_twin_equals_the_plain_network(activation):
    torch.manual_seed(0)
    plain = FeedForward(16, 48, activation=activation)
    fast = FastFeedForward.from_module(plain)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(fast(x), plain(x), rtol=0, atol=0)  # eager: the very same operations
    compiled = torch.compile(fast, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), plain(x), rtol=0, atol=1e-5)


def test_the_compiled_form_of_gelu_tanh_is_the_same_function_to_rounding(monkeypatch):
    """x·σ(2u), what a compiled graph gets, against torch's 0.5·x·(1 + tanh(u)) and a float64 reference: values within
    1e-6, gradients within 3e-6, over |x| ≤ 12, where both forms saturate."""
    from attnlab.fast import feedforward

    x = torch.linspace(-12, 12, 48_001, requires_grad=True)
    eager = feedforward.gelu_tanh(x)
    (eager_grad,) = torch.autograd.grad(eager.sum(), x)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiled = feedforward.gelu_tanh(x)
    (compiled_grad,) = torch.autograd.grad(compiled.sum(), x)
    x64 = x.detach().double()
    exact = 0.5 * x64 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-6)
    torch.testing.assert_close(compiled.double(), exact, rtol=0, atol=1e-6)
    torch.testing.assert_close(compiled_grad, eager_grad, rtol=0, atol=3e-6)
    assert torch.equal(F.gelu(x, approximate="tanh"), eager)  # eager: torch's own kernel


def test_a_compiled_graph_off_the_cpu_keeps_the_tanh_form(monkeypatch):
    """σ(2u) only in a CPU graph, where it pays; elsewhere (a GPU, here the meta device) torch's tanh form."""
    from attnlab.fast import feedforward

    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(torch, "sigmoid", lambda *a: pytest.fail("the σ form ran off the CPU"))
    assert feedforward.gelu_tanh(torch.ones(4, device="meta")).shape == (4,)
    with pytest.raises(pytest.fail.Exception):
        feedforward.gelu_tanh(torch.ones(4))  # the CPU takes it


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_the_gated_twin_equals_the_plain_network_fused_or_not(activation):
    torch.manual_seed(0)
    plain = SwiGLU(16, 40, activation=activation)
    fast = FastSwiGLU.from_module(plain)
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(fast(x), plain(x), rtol=0, atol=0)  # training mode: the maps one by one
    with torch.no_grad():
        torch.testing.assert_close(fast.eval()(x), plain.eval()(x), rtol=1e-5, atol=1e-6)  # fused: one product
