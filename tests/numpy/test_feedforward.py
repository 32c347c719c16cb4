import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import numpy as anp
from attnlab.layers import FeedForward


def test_erf_against_math_erf():
    x = np.linspace(-6, 6, 2001)
    want = np.array([math.erf(v) for v in x])
    assert np.abs(anp.erf(x) - want).max() < 1.5e-7  # the bound of Abramowitz & Stegun 7.1.26


@pytest.mark.parametrize(("fn", "approximate"), [(anp.gelu, "none"), (anp.gelu_tanh, "tanh")])
def test_gelu_equals_torch(fn, approximate):
    # torch's vectorised fp32 erf is itself off by up to ~1e-6 in the negative tail: the fp32 tolerance
    x = torch.linspace(-8, 8, 4001)
    np.testing.assert_allclose(fn(x.numpy()), torch.nn.functional.gelu(x, approximate=approximate).numpy(),
                               atol=1e-5, rtol=0)


def test_gelu_against_float64_formula():
    x = np.linspace(-8, 8, 4001).astype(np.float32)
    exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    assert np.abs(anp.gelu(x) - exact).max() < 5e-7  # A&S's 1.5e-7 (times |x|/2) plus fp32 rounding


@given(st.integers(1, 3), st.integers(1, 5), st.sampled_from([(8, 32), (4, 6)]),
       st.sampled_from(["relu", "gelu", "gelu_tanh"]), st.booleans(), st.integers(0, 2**16))
def test_feed_forward_equals_torch(b, t, dims, activation, bias, seed):
    torch.manual_seed(seed)
    ff = FeedForward(*dims, activation=activation, bias=bias).eval()
    x = torch.randn(b, t, dims[0]) * 2
    with torch.no_grad():
        want = ff(x).numpy()
    got = anp.feed_forward(x.numpy(), anp.state_dict_to_arrays(ff.state_dict()), activation)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_bad_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        anp.feed_forward(np.ones((1, 2), np.float32), {}, "swish")
