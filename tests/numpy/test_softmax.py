import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlab import functional as AF
from attnlab import numpy as anp

finite = st.floats(-30, 30, width=32)


@given(arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 9)), elements=finite),
       st.sampled_from([0, 1, -1]))
def test_softmax_equals_torch(x, dim):
    got = anp.softmax(x, dim=dim)
    want = AF.softmax(torch.from_numpy(x), dim=dim).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.sum(axis=dim), 1.0, atol=1e-5)


def test_softmax_hand_worked():
    # e^0, e^1, e^2 over their sum: 1/(1+e+e²) = 0.0900306, e/(…) = 0.2447285, e²/(…) = 0.6652410
    np.testing.assert_allclose(anp.softmax(np.array([1.0, 2.0, 3.0], dtype=np.float32)),
                               [0.0900306, 0.2447285, 0.6652410], atol=1e-6)


def test_softmax_is_stable_and_survives_all_masked_rows():
    x = np.array([[1000.0, 1001.0], [-np.inf, -np.inf]], dtype=np.float32)
    got = anp.softmax(x)
    np.testing.assert_allclose(got, [[0.26894142, 0.7310586], [0.0, 0.0]], atol=1e-6)
    assert not np.isnan(got).any()


def test_softmax_leaves_its_input_alone():
    x = np.array([1.0, 2.0], dtype=np.float32)
    anp.softmax(x)
    assert x.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(("x", "error"), [([1.0, 2.0], TypeError), (np.array([1, 2]), TypeError)])
def test_softmax_bad_input(x, error):
    with pytest.raises(error, match="x must be"):
        anp.softmax(x)
