import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.generation import filter_logits, sample_next_token

logit_rows = st.lists(st.floats(-20, 20, allow_nan=False, width=32), min_size=2, max_size=30)


def allowed_set(row: list[float], top_k, top_p) -> set[int]:
    """The rule written independently, in plain Python: top-k by value (ties kept), then the nucleus."""
    ids = list(range(len(row)))
    if top_k is not None and top_k < len(row):
        kth = sorted(row, reverse=True)[top_k - 1]
        ids = [i for i in ids if row[i] >= kth]
    if top_p is not None and top_p < 1.0:  # top_p = 1 is the whole distribution: nothing is cut
        m = max(row[i] for i in ids)
        z = sum(math.exp(row[i] - m) for i in ids)
        probs = {i: math.exp(row[i] - m) / z for i in ids}
        keep, mass = set(), 0.0
        for i in sorted(ids, key=lambda i: -probs[i]):
            keep.add(i)
            mass += probs[i]
            if mass >= top_p - 1e-6:
                break
        # ties at the boundary may be kept by either rule: allow anything with the boundary probability
        edge = min(probs[i] for i in keep)
        ids = [i for i in ids if i in keep or abs(probs[i] - edge) < 1e-6]
    return set(ids)


@settings(max_examples=60, deadline=None)
@given(row=logit_rows, top_k=st.one_of(st.none(), st.integers(1, 40)),
       top_p=st.one_of(st.none(), st.floats(0.01, 1.0)), temperature=st.floats(0.05, 3.0),
       seed=st.integers(0, 2**31 - 1))
def test_never_samples_outside_the_allowed_set(row, top_k, top_p, temperature, seed):
    logits = torch.tensor([row])
    allowed = allowed_set([v / temperature for v in row], top_k, top_p)
    g = torch.Generator().manual_seed(seed)
    picks = {int(sample_next_token(logits, temperature, top_k, top_p, generator=g)) for _ in range(20)}
    assert picks <= allowed
    kept = set(torch.isfinite(filter_logits(logits / temperature, top_k, top_p))[0].nonzero().flatten().tolist())
    assert kept <= allowed and kept


def test_greedy_and_top1():
    logits = torch.tensor([[0.1, 3.0, -2.0, 2.9], [5.0, 0.0, 0.0, 0.0]])
    assert sample_next_token(logits, temperature=0).tolist() == [1, 0]
    assert sample_next_token(logits, top_k=1).tolist() == [1, 0]
    assert sample_next_token(logits, top_p=1e-3).tolist() == [1, 0]


def test_frequencies_follow_softmax_with_temperature():
    logits = torch.tensor([[1.0, 0.0, -1.0]])
    g = torch.Generator().manual_seed(0)
    n = 20000
    draws = sample_next_token(logits.expand(n, 3), temperature=2.0, generator=g)
    freq = torch.bincount(draws, minlength=3).float() / n
    want = torch.softmax(logits[0] / 2.0, dim=-1)
    assert torch.allclose(freq, want, atol=0.015)  # ~4 standard errors at n = 20,000


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"top_p": 0.0}, r"top_p must be None or a float in \(0, 1\], got 0.0"),
    ({"top_p": 1.1}, "top_p"), ({"top_p": -0.5}, "top_p"),
    ({"temperature": -0.1}, "temperature must be a finite float >= 0"),
    ({"temperature": float("nan")}, "temperature"), ({"temperature": float("inf")}, "temperature"),
    ({"top_k": 0}, "top_k"), ({"top_k": 2.5}, "top_k"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_next_token(torch.zeros(1, 4), **kwargs)


def test_bad_logits():
    with pytest.raises(ValueError, match=r"shape \(B, vocab_size\)"):
        sample_next_token(torch.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        sample_next_token(torch.tensor([[0.0, float("nan")]]))
