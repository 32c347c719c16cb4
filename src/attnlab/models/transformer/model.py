"""The original Transformer ("Attention Is All You Need", Figure 1): an encoder-decoder.

    src (B, S) -> embedding · √d_model + sinusoidal positions -> N encoder blocks        -> memory (B, S, D)
    tgt (B, T) -> embedding · √d_model + sinusoidal positions -> N decoder blocks (memory) -> logits (B, T, vocab)

One embedding matrix serves the source, the target and the output layer (§3.4: "we share the same weight matrix
between the two embedding layers and the pre-softmax linear transformation"). The encoder's blocks are
:class:`~attnlab.layers.TransformerBlock` (bidirectional, source padding masked); the decoder's are
:class:`~attnlab.layers.DecoderBlock` (masked self-attention, cross-attention to the memory, feed-forward).

``encode`` and ``decode`` are the two halves; ``decode_step`` is the decoder one token at a time, with a cache, for
the searches (:mod:`attnlab.generation.seq2seq`);
``body`` runs the blocks alone on given embeddings, which is what ``torch.nn.Transformer`` computes, so a model
made by :meth:`Transformer.from_torch` can be compared with the module it came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.functional.masks import additive_mask, key_mask
from attnlab.i18n import tr
from attnlab.layers import DecoderBlock, LayerNorm, SinusoidalPositionalEncoding, TransformerBlock
from attnlab.layers.feedforward import dropped
from attnlab.models.caches import KVCache, compute_dtype
from attnlab.models.transformer.checks import Door, check_inputs
from attnlab.models.transformer.config import TransformerConfig
from attnlab.models.transformer.from_torch import config_from_torch, copy_torch_body
from attnlab.models.transformer.head_mask import Seq2SeqHeadMask, check_seq2seq_head_mask, layer_mask


@dataclass
class Seq2SeqOutput:
    """What an encoder-decoder's forward returns (:class:`attnlab.models.Transformer`).

    Attributes:
        logits: ``(B, T, vocab_size)``: the scores of the next target token at every target position.
        loss: the mean (label-smoothed) cross-entropy over the non-padding targets, when ``targets`` were given.
        encoder_attentions: with ``return_weights``: one ``(B, H, S, S)`` per encoder layer.
        decoder_attentions: with ``return_weights``: one ``(B, H, T, T)`` per decoder layer (masked self-attention;
            ``(B, H, T, L)`` with a cache of ``L`` positions).
        cross_attentions: with ``return_weights``: one ``(B, H, T, S)`` per decoder layer: target tokens (rows)
            attending to source tokens (columns), the alignment.
    """

    logits: Tensor
    loss: Tensor | None = None
    encoder_attentions: tuple[Tensor, ...] | None = None
    decoder_attentions: tuple[Tensor, ...] | None = None
    cross_attentions: tuple[Tensor, ...] | None = None


class Transformer(nn.Module):
    """The encoder-decoder Transformer, configured by a :class:`TransformerConfig`.

    Example:
        >>> model = Transformer(TransformerConfig.from_preset("transformer-tiny")).eval()
        >>> src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])    # tgt starts with bos_id
        >>> model(src, tgt).logits.shape                                          # (B, T, vocab)
        torch.Size([1, 3, 256])
    """

    name: str  # what a loader calls the model it loaded (the CLI and the explorer show it); not set otherwise

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(tr("Transformer: config must be a TransformerConfig, got {got}",
                               got=type(config).__name__))
        self.config = c = config
        self.embedding = nn.Embedding(c.vocab_size, c.d_model)  # source, target and output layer share it
        self.positions = SinusoidalPositionalEncoding(c.d_model, c.context_length)
        self.drop = nn.Dropout(c.dropout)
        spec = c.block_spec()
        self.encoder_blocks = nn.ModuleList(TransformerBlock(spec) for _ in range(c.num_encoder_layers))
        self.decoder_blocks = nn.ModuleList(DecoderBlock(spec) for _ in range(c.num_decoder_layers))
        final = c.has_final_norm
        self.encoder_norm = LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias) if final else None
        self.decoder_norm = LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias) if final else None
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.head.weight = self.embedding.weight  # tied: one matrix reads and writes tokens
        self._init_weights()

    def _init_weights(self) -> None:
        """Xavier-uniform matrices and zero biases (as ``torch.nn.Transformer``); the embedding N(0, 1/d_model),
        so that the embeddings scaled by √d_model have unit variance, like the positions they are added to."""
        for module in self.modules():
            if isinstance(module, nn.Linear) and module is not self.head:
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=self.config.d_model ** -0.5)

    @classmethod
    def from_torch(cls, module: nn.Transformer, vocab_size: int, **overrides: Any) -> Transformer:
        """An attnlab Transformer with the blocks of a user's ``torch.nn.Transformer`` (``batch_first=True``).

        The encoder and decoder stacks are copied weight for weight; the embeddings, positions and output layer,
        which ``nn.Transformer`` does not have, are attnlab's own (freshly initialised). ``vocab_size`` and any
        other :class:`TransformerConfig` field (``context_length``, ``pad_id``, ...) are given by keyword. Then
        ``model.body(src_x, tgt_x, ...)`` equals ``module(src_x, tgt_x, ...)`` (tested to 1e-5).
        """
        model = cls(config_from_torch(module, vocab_size=vocab_size, **overrides))
        copy_torch_body(model, module)
        return model

    def num_parameters(self) -> int:
        """Trainable parameters (the shared embedding counted once; the sinusoidal positions are not parameters)."""
        return sum(p.numel() for p in self.parameters())

    def source_mask(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The ``(B, S)`` bool padding mask the model uses for ``src`` (True = real): ``src_mask`` when given,
        else every position not holding ``pad_id``. Not checked (the door checks)."""
        return src != self.config.pad_id if src_mask is None else src_mask.bool()

    def _door(self, **inputs: Any) -> tuple[Tensor | None, Tensor | None]:
        c = self.config
        return check_inputs(Door(type(self).__name__, c.vocab_size, c.context_length, c.pad_id, **inputs))

    def _embed(self, ids: Tensor, offset: int = 0) -> Tensor:
        """Token embedding · √d_model (§3.4) + positions, then dropout: ``(B, T)`` -> ``(B, T, D)``."""
        x = self.embedding(ids) * math.sqrt(self.config.d_model)
        return dropped(self.drop, self.positions(x, offset=offset))

    def _encoder_stack(self, x: Tensor, src_keys: Tensor | None, return_weights: bool = False,
                       head_mask: Seq2SeqHeadMask | None = None):
        weights = []
        for i, block in enumerate(self.encoder_blocks):
            x = block(x, attn_mask=src_keys, return_weights=return_weights,
                      head_mask=layer_mask(head_mask, "encoder", i))
            if return_weights:
                x, w = x
                weights.append(w)
        x = x if self.encoder_norm is None else self.encoder_norm(x)
        return (x, tuple(weights)) if return_weights else x

    def _decoder_stack(self, y: Tensor, memory: Tensor | None, src_keys: Tensor | None, tgt_keys: Tensor | None,
                       cache: KVCache | None = None, return_weights: bool = False,
                       head_mask: Seq2SeqHeadMask | None = None):
        self_weights, cross_weights = [], []
        for i, block in enumerate(self.decoder_blocks):
            y = block(y, memory, attn_mask=tgt_keys, memory_attn_mask=src_keys, return_weights=return_weights,
                      kv_cache=None if cache is None else cache[i], head_mask=layer_mask(head_mask, "decoder", i),
                      cross_head_mask=layer_mask(head_mask, "cross", i))
            if return_weights:
                y, sw, cw = y
                self_weights.append(sw)
                cross_weights.append(cw)
        y = y if self.decoder_norm is None else self.decoder_norm(y)
        return (y, tuple(self_weights), tuple(cross_weights)) if return_weights else y

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The encoder: ``src (B, S)`` ids -> memory ``(B, S, D)`` (rows at padding positions are meaningless).

        ``src_mask (B, S)``: 1 = real token; None: positions holding ``pad_id`` are padding.
        """
        src_keys, _ = self._door(src=src, src_mask=src_mask)
        return self._encoder_stack(self._embed(src), src_keys)

    def new_cache(self, memory: Tensor, src_mask: Tensor | None = None, context_length: int | None = None, *,
                  beams: int = 1) -> KVCache:
        """An empty decoding cache for ``memory (B, S, D)`` with its padding mask ``src_mask (B, S)`` (None: all
        real), holding up to ``context_length`` target positions (default: the model's), for ``beams`` target rows
        per source (a search's hypotheses: rows ``b·beams .. b·beams + beams - 1`` are source ``b``'s).

        Every layer's cross-attention keys and values of the memory are computed here, once per source: a source's
        beams share them (the decoder blocks attend with the beams' queries together, never a copy per beam).
        """
        c, w = self.config, self.embedding.weight
        src_keys, _ = self._door(memory=memory, src_mask=src_mask)
        length = c.context_length if context_length is None else context_length
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= c.context_length:
            raise ValueError(tr("Transformer.new_cache: context_length must be an int in [1, {most}], got {got!r}",
                                most=c.context_length, got=context_length))
        check_positive_int("Transformer.new_cache", "beams", beams, tr)
        dtype = compute_dtype(w)
        # the padding as a term added to the scores (0 or -inf): an add at every step, 5x cheaper than a bool mask's
        # fill broadcast over the heads and beams (0.15 against 0.77 ms at 1,000 sources, beam 4, one thread)
        bias = None if src_keys is None else additive_mask(src_keys, dtype)
        # positions first: a search decodes many rows at once, one query each against a few keys (LayerKVCache)
        cache = KVCache(c.num_decoder_layers, memory.shape[0] * beams, c.num_heads, length, c.head_dim, dtype,
                        w.device, memory_mask=bias, positions_first=True)
        for layer, block in zip(cache.layers, self.decoder_blocks, strict=True):
            layer.memory_kv = cast(DecoderBlock, block).cross_attn.project_memory(memory)
        return cache

    def decode_step(self, tgt: Tensor, cache: KVCache) -> Tensor:
        """The next-token logits ``(N, vocab_size)`` after ``tgt (N, T)`` placed after what ``cache`` holds: what a
        search runs at every step, with :meth:`new_cache` and ``cache.reorder(rows, memory=False)`` to follow its
        beams.

        Unchecked, and nothing read back from the device: the search checked the source once at
        :meth:`new_cache`'s door, and the ids it feeds come from argmax and topk. The same decoder blocks as
        :meth:`decode` and :meth:`forward` (equal to :meth:`decode` over the whole prefix: tested). Eval mode.
        """
        y = self._decoder_stack(self._embed(tgt, cache.length), None, cache.memory_mask, None, cache)
        return self.head(y[:, -1])

    def decode(self, tgt: Tensor, memory: Tensor | None = None, *, src_mask: Tensor | None = None,
               tgt_mask: Tensor | None = None, cache: KVCache | None = None, return_weights: bool = False):
        """The decoder: ``tgt (B, T)`` ids attending to ``memory (B, S, D)`` -> logits ``(B, T, vocab_size)``.

        Args:
            tgt: target ids, starting with ``bos_id`` (or, with a cache, the new tokens only).
            memory: :meth:`encode`'s output; not needed with a cache (which holds its keys and values).
            src_mask: ``(B, S)`` padding mask of the memory, 1 = real (None: all real); with a cache, the one
                given to :meth:`new_cache` is used and this must be None.
            tgt_mask: ``(B, T)`` padding mask of the target (None: positions holding ``pad_id``); not with a cache.
            cache: a :meth:`new_cache`; ``tgt`` is placed after the ``cache.length`` positions it holds.
            return_weights: return a :class:`Seq2SeqOutput` with the decoder's self- and cross-attention weights
                instead of the logits alone.
        """
        if cache is None:
            src_keys, tgt_keys = self._door(tgt=tgt, memory=memory, src_mask=src_mask, tgt_mask=tgt_mask)
            if memory is None:
                raise ValueError(tr("Transformer.decode: memory (B, S, D) is required without a cache, got None"))
            offset = 0
        else:
            if src_mask is not None:
                raise ValueError(tr("Transformer.decode: src_mask must be None with a cache (the cache holds the "
                                    "mask given to new_cache)"))
            offset = cache.length
            _, tgt_keys = self._door(tgt=tgt, tgt_mask=tgt_mask, offset=offset, cached=True)
            if tgt.shape[0] != cache[0].keys.shape[0]:
                raise ValueError(tr("Transformer.decode: tgt has batch size {got}, the cache {batch}", got=tgt.shape[0],
                                    batch=cache[0].keys.shape[0]))
            src_keys = cache.memory_mask
        y = self._decoder_stack(self._embed(tgt, offset), memory, src_keys, tgt_keys, cache, return_weights)
        if not return_weights:
            return self.head(y)
        y, self_weights, cross_weights = y
        return Seq2SeqOutput(self.head(y), decoder_attentions=self_weights, cross_attentions=cross_weights)

    def forward(self, src: Tensor, tgt: Tensor, *, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                targets: Tensor | None = None, label_smoothing: float = 0.0, return_weights: bool = False,
                head_mask: Seq2SeqHeadMask | None = None) -> Seq2SeqOutput:
        """Teacher forcing: ``src (B, S)`` and ``tgt (B, T)`` ids -> :class:`Seq2SeqOutput` with logits ``(B, T, V)``.

        Args:
            src: source ids, ``S <= context_length``.
            tgt: target ids shifted right: ``bos_id`` first, ``T <= context_length``.
            src_mask, tgt_mask: ``(B, S)`` and ``(B, T)`` padding masks, 1 = real token; None: the positions
                holding ``pad_id`` are padding. An explicit mask wins.
            targets: ``(B, T)`` the token each position should predict (``tgt`` shifted left); positions holding
                ``pad_id`` are left out of the loss.
            label_smoothing: ε of the paper's label smoothing (§5.4: 0.1), in ``[0, 1)``.
            return_weights: also return every layer's attention weights (math backend).
            head_mask: a :class:`~attnlab.models.transformer.head_mask.Seq2SeqHeadMask`: one ``(layers, num_heads)``
                mask per attention (the encoder's, the decoder's, the cross-attention); head h of layer l has its
                output multiplied by the entry ``[l, h]`` before ``out_proj`` (0 removes it), as a decoder's
                ``head_mask`` does.
        """
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, int | float) \
                or not 0.0 <= label_smoothing < 1.0:
            raise ValueError(tr("Transformer: label_smoothing must be a float in [0, 1), got {value!r}",
                                value=label_smoothing))
        src_keys, tgt_keys = self._door(src=src, tgt=tgt, targets=targets, src_mask=src_mask, tgt_mask=tgt_mask)
        head_mask = check_seq2seq_head_mask(head_mask, self.config, type(self).__name__)
        memory = self._encoder_stack(self._embed(src), src_keys, return_weights, head_mask)
        memory, enc_weights = memory if return_weights else (memory, None)
        y = self._decoder_stack(self._embed(tgt), memory, src_keys, tgt_keys, return_weights=return_weights,
                                head_mask=head_mask)
        y, self_weights, cross_weights = y if return_weights else (y, None, None)
        logits = self.head(y)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1),
                                   ignore_index=self.config.pad_id, label_smoothing=float(label_smoothing))
        return Seq2SeqOutput(logits, loss, enc_weights, self_weights, cross_weights)

    def body(self, src_x: Tensor, tgt_x: Tensor, *, src_mask: Tensor | None = None,
             tgt_mask: Tensor | None = None) -> Tensor:
        """The encoder and decoder stacks alone, on embeddings: ``src_x (B, S, D)``, ``tgt_x (B, T, D)`` ->
        ``(B, T, D)``, with the causal target mask and the ``(B, S)`` / ``(B, T)`` padding masks (1 = real;
        None: all real).

        What ``torch.nn.Transformer(batch_first=True)`` computes with ``tgt_mask`` causal,
        ``src_key_padding_mask = memory_key_padding_mask = ~src_mask`` and ``tgt_key_padding_mask = ~tgt_mask``.
        """
        owner = "Transformer.body"
        d = self.config.d_model
        for name, x in (("src_x", src_x), ("tgt_x", tgt_x)):
            if not isinstance(x, Tensor) or not torch.is_floating_point(x) or x.dim() != 3 or x.shape[-1] != d:
                got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(tr("{owner}: {name} must be float embeddings (B, T, {d}), got {got}", owner=owner,
                                    name=name, d=d, got=got))
        masks = []
        for name, m, x in (("src_mask", src_mask, src_x), ("tgt_mask", tgt_mask, tgt_x)):
            if m is not None and (not isinstance(m, Tensor) or tuple(m.shape) != tuple(x.shape[:2])):
                raise ValueError(tr("{owner}: {name} must have shape {shape}, got {got}", owner=owner, name=name,
                                    shape=tuple(x.shape[:2]),
                                    got=tuple(m.shape) if isinstance(m, Tensor) else type(m).__name__))
            masks.append(None if m is None else key_mask(m))
        memory = self._encoder_stack(src_x, masks[0])
        return self._decoder_stack(tgt_x, memory, masks[0], masks[1])
