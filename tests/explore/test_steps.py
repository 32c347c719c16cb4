"""One head, step by step, against the arithmetic written out here from the module's own weights: q = x·W_q + b,
RoPE's pairs turned by position · base^(−2j/d), the scores, ÷√d_k, the causal mask, softmax, Σ a_j v_j and the
head's columns of W_o."""

import pytest
import torch

from explore_reference import TEXT

TOL = 1e-5


def layer_input(model, module, idx, **kwargs):
    """What ``module`` read in the model's forward pass over ``idx``: ``(T, D)``."""
    seen = {}
    handle = module.register_forward_pre_hook(lambda _m, args: seen.__setitem__("x", args[0][0].detach()))
    try:
        with torch.no_grad():
            model(idx, **kwargs)
    finally:
        handle.remove()
    return seen["x"].double()


def read_layer(models, name: str, text: str, layer: int):
    """``(model, idx, attention module, what it read (T, D))`` for ``text`` through model ``name``."""
    model, tok = models[name]
    idx = torch.as_tensor(tok.encode(text))[None]
    attn = model.blocks[layer].attn
    return model, idx, attn, layer_input(model, attn, idx)


def rotate(v: torch.Tensor, position: int, base: float) -> torch.Tensor:
    """RoPE on one head's vector (pairs j and j + d/2), written out: no attnlab code."""
    d = v.shape[-1]
    theta = position * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a, b = v[: d // 2], v[d // 2:]
    return torch.cat([a * theta.cos() - b * theta.sin(), b * theta.cos() + a * theta.sin()])


def test_a_gpt_heads_steps_are_the_texts_arithmetic(api, models):
    text, layer, head, query = TEXT[:24], 1, 1, 9
    model, idx, attn, x = read_layer(models, "gpt", text, layer)
    d = attn.head_dim
    cols = slice(head * d, (head + 1) * d)
    w = {name: (getattr(attn, name).weight.double(), getattr(attn, name).bias.double())
         for name in ("W_query", "W_key", "W_value")}
    q = x[query] @ w["W_query"][0][cols].T + w["W_query"][1][cols]
    k = x @ w["W_key"][0][cols].T + w["W_key"][1][cols]
    v = x @ w["W_value"][0][cols].T + w["W_value"][1][cols]
    scores = k @ q
    scaled = torch.where(torch.arange(24) <= query, scores / d ** 0.5, torch.tensor(float("-inf"), dtype=torch.float64))
    a = torch.softmax(scaled, 0)
    z = a @ v
    share = attn.out_proj.weight.double()[:, cols] @ z
    steps = api.call("head", {"model": "gpt", "text": text, "layer": layer, "head": head, "query": query})
    assert steps["query_token"] == text[query] and steps["rope"] is None and steps["d_k"] == d
    for key, expected in (("x", x[query]), ("q", q), ("keys", k), ("values", v), ("scores", scores), ("weights", a),
                          ("context", z), ("share", share)):
        assert torch.allclose(torch.tensor(steps[key], dtype=torch.float64), expected, atol=TOL), key
    assert steps["scaled"][query + 1:] == [None] * (23 - query) and steps["allowed"] == [j <= query for j in range(24)]
    with torch.no_grad():
        own = model(idx, return_weights=True).attentions[layer][0, head, query]
    assert torch.allclose(torch.tensor(steps["weights"], dtype=torch.float64), own.double(), atol=1e-6)
    assert max(steps["check"]["weights"], steps["check"]["context"], steps["check"]["out_proj"]) < 1e-6


def test_a_rotary_heads_steps_show_the_turn_and_the_shared_key_value_head(api, models):
    text, layer, head, query = TEXT[:20], 0, 3, 11
    model, _, attn, x = read_layer(models, "modern", text, layer)
    d, group = attn.head_dim, attn.num_heads // attn.num_kv_heads
    base = model.config.rope_base
    raw_q = x[query] @ attn.W_query.weight.double()[head * d:(head + 1) * d].T
    kv = head // group
    raw_k = x @ attn.W_key.weight.double()[kv * d:(kv + 1) * d].T
    keys = torch.stack([rotate(raw_k[j], j, base) for j in range(20)])
    q = rotate(raw_q, query, base)
    steps = api.call("head", {"model": "modern", "text": text, "layer": layer, "head": head, "query": query})
    assert steps["kv_head"] == kv == 1
    assert torch.allclose(torch.tensor(steps["xw"], dtype=torch.float64), raw_q, atol=TOL)
    assert torch.allclose(torch.tensor(steps["rope"]["before"], dtype=torch.float64), raw_q, atol=TOL)
    assert torch.allclose(torch.tensor(steps["q"], dtype=torch.float64), q, atol=TOL)
    assert torch.allclose(torch.tensor(steps["keys"], dtype=torch.float64), keys, atol=TOL)
    angles = query * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    assert torch.allclose(torch.tensor(steps["rope"]["angles"], dtype=torch.float64), angles, atol=1e-5)
    assert torch.allclose(torch.tensor(steps["scores"], dtype=torch.float64), keys @ q, atol=TOL)
    assert steps["check"]["rope"] < 1e-6


def test_a_translation_models_cross_attention_step_by_step(api, models):
    model, vocab = models["s2s"]
    source, target, layer, head, query = "15 juillet 2031", "2031-0", 1, 2, 4
    src = torch.as_tensor(vocab.encode(source))[None]
    tgt = torch.tensor([[1, *vocab.encode(target)]])
    attn = model.decoder_blocks[layer].cross_attn
    seen = {}
    handles = [attn.W_query.register_forward_hook(lambda _m, a, o: seen.__setitem__("x", a[0][0].double())),
               attn.W_key.register_forward_hook(lambda _m, a, o: seen.__setitem__("memory", a[0][0].double()))]
    try:
        with torch.no_grad():
            out = model(src, tgt, return_weights=True)
    finally:
        for h in handles:
            h.remove()
    d = attn.head_dim
    cols = slice(head * d, (head + 1) * d)
    q = seen["x"][query] @ attn.W_query.weight.double()[cols].T + attn.W_query.bias.double()[cols]
    k = seen["memory"] @ attn.W_key.weight.double()[cols].T + attn.W_key.bias.double()[cols]
    a = torch.softmax(k @ q / d ** 0.5, 0)  # no mask: the decoder reads the whole source
    steps = api.call("head", {"model": "s2s", "text": source, "target": target, "layer": layer, "head": head,
                              "query": query, "mode": "cross"})
    assert steps["mode"] == "cross" and steps["query_token"] == target[query - 1] and len(steps["tokens"]) == 15
    assert torch.allclose(torch.tensor(steps["weights"], dtype=torch.float64), a, atol=TOL)
    own = out.cross_attentions[layer][0, head, query].double()
    assert torch.allclose(torch.tensor(steps["weights"], dtype=torch.float64), own, atol=1e-6)
    assert torch.allclose(torch.tensor(steps["q"], dtype=torch.float64), q, atol=TOL)


def test_the_encoders_steps_read_cls_and_sep(bert_api, bert):
    steps = bert_api.call("head", {"text": "I love learning AI", "layer": 2, "head": 5, "query": 2})
    assert steps["tokens"][0] == "[CLS]" and steps["tokens"][-1] == "[SEP]" and all(steps["allowed"])
    assert sum(steps["weights"]) == pytest.approx(1.0, abs=1e-9)
    assert max(steps["check"]["weights"], steps["check"]["context"], steps["check"]["out_proj"]) < 1e-5
