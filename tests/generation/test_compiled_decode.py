"""generate(..., compile=True): a static KV cache and a step compiled whole, with the eager loop's tokens.

CI has no GPU, so the step is compiled with torch.compile's cheapest backend, "aot_eager": it traces the step
whole (``fullgraph=True`` fails on any graph break, e.g. a read of a tensor's value) and runs the traced graph
eagerly. A step that traces whole with no host reads (tests/models/test_host_syncs.py) is what CUDA graphs
capture; capturing it for real is tests/generation/test_gpu_decoding.py, on a GPU.
"""

import pytest
import torch

from attnlab.generation import compiled_decode, generate, generate_stream
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig


@pytest.fixture(autouse=True)
def cheap_compile(monkeypatch):
    monkeypatch.setattr(compiled_decode, "compile_options", lambda device: {"fullgraph": True, "backend": "aot_eager"})


def model(ctx=24):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=61, context_length=ctx, d_model=32, num_layers=2, num_heads=4, qkv_bias=True)
    return GPT(config)


def test_greedy_tokens_equal_the_eager_loop_past_the_context():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    out = generate(m, prompt, 30, temperature=0, compile=True)  # 35 > 24: the last steps crop and recompute
    assert out.shape == (3, 35)
    assert torch.equal(out, generate(m, prompt, 30, temperature=0))
    assert m.training  # put back as it was


def test_sampled_tokens_equal_the_eager_loop_with_the_same_generator():
    m, prompt = model(), torch.randint(0, 61, (3, 5))

    def run(compile):
        g = torch.Generator().manual_seed(3)
        return generate(m, prompt, 12, temperature=0.9, top_k=20, top_p=0.9, generator=g, compile=compile)

    assert torch.equal(run(True), run(False))


def test_end_of_sequence_stops_as_the_eager_loop_does():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    eos = int(generate(m, prompt, 3, temperature=0)[0, -1])  # a token row 0 produces
    out = generate(m, prompt, 12, temperature=0, eos_token_id=eos, compile=True)
    assert torch.equal(out, generate(m, prompt, 12, temperature=0, eos_token_id=eos))


def test_under_autocast_compiling_changes_no_token(monkeypatch):
    # the compiled step against the same static step run eagerly (exact), both in bfloat16
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    with torch.autocast("cpu", torch.bfloat16):
        compiled = generate(m, prompt, 12, temperature=0, compile=True)
        monkeypatch.setattr(compiled_decode, "compiled_step", lambda model, device: type(model).decode_step)
        eager = generate(m, prompt, 12, temperature=0, compile=True)
    assert torch.equal(compiled, eager)


def test_a_second_call_reuses_the_cache_and_two_streams_get_two():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    generate(m, prompt, 2, temperature=0, compile=True)
    held = compiled_decode._CACHES[m][1]
    generate(m, prompt, 2, temperature=0, compile=True)
    assert compiled_decode._CACHES[m][1] is held  # the same buffers: CUDA graphs replay without a new capture
    a, b = (generate_stream(m, prompt, 4, temperature=0, compile=True) for _ in range(2))
    first = [next(a), next(b)]  # both streams are inside their loops now
    rest_a, rest_b = list(a), list(b)
    assert torch.equal(torch.stack([first[0], *rest_a]), torch.stack([first[1], *rest_b]))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"compile": True, "use_cache": False}, "compile=True decodes with a static KV cache; it cannot be combined "
                                            "with use_cache=False"),
    ({"compile": "yes"}, "compile must be True or False, got 'yes'"),
])
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(model(), torch.zeros(1, 2, dtype=torch.long), 3, **kwargs)


def test_prompt_ids_are_checked_before_decoding():
    with pytest.raises(ValueError, match=r"GPT: token ids must be in \[0, vocab_size=61\), got min 0, max 99"):
        generate(model(), torch.tensor([[0, 99]]), 3, compile=True)


def test_rotary_positions_decode_past_the_context_in_a_static_cache_of_the_whole_sequence():
    """A ModernDecoder trained for 24 positions, 5 + 40: the static cache is allocated for 64 (the sequence,
    rounded up to a power of two), nothing cropped, the eager loop's tokens."""
    torch.manual_seed(0)
    m = ModernDecoder(ModernDecoderConfig(vocab_size=61, context_length=24, d_model=32, num_layers=2, num_heads=4,
                                          num_kv_heads=2, d_ff=40))
    with torch.no_grad():  # weights of order 1: no greedy choice hangs on a rounding
        for p in m.parameters():
            p.copy_(torch.randn_like(p) / 32**0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    prompt = torch.randint(0, 61, (2, 5))
    out = generate(m, prompt, 40, temperature=0, compile=True)
    assert torch.equal(out, generate(m, prompt, 40, temperature=0))
    assert compiled_decode._CACHES[m][1].context_length == 64


@pytest.mark.parametrize(("new", "slots"), [(11, 16), (30, 24)])
def test_the_static_cache_holds_the_sequence_not_the_whole_context(new, slots):
    """Every step attends over every slot: 5 + 11 positions get 16 slots (a power of two), not the table's 24;
    5 + 30 get the table's 24 (the loop crops and recomputes past it)."""
    m, prompt = model(), torch.randint(0, 61, (2, 5))
    out = generate(m, prompt, new, temperature=0, compile=True)
    assert compiled_decode._CACHES[m][1].context_length == slots
    assert torch.equal(out, generate(m, prompt, new, temperature=0))


def test_longer_sequences_reuse_the_compiled_step(monkeypatch):
    """The cache's length is dynamic in the compiled step: 64 and 128 slots are one graph, not a compile each."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # forget the sizes earlier tests compiled for (torch would have made them dynamic)
    monkeypatch.setattr(compiled_decode, "_STEPS", {})
    m, prompt = model(ctx=256), torch.randint(0, 61, (2, 5))
    generate(m, prompt, 40, temperature=0, compile=True)  # 64 slots
    graphs = counters["stats"]["unique_graphs"]
    out = generate(m, prompt, 100, temperature=0, compile=True)  # 128 slots
    assert compiled_decode._CACHES[m][1].context_length == 128
    assert counters["stats"]["unique_graphs"] == graphs
    assert torch.equal(out, generate(m, prompt, 100, temperature=0))


@pytest.mark.parametrize(("scaling", "name"), [
    ({"type": "dynamic", "factor": 2.0}, "dynamic NTK"),
    ({"type": "longrope", "factor": 2.0, "original_context_length": 12, "short_factor": [1.0] * 4,
      "long_factor": [2.0] * 4}, "LongRoPE")])
def test_a_scaling_that_reads_the_length_is_refused(scaling, name):
    m = ModernDecoder(ModernDecoderConfig(vocab_size=61, context_length=24, d_model=32, num_layers=2, num_heads=4,
                                          rope_scaling=scaling))
    with pytest.raises(ValueError, match=rf"compile=True: {name} scaling picks its frequencies from the length"):
        generate(m, torch.zeros(1, 3, dtype=torch.long), 3, compile=True)
