import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import numpy as anp
from attnlab.layers import SinusoidalPositionalEncoding, sinusoidal_table


@given(st.integers(1, 64), st.integers(1, 16).map(lambda n: 2 * n))
def test_table_equals_torch(context_length, d_model):
    np.testing.assert_allclose(anp.sinusoidal_table(context_length, d_model),
                               sinusoidal_table(context_length, d_model).numpy(),
                               atol=1e-6, rtol=0)


def test_table_hand_worked():
    # position 3, pair i=1 of d=4: sin(3 / 10000^(2/4)) = sin(0.03), cos(0.03)
    row = anp.sinusoidal_table(4, 4)[3]
    np.testing.assert_allclose(row, [math.sin(3), math.cos(3), math.sin(0.03), math.cos(0.03)], atol=1e-7)


@given(st.integers(1, 3), st.integers(1, 10), st.integers(0, 5))
def test_add_positions_equals_torch(b, t, offset):
    x = np.random.default_rng(t).standard_normal((b, t, 8), dtype=np.float32)
    want = SinusoidalPositionalEncoding(8, context_length=32)(torch.from_numpy(x), offset=offset).numpy()
    np.testing.assert_allclose(anp.add_sinusoidal_positions(x, offset=offset), want, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: anp.sinusoidal_table(4, 3), "d_model must be even"),
    (lambda: anp.sinusoidal_table(0, 4), "context_length must be a positive int, got 0"),
    (lambda: anp.add_sinusoidal_positions(np.zeros((2, 4), np.float32)), r"x must have shape \(B, T, D\)"),
    (lambda: anp.add_sinusoidal_positions(np.zeros((1, 2, 4), np.float32), offset=-1), "offset must be an int >= 0"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
