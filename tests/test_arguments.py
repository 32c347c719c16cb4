"""The shared argument checks: ``broadcast_shapes`` is NumPy's, with its fast path for equal shapes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.arguments import broadcast_shapes, check_mask_shape

shapes = st.lists(st.sampled_from([0, 1, 2, 3, 5]), max_size=4).map(tuple)


@given(st.lists(shapes, min_size=1, max_size=3))
def test_broadcast_shapes_is_numpys(given_shapes):
    try:
        want = tuple(np.broadcast_shapes(*given_shapes))
    except ValueError:
        with pytest.raises(ValueError):
            broadcast_shapes(*given_shapes)
        return
    assert broadcast_shapes(*given_shapes) == want


def test_a_mask_must_not_grow_the_scores():
    check_mask_shape((2, 1, 1, 7), (2, 4), 3, 7)  # a padding mask
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 1, 1, 7\) does not broadcast to the scores' "
                                         r"shape \(2, 4, 3, 7\)"):
        check_mask_shape((3, 1, 1, 7), (2, 4), 3, 7)
    with pytest.raises(ValueError, match="does not broadcast"):
        check_mask_shape((5, 2, 4, 3, 7), (2, 4), 3, 7)  # more batch dims than the scores have
