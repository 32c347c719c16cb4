"""GenerationConfig: every field checked when the config is made, naming the field, the value and what was
expected; what a config does once made (``greedy``, ``sampler``, ``replace``); and ``stop_tokens`` at work, on a
scripted model whose every next token is written out here."""

import dataclasses
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from attnlab.generation import GenerationConfig, generate

# one value out of range for every field (and the pairs that exclude each other), and what the refusal says
BAD = [
    (dict(temperature=-1), ValueError, r"GenerationConfig: temperature must be a finite float >= 0 \(0 = greedy\), "
                                       r"got -1"),
    (dict(temperature=float("inf")), ValueError, r"GenerationConfig: temperature must be .*, got inf"),
    (dict(temperature=float("nan")), ValueError, r"GenerationConfig: temperature must be .*, got nan"),
    (dict(temperature="0.5"), ValueError, r"GenerationConfig: temperature must be .*, got '0.5'"),
    (dict(temperature=True), ValueError, r"GenerationConfig: temperature must be .*, got True"),
    (dict(top_k=0), ValueError, r"GenerationConfig: top_k must be None or an int >= 1, got 0"),
    (dict(top_k=2.0), ValueError, r"GenerationConfig: top_k must be None or an int >= 1, got 2.0"),
    (dict(top_k=True), ValueError, r"GenerationConfig: top_k must be None or an int >= 1, got True"),
    (dict(top_p=0), ValueError, r"GenerationConfig: top_p must be None or a float in \(0, 1\], got 0"),
    (dict(top_p=1.5), ValueError, r"GenerationConfig: top_p must be None or a float in \(0, 1\], got 1.5"),
    (dict(top_p=float("nan")), ValueError, r"GenerationConfig: top_p must be None or a float in \(0, 1\], got nan"),
    (dict(seed=-1), ValueError, r"GenerationConfig: seed must be None or an int in \[0, 2\*\*64 - 1\], got -1"),
    (dict(seed=2**64), ValueError, r"GenerationConfig: seed must be .*, got 18446744073709551616"),
    (dict(seed=1.0), ValueError, r"GenerationConfig: seed must be .*, got 1.0"),
    (dict(seed=False), ValueError, r"GenerationConfig: seed must be .*, got False"),
    (dict(generator=0), TypeError, r"GenerationConfig: generator must be None or a torch.Generator, got int"),
    (dict(seed=1, generator=torch.Generator()), ValueError,
     r"GenerationConfig: give seed or generator, not both \(a seed makes a generator of its own\)"),
    (dict(stop_tokens=-1), ValueError, r"GenerationConfig: stop_tokens must be token ids >= 0 \(an int, or a tuple of "
                                       r"them\), got -1"),
    (dict(stop_tokens=(3, -2)), ValueError, r"GenerationConfig: stop_tokens must be .*, got \(3, -2\)"),
    (dict(stop_tokens="5"), ValueError, r"GenerationConfig: stop_tokens must be .*, got '5'"),
    (dict(stop_tokens=(1.5,)), ValueError, r"GenerationConfig: stop_tokens must be .*, got \(1.5,\)"),
    (dict(stop_tokens=True), ValueError, r"GenerationConfig: stop_tokens must be .*, got True"),
    (dict(stop_tokens=None), ValueError, r"GenerationConfig: stop_tokens must be .*, got None"),
    (dict(use_cache=1), ValueError, r"GenerationConfig: use_cache must be True or False, got 1"),
    (dict(compile="yes"), ValueError, r"GenerationConfig: compile must be True or False, got 'yes'"),
    (dict(accelerate=None), ValueError, r"GenerationConfig: accelerate must be True or False, got None"),
    (dict(compile=True, use_cache=False), ValueError,
     r"GenerationConfig: compile=True decodes with a static KV cache; it cannot be combined with use_cache=False"),
]


def case_id(fields: dict) -> str:
    """A test id that is the same in every process (an object's repr holds its address)."""
    return " ".join(f"{k}={type(v).__name__ if isinstance(v, torch.Generator) else repr(v)}" for k, v in fields.items())


@pytest.mark.parametrize(("fields", "error", "match"), BAD, ids=[case_id(f) for f, _, _ in BAD])
def test_a_field_out_of_range_is_refused_when_the_config_is_made(fields, error, match):
    with pytest.raises(error, match=match):
        GenerationConfig(**fields)


def test_every_field_is_checked():
    """Each field of the dataclass has a refusal above: a new field needs one."""
    checked = {name for fields, _, _ in BAD for name in fields}
    assert checked == {f.name for f in dataclasses.fields(GenerationConfig)}


@pytest.mark.parametrize(("fields", "error", "match"), BAD[:3] + BAD[-2:])
def test_replace_checks_again(fields, error, match):
    with pytest.raises(error, match=match):
        GenerationConfig(temperature=0.7).replace(**fields)


def test_a_config_once_made():
    config = GenerationConfig(temperature=0.8, top_k=20, stop_tokens=[3, 4])
    assert config.stop_tokens == (3, 4) and GenerationConfig(stop_tokens=7).stop_tokens == (7,)
    assert not config.greedy and GenerationConfig(temperature=0).greedy
    assert config.replace(temperature=0) == GenerationConfig(temperature=0, top_k=20, stop_tokens=(3, 4))
    assert config.temperature == 0.8  # replace makes a new one
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.temperature = 0.0
    assert config.sampler("cpu") is None  # torch's global generator
    mine = torch.Generator()
    assert GenerationConfig(generator=mine).sampler("cpu") is mine
    seeded = GenerationConfig(seed=5)
    a, b = seeded.sampler("cpu"), seeded.sampler("cpu")
    assert a is not b and torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))  # fresh each time
    assert torch.equal(torch.rand(4, generator=seeded.sampler("cpu")),
                       torch.rand(4, generator=torch.Generator().manual_seed(5)))


class Scripted(torch.nn.Module):
    """A "model" that makes row b's i-th new token ``SCRIPT[b][i]`` (its logits put 1 there, 0 elsewhere), from the
    length of what it is given: decoded without a cache, every step is a forward over the whole sequence."""

    PROMPT = 2
    SCRIPT: ClassVar = [[3, 4, 7, 8, 5, 5, 5, 5, 5, 5],   # stops at 7 (step 3); would make the other stop token next
                        [6, 8, 6, 7, 9, 9, 9, 9, 9, 9],   # stops at 8 (step 2), before the 7 it would make
                        [1, 2, 1, 2, 1, 2, 1, 2, 1, 2]]   # never stops
    config = SimpleNamespace(context_length=100, vocab_size=10)

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def new_cache(self, batch):
        return None  # no cache: every step is a full forward

    def forward(self, idx, kv_cache=None):
        logits = torch.zeros(idx.shape[0], idx.shape[1], self.config.vocab_size)
        step = idx.shape[1] - self.PROMPT
        for b, script in enumerate(self.SCRIPT[: idx.shape[0]]):
            logits[b, -1, script[step]] = 1.0
        return SimpleNamespace(logits=logits)


def test_with_several_stop_tokens_each_row_stops_at_its_own_and_repeats_it():
    """Rows 0 and 1 end at different stop tokens, at different steps, and repeat the one they made (not the other
    one, which their script makes next); row 2 never stops, so decoding runs to max_new_tokens."""
    prompt = torch.zeros(3, Scripted.PROMPT, dtype=torch.long)
    config = GenerationConfig(temperature=0, stop_tokens=(8, 7))
    out = generate(Scripted(), prompt, 10, config)[:, Scripted.PROMPT:]
    assert out.tolist() == [[3, 4, 7, 7, 7, 7, 7, 7, 7, 7],
                            [6, 8, 8, 8, 8, 8, 8, 8, 8, 8],
                            [1, 2, 1, 2, 1, 2, 1, 2, 1, 2]]
    # once every row has stopped, decoding ends: rows 0 and 1 alone stop at step 3, the later of their two
    assert generate(Scripted(), prompt[:2], 10, config)[:, Scripted.PROMPT:].tolist() == [[3, 4, 7], [6, 8, 8]]
    # a list of prompts comes back cut after each row's stop token
    rows = generate(Scripted(), prompt.tolist(), 10, config)
    assert rows == [[0, 0, 3, 4, 7], [0, 0, 6, 8], [0, 0, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2]]
