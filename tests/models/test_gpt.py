import pytest
import torch
import torch.nn.functional as F

from attnlab.models import GPT, CausalLMOutput, GPTConfig
from references import torch_block


def small(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, num_layers=2, num_heads=4,
                                   qkv_bias=True), **kw})).eval()


def reference_forward(model: GPT, idx):
    """The same GPT assembled from torch modules: pre-LN nn.TransformerEncoderLayer with a causal mask."""
    c = model.config
    x = F.embedding(idx, model.tok_emb.weight) + model.pos_emb.weight[: idx.shape[1]]
    mask = torch.ones(idx.shape[1], idx.shape[1], dtype=torch.bool).triu(1)
    for block in model.blocks:
        layer = torch_block(block, "pre", lambda t: F.gelu(t, approximate="tanh"))
        with torch.no_grad():
            x = layer(x, src_mask=mask, is_causal=True)
    x = F.layer_norm(x, (c.d_model,), model.ln_f.weight, model.ln_f.bias, c.layer_norm_eps)
    return x @ model.tok_emb.weight.T


def test_forward_equals_torch_assembly():
    model = small()
    idx = torch.randint(0, 50, (3, 16))
    with torch.no_grad():
        torch.testing.assert_close(model(idx).logits, reference_forward(model, idx), atol=1e-5, rtol=0)


def test_return_weights():
    model = small()
    idx = torch.randint(0, 50, (2, 9))
    out = model(idx, return_weights=True)
    assert isinstance(out, CausalLMOutput) and out.loss is None
    torch.testing.assert_close(out.logits, model(idx).logits, atol=1e-5, rtol=0)
    assert len(out.attentions) == 2
    for w in out.attentions:
        assert w.shape == (2, 4, 9, 9)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 9), atol=1e-6, rtol=0)
        assert torch.all(w.triu(diagonal=1) == 0)


def test_causal_prefix_does_not_see_future():
    model = small()
    idx = torch.randint(0, 50, (1, 12))
    other = idx.clone()
    other[0, 8:] = (other[0, 8:] + 1) % 50
    torch.testing.assert_close(model(idx).logits[:, :8], model(other).logits[:, :8], atol=1e-6, rtol=0)


def test_weight_tying_and_init():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("baby"))
    assert model.head.weight is model.tok_emb.weight
    assert abs(model.tok_emb.weight.std().item() - 0.02) < 2e-3
    assert abs(model.blocks[0].ff.linear1.weight.std().item() - 0.02) < 2e-3
    assert abs(model.blocks[0].attn.out_proj.weight.std().item() - 0.02 / (2 * 4) ** 0.5) < 1e-3
    assert model.blocks[0].norm == "pre"


def test_trains_a_step():
    model = small().train()
    idx = torch.randint(0, 50, (4, 16))
    out = model(idx[:, :-1], targets=idx[:, 1:])
    loss = F.cross_entropy(out.logits.flatten(0, 1), idx[:, 1:].flatten())
    torch.testing.assert_close(out.loss, loss, atol=1e-6, rtol=0)
    assert abs(loss.item() - torch.log(torch.tensor(50.0)).item()) < 0.2  # near uniform at init
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize(("idx", "err", "match"), [
    (torch.tensor([[1, 50]]), ValueError, r"token ids must be in \[0, vocab_size=50\)"),
    (torch.tensor([[-1, 2]]), ValueError, "min -1"),
    (torch.zeros(1, 17, dtype=torch.long), ValueError, "exceed context_length=16"),
    (torch.zeros(1, 3), TypeError, "integer token ids"),
    (torch.zeros(3, dtype=torch.long), ValueError, r"shape \(B, T\)"),
])
def test_bad_input(idx, err, match):
    with pytest.raises(err, match=match):
        small()(idx)


def test_bad_config_type():
    with pytest.raises(TypeError, match="GPTConfig"):
        GPT({"vocab_size": 5})


@pytest.mark.parametrize("keep", [1, 3, 16])
def test_logits_to_keep_gives_the_last_positions_logits(keep):
    """What a decoding loop's prompt asks for: the last positions' logits only, equal to those of every position's
    (to rounding: the head multiplies fewer rows), with or without a cache."""
    model, idx = small(), torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        every = model(idx).logits
        kept = model(idx, logits_to_keep=keep).logits
        cached = model(idx[:, -4:], kv_cache=_filled(model, idx[:, :-4]), logits_to_keep=1).logits
    assert kept.shape == (2, keep, 50)
    torch.testing.assert_close(kept, every[:, -keep:], atol=1e-5, rtol=0)
    torch.testing.assert_close(cached, every[:, -1:], atol=1e-5, rtol=0)


def _filled(model, idx):
    cache = model.new_cache(idx.shape[0])
    model(idx, kv_cache=cache)
    return cache


@pytest.mark.parametrize(("keep", "targets", "match"), [
    (-1, False, r"logits_to_keep must be an int >= 0 \(0: every position\), got -1"),
    (True, False, "logits_to_keep must be an int >= 0"),
    (1.0, False, "got 1.0"),
    (1, True, "logits_to_keep=1 keeps only the last positions' logits, and the loss over targets"),
])
def test_logits_to_keep_bad_values(keep, targets, match):
    model, idx = small(), torch.randint(0, 50, (2, 8))
    with pytest.raises(ValueError, match=match):
        model(idx, targets=idx if targets else None, logits_to_keep=keep)
