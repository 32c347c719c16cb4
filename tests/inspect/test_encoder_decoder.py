import pytest
import torch

from attnlab.generation.translation import Translation, translate
from attnlab.inspect.encoder_decoder import capture_translation


@pytest.fixture(scope="module")
def cap_and_ids(dates_run):
    _, model, vocab = dates_run
    # this briefly trained model may write until it runs out of room: keep the first 12 ids, a translation that
    # ended (test_a_translation_that_never_ended covers the other kind)
    out = translate(model, vocab, ["5 mars 2021"])[0]
    out = Translation(source=out.source, target=vocab.decode(out.ids[:12]), ids=out.ids[:12])
    return capture_translation(model, vocab, "5 mars 2021", out.ids), out, model, vocab


def test_the_capture_holds_the_models_own_weights(cap_and_ids):
    cap, out, model, vocab = cap_and_ids
    src = torch.tensor([vocab.encode("5 mars 2021")])
    tgt = torch.tensor([[1, *out.ids]])
    with torch.no_grad():
        ref = model(src, tgt, return_weights=True)
    for mine, theirs in ((cap.encoder, ref.encoder_attentions), (cap.decoder, ref.decoder_attentions),
                         (cap.cross, ref.cross_attentions)):
        assert len(mine) == len(theirs) and all(torch.equal(a, b[0]) for a, b in zip(mine, theirs, strict=True))


def test_shapes_labels_and_rows(cap_and_ids):
    cap, out, model, _ = cap_and_ids
    s, t, h = len("5 mars 2021"), len(out.ids) + 1, model.config.num_heads
    assert cap.source_tokens == list("5␣mars␣2021") and cap.target_tokens == [*out.target, "<eos>"]
    assert [tuple(w.shape) for w in cap.cross] == [(h, t, s)] * model.config.num_decoder_layers
    assert [tuple(w.shape) for w in cap.encoder] == [(h, s, s)] * model.config.num_encoder_layers
    for maps in (cap.encoder, cap.decoder, cap.cross):
        for w in maps:
            torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5, rtol=0)


def test_a_translation_that_never_ended(dates_run):
    _, model, vocab = dates_run
    most = model.config.context_length - 1
    ids = [vocab.encode("1")[0]] * (most + 5)  # more ids than <bos> + ids can hold
    cap = capture_translation(model, vocab, "5 mars 2021", ids)
    assert cap.target_tokens == ["1"] * most + ["…"] and cap.cross[0].shape[1] == most + 1


def test_decoder_self_attention_is_causal_and_square_modes_are_captures(cap_and_ids):
    cap = cap_and_ids[0]
    dec = cap.as_capture("decoder")
    assert dec.is_causal and dec.tokens == cap.target_tokens
    assert all(torch.equal(w.triu(1), torch.zeros_like(w)) for w in dec.attentions)
    assert cap.as_capture("encoder").tokens == cap.source_tokens
    with pytest.raises(ValueError, match="cross-attention is not square"):
        cap.as_capture("cross")
    with pytest.raises(ValueError, match=r"layer must be in 0..1 \(2 cross-attention"):
        cap.check_layer_head("cross", 2)


def test_explain_cross_is_the_models_own_cross_attention(cap_and_ids):
    from attnlab.inspect.encoder_decoder import explain_cross

    cap, out, model, vocab = cap_and_ids
    e = explain_cross(model, vocab, "5 mars 2021", out.ids, query=1, layer=1, head=1)
    assert e.tokens == cap.source_tokens and e.query_tokens == cap.target_tokens and e.query_index == 1
    assert e.max_abs_diff_weights < 1e-6 and e.max_abs_diff_context < 1e-5
    torch.testing.assert_close(e.weights.float(), cap.cross[1][1, 1], atol=1e-6, rtol=0)
    # independently: the layer's own projections of the decoder state and the encoder output
    attn = model.decoder_blocks[1].cross_attn
    d = attn.head_dim
    k = attn.W_key(e.inputs.float())[:, d: 2 * d]
    torch.testing.assert_close(k.double(), e.keys, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.softmax(e.keys @ e.query / d**0.5, 0), e.weights, atol=1e-12, rtol=0)
    assert e.to_dict()["query_tokens"] == cap.target_tokens


def test_explain_cross_bad_step_layer_head(cap_and_ids):
    from attnlab.inspect.encoder_decoder import explain_cross

    _, out, model, vocab = cap_and_ids
    with pytest.raises(ValueError, match=r"query index must be in 0\.\."):
        explain_cross(model, vocab, "5 mars 2021", out.ids, query=99)
    with pytest.raises(ValueError, match=r"layer must be in 0..1 \(2 decoder layers\), got 2"):
        explain_cross(model, vocab, "5 mars 2021", out.ids, layer=2)
    with pytest.raises(ValueError, match=r"head must be in 0..1 \(2 heads\), got 2"):
        explain_cross(model, vocab, "5 mars 2021", out.ids, head=2)
