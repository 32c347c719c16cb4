import math

import pytest
import torch

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


def test_a_compiled_feed_forward_equals_the_eager_one():
    torch.manual_seed(0)
    ff, x = FeedForward(16, 64, activation="gelu_tanh"), torch.randn(3, 5, 16) * 4
    compiled = torch.compile(ff, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), ff(x), rtol=0, atol=1e-5)
