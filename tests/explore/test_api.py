"""The explorer's API against the models themselves: every number it answers is the model's forward pass, the loss on
the text is its cross-entropy, and the next token's probabilities are what ``generate`` samples from, checked against
softmax(logits / T) after top-k and top-p written out here in plain Python."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from attnlab.explore.arrays import decoded
from attnlab.explore.checks import MAX_TEXT, ApiError
from attnlab.explore.next_token import Sampling, probabilities
from explore_reference import TEXT, assert_refused, reference_probs

TOL = 1e-6


def ids_of(tokenizer, text):
    return torch.as_tensor(tokenizer.encode(text), dtype=torch.long)[None]


@pytest.mark.parametrize("name", ["gpt", "modern", "windowed"])
def test_forward_gives_the_models_own_attention_tokens_and_loss(api, models, name):
    model, tok = models[name]
    answer = api.call("forward", {"model": name, "text": TEXT[:30]})
    idx = ids_of(tok, TEXT[:30])
    with torch.no_grad():
        out = model(idx, return_weights=True)
        loss = model(idx[:, :-1], targets=idx[:, 1:]).loss  # the last token is not read: a causal model's loss
    assert answer["ids"] == idx[0].tolist() and answer["tokens"] == list(TEXT[:30])
    shown = torch.tensor(answer["attentions"])
    assert shown.shape == (model.config.num_layers, model.config.num_heads, 30, 30)
    assert torch.allclose(shown, torch.stack([a[0] for a in out.attentions]), atol=TOL, rtol=0)
    assert answer["loss"] == pytest.approx(float(loss), abs=1e-5)
    probs = torch.softmax(out.logits[0, -1].double(), -1)  # generate's defaults: T = 1, no top-k, no top-p
    assert answer["settings"] == {"temperature": 1.0, "top_k": None, "top_p": None}
    assert [n["id"] for n in answer["next_tokens"]] == probs.argsort(descending=True)[:10].tolist()
    assert [n["prob"] for n in answer["next_tokens"]] == pytest.approx(probs.sort(descending=True).values[:10]
                                                                        .tolist(), abs=TOL)
    assert answer["kept"] == model.config.vocab_size and answer["cropped"] is None


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [
    (1.0, None, None), (0.8, None, None), (1.7, 5, None), (0.5, None, 0.3), (1.0, 3, 0.9), (0.0, None, None),
    (0.3, 1, None), (2.0, 50, 0.05)])
def test_the_sliders_equal_softmax_of_logits_over_t_after_top_k_and_top_p(api, models, temperature, top_k, top_p):
    model, tok = models["gpt"]
    with torch.no_grad():
        logits = model(ids_of(tok, TEXT)).logits[0, -1].tolist()
    answer = api.call("forward", {"model": "gpt", "text": TEXT, "temperature": temperature, "top_k": top_k,
                                  "top_p": top_p, "top": 100, "detail": None})
    expected = reference_probs(logits, temperature, top_k, top_p)
    shown = {n["id"]: n["prob"] for n in answer["next_tokens"]}
    assert set(shown) == {i for i, p in enumerate(expected) if p > 0}
    assert all(abs(shown[i] - expected[i]) <= TOL for i in shown)
    assert answer["kept"] == len(shown)
    assert "attentions" not in answer  # the page's slider asks for the probabilities alone


def near_the_top_p_boundary(logits: list[float], temperature: float, top_k: int | None, top_p: float | None) -> bool:
    """Whether some token's mass-before sits within float32 rounding of top_p (float32 and float64 may then keep a
    different set, both right)."""
    if top_p is None or temperature == 0:
        return False
    probs = sorted(reference_probs(logits, temperature, top_k, None), reverse=True)
    before = 0.0
    for p in probs:
        if abs(before - top_p) < 1e-4:
            return True
        before += p
    return False


@given(logits=st.lists(st.floats(-20, 20), min_size=2, max_size=40),
       temperature=st.sampled_from([0.0, 0.1, 0.7, 1.0, 3.0]), top_k=st.one_of(st.none(), st.integers(1, 45)),
       top_p=st.one_of(st.none(), st.floats(0.01, 1.0)))
def test_probabilities_are_what_sampling_draws_from(logits, temperature, top_k, top_p):
    as_float32 = torch.tensor(logits).tolist()
    assume(not near_the_top_p_boundary(as_float32, temperature, top_k, top_p))
    probs = probabilities(torch.tensor(logits), Sampling(temperature, top_k, top_p))
    expected = torch.tensor(reference_probs(as_float32, temperature, top_k, top_p), dtype=torch.float64)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-5)
    assert torch.allclose(probs.double(), expected, atol=1e-5, rtol=0)
    assert bool(((probs > 0) <= (expected > 0)).all())  # nothing ruled out is drawn


def test_a_head_switched_off_is_the_models_head_mask(api, models):
    model, tok = models["gpt"]
    idx = ids_of(tok, TEXT)
    mask = torch.ones(2, 2)
    mask[1, 0] = 0.0
    answer = api.call("forward", {"model": "gpt", "text": TEXT, "head_mask": [[1, 0]], "top": 100})
    with torch.no_grad():
        off = model(idx[:, :-1], targets=idx[:, 1:], head_mask=mask)
        on = model(idx[:, :-1], targets=idx[:, 1:])
        logits = model(idx, head_mask=mask).logits[0, -1]
    assert answer["loss"] == pytest.approx(float(off.loss), abs=1e-5)
    assert answer["baseline"]["loss"] == pytest.approx(float(on.loss), abs=1e-5)
    assert answer["loss"] != answer["baseline"]["loss"]
    probs = torch.softmax(logits.double(), -1)
    assert all(abs(n["prob"] - float(probs[n["id"]])) <= TOL for n in answer["next_tokens"])
    assert answer["head_mask"] == [[1, 0]]


def test_the_pages_share_one_heads_detail_and_the_overview(api, models):
    model, tok = models["modern"]
    text = TEXT * 2  # 118 characters: the model reads its last 64
    answer = api.call("forward", {"model": "modern", "text": text, "encoding": "base64",
                                  "detail": {"layer": 1, "head": 3}, "overview": 16})
    idx = ids_of(tok, text)[:, -64:]
    with torch.no_grad():
        weights = model(idx, return_weights=True).attentions
    assert answer["cropped"] == {"kept": 64, "of": len(text), "side": "start"}
    assert "attentions" not in answer
    assert torch.allclose(decoded(answer["detail"]["weights"]), weights[1][0, 3], atol=TOL, rtol=0)
    thumbs = decoded(answer["overview"]["weights"])  # (L, H, 16, 16): means over 4 × 4 blocks
    assert thumbs.shape == (2, 4, 16, 16)
    block = weights[0][0, 2, 8:12, 20:24].mean()
    assert float(thumbs[0, 2, 2, 5]) == pytest.approx(float(block), abs=TOL)


def test_the_translation_model_gives_all_three_attentions_and_the_next_target_token(api, models):
    model, vocab = models["s2s"]
    answer = api.call("forward", {"model": "s2s", "text": "15 juillet 2031", "target": "2031-"})
    src = ids_of(vocab, "15 juillet 2031")
    tgt = torch.tensor([[1, *vocab.encode("2031-")]])  # <bos> first
    with torch.no_grad():
        out = model(src, tgt, return_weights=True)
    assert answer["tokens"] == list("15 juillet 2031") and answer["target_tokens"] == ["<bos>", *"2031-"]
    for key, maps in (("attentions", out.encoder_attentions), ("decoder_attentions", out.decoder_attentions),
                      ("cross_attentions", out.cross_attentions)):
        assert torch.allclose(torch.tensor(answer[key]), torch.stack([m[0] for m in maps]), atol=TOL, rtol=0)
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    assert answer["next_tokens"][0]["id"] == int(probs.argmax())
    assert answer["loss"] == pytest.approx(float(F.cross_entropy(out.logits[0, :-1], tgt[0, 1:])), abs=1e-5)
    from attnlab.generation.translation import translate

    assert api.call("translate", {"model": "s2s", "text": "5 mars 2021"})["target"] == \
        translate(model, vocab, ["5 mars 2021"])[0].target


def test_a_translation_models_heads_switch_off_in_each_of_its_three_attentions(api, models):
    """One ``head_mask`` per attention, by name: the answer is the model's forward with that Seq2SeqHeadMask."""
    from attnlab.models import Seq2SeqHeadMask

    model, vocab = models["s2s"]
    off = {"encoder": [[0, 1]], "decoder": [[1, 3]], "cross": [[1, 0], [0, 2]]}
    answer = api.call("forward", {"model": "s2s", "text": "15 juillet 2031", "target": "2031-", "head_mask": off,
                                  "top": 100})
    masks = {name: torch.ones(2, 4) for name in off}
    for name, pairs in off.items():
        for layer, head in pairs:
            masks[name][layer, head] = 0.0
    src, tgt = ids_of(vocab, "15 juillet 2031"), torch.tensor([[1, *vocab.encode("2031-")]])
    with torch.no_grad():
        out = model(src, tgt, return_weights=True, head_mask=Seq2SeqHeadMask(**masks))
        whole = model(src, tgt)
    assert answer["head_mask"] == {"encoder": [[0, 1]], "decoder": [[1, 3]], "cross": [[0, 2], [1, 0]]}
    for key, maps in (("attentions", out.encoder_attentions), ("decoder_attentions", out.decoder_attentions),
                      ("cross_attentions", out.cross_attentions)):
        assert torch.allclose(torch.tensor(answer[key]), torch.stack([m[0] for m in maps]), atol=TOL, rtol=0)
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    assert all(abs(n["prob"] - float(probs[n["id"]])) <= TOL for n in answer["next_tokens"])
    assert answer["loss"] == pytest.approx(float(F.cross_entropy(out.logits[0, :-1], tgt[0, 1:])), abs=1e-5)
    assert answer["baseline"]["loss"] == pytest.approx(float(F.cross_entropy(whole.logits[0, :-1], tgt[0, 1:])),
                                                       abs=1e-5)


def test_the_encoder_reads_cls_and_sep_and_its_heads_switch_off(bert_api, bert):
    text = "The cat sat on the mat because it was tired."
    batch = bert.tokenize(text)
    answer = bert_api.call("forward", {"text": text, "head_mask": [[0, 3], [5, 11]]})
    mask = torch.ones(6, 12)
    mask[0, 3] = mask[5, 11] = 0
    with torch.no_grad():
        out = bert(batch.input_ids, return_weights=True, head_mask=mask)
        whole = bert(batch.input_ids).last_hidden_state[0].mean(0)
    assert answer["tokens"] == batch.tokens[0] and answer["tokens"][0] == "[CLS]" and answer["tokens"][-1] == "[SEP]"
    assert torch.allclose(torch.tensor(answer["attentions"]), torch.stack([a[0] for a in out.attentions]), atol=TOL,
                          rtol=0)
    assert answer["next_tokens"] == [] and answer["loss"] is None
    cosine = F.cosine_similarity(out.last_hidden_state[0].mean(0), whole, dim=0)
    assert answer["baseline"]["embedding_similarity"] == pytest.approx(float(cosine), abs=1e-5)


def test_an_encoder_reads_the_first_tokens_of_a_long_text_as_its_tokenizer_truncates(bert_api, bert):
    text = "word " * 600
    answer = bert_api.call("forward", {"text": text, "detail": None})
    assert answer["ids"] == bert.tokenize(text, truncation=True).input_ids[0].tolist()
    assert answer["cropped"] == {"kept": 512, "of": 602, "side": "end"}


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{", 400, ["not valid JSON"]),
    (b"[1, 2]", 400, ["JSON object", "array"]),
    ({"model": "nope", "text": "a"}, 404, ["unknown model 'nope'", "gpt, modern"]),
    ({"model": "gpt", "text": ""}, 400, ["text is empty"]),
    ({"model": "gpt", "text": "   "}, 400, ["text is empty"]),
    ({"model": "gpt", "text": "a" * (MAX_TEXT + 1)}, 413, ["100,001 characters", "at most 100,000"]),
    ({"model": "gpt", "text": 3}, 400, ["text: expected a string", "3"]),
    ({"model": "gpt", "text": "中文"}, 400, ["text:", "'中'", "not in the vocabulary"]),
    ({"model": "gpt", "text": "abc", "temperature": -1}, 400, ["temperature", "-1"]),
    ({"model": "gpt", "text": "abc", "top_k": 0}, 400, ["top_k", "from 1"]),
    ({"model": "gpt", "text": "abc", "top_p": 1.5}, 400, ["top_p", "1.5"]),
    ({"model": "gpt", "text": "abc", "head_mask": [[2, 0]]}, 400, ["[2, 0]", "2 layers × 2 heads"]),
    ({"model": "gpt", "text": "abc", "colour": 1}, 400, ["unknown field 'colour'"]),
    ({"model": "gpt", "text": "abc", "target": "x"}, 400, ["not a translation model"]),
    ({"model": "s2s", "text": "15 mai", "head_mask": [[0, 0]]}, 400,
     ["head_mask", "3 attentions", "encoder, decoder, cross", "[[0, 0]]"]),
    ({"model": "s2s", "text": "15 mai", "head_mask": {"crosss": []}}, 400, ["unknown field 'crosss'"]),
    ({"model": "s2s", "text": "15 mai", "head_mask": {"encoder": [[2, 0]]}}, 400,
     ["head_mask.encoder: [2, 0]", "2 layers × 4 heads"]),
])
def test_bad_requests_are_one_line_and_a_status(api, body, status, words):
    assert_refused(api, "forward", body, status, words)


def test_messages_follow_the_language_the_request_asks_for(api):
    with pytest.raises(ApiError) as err:
        api.call("forward", {"model": "gpt", "text": "", "lang": "zh"})
    assert "是空的" in err.value.message
    with pytest.raises(ApiError) as err:
        api.call("forward", {"model": "gpt", "text": ""})
    assert "text is empty" in err.value.message  # and the language goes back to the caller's


def test_the_fonts_cut_what_the_page_lacks_under_a_family_of_its_own(api):
    pytest.importorskip("fontTools")
    from attnlab.viz.webfont import covered

    face = api.call("font", {"chars": "爱学"})
    assert face["family"].startswith("attnlab Noto Sans CJK ") and covered("爱学", face["css"])
    assert f'font-family: "{face["family"]}"' in face["css"]
    assert api.call("font", {"chars": "学爱"}) is face  # the same characters: the same face, not cut again



@pytest.mark.parametrize(("body", "words"), [
    ({"temperature": None}, ["temperature: expected a finite number", "None"]),
    ({"top": None}, ["top: expected an integer from 1 to", "None"]),
    ({"detail": {"layer": None, "head": 0}}, ["layer: expected an integer from 0 to 1", "None"]),
])
def test_a_null_field_that_has_a_default_is_refused_by_name(api, body, words):
    # only a field whose default is None may be null: the others are promised a number
    with pytest.raises(ApiError) as err:
        api.call("forward", {"model": "gpt", "text": "abc", **body})
    assert err.value.status == 400
    for word in words:
        assert word in err.value.message, (word, err.value.message)
