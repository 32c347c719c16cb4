"""What an encoder-decoder's attention did while it translated one source: all three kinds, per layer.

:func:`capture_translation` runs the model's own forward pass once, with weights returned, on the source
and on the translation it wrote (teacher-forced: the decoder reads ``<bos>`` and the written tokens), and
keeps:

* ``encoder``: encoder self-attention, per layer ``(H, S, S)``: source tokens attending to source tokens;
* ``decoder``: decoder self-attention (masked), per layer ``(H, T, T)``;
* ``cross``: cross-attention, per layer ``(H, T, S)``: each decoding step (a row) reading the source.

:func:`explain_cross` works through one cross-attention step by hand (``q · k_j``, ``÷ √d_k``, softmax,
``Σ a_j v_j``) from the layer's own queries, keys and values, checked against what the model computed.

Rows of the decoder and cross maps are labelled with the token each step *wrote* (the last is ``<eos>``):
row ``i`` is the query that predicted ``target[i]``, so a date's ``2021`` row lights up on the source's year.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.data.pairs import BOS
from attnlab.data.tokenizer import CharTokenizer
from attnlab.i18n import N_, _, tr
from attnlab.inspect.capture import Capture
from attnlab.inspect.explain import Explanation, attention_arithmetic, find_query
from attnlab.layers import DecoderBlock
from attnlab.models import Transformer

MODES = ("encoder", "decoder", "cross")
MODE_TITLES = {"encoder": N_("encoder self-attention"), "decoder": N_("decoder self-attention (masked)"),
               "cross": N_("cross-attention (decoder → source)")}


def show_char(c: str) -> str:
    """A character as a label: a space is drawn as ``␣`` so it can be seen."""
    return "␣" if c == " " else c


@dataclass
class Seq2SeqCapture:
    """The three attentions of one translation (see the module docstring)."""

    source_tokens: list[str]        # S labels
    target_tokens: list[str]        # T labels: the tokens written, then "<eos>"
    encoder: list[Tensor]           # per encoder layer (H, S, S)
    decoder: list[Tensor]           # per decoder layer (H, T, T)
    cross: list[Tensor]             # per decoder layer (H, T, S)
    model_name: str = "translation model"

    def weights(self, mode: str) -> list[Tensor]:
        if mode not in MODES:
            raise ValueError(tr("mode: expected one of {choices}, got {mode!r}", choices=", ".join(MODES), mode=mode))
        return getattr(self, mode)

    def check_layer_head(self, mode: str, layer: int, head: int | None = None) -> None:
        """A ValueError naming the valid range when ``layer``/``head`` is outside it."""
        maps = self.weights(mode)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(maps):
            raise ValueError(tr("layer must be in 0..{last} ({n} {what} layers), got {layer!r}", last=len(maps) - 1,
                                n=len(maps), what=_(MODE_TITLES[mode]), layer=layer))
        heads = maps[0].shape[0]
        if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads):
            raise ValueError(tr("head must be in 0..{last} ({n} heads), got {head!r}", last=heads - 1, n=heads,
                                head=head))

    def as_capture(self, mode: str) -> Capture:
        """A square mode (``encoder`` or ``decoder``) as a plain :class:`Capture`, for the usual views."""
        if mode == "cross":
            raise ValueError(tr("mode: cross-attention is not square (target rows, source columns); "
                                "draw it with attnlab.viz.alignment"))
        tokens = self.source_tokens if mode == "encoder" else self.target_tokens
        return Capture(tokens=list(tokens), attentions=self.weights(mode), is_causal=mode == "decoder",
                       model_name=f"{self.model_name}: {MODE_TITLES[mode]}")


@torch.no_grad()
def capture_translation(model: Transformer, vocab: CharTokenizer, source: str, target_ids: list[int],
                        name: str = "translation model") -> Seq2SeqCapture:
    """Run ``model`` on ``source`` and the ids it wrote (``target_ids``, without ``<bos>``/``<eos>``); keep the
    weights of every attention (batch of one, float32 on the CPU)."""
    most = model.config.context_length - 1  # <bos> + the ids must fit; a translation that never ended is cut
    ended = len(target_ids) <= most
    target_ids = list(target_ids[:most])
    src = torch.as_tensor(vocab.encode(source), dtype=torch.long)[None]
    tgt = torch.tensor([[BOS, *target_ids]], dtype=torch.long)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        out = model(src.to(device), tgt.to(device), return_weights=True)
    finally:
        model.train(was_training)

    def first(maps) -> list[Tensor]:
        return [m[0].detach().float().cpu() for m in maps]

    written = vocab.decode([*target_ids])  # the same text the translation shows
    return Seq2SeqCapture(source_tokens=[show_char(c) for c in source],
                          target_tokens=[show_char(c) for c in written] + ["<eos>" if ended else "…"],
                          encoder=first(out.encoder_attentions), decoder=first(out.decoder_attentions),
                          cross=first(out.cross_attentions), model_name=name)


def _split_heads(t: Tensor, heads: int) -> Tensor:
    """``(T, D)`` -> ``(H, T, D / H)``."""
    return t.view(t.shape[0], heads, -1).transpose(0, 1)


@torch.no_grad()
def explain_cross(model: Transformer, vocab: CharTokenizer, source: str, target_ids: list[int], query: str | int = 0,
                  layer: int = 0, head: int = 0, name: str = "translation model") -> Explanation:
    """Cross-attention of decoder ``layer``, ``head`` for one decoding step, every number shown.

    ``query``: the step, as an index into the target tokens (0 = the step that wrote the first token) or as the
    token it wrote. The queries come from the decoder's state, the keys and values from the encoder's output
    (``inputs`` of the explanation: one row per source token); hooks on the layer's ``W_query``, ``W_key``,
    ``W_value`` and ``out_proj`` record them in the model's own forward pass.
    """
    blocks = model.decoder_blocks
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(blocks):
        raise ValueError(tr("layer must be in 0..{last} ({n} decoder layers), got {layer!r}", last=len(blocks) - 1,
                            n=len(blocks), layer=layer))
    block = blocks[layer]
    assert isinstance(block, DecoderBlock)  # what a Transformer's decoder is made of
    attn = block.cross_attn
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < attn.num_heads:
        raise ValueError(tr("head must be in 0..{last} ({n} heads), got {head!r}", last=attn.num_heads - 1,
                            n=attn.num_heads, head=head))
    seen: dict[str, Tensor] = {}

    def keep(key: str, take_input: bool = False):
        def hook(_module, args, out=None):
            seen[key] = (args[0] if take_input else out)[0].detach().double().cpu()
        return hook

    handles = [attn.W_query.register_forward_hook(keep("q")), attn.W_key.register_forward_hook(keep("k")),
               attn.W_value.register_forward_hook(keep("v")),
               attn.W_key.register_forward_hook(lambda _m, args, _o: seen.__setitem__(
                   "memory", args[0][0].detach().double().cpu())),
               attn.out_proj.register_forward_pre_hook(keep("context", take_input=True))]
    try:
        cap = capture_translation(model, vocab, source, target_ids, name)
    finally:
        for h in handles:
            h.remove()
    i = find_query(cap.target_tokens, query)
    heads = attn.num_heads
    q = _split_heads(seen["q"], heads)[head, i]
    keys, values = _split_heads(seen["k"], heads)[head], _split_heads(seen["v"], heads)[head]
    scale = keys.shape[-1] ** -0.5
    steps = attention_arithmetic(q, keys, values, scale, [True] * len(cap.source_tokens))  # no source padding
    model_w = cap.cross[layer][head, i].double()
    model_context = _split_heads(seen["context"], heads)[head, i]
    return Explanation(
        tokens=list(cap.source_tokens), query_index=i, layer=layer, head=head,
        model_name=f"{name}: {MODE_TITLES['cross']}", inputs=seen["memory"], token_embeddings=None, positions=None,
        query=q, keys=keys, values=values, scale=scale, allowed=[True] * len(cap.source_tokens), **steps,
        max_abs_diff_weights=float((model_w - steps["weights"]).abs().max()),
        max_abs_diff_context=float((model_context - steps["context"]).abs().max()),
        query_tokens=list(cap.target_tokens),
    )
