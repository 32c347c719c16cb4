"""Greedy and beam search for an encoder-decoder: cached equals uncached, beam 1 equals greedy, the length penalty
worked by hand on a scripted model, and bad input."""

import math
from typing import ClassVar

import pytest
import torch
from torch import nn

from attnlab.generation import beam_search, greedy_decode, length_penalty
from attnlab.models import Transformer, TransformerConfig

PAD, BOS, EOS = 0, 1, 2
STEPS = 400  # enough for every source to end at eos, on one thread


def _reversal_batch(n: int, g: torch.Generator):
    """Sources of 2..6 tokens in [3, 12) then eos; the targets are the sources reversed."""
    src, tgt, out = (torch.zeros(n, w, dtype=torch.long) for w in (7, 8, 8))
    for i, length in enumerate(torch.randint(2, 7, (n,), generator=g).tolist()):
        s = torch.randint(3, 12, (length,), generator=g)
        src[i, :length], src[i, length] = s, EOS
        tgt[i, 0], tgt[i, 1 : length + 1] = BOS, s.flip(0)
        out[i, :length], out[i, length] = s.flip(0), EOS
    return src, tgt, out


@pytest.fixture(scope="module")
def model():
    """A tiny model trained for a few seconds on reversal, on one thread whatever the machine has (float sums
    differ with the thread count, and so would the model): right on most sources, its results ending at eos at
    different steps, so finished and unfinished rows meet in one batch."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    m = Transformer(TransformerConfig.from_preset("transformer-tiny", vocab_size=12, context_length=16, dropout=0.0))
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(STEPS):
            src, tgt, out = _reversal_batch(32, g)
            loss = m(src, tgt, targets=out).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    return m.eval()


@pytest.fixture(scope="module")
def sources():
    return _reversal_batch(8, torch.Generator().manual_seed(1))[0]


def test_the_model_learned_something(model, sources):
    tokens = greedy_decode(model, sources)
    ends = (tokens == EOS).int().argmax(1)
    assert (tokens == EOS).any(1).all() and len(set(ends.tolist())) > 1  # every row ended, at different steps
    expected = [s[s > EOS].flip(0).tolist() for s in sources]
    right = sum(t[: int(e)].tolist() == x for t, e, x in zip(tokens, ends, expected, strict=True))
    assert right >= 4


def test_greedy_with_the_cache_gives_the_same_tokens(model, sources):
    assert torch.equal(greedy_decode(model, sources, use_cache=True), greedy_decode(model, sources, use_cache=False))


@pytest.mark.parametrize("beam_size", [2, 4])
def test_beam_search_with_the_cache_gives_the_same_tokens_and_scores(model, sources, beam_size):
    cached = beam_search(model, sources, beam_size=beam_size, use_cache=True)
    uncached = beam_search(model, sources, beam_size=beam_size, use_cache=False)
    assert torch.equal(cached[0], uncached[0])
    torch.testing.assert_close(cached[1], uncached[1], atol=1e-5, rtol=0)


def test_the_first_step_decodes_one_row_per_source(model, sources, monkeypatch):
    """At the first step a source's beams are all its bos: one row per source is decoded, then each gets its beams
    (the tokens are those of the uncached search, which repeats the memory for the beams: tested above)."""
    rows, step = [], type(model).decode_step
    monkeypatch.setattr(type(model), "decode_step", lambda self, tgt, cache: rows.append(tgt.shape[0]) or
                        step(self, tgt, cache))
    beam_search(model, sources, beam_size=3, max_new_tokens=4)
    assert rows[0] == len(sources) and set(rows[1:]) == {3 * len(sources)} and len(rows) > 1


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_size_one_is_greedy(model, sources, use_cache):
    tokens, scores = beam_search(model, sources, beam_size=1, alpha=0.0, use_cache=use_cache)
    assert torch.equal(tokens, greedy_decode(model, sources, use_cache=use_cache))
    # the score is the log-probability of those tokens (pad and bos, never chosen, left out of the softmax),
    # from a plain forward pass (teacher forcing)
    tgt = torch.cat([torch.full((len(sources), 1), BOS), tokens[:, :-1]], dim=1)
    logits = model(sources, tgt, tgt_mask=torch.ones_like(tgt)).logits
    logp = logits.index_fill(-1, torch.tensor([PAD, BOS]), -math.inf).log_softmax(-1)
    picked = logp.gather(-1, tokens[..., None])[..., 0]
    keep = torch.cumsum((tokens == EOS).int(), 1) - (tokens == EOS).int() == 0  # up to and including eos
    torch.testing.assert_close(scores, torch.where(keep, picked, 0.0).sum(1), atol=1e-5, rtol=0)


def test_a_wider_beam_finds_scores_at_least_as_good_as_greedy(model, sources):
    greedy = beam_search(model, sources, beam_size=1)[1]
    wide = beam_search(model, sources, beam_size=4)[1]
    assert torch.all(wide >= greedy - 1e-6)


def test_padding_on_the_source_changes_nothing(model, sources):
    wider = torch.cat([sources, torch.zeros(len(sources), 3, dtype=torch.long)], dim=1)
    assert torch.equal(greedy_decode(model, wider), greedy_decode(model, sources))
    torch.testing.assert_close(beam_search(model, wider)[1], beam_search(model, sources)[1], atol=1e-5, rtol=0)


def test_length_penalty_by_hand():
    assert length_penalty(1, 0.6) == 1.0  # (5 + 1) / 6 = 1
    assert length_penalty(7, 0.6) == pytest.approx(2 ** 0.6)  # (5 + 7) / 6 = 2
    assert length_penalty(3, 0.0) == 1.0


class Scripted(nn.Module):
    """A "model" whose next-token probabilities depend only on the target prefix, written out below.

    Tokens: 0 pad, 1 bos, 2 eos, 3 "a", 4 "b".
    """

    TABLE: ClassVar = {(): {EOS: 0.38, 3: 0.37, 4: 0.25}, (3,): {EOS: 0.99, 3: 0.005, 4: 0.005}}
    OTHERWISE: ClassVar = {EOS: 0.9, 3: 0.05, 4: 0.05}

    def __init__(self):
        super().__init__()
        self.config = TransformerConfig(vocab_size=5, d_model=8, num_heads=2, context_length=6)

    def source_mask(self, src, src_mask=None):
        return src != PAD if src_mask is None else src_mask.bool()

    def encode(self, src, src_mask=None):
        return torch.zeros(*src.shape, 8)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        logits = torch.full((*tgt.shape, 5), -math.inf)
        for b, row in enumerate(tgt.tolist()):
            for t in range(len(row)):
                for token, p in self.TABLE.get(tuple(row[1 : t + 1]), self.OTHERWISE).items():
                    logits[b, t, token] = math.log(p)
        return logits


def test_the_length_penalty_decides_between_a_short_and_a_longer_translation():
    """"eos" alone has probability 0.38; "a eos" has 0.37 · 0.99 = 0.3663, lower, but it is two tokens long.

    α = 0: scores log 0.38 = -0.968 against log 0.3663 = -1.004: the short one wins.
    α = 0.6: log 0.3663 / ((5 + 2) / 6)^0.6 = -1.004 / 1.097 = -0.916 beats -0.968 / 1: the longer one wins.
    """
    src = torch.tensor([[3, 2]])
    tokens, score = beam_search(Scripted(), src, beam_size=2, alpha=0.0, use_cache=False)
    assert tokens.tolist() == [[EOS]] and score.item() == pytest.approx(math.log(0.38))
    tokens, score = beam_search(Scripted(), src, beam_size=2, alpha=0.6, use_cache=False)
    assert tokens.tolist() == [[3, EOS]]
    assert score.item() == pytest.approx(math.log(0.37 * 0.99) / (7 / 6) ** 0.6)
    # more beams than tokens to choose from (eos, a, b)
    tokens, score = beam_search(Scripted(), src, beam_size=4, alpha=0.6, use_cache=False)
    assert tokens.tolist() == [[3, EOS]]
    assert score.item() == pytest.approx(math.log(0.37 * 0.99) / (7 / 6) ** 0.6)
    # greedy sees one step at a time: eos (0.38) beats "a" (0.37)
    assert greedy_decode(Scripted(), src, use_cache=False).tolist() == [[EOS]]


@pytest.mark.parametrize(("call", "msg"), [
    (lambda m, s: beam_search(m, s, beam_size=0), "beam_size must be an int >= 1, got 0"),
    (lambda m, s: beam_search(m, s, beam_size=2.0), "beam_size must be an int >= 1, got 2.0"),
    (lambda m, s: beam_search(m, s, alpha=-1), r"alpha \(the length penalty's exponent\) must be a number >= 0"),
    (lambda m, s: greedy_decode(m, s[:, :0]), r"src is empty \(shape \(8, 0\)\)"),
    (lambda m, s: greedy_decode(m, torch.zeros(2, 3, dtype=torch.long)), r"src rows \[0, 1\] are empty"),
    (lambda m, s: beam_search(m, torch.ones(1, 17, dtype=torch.long)),
     "src has 17 tokens, more than the model's context_length=16"),
    (lambda m, s: greedy_decode(m, s, max_new_tokens=0), r"max_new_tokens must be an int in \[1, context_length=16\]"),
    (lambda m, s: greedy_decode(m, s, max_new_tokens=17), "got 17"),
    (lambda m, s: greedy_decode(m, s, src_mask=torch.ones(8, 2)), r"src_mask must have the shape of src \(8, 7\)"),
    (lambda m, s: greedy_decode(m, s, src_mask=torch.full(s.shape, 2)), "src_mask must contain only 0 and 1"),
    (lambda m, s: greedy_decode(m, s.float()), "src must hold integer token ids"),
])
def test_bad_input_is_named(model, sources, call, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        call(model, sources)


def test_the_results_are_plain_tensors(model, sources):
    """Decoding runs in inference mode, but hands back tensors the caller may write to and use with autograd."""
    tokens = greedy_decode(model, sources, max_new_tokens=3)
    beam_tokens, scores = beam_search(model, sources, max_new_tokens=3)
    assert not any(t.is_inference() for t in (tokens, beam_tokens, scores))
    tokens[0, 0] = PAD


def test_decoding_leaves_the_model_in_its_mode(model, sources):
    model.train()
    try:
        greedy_decode(model, sources, max_new_tokens=2)
        beam_search(model, sources, max_new_tokens=2)
        assert model.training
    finally:
        model.eval()


class Certain(Scripted):
    """Only eos can follow bos; counts its calls."""

    TABLE: ClassVar = {(): {EOS: 1.0}}
    calls = 0

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        self.calls += 1
        return super().decode(tgt, memory, src_mask, tgt_mask)


def test_a_beam_with_nothing_to_choose_stops_at_once():
    model = Certain()  # the book's modules, not a fast twin: its calls are counted on the model itself
    tokens, score = beam_search(model, torch.tensor([[3, 2]]), beam_size=3, use_cache=False, accelerate=False)
    assert tokens.tolist() == [[EOS]] and score.item() == 0.0
    assert model.calls == 1  # the two beams with probability 0 stopped with the first
