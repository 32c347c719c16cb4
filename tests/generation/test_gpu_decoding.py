"""On a GPU: generation under autocast, and the compiled step captured in a CUDA graph, with the eager tokens.

Marked ``cuda`` and skipped (with the reason) where there is none; CI never has one (it proves the step traces
whole with no host reads: test_compiled_decode.py and tests/models/test_host_syncs.py).
"""

import pytest
import torch

from attnlab.generation import GenerationConfig, generate
from attnlab.models import GPT, GPTConfig, StaticKVCache

GREEDY = GenerationConfig(temperature=0)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")]


def model(ctx=128):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=97, context_length=ctx, d_model=128, num_layers=4, num_heads=4, qkv_bias=True)
    return GPT(config).cuda().eval()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_generate_under_autocast(dtype):
    # this raised "query, key and value must share a dtype" before the cache took the compute dtype
    m, prompt = model(), torch.randint(0, 97, (2, 10), device="cuda")
    with torch.autocast("cuda", dtype):
        cached = generate(m, prompt, 40, GREEDY)
        assert m.new_cache(2)[0].keys.dtype == dtype
    assert cached.shape == (2, 50) and cached.max() < 97


def test_compiled_decoding_gives_the_eager_tokens():
    # inductor + CUDA graphs (mode="reduce-overhead"), past the context (crop and recompute at the end)
    m, prompt = model(ctx=64), torch.randint(0, 97, (3, 8), device="cuda")
    eager = generate(m, prompt, 80, GREEDY)
    assert torch.equal(generate(m, prompt, 80, GREEDY.replace(compile=True)), eager)
    assert torch.equal(generate(m, prompt, 80, GREEDY.replace(compile=True)), eager)  # replayed, not recompiled


def test_the_decode_step_captures_in_a_cuda_graph():
    m = model()
    cache, prompt = StaticKVCache.for_model(m, 2), torch.randint(0, 97, (2, 10), device="cuda")
    token = torch.randint(0, 97, (2, 1), device="cuda")
    with torch.no_grad():
        m.decode_step(prompt, cache)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up on a side stream, as capture requires
            for _ in range(2):
                m.decode_step(token, cache)
        torch.cuda.current_stream().wait_stream(stream)
        cache.reset()
        m.decode_step(prompt, cache)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = m.decode_step(token, cache)  # captured: it also moves the position on by one
        cache.reset()
        m.decode_step(prompt, cache)
        dynamic = m.new_cache(2)
        want = m(prompt, kv_cache=dynamic).logits[:, -1]
        for _ in range(20):
            token.copy_(want.argmax(-1, keepdim=True))
            graph.replay()
            want = m(token.clone(), kv_cache=dynamic).logits[:, -1]
            torch.testing.assert_close(logits, want, atol=1e-4, rtol=0)
