import doctest
import math

import pytest
import torch
import torch.nn.functional as F

import attnlab.functional.windows as windows_module
from attnlab.functional import sliding_window_mask

SHAPES = [(5, 5, 3), (1, 9, 4), (3, 8, 2), (6, 6, 1), (4, 10, 20), (7, 7, 7)]  # (t_q, t_k, window)


def test_hand_worked_mask():
    # window 3, 2 new queries after 4 cached keys: positions 4 and 5 see keys 2..4 and 3..5
    expected = torch.tensor([
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1, 1],
    ], dtype=torch.bool)
    assert torch.equal(sliding_window_mask(2, 6, 3), expected)


@pytest.mark.parametrize(("t_q", "t_k", "window"), SHAPES)
def test_equals_transformers_mask_function(t_q, t_k, window):
    pytest.importorskip("transformers", minversion="5.0")  # masking_utils
    from transformers.masking_utils import sdpa_mask, sliding_window_causal_mask_function

    ref = sdpa_mask(batch_size=1, q_length=t_q, kv_length=t_k, q_offset=t_k - t_q, kv_offset=0,
                    mask_function=sliding_window_causal_mask_function(window), allow_is_causal_skip=False)
    assert torch.equal(sliding_window_mask(t_q, t_k, window), ref[0, 0])


@pytest.mark.parametrize(("past", "t_q"), [(0, 6), (5, 1), (4, 3), (1, 2), (9, 2)])
@pytest.mark.parametrize("rolling", [True, False])
def test_equals_transformers_mistral_mask(past, t_q, rolling):
    # what a Mistral model in transformers builds, after `past` cached tokens; its sliding-window cache keeps
    # only the last window − 1 keys (rolling), a plain cache all of them: the mask must agree with both
    transformers = pytest.importorskip("transformers", minversion="5.0")
    from transformers.masking_utils import create_sliding_window_causal_mask

    window = 3
    config = transformers.MistralConfig(hidden_size=8, num_attention_heads=2, num_key_value_heads=2, head_dim=4,
                                        num_hidden_layers=1, sliding_window=window, vocab_size=10)
    config._attn_implementation = "sdpa"
    cache = transformers.DynamicCache(config=config) if rolling else transformers.DynamicCache()
    if past:
        cache.update(torch.zeros(1, 2, past, 4), torch.zeros(1, 2, past, 4), 0)
    ref = create_sliding_window_causal_mask(config=config, inputs_embeds=torch.zeros(1, t_q, 8), attention_mask=None,
                                            past_key_values=cache, allow_is_causal_skip=False)
    t_k = ref.shape[-1]
    assert t_k == (min(past, window - 1) if rolling else past) + t_q
    assert torch.equal(sliding_window_mask(t_q, t_k, window), ref[0, 0])


def explicit_window_mask(t_q: int, t_k: int, window: int) -> torch.Tensor:
    """The float mask written element by element: 0 for keys p − window + 1 .. p, −inf elsewhere."""
    mask = torch.full((t_q, t_k), float("-inf"))
    for i in range(t_q):
        p = t_k - t_q + i
        for j in range(max(0, p - window + 1), p + 1):
            mask[i, j] = 0.0
    return mask


@pytest.mark.parametrize(("t_q", "t_k", "window"), SHAPES)
def test_through_sdpa_equals_explicit_mask(t_q, t_k, window):
    q = torch.randn(2, 3, t_q, 8)
    k, v = torch.randn(2, 3, t_k, 8), torch.randn(2, 3, t_k, 8)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(t_q, t_k, window))
    scores = q @ k.transpose(-2, -1) / math.sqrt(8) + explicit_window_mask(t_q, t_k, window)
    torch.testing.assert_close(out, torch.softmax(scores, dim=-1) @ v, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(("t_q", "t_k"), [(4, 4), (2, 6), (1, 5)])
def test_wide_window_is_causal_aligned_to_the_end(t_q, t_k):
    end_aligned = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)
    assert torch.equal(sliding_window_mask(t_q, t_k, window=t_k), end_aligned)
    assert torch.equal(sliding_window_mask(t_q, t_k, window=1000), end_aligned)


def test_every_query_sees_at_most_window_keys_and_itself():
    mask = sliding_window_mask(9, 12, window=4)
    assert mask.sum(-1).max() == 4
    assert mask[torch.arange(9), torch.arange(3, 12)].all()  # the diagonal of the end-aligned queries


@pytest.mark.parametrize(("args", "match"), [
    ((4, 4, 0), r"window must be an int >= 1 \(keys seen, own included\), got 0"),
    ((4, 4, -2), "window must be an int >= 1 .* got -2"),
    ((4, 4, 2.0), "window must be an int >= 1 .* got 2.0"),
    ((0, 4, 2), "t_q must be a positive int, got 0"),
    ((5, 4, 2), "t_q must be <= t_k .* got t_q=5, t_k=4"),
])
def test_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        sliding_window_mask(*args)


def test_docstring_examples():
    assert doctest.testmod(windows_module).failed == 0
