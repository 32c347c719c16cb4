import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import functional as AF
from attnlab import numpy as anp


@given(st.integers(1, 12), st.integers(1, 12))
def test_causal_mask_equals_torch(t_q, t_k):
    np.testing.assert_array_equal(anp.causal_mask(t_q, t_k), AF.causal_mask(t_q, t_k).numpy())


def test_causal_mask_hand_worked():
    assert anp.causal_mask(2, 3).tolist() == [[True, False, False], [True, True, False]]


@given(st.lists(st.lists(st.integers(0, 1), min_size=5, max_size=5), min_size=1, max_size=3))
def test_padding_mask_equals_torch(rows):
    m = np.array(rows)
    got = anp.padding_mask(m)
    assert got.shape == (len(rows), 1, 1, 5) and got.dtype == np.bool_
    np.testing.assert_array_equal(got, AF.padding_mask(torch.tensor(rows)).numpy())


@pytest.mark.parametrize(("args", "error", "match"), [
    ((0,), ValueError, "t_q must be a positive int, got 0"),
    ((3, -1), ValueError, "t_k must be a positive int, got -1"),
    ((2.0,), ValueError, "t_q must be a positive int"),
])
def test_causal_mask_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        anp.causal_mask(*args)


@pytest.mark.parametrize(("mask", "error", "match"), [
    ([[1, 0]], TypeError, "must be a numpy.ndarray"),
    (np.array([1, 0]), ValueError, r"shape \(B, T\)"),
    (np.array([[1.0, 0.0]]), TypeError, "bool or integer"),
    (np.array([[1, 2]]), ValueError, r"only 0 and 1, got \[2\]"),
])
def test_padding_mask_bad_input(mask, error, match):
    with pytest.raises(error, match=match):
        anp.padding_mask(mask)
