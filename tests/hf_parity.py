"""The checks every family's loader passes against transformers' own model of a tiny checkpoint
(tests/hf_checkpoints.py writes it): logits on a left-padded batch, greedy decoding alone and batched, the cache."""

import torch

from attnlab.generation import GenerationConfig, generate
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import VOCAB, assert_left_padded_batch_equals, cached_and_full_logits, left_padded, write_checkpoint

GREEDY = GenerationConfig(temperature=0)
ATOL = 1e-4


def written_and_loaded(root, cases):
    """``(arch, storage)`` -> ``(directory, transformers model, attnlab model)``: each case written under ``root``
    by transformers and loaded by :func:`load_causal_lm`."""
    out = {}
    for arch, storage in cases:
        d = root / f"{arch}-{storage}"
        hf = write_checkpoint(arch, d, storage=storage)
        out[arch, storage] = (d, hf, load_causal_lm(d)[0])
    return out


def assert_logits_equal_transformers(hf, model, lengths=(24, 15, 6)):
    """Logits ≤ ``ATOL`` from transformers' on a left-padded batch, and each row equal to itself alone."""
    assert_left_padded_batch_equals(model, hf, ATOL, lengths)


def assert_greedy_equals_generate(hf, model, new_tokens=40):
    """The same ``new_tokens`` greedy tokens as transformers' ``generate``, alone and in a left-padded batch."""
    prompt = torch.randint(1, VOCAB, (1, 8), generator=torch.Generator().manual_seed(3))
    want = hf.generate(prompt, max_new_tokens=new_tokens, do_sample=False)
    assert torch.equal(generate(model, prompt, new_tokens, GREEDY), want)
    ids, mask = left_padded((9, 4), 9, seed=1)
    want_batch = hf.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False)
    assert torch.equal(generate(model, ids, new_tokens, GREEDY, attention_mask=mask), want_batch)


def assert_cache_equals_recomputation(model):
    """A prefix at once, then one token at a time through ``model.new_cache``: the logits of one forward."""
    ids, mask = left_padded((16, 11), 16, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, 10)
    real = mask.bool()
    scale = float(full[real].abs().max().clamp(min=1))
    torch.testing.assert_close(cached[real], full[real], atol=1e-5 * scale, rtol=0)
