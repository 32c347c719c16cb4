import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.layers import FeedForward


def erf_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def tanh_gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(("activation", "act"), [("relu", lambda x: x.clamp(min=0)), ("gelu", erf_gelu),
                                                 ("gelu_tanh", tanh_gelu)])
def test_equals_formula(activation, act):
    torch.manual_seed(0)
    ff = FeedForward(16, 64, activation=activation)
    x = torch.randn(2, 5, 16)
    ref = act(x @ ff.linear1.weight.T + ff.linear1.bias) @ ff.linear2.weight.T + ff.linear2.bias
    torch.testing.assert_close(ff(x), ref, atol=1e-6, rtol=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="activation"):
        FeedForward(4, 8, activation="swish")
    with pytest.raises(ValueError, match="dropout"):
        FeedForward(4, 8, dropout=1.0)


def test_the_compiled_form_of_gelu_tanh_is_the_same_function_to_rounding(monkeypatch):
    """x·σ(2u), what a compiled graph gets, against torch's 0.5·x·(1 + tanh(u)) and a float64 reference: values within
    1e-6, gradients within 3e-6, over |x| ≤ 12, where both forms saturate."""
    from attnlab.layers import feedforward

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


def test_a_compiled_feed_forward_equals_the_eager_one():
    torch.manual_seed(0)
    ff, x = FeedForward(16, 64, activation="gelu_tanh"), torch.randn(3, 5, 16) * 4
    compiled = torch.compile(ff, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), ff(x), rtol=0, atol=1e-5)


def test_a_compiled_graph_off_the_cpu_keeps_the_tanh_form(monkeypatch):
    """σ(2u) only in a CPU graph, where it pays; elsewhere (a GPU, here the meta device) torch's tanh form."""
    from attnlab.layers import feedforward

    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(torch, "sigmoid", lambda *a: pytest.fail("the σ form ran off the CPU"))
    assert feedforward.gelu_tanh(torch.ones(4, device="meta")).shape == (4,)
    with pytest.raises(pytest.fail.Exception):
        feedforward.gelu_tanh(torch.ones(4))  # the CPU takes it
