"""Ragged batches: ``generate(model, prompts)`` with prompts of different lengths = each prompt generated alone
(greedy), for GPT and the modern decoder; padding and masks built here, cut off in what comes back.
(Loaded checkpoints: tests/pretrained/test_long_context.py.)"""

import contextlib

import pytest
import torch

from attnlab.data.tokenizer import CharTokenizer
from attnlab.generation import GenerationConfig, PositionTableWarning, generate, generate_texts
from attnlab.generation.ragged import encode_prompts, left_pad, unpad
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12], [13, 14, 15]]
GREEDY = GenerationConfig(temperature=0)


def order_one(model):
    """Weights of order 1: logits far apart, so that no greedy choice hangs on a rounding."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) / 32**0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return model.eval()


def models():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=50, context_length=16, d_model=32, num_layers=2, num_heads=4))
    modern = ModernDecoder(ModernDecoderConfig(vocab_size=50, context_length=16, d_model=32, num_layers=2,
                                               num_heads=4, num_kv_heads=2, d_ff=40))
    windowed = ModernDecoder(ModernDecoderConfig(vocab_size=50, context_length=16, d_model=32, num_layers=2,
                                                 num_heads=4, num_kv_heads=2, d_ff=40, sliding_window=3))
    return {"gpt": order_one(gpt), "modern": order_one(modern), "windowed": order_one(windowed)}


@pytest.mark.parametrize("name", ["gpt", "modern", "windowed"])
def test_each_row_is_the_prompt_generated_alone(name):
    """12 new tokens: GPT's 7 + 12 passes its 16 positions (crop and recompute, per row as alone)."""
    model = models()[name]
    with pytest.warns(PositionTableWarning) if name == "gpt" else contextlib.nullcontext():
        rows = generate(model, PROMPTS, 12, GREEDY)
    assert [len(r) for r in rows] == [len(p) + 12 for p in PROMPTS]
    for p, row in zip(PROMPTS, rows, strict=True):
        assert row[: len(p)] == p
        assert row == generate(model, torch.tensor([p]), 12, GREEDY)[0].tolist()
    assert rows == generate(model, PROMPTS, 12, GREEDY.replace(use_cache=False))


def test_strings_with_a_tokenizer_and_the_end_of_sequence():
    tokenizer = CharTokenizer.train("abcdefghij klmnopqrstuvwxyz")
    torch.manual_seed(0)
    model = order_one(ModernDecoder(ModernDecoderConfig(vocab_size=tokenizer.vocab_size, context_length=16,
                                                        d_model=32, num_layers=2, num_heads=4, d_ff=40)))
    texts = ["to be or", "not", "a question"]
    got = generate_texts(model, tokenizer, texts, 10, GREEDY)
    for text, row in zip(texts, got, strict=True):
        alone = generate(model, torch.tensor([tokenizer.encode(text)]), 10, GREEDY)[0].tolist()
        assert row == tokenizer.decode(alone) and row.startswith(text)
    ids = [[int(i) for i in tokenizer.encode(t)] for t in texts]  # the same prompts as token lists
    assert [tokenizer.decode(row) for row in generate(model, ids, 10, GREEDY)] == got
    model = models()["modern"]
    rows = generate(model, PROMPTS, 12, GREEDY)
    eos = rows[1][3]  # a token row 1 makes: it ends there, while the others may go on
    ended = generate(model, PROMPTS, 12, GREEDY.replace(stop_tokens=eos))
    assert ended[1] == rows[1][: rows[1].index(eos, 1) + 1] and ended[1][-1] == eos


def test_padding_and_unpadding():
    idx, mask = left_pad(PROMPTS)
    assert idx.tolist()[1] == [0] * 6 + [12] and mask.tolist()[2] == [0] * 4 + [1] * 3
    out = torch.cat([idx, torch.full((3, 2), 7)], 1)
    assert unpad(out, PROMPTS)[1] == [12, 7, 7] and unpad(out, PROMPTS, (7,))[1] == [12, 7]
    assert encode_prompts([torch.tensor([3, 4])], None) == [[3, 4]]


@pytest.mark.parametrize(("prompts", "kwargs", "match"), [
    ([[1, 2], []], {}, r"prompts\[1\]: an empty prompt; every prompt needs at least one token"),
    (["ab"], {}, r"prompts\[0\]: a string needs a tokenizer \(generate_texts\(model, tokenizer, prompts, \.\.\.\)\)"),
    ([[1, 2.5]], {}, r"prompts\[0\]: expected a list of token ids or a string, got list"),
    ([], {}, r"prompts: expected a non-empty list of prompts"),
    ([[1, 2]], {"attention_mask": torch.ones(1, 2)}, r"attention_mask: a list of prompts is padded here"),
    ([[1, 60]], {}, r"token ids must be in \[0, vocab_size=50\)"),
])
def test_bad_prompts(prompts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(models()["modern"], prompts, 3, **kwargs)


def test_strings_are_checked_as_token_lists_are():
    with pytest.raises(ValueError, match=r"prompts\[1\]: an empty prompt; every prompt needs at least one token"):
        generate_texts(models()["modern"], CharTokenizer.train("ab"), ["ab", ""], 3)


def test_a_caller_that_expects_the_crop_can_silence_its_warning():
    import warnings

    from attnlab.generation import cropping_expected

    gpt = models()["gpt"]
    with pytest.warns(PositionTableWarning, match=r"GPT: 10 prompt \+ 8 new tokens pass its learned position table "
                                                  r"of 16 positions"):
        generate(gpt, torch.ones(1, 10, dtype=torch.long), 8, GREEDY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with cropping_expected():
            generate(gpt, torch.ones(1, 10, dtype=torch.long), 8, GREEDY)
        generate(gpt, torch.ones(1, 10, dtype=torch.long), 7, GREEDY)  # 10 + 6 fed: the table suffices
