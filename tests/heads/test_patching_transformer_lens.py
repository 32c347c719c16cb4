"""Patching, attribution and direct logit attribution against TransformerLens (4.x, through ``TransformerBridge``):
one random GPT-2 written by transformers' ``save_pretrained``, loaded by attnlab's ``load_causal_lm`` and booted by
TransformerLens, the metric a logit difference. TransformerLens is a test dependency only (the ``dev`` extra)."""

from __future__ import annotations

import pytest
import torch

from attnlab.heads.attribution import attribute_heads
from attnlab.heads.logit_attribution import answer_direction, logit_attribution
from attnlab.heads.patching import patch_heads, patch_residual
from attnlab.heads.path_patching import path_patch
from hf_checkpoints import VOCAB, write_checkpoint

tl_patching = pytest.importorskip("transformer_lens.patching", reason="needs transformer-lens (the dev extra)")
TransformerBridge = pytest.importorskip("transformer_lens.model_bridge").TransformerBridge

TOL = 1e-5
SITES = {"output": "z", "query": "q", "key": "k", "value": "v"}
TL_NAMES = {"output": "out", "query": "q", "key": "k", "value": "v"}
RIGHT, WRONG = torch.tensor([5, 17, 40]), torch.tensor([7, 3, 250])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from attnlab.pretrained import load_causal_lm

    directory = tmp_path_factory.mktemp("gpt2")
    write_checkpoint("gpt2", directory, seed=3)
    ours, _ = load_causal_lm(directory)
    bridge = TransformerBridge.boot_transformers(str(directory), device="cpu")
    bridge.eval()
    return ours, bridge


@pytest.fixture(scope="module")
def runs():
    g = torch.Generator().manual_seed(11)
    clean = torch.randint(0, VOCAB, (3, 9), generator=g)
    corrupt = clean.clone()
    corrupt[:, :-1] = torch.randint(0, VOCAB, (3, 8), generator=g)  # all but the last token re-drawn
    return clean, corrupt


def logit_difference(logits):
    rows = torch.arange(logits.shape[0])
    return (logits[rows, -1, RIGHT] - logits[rows, -1, WRONG]).mean()


def test_the_two_models_compute_the_same_logits(models, runs):
    ours, bridge = models
    with torch.no_grad():
        torch.testing.assert_close(ours(runs[0]).logits, bridge(runs[0]), atol=TOL, rtol=0)
        assert abs(float(logit_difference(ours(runs[0]).logits) - logit_difference(ours(runs[1]).logits))) > 0.2


@pytest.mark.parametrize("positions", ["all", "each"])
@pytest.mark.parametrize("site", list(SITES))
def test_patch_heads_equals_transformer_lens(models, runs, site, positions):
    """Every position at once (``..._all_pos``) and one at a time (``..._by_pos``, whose result is ``(L, T, H)``)."""
    ours, bridge = models
    clean, corrupt = runs
    _, cache = bridge.run_with_cache(clean)
    which = "all" if positions == "all" else "by"
    sweep = getattr(tl_patching, f"get_act_patch_attn_head_{TL_NAMES[site]}_{which}_pos")
    theirs = sweep(bridge, corrupt, cache, logit_difference).float()
    got = patch_heads(ours, clean, corrupt, logit_difference, positions=positions, site=site)
    torch.testing.assert_close(got, theirs if positions == "all" else theirs.permute(0, 2, 1), atol=TOL, rtol=0)
    assert got.std() > 0.01  # the heads (and positions) differ: not a comparison of constants


def test_patch_residual_equals_transformer_lens(models, runs):
    ours, bridge = models
    clean, corrupt = runs
    _, cache = bridge.run_with_cache(clean)
    theirs = tl_patching.get_act_patch_resid_pre(bridge, corrupt, cache, logit_difference)
    torch.testing.assert_close(patch_residual(ours, clean, corrupt, logit_difference), theirs.float(), atol=TOL,
                               rtol=0)


@pytest.mark.parametrize("site", list(SITES))
def test_attribute_heads_equals_the_formula_through_transformer_lens_hooks(models, runs, site):
    """Σ (clean − corrupted) · ∂metric/∂activation at the corrupted run, the gradient read off TransformerLens's own
    hook points (``retain_grad`` on the activation each hook sees)."""
    ours, bridge = models
    clean, corrupt = runs
    name = SITES[site]
    _, cache = bridge.run_with_cache(clean)
    seen = {}

    def keep(point):  # the bridge's hook_z is an alias: hook.name is the point it stands for
        def hook(activation, hook):
            activation.retain_grad()
            seen[point] = activation
            return activation
        return hook

    points = [f"blocks.{layer}.attn.hook_{name}" for layer in range(bridge.cfg.n_layers)]
    hooks = [(point, keep(point)) for point in points]
    logit_difference(bridge.run_with_hooks(corrupt, fwd_hooks=hooks)).backward()
    bridge.zero_grad(set_to_none=True)
    theirs = torch.stack([((cache[n] - seen[n].detach()) * seen[n].grad).sum(dim=(0, 1, 3)) for n, _ in hooks])
    torch.testing.assert_close(attribute_heads(ours, clean, corrupt, logit_difference, site=site), theirs, atol=TOL,
                               rtol=0)
    each = attribute_heads(ours, clean, corrupt, logit_difference, site=site, positions="each")  # (L, H, T)
    per_position = torch.stack([((cache[n] - seen[n].detach()) * seen[n].grad).sum(dim=(0, 3)).T for n, _ in hooks])
    torch.testing.assert_close(each, per_position, atol=TOL, rtol=0)


def test_path_patching_equals_the_same_two_runs_through_transformer_lens_hooks(models, runs):
    """The sender's clean output with every other head held at the corrupted run's (TransformerLens's ``hook_z``),
    the receivers' keys recorded; then each receiver's key alone put into the corrupted run."""
    ours, bridge = models
    clean, corrupt = runs
    sender = (0, 2)
    _, clean_cache = bridge.run_with_cache(clean)
    _, corrupt_cache = bridge.run_with_cache(corrupt)

    def hold(activation, hook):
        layer = int(hook.name.split(".")[1])
        held = corrupt_cache[hook.name].clone()
        if layer == sender[0]:
            held[:, :, sender[1]] = clean_cache[hook.name][:, :, sender[1]]
        return held

    holds = [(f"blocks.{layer}.attn.hook_z", hold) for layer in range(bridge.cfg.n_layers)]
    sent = {}
    keeps = [("blocks.1.attn.hook_k", lambda a, hook: sent.setdefault("k", a.detach()))]
    with torch.no_grad():
        bridge.run_with_hooks(corrupt, fwd_hooks=holds + keeps)
        theirs = []
        for head in range(bridge.cfg.n_heads):
            def put(activation, hook, head=head):
                activation = activation.clone()
                activation[:, :, head] = sent["k"][:, :, head]
                return activation

            theirs.append(logit_difference(bridge.run_with_hooks(corrupt, fwd_hooks=[("blocks.1.attn.hook_k", put)])))
    got = path_patch(ours, clean, corrupt, logit_difference, sender, site="key")
    assert torch.isnan(got[0]).all()
    torch.testing.assert_close(got[1], torch.stack(theirs).float(), atol=TOL, rtol=0)
    with torch.no_grad():
        corrupted = logit_difference(ours(corrupt).logits)
    assert (got[1] - corrupted).abs().max() > 0.01  # the path carries something: not the corrupted run itself


def test_direct_logit_attribution_sums_to_the_logit_difference_and_equals_transformer_lens(models, runs):
    """The parts sum to the logit difference, and each equals the same decomposition of TransformerLens's cached
    activations: its heads' results (``stack_head_results``), embeddings, MLP outputs and ``b_O``, centred and
    divided by ``ln_final.hook_scale`` (``apply_ln_to_stack``), times the final norm's gain, onto W_U's answer
    direction."""
    ours, bridge = models
    clean = runs[0]
    found = logit_attribution(ours, clean, answer_direction(VOCAB, RIGHT, WRONG))
    with torch.no_grad():
        difference = logit_difference(ours(clean).logits)
    assert abs(float(found.total - difference)) < TOL
    assert abs(float(found.sum() - difference)) < TOL

    _, cache = bridge.run_with_cache(clean)
    direction = bridge.W_U[:, RIGHT] - bridge.W_U[:, WRONG]  # (D, B)

    def readout(stack):  # (N, B, D) at the last position -> (N,)
        normed = cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1) * bridge.ln_final.w
        return torch.einsum("nbd,db->nb", normed, direction).mean(dim=1)

    with torch.no_grad():
        heads = readout(cache.stack_head_results(layer=-1, pos_slice=-1)).reshape(bridge.cfg.n_layers, -1)
        parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
        by_label = dict(zip(labels, readout(parts), strict=True))
        biases = readout(bridge.b_O[:, None].expand(-1, clean.shape[0], -1))
        norm_bias = (bridge.ln_final.b @ direction).mean()
    torch.testing.assert_close(found.heads, heads, atol=TOL, rtol=0)
    torch.testing.assert_close(found.parts["embeddings"], by_label["embed"] + by_label["pos_embed"], atol=TOL, rtol=0)
    torch.testing.assert_close(found.parts["feed-forward"],
                               torch.stack([by_label[f"{layer}_mlp_out"] for layer in range(bridge.cfg.n_layers)]),
                               atol=TOL, rtol=0)
    torch.testing.assert_close(found.parts["attention biases"], biases, atol=TOL, rtol=0)
    torch.testing.assert_close(found.parts["final norm bias"], norm_bias, atol=TOL, rtol=0)
    assert found.heads.abs().max() > 0.05
