"""generate(..., GenerationConfig(compile=True)): a static KV cache and a step compiled whole, with the eager
loop's tokens.

CI has no GPU, so the step is compiled with torch.compile's cheapest backend, "aot_eager": it traces the step
whole (``fullgraph=True`` fails on any graph break, e.g. a read of a tensor's value) and runs the traced graph
eagerly. A step that traces whole with no host reads (tests/models/test_host_syncs.py) is what CUDA graphs
capture; capturing it for real is tests/generation/test_gpu_decoding.py, on a GPU.
"""

import pytest
import torch

from attnlab.fast import accelerated
from attnlab.generation import GenerationConfig, compiled_decode, generate, generate_stream
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, StaticKVCache

GREEDY = GenerationConfig(temperature=0)
COMPILED = GREEDY.replace(compile=True)


@pytest.fixture(autouse=True)
def cheap_compile(monkeypatch):
    monkeypatch.setattr(compiled_decode, "compile_options", lambda device: {"fullgraph": True, "backend": "aot_eager"})
    # each test starts from no compiled graph: what one compiled does not change what the next one finds
    torch._dynamo.reset()


def held(m):
    """The static cache the compiled loop keeps for ``m`` between calls (it decodes ``m``'s fast twin)."""
    return compiled_decode._CACHES[accelerated(m)][1]


def model(ctx=24):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=61, context_length=ctx, d_model=32, num_layers=2, num_heads=4, qkv_bias=True)
    return GPT(config)


def test_greedy_tokens_equal_the_eager_loop_past_the_context():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    out = generate(m, prompt, 30, COMPILED)  # 35 > 24: the last steps crop and recompute
    assert out.shape == (3, 35)
    assert torch.equal(out, generate(m, prompt, 30, GREEDY))
    assert m.training  # put back as it was


def test_sampled_tokens_equal_the_eager_loop_with_the_same_generator():
    m, prompt = model(), torch.randint(0, 61, (3, 5))

    def run(compile):
        g = torch.Generator().manual_seed(3)
        return generate(m, prompt, 12, GenerationConfig(temperature=0.9, top_k=20, top_p=0.9, generator=g,
                                                        compile=compile))

    assert torch.equal(run(True), run(False))


def test_end_of_sequence_stops_as_the_eager_loop_does():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    eos = int(generate(m, prompt, 3, GREEDY)[0, -1])  # a token row 0 produces
    out = generate(m, prompt, 12, COMPILED.replace(stop_tokens=eos))
    assert torch.equal(out, generate(m, prompt, 12, GREEDY.replace(stop_tokens=eos)))
    assert (out[0, 7:] == eos).all()  # row 0 stopped at its third new token at the latest, then repeats it


def test_under_autocast_compiling_changes_no_token(monkeypatch):
    # the compiled step against the same static step run eagerly (exact), both in bfloat16
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    with torch.autocast("cpu", torch.bfloat16):
        compiled = generate(m, prompt, 12, COMPILED)
        monkeypatch.setattr(compiled_decode, "compiled_step", lambda model, device: type(model).decode_step)
        eager = generate(m, prompt, 12, COMPILED)
    assert torch.equal(compiled, eager)


def test_a_second_call_reuses_the_cache_and_two_streams_get_two():
    m, prompt = model(), torch.randint(0, 61, (3, 5))
    generate(m, prompt, 2, COMPILED)
    first = held(m)
    generate(m, prompt, 2, COMPILED)
    assert held(m) is first  # the same buffers: CUDA graphs replay without a new capture
    a, b = (generate_stream(m, prompt, 4, COMPILED) for _ in range(2))
    first = [next(a), next(b)]  # both streams are inside their loops now
    rest_a, rest_b = list(a), list(b)
    assert torch.equal(torch.stack([first[0], *rest_a]), torch.stack([first[1], *rest_b]))


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(attention_mask=torch.ones(1, 2, dtype=torch.long)),
     r"compile=True decodes prompts of one length; left-padded prompts \(attention_mask\) need compile=False"),
    (dict(cache="dynamic"), r"cache: compile=True decodes with a StaticKVCache \(StaticKVCache.for_model\), got a "
                            "KVCache"),
])
def test_what_the_compiled_loop_cannot_do_is_refused(kwargs, message):
    m = model()
    if kwargs.get("cache") == "dynamic":
        kwargs["cache"] = m.new_cache(1)
    with pytest.raises(ValueError, match=message):
        generate(m, torch.zeros(1, 2, dtype=torch.long), 3, COMPILED, **kwargs)


def test_a_model_without_a_decode_step_is_refused():
    class Plain(torch.nn.Module):  # a forward, a context, nothing to compile a step of
        config = GPTConfig.from_preset("tiny")

        def forward(self, idx, kv_cache=None):
            raise AssertionError("never run: refused before")

    with pytest.raises(ValueError, match=r"compile=True needs a model with a static KV cache and a decode_step \(GPT "
                                         r"has them\), got Plain; decode it with compile=False"):
        generate(Plain(), torch.zeros(1, 2, dtype=torch.long), 3, COMPILED)


def test_the_callers_static_cache_decodes_the_same_tokens():
    m, prompt = model(), torch.randint(0, 61, (2, 5))
    cache = StaticKVCache.for_model(m, 2)
    out = generate(m, prompt, 12, COMPILED, cache=cache)
    assert int(cache.position) == 5 + 11  # the prompt and every new token fed back
    assert accelerated(m) not in compiled_decode._CACHES  # the caller's cache, not one the loop keeps
    cache.reset()
    assert torch.equal(generate(m, prompt, 12, COMPILED, cache=cache), out)
    assert torch.equal(out, generate(m, prompt, 12, GREEDY))


def test_a_model_with_sliding_windows_decodes_the_eager_tokens():
    """Every layer of the static cache keeps every slot; a window is a mask over them."""
    torch.manual_seed(0)
    m = ModernDecoder(ModernDecoderConfig(vocab_size=61, context_length=24, d_model=32, num_layers=2, num_heads=4,
                                          num_kv_heads=2, d_ff=40, sliding_window=4))
    prompt = torch.randint(0, 61, (2, 6))
    assert torch.equal(generate(m, prompt, 20, COMPILED), generate(m, prompt, 20, GREEDY))


def test_prompt_ids_are_checked_before_decoding():
    with pytest.raises(ValueError, match=r"GPT: token ids must be in \[0, vocab_size=61\), got min 0, max 99"):
        generate(model(), torch.tensor([[0, 99]]), 3, COMPILED)


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
    out = generate(m, prompt, 40, COMPILED)
    assert torch.equal(out, generate(m, prompt, 40, GREEDY))
    assert held(m).context_length == 64


@pytest.mark.parametrize(("new", "slots"), [(11, 16), (30, 24)])
def test_the_static_cache_holds_the_sequence_not_the_whole_context(new, slots):
    """Every step attends over every slot: 5 + 11 positions get 16 slots (a power of two), not the table's 24;
    5 + 30 get the table's 24 (the loop crops and recomputes past it)."""
    m, prompt = model(), torch.randint(0, 61, (2, 5))
    out = generate(m, prompt, new, COMPILED)
    assert held(m).context_length == slots
    assert torch.equal(out, generate(m, prompt, new, GREEDY))


def test_longer_sequences_reuse_the_compiled_step(monkeypatch):
    """The cache's length is dynamic in the compiled step: 64 and 128 slots are one graph, not a compile each."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # forget the sizes earlier tests compiled for (torch would have made them dynamic)
    monkeypatch.setattr(compiled_decode, "_STEPS", {})
    m, prompt = model(ctx=256), torch.randint(0, 61, (2, 5))
    generate(m, prompt, 40, COMPILED)  # 64 slots
    graphs = counters["stats"]["unique_graphs"]
    out = generate(m, prompt, 100, COMPILED)  # 128 slots
    assert held(m).context_length == 128
    assert counters["stats"]["unique_graphs"] == graphs
    assert torch.equal(out, generate(m, prompt, 100, GREEDY))


@pytest.mark.parametrize(("scaling", "name"), [
    ({"type": "dynamic", "factor": 2.0}, "dynamic NTK"),
    ({"type": "longrope", "factor": 2.0, "original_context_length": 12, "short_factor": [1.0] * 4,
      "long_factor": [2.0] * 4}, "LongRoPE")])
def test_a_scaling_that_reads_the_length_is_refused(scaling, name):
    m = ModernDecoder(ModernDecoderConfig(vocab_size=61, context_length=24, d_model=32, num_layers=2, num_heads=4,
                                          rope_scaling=scaling))
    with pytest.raises(ValueError, match=rf"compile=True: {name} scaling picks its frequencies from the length"):
        generate(m, torch.zeros(1, 3, dtype=torch.long), 3, COMPILED)


def test_more_model_shapes_than_dynamos_recompile_limit_each_compile():
    """Dynamo recompiles one code object at most 8 times, and under fullgraph=True the ninth fails; each model
    shape's step has a code object of its own, so ten shapes in a process each compile and give the eager tokens."""
    idx = torch.tensor([[1, 2, 3]])
    for width in range(1, 11):
        torch.manual_seed(width)
        m = GPT(GPTConfig(vocab_size=61, context_length=16, d_model=8 * width, num_layers=1, num_heads=2)).eval()
        assert torch.equal(generate(m, idx, 3, COMPILED), generate(m, idx, 3, GREEDY)), width
