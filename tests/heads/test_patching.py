"""Activation patching's laws on every kind of model, against hooks written out by hand; the model left as found."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.heads import patching
from attnlab.heads.attribution import attribute_heads
from attnlab.heads.logit_attribution import answer_direction, logit_attribution
from attnlab.heads.patching import Patch, baselines, patch_heads, patch_residual, run_patched
from attnlab.heads.path_patching import path_patch
from attnlab.heads.sites import SITES
from patching_models import KINDS, VOCAB, inputs, logit_difference, make

TOL = 1e-5
MODELS = {kind: make(kind) for kind in KINDS}


def metric_of(model, x):
    with torch.no_grad():
        return float(logit_difference(model(*x).logits if isinstance(x, tuple) else model(x).logits))


@settings(max_examples=20)
@given(st.sampled_from(KINDS), st.sampled_from(SITES), st.sampled_from(("all", "each")), st.integers(0, 2**16))
def test_patching_a_run_into_itself_changes_nothing(kind, site, positions, seed):
    model = MODELS[kind]
    clean, _ = inputs(kind, seed)
    got = patch_heads(model, clean, clean, logit_difference, positions=positions, site=site)
    torch.testing.assert_close(got, torch.full_like(got, metric_of(model, clean)), atol=TOL, rtol=0)


@settings(max_examples=20)
@given(st.sampled_from(("gpt", "modern", "attention-only")), st.integers(0, 1), st.sampled_from(SITES),
       st.integers(0, 2**16))
def test_every_head_and_the_residual_at_once_give_the_clean_metric(kind, layer, site, seed):
    """The residual stream before ``layer`` at every position, and every head of every layer at ``site``: the run
    is the clean one, whatever the layer and the site (the heads before ``layer`` were already corrupted)."""
    model = MODELS[kind]
    clean, corrupt = inputs(kind, seed)
    heads = model.config.num_kv_heads if kind == "modern" and site in ("key", "value") else model.config.num_heads
    patches = [Patch(layer, None, "residual")] + [Patch(lay, h, site) for lay in range(2) for h in range(heads)]
    got = run_patched(model, clean, corrupt, logit_difference, patches)
    assert abs(float(got) - metric_of(model, clean)) < TOL
    assert abs(metric_of(model, clean) - metric_of(model, corrupt)) > 0.01


@settings(max_examples=10)
@given(st.integers(0, 2**16))
def test_a_translation_model_reads_the_source_only_through_its_cross_attention_keys_and_values(seed):
    """The targets agree, so with every cross-attention key and value from the clean run the decoder computes the
    clean run; with the keys alone (or the values alone) it does not."""
    model = MODELS["translation"]
    clean, corrupt = inputs("translation", seed)
    every = [Patch(layer, None, site) for layer in range(2) for site in ("key", "value")]
    assert abs(float(run_patched(model, clean, corrupt, logit_difference, every)) - metric_of(model, clean)) < TOL
    keys = [p for p in every if p.site == "key"]
    assert abs(float(run_patched(model, clean, corrupt, logit_difference, keys)) - metric_of(model, clean)) > 1e-4


def by_hand(model, clean, corrupt, layer, head, site, position=None):
    """The same patch with hooks written out here: the head's slice of the module's tensor replaced."""
    attn = model.blocks[layer].attn
    module = {"output": attn.out_proj, "query": attn.W_query, "key": attn.W_key, "value": attn.W_value}[site]
    width = attn.head_dim
    where = slice(None) if position is None else position
    kept = {}

    def keep(t):
        kept["t"] = t.detach()

    if site == "output":
        hook = module.register_forward_pre_hook(lambda m, a: keep(a[0]))
    else:
        hook = module.register_forward_hook(lambda m, a, out: keep(out))
    with torch.no_grad():
        model(clean)
    hook.remove()

    def put(t):
        t = t.clone()
        t[:, where, head * width:(head + 1) * width] = kept["t"][:, where, head * width:(head + 1) * width]
        return t

    if site == "output":
        hook = module.register_forward_pre_hook(lambda m, a: (put(a[0]),))
    else:
        hook = module.register_forward_hook(lambda m, a, out: put(out))
    with torch.no_grad():
        value = float(logit_difference(model(corrupt).logits))
    hook.remove()
    return value


@pytest.mark.parametrize("site", SITES)
def test_patch_heads_equals_hooks_by_hand_with_grouped_key_value_heads(site):
    """A ModernDecoder of 4 query heads over 2 key/value heads: the key and value sites have 2 heads."""
    model = MODELS["modern"]
    clean, corrupt = inputs("modern", 1)
    got = patch_heads(model, clean, corrupt, logit_difference, site=site)
    heads = 2 if site in ("key", "value") else 4
    assert got.shape == (2, heads)
    expected = torch.tensor([[by_hand(model, clean, corrupt, lay, h, site) for h in range(heads)] for lay in range(2)])
    torch.testing.assert_close(got, expected, atol=TOL, rtol=0)
    each = patch_heads(model, clean, corrupt, logit_difference, positions="each", site=site)
    assert each.shape == (2, heads, 7)
    assert abs(float(each[1, 1, 3]) - by_hand(model, clean, corrupt, 1, 1, site, 3)) < TOL


def test_a_key_patched_before_rope_is_the_key_patched_after_it():
    """RoPE turns the keys after ``W_key`` by the position alone, so the head's rotated keys from the clean run (taken
    where the rotation returns them) give the same metric as its projection from the clean run."""
    model = MODELS["modern"]
    clean, corrupt = inputs("modern", 2)
    rotary, layer, head = model.blocks[1].attn.rotary, 1, 0
    apply, calls, kept = rotary.apply, [], []

    def recording(q, k, positions):
        q, k = apply(q, k, positions)
        calls.append(None)
        if len(calls) == layer + 1:
            kept.append(k.detach())
        return q, k

    def replacing(q, k, positions):
        q, k = apply(q, k, positions)
        calls.append(None)
        if len(calls) == layer + 1:
            k = k.clone()
            k[:, head] = kept[0][:, head]  # (B, kv heads, T, hd)
        return q, k

    with torch.no_grad():
        rotary.apply = recording
        model(clean)
        calls.clear()
        rotary.apply = replacing
        after = float(logit_difference(model(corrupt).logits))
    del rotary.apply
    before = float(patch_heads(model, clean, corrupt, logit_difference, site="key")[layer, head])
    assert abs(before - after) < TOL
    assert abs(after - metric_of(model, corrupt)) > 1e-3


def test_chunked_passes_give_what_one_pass_gives(monkeypatch):
    model = MODELS["gpt"]
    clean, corrupt = inputs("gpt", 3)
    whole = patch_heads(model, clean, corrupt, logit_difference, positions="each")
    monkeypatch.setattr(patching, "PASS_BYTES", 1)  # one patch a pass
    torch.testing.assert_close(patch_heads(model, clean, corrupt, logit_difference, positions="each"), whole,
                               atol=TOL, rtol=0)


def test_patch_residual_before_the_first_layer_at_every_position_is_the_clean_run():
    model = MODELS["gpt"]
    clean, corrupt = inputs("gpt", 4)
    residual = patch_residual(model, clean, corrupt, logit_difference)
    assert residual.shape == (2, 7)
    # the last position's stream before the last layer carries everything the last prediction reads from layer 1 on
    # only if attention cannot look elsewhere: it can, so the values lie between the two runs' (not a law); but the
    # whole stream at once is the clean run
    whole = run_patched(model, clean, corrupt, logit_difference, [Patch(1, None, "residual")])
    assert abs(float(whole) - metric_of(model, clean)) < TOL
    clean_value, corrupt_value = baselines(model, clean, corrupt, logit_difference)
    assert clean_value == pytest.approx(metric_of(model, clean)) and corrupt_value == pytest.approx(
        metric_of(model, corrupt))


def test_layers_limits_the_rows_measured():
    model = MODELS["attention-only"]
    clean, corrupt = inputs("attention-only", 5)
    got = patch_heads(model, clean, corrupt, logit_difference, layers=[1])
    assert torch.isnan(got[0]).all()
    torch.testing.assert_close(got[1], patch_heads(model, clean, corrupt, logit_difference)[1], atol=TOL, rtol=0)


def test_attribution_each_position_sums_to_all_positions():
    model = MODELS["modern"]
    clean, corrupt = inputs("modern", 6)
    for site in SITES:
        every = attribute_heads(model, clean, corrupt, logit_difference, site=site)
        each = attribute_heads(model, clean, corrupt, logit_difference, site=site, positions="each")
        torch.testing.assert_close(each.sum(-1), every, atol=TOL, rtol=0)


def test_path_patching_into_a_cross_attentions_keys_is_the_corrupted_run():
    """The memory does not depend on the decoder's heads: no sender reaches a cross-attention's keys or values."""
    model = MODELS["translation"]
    clean, corrupt = inputs("translation", 7)
    got = path_patch(model, clean, corrupt, logit_difference, (0, 1), site="value")
    torch.testing.assert_close(got[1], torch.full((4,), metric_of(model, corrupt)), atol=TOL, rtol=0)
    through_queries = path_patch(model, clean, corrupt, logit_difference, (0, 1), site="query")
    assert (through_queries[1] - metric_of(model, corrupt)).abs().max() > 1e-4


def state(model):
    """Everything a call could leave behind: weights (bit for bit), train flags, requires_grad, grads, hooks."""
    hooks = [(name, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
             for name, m in model.named_modules()]
    return ({k: v.clone() for k, v in model.state_dict().items()}, [m.training for m in model.modules()],
            [(p.requires_grad, p.grad) for p in model.parameters()], hooks)


def same_state(a, b):
    assert a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])
    assert a[1:] == b[1:]


CALLS = {
    "patch_heads": lambda m, c, x, metric: patch_heads(m, c, x, metric, positions="each", site="key"),
    "patch_residual": patch_residual,
    "run_patched": lambda m, c, x, metric: run_patched(m, c, x, metric, [Patch(0, 1), Patch(1, None, "residual")]),
    "path_patch": lambda m, c, x, metric: path_patch(m, c, x, metric, (0, 0), site="query"),
    "attribute_heads": lambda m, c, x, metric: attribute_heads(m, c, x, metric, site="value"),
    "logit_attribution": lambda m, c, x, metric: (metric(m(c).logits), logit_attribution(
        m, c, answer_direction(VOCAB, [5] * 3, [7] * 3))),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("kind", ["gpt", "modern"])
def test_the_model_is_left_as_it_was_found_when_a_call_returns_or_raises(call, kind):
    model = make(kind, seed=8)
    model.blocks[1].train()  # a mixed model: its flags come back as they were, module by module
    model.tok_emb.weight.requires_grad_(False)
    clean, corrupt = inputs(kind, 8)
    before = state(model)
    CALLS[call](model, clean, corrupt, logit_difference)
    same_state(before, state(model))

    def fails(logits):
        raise RuntimeError("metric failed")

    with pytest.raises(RuntimeError, match="metric failed"):
        CALLS[call](model, clean, corrupt, fails)
    same_state(before, state(model))
    passes = []

    def bomb(module, args):  # the model itself fails in its second pass, with the call's hooks in place
        passes.append(None)
        if len(passes) == 2:
            raise RuntimeError("the block failed")

    handle = model.blocks[1].register_forward_pre_hook(bomb)
    armed = state(model)
    with pytest.raises(RuntimeError, match="the block failed"):
        CALLS[call](model, clean, corrupt, logit_difference)
    same_state(armed, state(model))
    handle.remove()


def test_transformer_lens_is_a_reference_of_the_tests_only():
    """No module of attnlab imports it; pyproject lists it in the dev extra alone."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert not [p for p in (root / "src").rglob("*.py") if "transformer_lens" in p.read_text(encoding="utf-8")]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {name for name, deps in project["optional-dependencies"].items()
              if any(d.startswith("transformer-lens") for d in deps)}
    assert extras == {"dev"} and not any(d.startswith("transformer-lens") for d in project["dependencies"])
