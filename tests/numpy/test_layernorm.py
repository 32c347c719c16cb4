import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import numpy as anp
from attnlab.layers import LayerNorm


@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 32), st.sampled_from([1e-5, 1e-12]), st.booleans(),
       st.integers(0, 2**16))
def test_layer_norm_equals_torch(b, t, d, eps, bias, seed):
    torch.manual_seed(seed)
    ln = LayerNorm(d, eps=eps, bias=bias)
    with torch.no_grad():
        ln.weight.normal_()
        if bias:
            ln.bias.normal_()
    x = torch.randn(b, t, d) * 3 + 1
    p = anp.state_dict_to_arrays(ln.state_dict())
    got = anp.layer_norm(x.numpy(), p["weight"], p.get("bias"), eps)
    with torch.no_grad():
        np.testing.assert_allclose(got, ln(x).numpy(), atol=1e-5, rtol=0)


def test_layer_norm_hand_worked():
    # x = (1, 2, 3): mean 2, biased variance 2/3, so (x - 2) / sqrt(2/3) = (-1.2247449, 0, 1.2247449)
    got = anp.layer_norm(np.array([1.0, 2.0, 3.0], dtype=np.float32), eps=1e-12)
    np.testing.assert_allclose(got, [-1.2247449, 0.0, 1.2247449], atol=1e-6)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"x": [1.0]}, TypeError, "x must be a numpy.ndarray"),
    ({"eps": 0.0}, ValueError, "eps must be a float > 0"),
    ({"weight": np.ones(2, np.float32)}, ValueError, r"weight must have shape \(3,\)"),
])
def test_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        anp.layer_norm(**{"x": np.ones(3, np.float32), **kwargs})
