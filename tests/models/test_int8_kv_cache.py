"""The int8 KV cache (``KVCache(..., storage="int8")``): what it stores is the rows' symmetric int8 codes, it takes
about half a bf16 cache's memory, and the logits it decodes stay within a stated distance of the fp32 cache's."""

import pytest
import torch

from attnlab.generation import GenerationConfig, generate
from attnlab.models import GPT, GPTConfig, KVCache, ModernDecoder, ModernDecoderConfig
from attnlab.models.caches.quantized import quantize_rows


def test_rows_are_kept_as_codes_and_a_scale_within_half_a_step():
    """Each value within half a step of its code times the stored (fp16) scale, plus what rounding the scale to
    11 bits moves the largest code: 127 · 2⁻¹¹ of a step."""
    x = torch.randn(2, 3, 5, 64, generator=torch.Generator().manual_seed(0))
    codes, scales = quantize_rows(x)
    step = x.abs().amax(-1, keepdim=True) / 127
    torch.testing.assert_close(scales.float(), step, rtol=2**-11, atol=0)
    s = scales.float()
    assert ((codes.float() * s - x).abs() <= (0.5 + 127 * 2**-11) * s).all()
    assert codes.dtype == torch.int8 and scales.dtype == torch.float16 and codes.abs().max() >= 126


def test_it_takes_about_half_the_memory_of_a_bf16_cache():
    """Per head and position: head_dim one-byte codes and a two-byte scale, against head_dim two-byte numbers."""
    cache = KVCache(num_layers=12, batch=1, num_heads=12, context_length=1024, head_dim=64, storage="int8")
    key = torch.randn(1, 12, 1000, 64)
    for layer in cache.layers:
        layer.update(key, key)
    bf16 = 12 * 2 * 12 * 1000 * 64 * 2
    assert cache.filled_nbytes() / bf16 == pytest.approx((64 + 2) / (2 * 64))  # 0.516 for gpt2-small's heads
    assert cache.filled_nbytes() / (2 * bf16) < 0.26  # and about a quarter of fp32


def model(make):
    torch.manual_seed(0)
    if make == "gpt":
        return GPT(GPTConfig(vocab_size=64, context_length=96, d_model=64, num_layers=2, num_heads=2)).eval()
    return ModernDecoder(ModernDecoderConfig(vocab_size=64, context_length=96, d_model=64, num_layers=2, num_heads=4,
                                             num_kv_heads=2, d_ff=128)).eval()


@pytest.mark.parametrize("make", ["gpt", "modern"])
def test_teacher_forced_logits_stay_close_to_the_fp32_cache(make):
    """80 tokens one at a time through each cache: the int8 cache's logits differ from the fp32 cache's by at most
    2 % of the logits' spread (measured: well under 1 %)."""
    m = model(make)
    seq = torch.randint(0, 64, (2, 80), generator=torch.Generator().manual_seed(1))
    caches = {"fp32": m.new_cache(2), "int8": KVCache.for_model(m, 2, storage="int8")}
    assert caches["fp32"].storage == "float" and caches["int8"].storage == "int8"
    assert all(layer.keys.dtype == torch.int8 for layer in caches["int8"].layers)
    worst = 0.0
    with torch.no_grad():
        for t in range(seq.shape[1]):
            a, b = (m(seq[:, t : t + 1], kv_cache=c).logits for c in caches.values())
            worst = max(worst, ((a - b).abs().max() / (a.max() - a.min())).item())
    assert 0 < worst < 0.02


def test_generate_decodes_with_it_and_checks_its_options():
    m = model("gpt")
    idx = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(2))
    cache = KVCache.for_model(m, 1, storage="int8")
    out = generate(m, idx, 20, GenerationConfig(temperature=0), cache=cache)
    assert out.shape == (1, 28) and cache.length == 27  # the prompt and every new token fed back
    with pytest.raises(ValueError, match=r"cache: compile=True decodes with a StaticKVCache "
                                         r"\(StaticKVCache.for_model\), got a KVCache"):
        generate(m, idx, 5, GenerationConfig(compile=True), cache=KVCache.for_model(m, 1, storage="int8"))
    with pytest.raises(ValueError, match=r"cache: use_cache=False recomputes every step without a cache"):
        generate(m, idx, 5, GenerationConfig(use_cache=False), cache=KVCache.for_model(m, 1, storage="int8"))
    with pytest.raises(ValueError, match=r"LayerKVCache: storage must be one of \('float', 'int8'\), got 'int4'"):
        KVCache.for_model(m, 1, storage="int4")
