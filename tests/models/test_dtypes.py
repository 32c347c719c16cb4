"""Models in bfloat16 and float16: under autocast, or with their weights cast; the KV cache takes the compute dtype."""

import pytest
import torch

from attnlab.generation import GenerationConfig, generate
from attnlab.models import DTYPES, GPT, GPTConfig, compute_dtype
from attnlab.models.config import check_dtype_name


def model():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=61, context_length=40, d_model=32, num_layers=2, num_heads=4)).eval()


def test_the_names():
    assert {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16} == DTYPES
    assert check_dtype_name("bf16") is torch.bfloat16
    with pytest.raises(ValueError, match=r"^dtype: expected one of 'fp32', 'bf16', 'fp16', got 'fp8'$"):
        check_dtype_name("fp8")


def test_compute_dtype_is_autocasts_where_it_is_on_else_the_weights():
    w = torch.zeros(2, 2)
    assert compute_dtype(w) is torch.float32 and compute_dtype(w.half()) is torch.float16
    with torch.autocast("cpu", torch.bfloat16):
        assert compute_dtype(w) is torch.bfloat16
    with torch.autocast("cuda", torch.float16, enabled=torch.cuda.is_available()):
        assert compute_dtype(w) is torch.float32  # autocast for another device does not touch CPU tensors


def test_forward_under_bf16_autocast_is_within_bfloat16_rounding_of_float32():
    m, idx = model(), torch.randint(0, 61, (2, 12))
    with torch.no_grad():
        want = m(idx, targets=idx)
        with torch.autocast("cpu", torch.bfloat16):
            got = m(idx, targets=idx)
    assert got.logits.dtype == torch.bfloat16 and got.loss.dtype == torch.float32  # the loss in float32
    scale = want.logits.abs().max().item()
    torch.testing.assert_close(got.logits.float(), want.logits, atol=8 * 2**-8 * scale, rtol=0)
    assert abs(got.loss.item() - want.loss.item()) < 1e-2


def test_the_kv_cache_takes_the_compute_dtype():
    m = model()
    with torch.autocast("cpu", torch.bfloat16):
        assert m.new_cache(1)[0].keys.dtype == torch.bfloat16
    outside = m.new_cache(1)  # made outside autocast, filled inside: an empty cache adopts the keys' dtype
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        m(torch.randint(0, 61, (1, 4)), kv_cache=outside)
    assert outside[0].keys.dtype == torch.bfloat16 and outside.length == 4
    with torch.no_grad(), pytest.raises(ValueError, match=r"LayerKVCache: holds torch.bfloat16 keys, got "
                                                          r"torch.float32; a cache keeps the dtype it was filled in"):
        m(torch.randint(0, 61, (1, 1)), kv_cache=outside)  # now outside autocast: float32 keys


def test_cached_logits_under_autocast_equal_recomputation_within_bfloat16_rounding():
    m, seq = model(), torch.randint(0, 61, (2, 6))
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        cache = m.new_cache(2)
        logits = m(seq, kv_cache=cache).logits[:, -1]
        for _ in range(10):
            full = m(seq).logits[:, -1]
            torch.testing.assert_close(logits.float(), full.float(), atol=4 * 2**-8 * full.abs().max().item(), rtol=0)
            nxt = full.argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
            logits = m(nxt, kv_cache=cache).logits[:, -1]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_generate_with_weights_cast_and_under_autocast(dtype):
    # generate under autocast used to fail: the cache was float32 while the new keys were the autocast dtype
    m, prompt = model(), torch.randint(0, 61, (2, 5))
    with torch.autocast("cpu", dtype):
        out = generate(m, prompt, 12, GenerationConfig(temperature=0))
    assert out.shape == (2, 17) and torch.equal(out[:, :5], prompt) and out.min() >= 0 and out.max() < 61
    cast = m.to(dtype)
    assert cast.new_cache(2)[0].keys.dtype == dtype
    out = generate(cast, prompt, 12, GenerationConfig(temperature=0.8, top_k=5, seed=0))
    assert out.shape == (2, 17) and out.max() < 61
