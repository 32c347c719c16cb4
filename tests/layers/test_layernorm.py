import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.layers import LayerNorm


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 64), rows=st.integers(1, 6), eps=st.sampled_from([1e-5, 1e-12, 0.1]),
       bias=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_equals_torch_layernorm(d, rows, eps, bias, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 3, d, generator=g) * 3 + 1
    ours = LayerNorm(d, eps=eps, bias=bias)
    ref = torch.nn.LayerNorm(d, eps=eps, bias=bias)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(d, generator=g))
        if bias:
            ref.bias.copy_(torch.randn(d, generator=g))
    ours.load_state_dict(ref.state_dict())  # same parameter names as torch
    # 1e-6 absolute plus 1e-6 relative: γ ~ N(0, 1) makes outputs up to ~5, where one float32 ulp is 5e-7
    torch.testing.assert_close(ours.formula(x), ref(x), atol=1e-6, rtol=1e-6)  # the written-out formula
    torch.testing.assert_close(ours(x), ours.formula(x), atol=1e-6, rtol=1e-6)  # the fused path
    plain_ours, plain_ref = LayerNorm(d, eps=eps, fused=False), torch.nn.LayerNorm(d, eps=eps)
    torch.testing.assert_close(plain_ours(x), plain_ref(x), atol=1e-6, rtol=0)  # γ = 1, β = 0


def test_hand_worked_numbers():
    # x = [1, 2, 3]: mean 2, biased variance 2/3 -> (x - 2) / sqrt(2/3)
    out = LayerNorm(3, eps=1e-12, fused=False)(torch.tensor([1.0, 2.0, 3.0]))
    s = (2 / 3) ** 0.5
    torch.testing.assert_close(out, torch.tensor([-1 / s, 0.0, 1 / s]), atol=1e-6, rtol=0)


def test_gradients_match_torch():
    x1 = torch.randn(4, 16, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    ours, ref = LayerNorm(16, fused=False), torch.nn.LayerNorm(16)
    (ours(x1) ** 3).sum().backward()
    (ref(x2) ** 3).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"d_model": 0}, "d_model"), ({"d_model": 4, "eps": 0}, "eps"), ({"d_model": 4, "eps": -1e-5}, "eps"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LayerNorm(**kwargs)


def test_wrong_width():
    with pytest.raises(ValueError, match="last dim 4"):
        LayerNorm(4)(torch.randn(2, 5))
