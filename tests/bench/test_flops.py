import pytest

from attnlab.bench import attention_flops


def test_texts_shape_hand_worked():
    # B=8, T=256, d=512, h=8 (d_h=64), a multiply-add = 2 FLOPs:
    f = attention_flops(8, 256, 512, 8, is_causal=False)
    assert f.qkv == 2 * 3 * 8 * 256 * 512 * 512 == 3_221_225_472
    assert f.scores == f.weighted_sum == 2 * 8 * 8 * 256 * 256 * 64 == 536_870_912
    assert f.out_proj == 2 * 8 * 256 * 512 * 512 == 1_073_741_824
    assert f.total == 5_368_709_120


def test_causal_counts_the_allowed_pairs():
    # T=4: 4·5/2 = 10 of the 16 pairs; the projections do not change
    full, causal = attention_flops(1, 4, 8, 2, is_causal=False), attention_flops(1, 4, 8, 2, is_causal=True)
    assert full.scores == 2 * 2 * 16 * 4 and causal.scores == 2 * 2 * 10 * 4
    assert causal.qkv == full.qkv and causal.out_proj == full.out_proj


def test_length_one():
    f = attention_flops(1, 1, 4, 1, is_causal=True)
    assert (f.scores, f.weighted_sum) == (8, 8)


@pytest.mark.parametrize(("args", "match"), [
    ((0, 4, 8, 2), "batch must be a positive int, got 0"),
    ((1, 4.0, 8, 2), "seq_len must be a positive int"),
    ((1, 4, 8, 3), "num_heads=3 must divide d_model=8"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        attention_flops(*args, is_causal=False)
