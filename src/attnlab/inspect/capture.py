"""One capture API: run a model once and keep everything its attention did.

``capture(model, text)`` tokenizes, runs the model's own forward pass with weights returned, and
records per layer: the attention weights ``(H, T, T)`` the model computed, and — through forward
hooks on ``W_query``/``W_key``/``W_value``/``out_proj`` — what each attention layer read, its queries,
keys and values, and the context vectors it produced. Every view in attnlab (explain, heatmaps, the
HTML viewer, the report) reads a :class:`Capture`; none recomputes attention its own way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import torch
from torch import Tensor, nn

from attnlab.attention import GroupedQueryAttention, SimpleSelfAttention
from attnlab.attention.latent import LatentAttention
from attnlab.i18n import N_, _, tr
from attnlab.inspect.random_model import RandomModel


class LayerFacts(TypedDict):
    """One layer's numbers the arithmetic needs: its scale, window (keys seen), soft-cap and sinks (one per head)."""

    scale: float | None
    window: int | None
    softcap: float | None
    sinks: list[float] | None


@dataclass
class Capture:
    """What one forward pass did, for one sentence.

    Attributes:
        tokens: the ``T`` tokens, as text.
        attentions: per layer, the model's own weights ``(H, T, T)`` (query rows, key columns).
        inputs: per layer, what the attention layer read ``(T, D)`` (None where not hooked).
        queries, keys, values: per layer ``(H, T, d_head)`` (None where the model has no such projections).
        contexts: per layer ``(H, T, d_head)``: each head's weighted sum of values, as the model computed it.
        scale: the factor the scores are multiplied by before the softmax (1/√d_head, or 1 for simple).
        is_causal: whether keys after the query were masked.
        window: with a sliding window, the keys each query saw, its own included (None: all before it).
        layer_facts: per layer, where layers differ (Gemma's local and global layers, GPT-2's per-layer scale) or
            the scores pass through more than a scale: ``{"scale", "window", "softcap", "sinks"}`` (``sinks`` a
            list of one logit per head, or None). None where every layer is as ``scale`` and ``window`` say.
        model_name: a label for titles.
        token_embeddings, positions: ``(T, D)`` parts of the first layer's input, where the model has them.
        not_one_softmax: why ``explain`` cannot work through this model one head at a time (a layer of
            differential or linear attention, whose weights are not one softmax of a head's q·k); None if it can.
        heads_per_layer: each layer's own heads where layers differ (Qwen3-Next: 16 attention heads beside its
            DeltaNet layers' 32 value heads); ``attentions`` then holds :func:`same_heads`' maps, a layer's heads
            after its own empty. None where every layer has ``num_heads``.
    """

    tokens: list[str]
    attentions: list[Tensor]
    inputs: list[Tensor] | None = None
    queries: list[Tensor] | None = None
    keys: list[Tensor] | None = None
    values: list[Tensor] | None = None
    contexts: list[Tensor] | None = None
    scale: float | None = None
    is_causal: bool = False
    window: int | None = None
    layer_facts: list[LayerFacts] | None = None
    model_name: str = "model"
    token_embeddings: Tensor | None = None
    positions: Tensor | None = None
    not_one_softmax: str | None = None
    heads_per_layer: list[int] | None = None

    @property
    def num_layers(self) -> int:
        return len(self.attentions)

    @property
    def num_heads(self) -> int:
        return self.attentions[0].shape[0]

    @property
    def seq_len(self) -> int:
        return len(self.tokens)

    def check_layer_head(self, layer: int, head: int | None = None) -> None:
        """Raise a ValueError naming the valid range if ``layer``/``head`` is out of it."""
        if not isinstance(layer, int) or not 0 <= layer < self.num_layers:
            raise ValueError(tr("layer must be in 0..{value} ({num_layers} layers), got {layer!r}",
                                value=self.num_layers - 1, num_layers=self.num_layers, layer=layer))
        if head is not None and (not isinstance(head, int) or not 0 <= head < self.num_heads):
            raise ValueError(tr("head must be in 0..{value} ({num_heads} heads), got {head!r}",
                                value=self.num_heads - 1, num_heads=self.num_heads, head=head))
        own = self.num_heads if self.heads_per_layer is None else self.heads_per_layer[layer]
        if head is not None and head >= own:
            raise ValueError(tr("head must be in 0..{value} (layer {layer} has {own} heads), got {head!r}",
                                value=own - 1, layer=layer, own=own, head=head))

    def weights(self, layer: int = 0, head: int = 0) -> Tensor:
        """``(T, T)`` weights of one head (query rows, key columns)."""
        self.check_layer_head(layer, head)
        return self.attentions[layer][head]

    def scores(self, layer: int = 0) -> Tensor:
        """``(H, T, T)`` raw scores Q Kᵀ of a layer, before scaling and masking."""
        self.check_layer_head(layer)
        if self.queries is None or self.keys is None:
            raise ValueError(tr("{model_name}: this capture has no queries/keys (capture with qkv=True)",
                                model_name=self.model_name))
        return self.queries[layer] @ self.keys[layer].transpose(-1, -2)


#: the kinds of attention that are not one softmax per head (their class's ``not_one_softmax``), as explain names them
NOT_ONE_SOFTMAX = {
    "differential": N_("differential attention (two softmax maps per pair of heads, subtracted)"),
    "gated delta rule": N_("linear attention (the gated delta rule: a state, no softmax)"),
    "kimi delta": N_("linear attention (Kimi delta attention: a state, no softmax)"),
    "sparse": N_("DeepSeek sparse attention (a softmax over the keys its indexer chose, not every key)"),
    "shared keys": N_("a shared-KV layer (Gemma 4: its keys and values are an earlier layer's, computed there)"),
}


def _attention_modules(model: nn.Module) -> list[nn.Module]:
    """The modules that compute attention, in forward order (outermost wins: a wrapper's heads are skipped)."""
    found: list[tuple[str, nn.Module]] = []
    for name, m in model.named_modules():
        # differential, linear and sparse attention are found too: their weights, though not one softmax a head
        is_attn = isinstance(m, SimpleSelfAttention | LatentAttention) or hasattr(m, "not_one_softmax") \
            or (hasattr(m, "W_query") and hasattr(m, "W_key"))
        if is_attn and not any(name.startswith(p + ".") for p, _ in found if p):
            found.append((name, m))
    return [m for _, m in found]


def _split(t: Tensor, heads: int) -> Tensor:
    """``(T, H·d)`` -> ``(H, T, d)``."""
    n, d = t.shape
    return t.view(n, heads, d // heads).transpose(0, 1)


class _Recorder:
    """Forward hooks that record one attention module's input, q/k/v and context."""

    def __init__(self, module: nn.Module, qkv: bool) -> None:
        self.module = module
        self.record: dict[str, Tensor] = {}
        self.handles = [module.register_forward_hook(self._on_attention)]
        if qkv:
            for part in ("W_query", "W_key", "W_value"):
                proj = getattr(module, part, None)
                if isinstance(proj, nn.Module):
                    self.handles.append(proj.register_forward_hook(self._store(part)))
        out_proj = getattr(module, "out_proj", None)
        if isinstance(out_proj, nn.Module):
            self.handles.append(out_proj.register_forward_pre_hook(self._store_input("context")))

    def _store(self, key: str):
        def hook(_m, _args, out):
            self.record[key] = out.detach()[0]
        return hook

    def _store_input(self, key: str):
        def hook(_m, args):
            self.record[key] = args[0].detach()[0]
        return hook

    def _on_attention(self, module, args, out) -> None:
        x = (args[0] if args else None)
        if x is not None:
            x = x.detach()
            self.record["input"] = x[0] if x.dim() == 3 else x
        if "context" not in self.record:  # no out_proj: the module's output is the context
            o = out[0] if isinstance(out, tuple) else out
            self.record["context"] = o.detach()[0] if o.dim() == 3 else o.detach()
        if isinstance(module, SimpleSelfAttention):  # no projections: Q = K = V = X
            for part in ("W_query", "W_key", "W_value"):
                self.record[part] = self.record["input"]
        elif isinstance(module, GroupedQueryAttention | LatentAttention) and "input" in self.record:
            with torch.no_grad():  # the q and k the scores saw: rotated (RoPE), key/value heads shared per group,
                # MLA's every head's from the latents
                q, k, v = module.scored_heads(self.record["input"])
            self.record.update({part: t.transpose(0, 1).flatten(1) for part, t in
                                (("W_query", q), ("W_key", k), ("W_value", v))})
        elif "W_query" not in self.record and hasattr(module, "project") and "input" in self.record:
            with torch.no_grad():  # raw-parameter projections (SelfAttentionV1) cannot be hooked
                q, k, v = module.project(self.record["input"])
            self.record.update(W_query=q, W_key=k, W_value=v)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _tokenize(tokenizer: Any, text: str) -> tuple[list[int], list[str]]:
    """Token ids and their text, from a ``tokenizers.Tokenizer`` or any object with ``encode``/``decode``."""
    enc = tokenizer.encode(text)
    if hasattr(enc, "ids"):
        return list(enc.ids), list(enc.tokens)
    ids = [int(i) for i in enc]
    return ids, [_token_text(tokenizer, i) for i in ids]


def _token_text(tokenizer: Any, i: int) -> str:
    if hasattr(tokenizer, "id_to_token"):
        return str(tokenizer.id_to_token(i))
    if hasattr(tokenizer, "decode"):
        return str(tokenizer.decode([i]))
    return str(i)


def max_length(model: nn.Module) -> int | None:
    """The longest sequence ``model`` accepts: a language model's ``position_limit`` (None for rotary positions),
    else its config's ``context_length`` (None if it does not say)."""
    if hasattr(model, "position_limit"):  # a language model, or a wrapper that passes its attributes on
        return getattr(model, "position_limit", None)
    value = getattr(getattr(model, "config", None), "context_length", None)
    return value if isinstance(value, int) else None


def _run(model: nn.Module, inputs: Any, tokenizer: Any, tokens: Sequence[str] | None):
    """Tokenize and run ``model`` once; returns (tokens, per-layer weights (H, T, T), extras)."""
    extra: dict[str, Any] = {}
    if isinstance(model, RandomModel):
        tokens = model.tokenize(inputs) if isinstance(inputs, str) else list(tokens or [])
        x = model.embed(tokens) if isinstance(inputs, str) else inputs
        extra.update(token_embeddings=model.token_embeddings(tokens), positions=model.positions(len(tokens)))
        _, w = model(x.unsqueeze(0), return_weights=True)
        return tokens, [w[0] if w.dim() == 4 else w], extra
    if isinstance(inputs, Tensor) and torch.is_floating_point(inputs):  # a bare attention module on embeddings
        if tokens is None or len(tokens) != inputs.shape[-2]:
            raise ValueError(tr("tokens must name each of the {shape} embeddings, got {tokens!r}",
                                shape=inputs.shape[-2], tokens=tokens))
        _, w = model(inputs.unsqueeze(0) if inputs.dim() == 2 else inputs, return_weights=True)
        return list(tokens), [w[0] if w.dim() == 4 else w], extra
    if isinstance(inputs, str):
        if not inputs.strip():
            raise ValueError(tr("text must not be empty, got an empty text"))
        if tokenizer is None:
            raise TypeError(tr("a tokenizer is needed to capture {model_type} on text, got tokenizer=None",
                               model_type=type(model).__name__))
        ids, tokens = _tokenize(tokenizer, inputs)
    else:
        ids = [int(i) for i in (inputs.tolist() if isinstance(inputs, Tensor) else inputs)]
        tokens = list(tokens) if tokens is not None else [_token_text(tokenizer, i) for i in ids]
    if not ids:
        raise ValueError(tr("text gave no tokens; expected at least one"))
    limit = max_length(model)
    if limit is not None and len(ids) > limit:
        raise ValueError(tr("the sentence has {n_ids} tokens; {model_type} accepts at most {limit}", n_ids=len(ids),
                            model_type=type(model).__name__, limit=limit))
    device = next(model.parameters()).device
    out = model(torch.tensor([ids], device=device), return_weights=True)
    attentions = getattr(out, "attentions", None)
    if not attentions:
        raise ValueError(tr("{model_type} returned no attentions with return_weights=True",
                            model_type=type(model).__name__))
    return tokens, [a[0] for a in attentions], extra


@torch.no_grad()
def same_heads(maps: list[Tensor]) -> list[Tensor]:
    """Per layer ``(H_l, ...)`` maps -> each ``(H, ...)``, ``H`` the most heads of any layer: a layer with fewer
    gets empty (zero) maps after its own, so that every layer is drawn on one grid of heads. As given where every
    layer has as many (every model but a hybrid whose layers differ, such as Qwen3-Next)."""
    most = max((m.shape[0] for m in maps), default=0)
    return [m if m.shape[0] == most else torch.cat([m, m.new_zeros(most - m.shape[0], *m.shape[1:])])
            for m in maps]


def capture(model: nn.Module, inputs: str | Sequence[int] | Tensor, *, tokenizer: Any = None,
            tokens: Sequence[str] | None = None, qkv: bool = True, name: str | None = None) -> Capture:
    """Run ``model`` once on one sentence and record what its attention did.

    Args:
        model: a :class:`~attnlab.inspect.random_model.RandomModel`, one of attnlab's Transformer models (its forward
            takes ``return_weights=True``), or a bare attention module (then ``inputs`` are embeddings).
        inputs: text, token ids ``(T,)``, or embeddings ``(T, D)`` for a bare attention module.
        tokenizer: turns text into ids for a Transformer model (``tokenizers.Tokenizer`` or alike).
        tokens: token labels, for ids or embeddings.
        qkv: also record each layer's input, queries, keys, values and contexts (forward hooks).
        name: label used in titles.

    Returns:
        a :class:`Capture`; ``capture.attentions[l]`` is ``(H, T, T)``.

    Example:
        >>> from attnlab.inspect import RandomModel, RandomModelConfig, capture
        >>> cap = capture(RandomModel(RandomModelConfig("multihead")), "我 爱 学习 AI")
        >>> cap.attentions[0].shape
        torch.Size([2, 4, 4])
    """
    if not isinstance(model, nn.Module):
        raise TypeError(tr("model must be a torch.nn.Module, got {model_type}", model_type=type(model).__name__))
    was_training = model.training
    model.eval()
    modules = _attention_modules(model)
    recorders = [_Recorder(m, qkv) for m in modules]
    try:
        tokens_out, attentions, extra = _run(model, inputs, tokenizer, tokens)
    finally:
        for r in recorders:
            r.remove()
        model.train(was_training)
    attentions = [a.detach().float().cpu() for a in attentions]
    heads = [a.shape[0] for a in attentions]
    cap = Capture(tokens=list(tokens_out), attentions=same_heads(attentions), model_name=name
                  or getattr(model, "name", None) or type(model).__name__,
                  token_embeddings=extra.get("token_embeddings"), positions=extra.get("positions"),
                  heads_per_layer=heads if len(set(heads)) > 1 else None)
    cap.is_causal = bool(modules and getattr(modules[0], "is_causal", False))
    cap.window = getattr(modules[0], "sliding_window", None) if modules else None
    records = [r.record for r in recorders]
    other = next(((i, m) for i, m in enumerate(modules) if hasattr(m, "not_one_softmax")), None)
    if other is not None:  # its weights are captured, its queries and keys do not make them
        kind = NOT_ONE_SOFTMAX.get(str(other[1].not_one_softmax), str(other[1].not_one_softmax))
        cap.not_one_softmax = tr("layer {layer} is {kind}", layer=other[0], kind=_(kind))
        return cap
    if qkv and records and len(records) == len(attentions) and all("W_query" in r for r in records):
        heads = attentions[0].shape[0]
        cap.inputs = [r["input"].float().cpu() for r in records]
        cap.queries, cap.keys, cap.values = ([_split(r[p].float().cpu(), heads) for r in records]
                                             for p in ("W_query", "W_key", "W_value"))
        cap.contexts = [_split(r["context"].float().cpu(), heads) for r in records]
        simple = isinstance(modules[0], SimpleSelfAttention)
        cap.scale = 1.0 if simple else 1.0 / math.sqrt(cap.queries[0].shape[-1])
        cap.layer_facts = _layer_facts(modules, cap.scale, cap.window)
    return cap


def _layer_facts(modules: list[nn.Module], scale: float, window: int | None) -> list[LayerFacts] | None:
    """Each layer's scale, window, soft-cap and sinks, where some layer differs from ``scale`` and ``window``."""
    facts: list[LayerFacts] = []
    for m in modules:
        sinks = getattr(m, "sinks", None)
        facts.append({"scale": getattr(m, "scale", None) or scale, "window": getattr(m, "sliding_window", None),
                      "softcap": getattr(m, "softcap", None),
                      "sinks": None if sinks is None else sinks.detach().float().cpu().tolist()})
    plain: LayerFacts = {"scale": scale, "window": window, "softcap": None, "sinks": None}
    return None if all(f == plain for f in facts) else facts
