import math

import torch

from attnlab.demo.toy import PAD, SENTENCES, ToyAttention, save_toy_heatmaps, token_ids, train_toy


def test_forward_equals_the_formula():
    """softmax(Q Kᵀ / √d) V, then out_proj: computed by hand from the layer's own matrices."""
    torch.manual_seed(0)
    toy = ToyAttention()
    ids = token_ids()
    out, x, w = toy(ids)
    a = toy.attention
    q, k, v = a.W_query(x), a.W_key(x), a.W_value(x)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(16), dim=-1)
    torch.testing.assert_close(w, weights, rtol=0, atol=1e-6)
    torch.testing.assert_close(out, a.out_proj(weights @ v), rtol=0, atol=1e-6)


def test_the_padding_key_gets_zero_weight_only_when_masked():
    plain, masked = train_toy(False, epochs=20), train_toy(True, epochs=20)
    pad_col = SENTENCES[1].index("<PAD>")
    assert torch.all(masked.weights[1, :, pad_col] == 0)
    assert torch.all(plain.weights[1, :, pad_col] > 0)
    for r in (plain, masked):
        torch.testing.assert_close(r.weights.sum(-1), torch.ones(2, 4), rtol=0, atol=1e-6)
    assert token_ids()[1, pad_col] == PAD


def test_loss_falls_and_is_logged_every_20_epochs():
    logged = []
    result = train_toy(False, log=lambda e, v: logged.append((e, v)))
    assert [e for e, _ in logged] == list(range(20, 201, 20))
    assert [v for _, v in logged] == [result.losses[e - 1] for e, _ in logged]
    assert result.losses[-1] < 0.5 * result.losses[0]


def test_seeded_and_repeatable():
    a, b = train_toy(True, seed=5, epochs=30), train_toy(True, seed=5, epochs=30)
    assert a.losses == b.losses and torch.equal(a.weights, b.weights)
    assert train_toy(True, seed=6, epochs=30).losses != a.losses


def test_heatmaps_are_written(tmp_path, monkeypatch):
    results = [train_toy(False, epochs=2), train_toy(True, epochs=2)]
    paths = save_toy_heatmaps(results, tmp_path)
    assert [p.name for p in paths] in (
        ["toy_unmasked_1.png", "toy_unmasked_2.png", "toy_masked_1.png", "toy_masked_2.png"],
        ["toy_attention.png"],  # no CJK font installed: one grid, English glosses
    )
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_heatmaps_without_a_cjk_font_use_glosses(tmp_path, monkeypatch):
    import attnlab.demo.toy

    def no_font(text):
        raise ImportError("no font")

    monkeypatch.setattr(attnlab.demo.toy, "require_glyphs", no_font)
    paths = save_toy_heatmaps([train_toy(True, epochs=2)], tmp_path)
    assert [p.name for p in paths] == ["toy_attention.png"] and paths[0].stat().st_size > 1000
