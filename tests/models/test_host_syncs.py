"""Checks happen at the door, once: inside the layers nothing reads a tensor's values back to the host.

A read (``bool(t)``, ``t.item()``, ``t.tolist()``, ``int(t)``, boolean indexing, ``nonzero``, ...) makes the
host wait for the device: harmless on a CPU, a stall per layer on a GPU and fatal to CUDA graph capture.
:class:`HostReads` counts them through ``__torch_function__``, which sees every tensor method call.
"""

import pytest
import torch
from torch.overrides import TorchFunctionMode

from attnlab.attention import MultiHeadAttention
from attnlab.functional import key_mask
from attnlab.models import GPT, EncoderConfig, GPTConfig, StaticKVCache, TransformerEncoder

READS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "numpy", "masked_select",
         "unique", "_unique2", "any_", "argwhere"}


class HostReads(TorchFunctionMode):
    """Records every call that reads tensor values back to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        bool_index = name in ("__getitem__", "__setitem__") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool
            for i in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in READS or bool_index:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def test_the_counter_sees_host_reads():
    x = torch.randn(4)
    with HostReads() as reads:
        bool(x.sum() > 0), x.max().item(), x[x > 0], x.tolist()
    assert reads.calls == ["__bool__", "item", "__getitem__", "tolist"]


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=50, context_length=16, d_model=32, num_layers=2, num_heads=4)
    return TransformerEncoder(config).eval()


@pytest.mark.parametrize("return_weights", [False, True])  # the fused path and the textbook (math) path
def test_encoder_layers_read_nothing_and_the_door_reads_once(encoder, return_weights):
    ids = torch.randint(1, 50, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    x = encoder.embeddings(ids)
    with torch.no_grad(), HostReads() as inside:
        for block in encoder.blocks:
            x = block(x, attn_mask=key_mask(mask), return_weights=return_weights)
            x = x[0] if return_weights else x
    assert inside.calls == []
    with torch.no_grad(), HostReads() as whole:
        encoder(ids, mask, return_weights=return_weights)
    assert whole.calls == ["tolist"]  # the door: ids, mask values, "all real?" in one read


def test_gpt_reads_once_with_or_without_targets():
    model = GPT(GPTConfig.from_preset("tiny")).eval()
    idx = torch.randint(0, 256, (2, 12))
    with torch.no_grad(), HostReads() as reads:
        model(idx)
        model(idx, targets=idx)
    assert reads.calls == ["tolist", "tolist"]


def test_attention_module_reads_only_a_callers_padding_mask():
    mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False).eval()
    x, mask = torch.randn(2, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1] * 5])
    with torch.no_grad(), HostReads() as trusted:
        mha(x, attn_mask=key_mask(mask))
    with torch.no_grad(), HostReads() as checked:
        mha(x, attention_mask=mask)
    assert trusted.calls == [] and checked.calls == ["__bool__"]  # are the values all 0 or 1?


@pytest.mark.parametrize("window", [None, 4])  # a GPT; a ModernDecoder whose windows are masks over the slots
def test_the_static_decode_step_reads_nothing(window):
    # what CUDA graphs need: no read anywhere in a step, the prefill included (positions live on the device)
    from attnlab.models import ModernDecoder, ModernDecoderConfig

    model = (GPT(GPTConfig.from_preset("tiny")) if window is None else
             ModernDecoder(ModernDecoderConfig.from_preset("tiny", sliding_window=window))).eval()
    cache = StaticKVCache.for_model(model, 2)
    with torch.no_grad(), HostReads() as reads:
        model.decode_step(torch.randint(0, 256, (2, 6)), cache)
        for _ in range(3):
            model.decode_step(torch.randint(0, 256, (2, 1)), cache)
    assert reads.calls == []


@pytest.mark.parametrize("padded", [False, True])
def test_decoders_with_a_padding_mask_read_once(padded):
    from attnlab.models import ModernDecoder, ModernDecoderConfig

    mask = torch.ones(2, 12, dtype=torch.long)
    if padded:
        mask[1, :5] = 0
    for model in (GPT(GPTConfig.from_preset("tiny")).eval(),
                  ModernDecoder(ModernDecoderConfig.from_preset("tiny", sliding_window=4)).eval()):
        idx = torch.randint(0, 256, (2, 12))
        with torch.no_grad(), HostReads() as reads:
            model(idx, attention_mask=mask, return_weights=padded)
            model(idx, targets=idx, attention_mask=mask)
        assert reads.calls == ["tolist", "tolist"]


@pytest.mark.parametrize("return_weights", [False, True])
def test_the_encoder_decoder_reads_once_at_its_door(return_weights):
    from attnlab.models import Transformer, TransformerConfig

    model = Transformer(TransformerConfig.from_preset("transformer-tiny")).eval()
    src = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 10, 11, 12, 2]])
    tgt = torch.tensor([[1, 13, 14, 0], [1, 15, 16, 17]])
    with torch.no_grad(), HostReads() as whole:
        model(src, tgt, targets=tgt, label_smoothing=0.1, return_weights=return_weights)
    assert whole.calls == ["tolist"]  # ids, targets, both masks' values and "all real?" in one read
    memory = model.encode(src)
    with torch.no_grad(), HostReads() as inside:  # the blocks trust the masks they are given
        y = model.embedding(tgt)
        for block in model.decoder_blocks:
            y = block(y, memory, attn_mask=key_mask(tgt != 0), memory_attn_mask=key_mask(src != 0),
                      return_weights=return_weights)
            y = y[0] if return_weights else y
    assert inside.calls == []
    with torch.no_grad(), HostReads() as decoding:
        cache = model.new_cache(memory, src != 0)
        for i in range(3):
            model.decode(tgt[:, i : i + 1], cache=cache)
    assert decoding.calls == ["tolist"] * 4  # new_cache's mask, then each step's ids


def test_the_searches_step_reads_nothing():
    from attnlab.models import Transformer, TransformerConfig

    model = Transformer(TransformerConfig.from_preset("transformer-tiny")).eval()
    src = torch.tensor([[5, 6, 7, 2, 0, 0], [8, 9, 10, 11, 12, 2]])
    memory = model.encode(src)
    with torch.no_grad(), HostReads() as door:
        cache = model.new_cache(memory, src != 0, beams=2)
    assert door.calls == ["tolist"]  # the mask's values
    with torch.no_grad(), HostReads() as steps:
        for _ in range(3):
            model.decode_step(torch.randint(3, 256, (4, 1)), cache)
            cache.reorder(torch.tensor([1, 0, 3, 3]), memory=False)
    assert steps.calls == []
