"""The arithmetic of attention for one query token, step by step, the way the texts teach it.

For query token i of one head:  q = x_i W_q;  s_j = q · k_j;  s_j / √d_k;  a = softmax(s);
z = Σ_j a_j v_j.  Every number comes from a :class:`~attnlab.inspect.capture.Capture` (the model's
own q, k, v); the weights and context worked out here are checked against the ones the model
computed in its forward pass (``max_abs_diff_*``), so the lesson and the model cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.inspect.capture import Capture, LayerFacts


@dataclass
class Explanation:
    """Each step for one query. Vectors are float64 tensors; ``allowed[j]`` is False for masked keys."""

    tokens: list[str]
    query_index: int
    layer: int
    head: int
    model_name: str
    inputs: Tensor                 # (T, D) what the layer read (embedding + position for the toy)
    token_embeddings: Tensor | None
    positions: Tensor | None
    query: Tensor                  # (d,)
    keys: Tensor                   # (T, d)
    values: Tensor                 # (T, d)
    raw_scores: Tensor             # (T,) q · k_j
    scale: float
    scaled_scores: Tensor          # (T,) raw × scale, -inf where masked
    allowed: list[bool]
    exp_scores: Tensor             # (T,) exp(scaled - max)
    weights: Tensor                # (T,) softmax
    contributions: Tensor          # (T, d) weight_j × v_j
    context: Tensor                # (d,)
    max_abs_diff_weights: float    # against the model's own weights
    max_abs_diff_context: float    # against the model's own context vector
    query_tokens: list[str] | None = None  # cross-attention: the queries' own tokens (``tokens`` are the keys')
    softcap: float | None = None   # Gemma 2: scaled_scores are cap · tanh(raw × scale / cap)
    sink: float | None = None      # gpt-oss: this head's logit that joins the softmax (its weight goes nowhere)

    @property
    def query_token(self) -> str:
        return (self.tokens if self.query_tokens is None else self.query_tokens)[self.query_index]

    def to_dict(self) -> dict:
        """Plain JSON-able numbers and labels."""
        def v(t: Tensor | None):
            return None if t is None else t.tolist()
        return {
            "model": self.model_name, "layer": self.layer, "head": self.head, "tokens": self.tokens,
            "query": {"index": self.query_index, "token": self.query_token},
            **({} if self.query_tokens is None else {"query_tokens": self.query_tokens}),
            "inputs": v(self.inputs), "token_embeddings": v(self.token_embeddings), "positions": v(self.positions),
            "q": v(self.query), "keys": v(self.keys), "values": v(self.values),
            "raw_scores": v(self.raw_scores), "scale": self.scale, "d_k": self.keys.shape[-1],
            "scaled_scores": [s if ok else None for s, ok in zip(self.scaled_scores.tolist(), self.allowed,
                                                                  strict=True)],
            "allowed": self.allowed, "exp_scores": v(self.exp_scores), "weights": v(self.weights),
            "weights_sum": float(self.weights.sum()), "contributions": v(self.contributions),
            "context": v(self.context), "softcap": self.softcap, "sink": self.sink,
            "check": {"max_abs_diff_weights": self.max_abs_diff_weights,
                      "max_abs_diff_context": self.max_abs_diff_context},
        }


def find_query(tokens: list[str], query: str | int) -> int:
    """Index of ``query`` (a token's text, or an index) in ``tokens``; a ValueError names the choices."""
    if isinstance(query, bool) or not isinstance(query, (int, str)):
        raise TypeError(tr("query must be a token (str) or an index (int), got {query_type}",
                           query_type=type(query).__name__))
    if isinstance(query, int):
        if not 0 <= query < len(tokens):
            raise ValueError(tr("query index must be in 0..{value}, got {query}", value=len(tokens) - 1, query=query))
        return query
    for candidates in ([query], [query.lower(), "##" + query, "Ġ" + query, "▁" + query]):
        for i, t in enumerate(tokens):
            if t in candidates:
                return i
    raise ValueError(tr("query {query!r} is not a token of the sentence; the tokens are: {tokens}", query=query,
                        tokens=', '.join(tokens)))


def explain(cap: Capture, query: str | int, layer: int = 0, head: int = 0) -> Explanation:
    """Work through attention for the token ``query`` of ``cap`` (layer ``layer``, head ``head``)."""
    cap.check_layer_head(layer, head)
    if cap.not_one_softmax is not None:
        raise ValueError(tr("{model_name}: {why}, whose weights are not one softmax of a head's queries and keys: "
                            "explain works through softmax attention; `attnlab view` shows these weights",
                            model_name=cap.model_name, why=cap.not_one_softmax))
    if cap.queries is None or cap.keys is None or cap.values is None or cap.inputs is None:
        raise ValueError(tr("{model_name}: the capture has no queries/keys/values; capture with qkv=True",
                            model_name=cap.model_name))
    i = find_query(cap.tokens, query)
    q = cap.queries[layer][head, i].double()
    keys, values = cap.keys[layer][head].double(), cap.values[layer][head].double()
    facts: LayerFacts = cap.layer_facts[layer] if cap.layer_facts is not None else \
        {"scale": cap.scale, "window": cap.window, "softcap": None, "sinks": None}
    scale = float(facts["scale"] if facts["scale"] is not None else keys.shape[-1] ** -0.5)
    window, softcap = facts["window"], facts["softcap"]
    sink = None if facts["sinks"] is None else float(facts["sinks"][head])
    allowed = [not (cap.is_causal and j > i) and not (window is not None and i - j >= window)
               for j in range(len(cap.tokens))]
    steps = attention_arithmetic(q, keys, values, scale, allowed, softcap, sink)
    model_w = cap.attentions[layer][head, i].double()
    context = steps["context"]
    diff_c = float("nan") if cap.contexts is None else float((cap.contexts[layer][head, i].double() - context)
                                                             .abs().max())
    return Explanation(
        tokens=list(cap.tokens), query_index=i, layer=layer, head=head, model_name=cap.model_name,
        inputs=cap.inputs[layer].double(),
        token_embeddings=None if cap.token_embeddings is None else cap.token_embeddings.double(),
        positions=None if cap.positions is None else cap.positions.double(),
        query=q, keys=keys, values=values, scale=scale, allowed=allowed, **steps,
        max_abs_diff_weights=float((model_w - steps["weights"]).abs().max()), max_abs_diff_context=diff_c,
        softcap=softcap, sink=sink,
    )


def attention_arithmetic(q: Tensor, keys: Tensor, values: Tensor, scale: float, allowed: list[bool],
                         softcap: float | None = None, sink: float | None = None) -> dict:
    """The steps for one query ``q (d,)`` over ``keys``/``values (T, d)`` (float64), as :class:`Explanation`'s
    fields: ``raw_scores``, ``scaled_scores``, ``exp_scores``, ``weights``, ``contributions``, ``context``.
    ``softcap``: the scaled scores pass through ``cap · tanh(s / cap)``; ``sink``: one more logit in the softmax's
    denominator, with no value."""
    raw = keys @ q                                             # s_j = q · k_j
    scaled = raw * scale if softcap is None else softcap * torch.tanh(raw * scale / softcap)
    scaled = torch.where(torch.tensor(allowed), scaled, torch.tensor(float("-inf"), dtype=torch.float64))
    top = scaled.max() if sink is None else torch.maximum(scaled.max(), torch.tensor(sink, dtype=torch.float64))
    exp = torch.exp(scaled - top)                              # minus the max: the same softmax, no overflow
    weights = exp / (exp.sum() + (0.0 if sink is None else math.exp(sink - float(top))))
    contributions = weights.unsqueeze(1) * values              # a_j v_j
    return {"raw_scores": raw, "scaled_scores": scaled, "exp_scores": exp, "weights": weights,
            "contributions": contributions, "context": contributions.sum(0)}
