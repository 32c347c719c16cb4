import pytest
import torch

from attnlab.functional import causal_mask, padding_mask


def test_causal_mask_matches_torch_is_causal_convention():
    # torch documents is_causal as ones(L, S).tril(diagonal=0): top-left aligned
    for t_q, t_k in [(4, 4), (3, 5), (5, 3), (1, 7)]:
        expected = torch.ones(t_q, t_k).tril().bool()
        assert torch.equal(causal_mask(t_q, t_k), expected)


def test_padding_mask_shape_and_values():
    m = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert m.shape == (2, 1, 1, 3) and m.dtype == torch.bool
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


@pytest.mark.parametrize(
    ("bad", "err", "msg"),
    [
        (torch.ones(2, 3, 4), ValueError, r"shape \(B, T\).*got shape \(2, 3, 4\)"),
        (torch.tensor([[1, 2]]), ValueError, r"only 0 and 1, got \[2\]"),
        (torch.tensor([[0.5, 1.0]]), TypeError, "bool or integer 0/1, got dtype torch.float32"),
        ([[1, 0]], TypeError, "must be a torch.Tensor, got list"),
    ],
)
def test_padding_mask_rejects(bad, err, msg):
    with pytest.raises(err, match=msg):
        padding_mask(bad)


def test_causal_mask_rejects_nonpositive():
    with pytest.raises(ValueError, match="t_q must be a positive int, got 0"):
        causal_mask(0)


def test_additive_mask_adds_what_the_bool_mask_fills():
    from attnlab.functional.masks import additive_mask

    mask = torch.tensor([[True, False, True], [False, False, True]])
    bias = additive_mask(mask, torch.bfloat16)
    assert bias.dtype == torch.bfloat16 and bias.shape == mask.shape
    scores = torch.randn(4, 2, 3)
    assert torch.equal(scores + bias.float(), scores.masked_fill(~mask, float("-inf")))
