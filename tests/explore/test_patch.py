"""``POST /api/patch`` against attnlab.heads and against patching written out here: its numbers are ``baselines``,
``run_patched`` and ``patch_heads`` themselves (≤ 1e-6), the patched run's next tokens are those of the corrupted run
with the head's slice of ``out_proj``'s input put in from the clean run by two hooks written here, and bad input is
one line and a 4xx."""

import pytest
import torch

from attnlab.data.tokenizer import BPETokenizer
from attnlab.explore.api import Api
from attnlab.explore.checks import ApiError
from attnlab.explore.entry import entry_for
from attnlab.heads import Patch, baselines, patch_heads, run_patched
from attnlab.models import GPT, GPTConfig
from explore_reference import TEXT, assert_refused, logits_of, patched_by_hand

TOL = 1e-6
REPEAT = "abcdefgh abcdefgh"


def ids_of(tokenizer, text):
    return torch.as_tensor(tokenizer.encode(text), dtype=torch.long)[None]


def runs(name, models, text, corrupt, target=None):
    """The two runs' inputs as attnlab.heads takes them, and the attention modules whose heads are patched."""
    model, tok = models[name]
    if name == "s2s":
        tgt = torch.tensor([[1, *tok.encode(target)]])  # <bos> and the target so far
        return (ids_of(tok, text), tgt), (ids_of(tok, corrupt), tgt), [b.cross_attn for b in model.decoder_blocks]
    return ids_of(tok, text), ids_of(tok, corrupt), [b.attn for b in model.blocks]


CASES = [("gpt", REPEAT, "zyxwvuts abcdefgh", None, (1, 0)), ("modern", TEXT[:24], TEXT[24:48], None, (0, 3)),
         ("s2s", "15 juillet 2031", "15 mailiet 2031", "2031-", (1, 2))]


@pytest.mark.parametrize(("name", "text", "corrupt", "target", "head"), CASES, ids=[c[0] for c in CASES])
def test_the_numbers_are_patch_heads_and_run_patched_and_the_bars_the_patched_runs(api, models, name, text, corrupt,
                                                                                    target, head):
    model = models[name][0]
    body = {"model": name, "text": text, "corrupt": corrupt, "head": {"layer": head[0], "head": head[1]}, "all": True,
            "top": 100}
    if target is not None:
        body["target"] = target
    answer = api.call("patch", body)
    clean, corrupted, modules = runs(name, models, text, corrupt, target)
    clean_logits, corrupt_logits = logits_of(model, clean)[0, -1], logits_of(model, corrupted)[0, -1]
    right = int(clean_logits.argmax())  # the defaults: the clean run's next token against the corrupted run's
    order = corrupt_logits.argsort(descending=True)
    wrong = int(order[1] if int(order[0]) == right else order[0])
    assert (answer["right"]["id"], answer["wrong"]["id"]) == (right, wrong)
    assert answer["attention"] == ("cross" if name == "s2s" else "self") and answer["proposed"] is False

    def metric(logits):
        return (logits[:, -1, right] - logits[:, -1, wrong]).mean()

    clean_value, corrupt_value = baselines(model, clean, corrupted, metric)
    assert answer["clean"]["metric"] == pytest.approx(clean_value, abs=TOL)
    assert answer["corrupted"]["metric"] == pytest.approx(corrupt_value, abs=TOL)
    every = patch_heads(model, clean, corrupted, metric)
    assert torch.allclose(torch.tensor(answer["heads"]["metric"]), every, atol=TOL, rtol=0)
    shares = (every - corrupt_value) / (clean_value - corrupt_value)
    assert torch.allclose(torch.tensor(answer["heads"]["recovered"]), shares, atol=1e-5, rtol=0)
    one = run_patched(model, clean, corrupted, metric, [Patch(*head)])
    assert answer["patched"]["metric"] == pytest.approx(float(one), abs=TOL)
    assert (answer["patched"]["layer"], answer["patched"]["head"]) == head
    by_hand = patched_by_hand(model, modules, clean, corrupted, *head)[0, -1]
    assert answer["patched"]["metric"] == pytest.approx(float(by_hand[right] - by_hand[wrong]), abs=1e-5)
    probs = torch.softmax(by_hand.double(), -1)  # generate's defaults: temperature 1, no top-k, no top-p
    assert [n["id"] for n in answer["patched"]["next_tokens"][:5]] == probs.argsort(descending=True)[:5].tolist()
    assert all(abs(n["prob"] - float(probs[n["id"]])) <= TOL for n in answer["patched"]["next_tokens"])


def test_chosen_tokens_and_the_sliders_settings(api, models):
    model, tok = models["gpt"]
    right, wrong = tok.encode("a")[0], tok.encode("z")[0]
    answer = api.call("patch", {"model": "gpt", "text": REPEAT, "corrupt": "zyxwvuts abcdefgh", "right": int(right),
                                "wrong": int(wrong), "head": {"layer": 0, "head": 1}, "temperature": 0.5,
                                "top_k": 3})
    clean, corrupted = ids_of(tok, REPEAT), ids_of(tok, "zyxwvuts abcdefgh")
    value = run_patched(model, clean, corrupted, lambda lg: (lg[:, -1, right] - lg[:, -1, wrong]).mean(),
                        [Patch(0, 1)])
    assert answer["right"] == {"id": right, "token": "a"} and answer["wrong"] == {"id": wrong, "token": "z"}
    assert answer["patched"]["metric"] == pytest.approx(float(value), abs=TOL)
    assert len(answer["patched"]["next_tokens"]) == 3 and answer["settings"]["top_k"] == 3
    assert "heads" not in answer  # the map only when asked for: patching is on demand


def test_without_a_corrupted_text_the_first_half_is_redrawn(api, models):
    tok = models["gpt"][1]
    answer = api.call("patch", {"model": "gpt", "text": REPEAT})
    corrupt = answer["corrupt"]
    ids, clean = tok.encode(corrupt).tolist(), tok.encode(REPEAT).tolist()
    assert answer["proposed"] is True and len(ids) == len(clean) and "patched" not in answer
    assert ids[8:] == clean[8:]  # the second half kept; the first drawn from tokens the second half does not hold
    assert not set(ids[:8]) & set(clean[8:])
    assert api.call("patch", {"model": "gpt", "text": REPEAT})["corrupt"] == corrupt  # the same draw every time
    source = api.call("patch", {"model": "s2s", "text": "15 juillet 2031", "target": "2031-"})["corrupt"]
    assert len(source) == len("15 juillet 2031") and source[7:] == "15 juillet 2031"[7:]


def test_the_redrawn_half_of_a_bpe_text_reads_as_as_many_tokens(tokenizer):
    """Byte-pair tokens can merge once written out: a draw is kept only where the text reads as the same tokens."""
    bpe = BPETokenizer.train(TEXT * 20, 300)
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny", vocab_size=bpe.vocab_size, context_length=64)).eval()
    api = Api([entry_for(model, bpe, "bpe")])
    answer = api.call("patch", {"text": TEXT, "head": {"layer": 1, "head": 1}})
    assert len(bpe.encode(answer["corrupt"])) == len(bpe.encode(TEXT)) == len(answer["corrupt_tokens"])


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"model": "gpt", "text": REPEAT, "corrupt": "abc"}, 400,
     ["corrupt:", "text reads as 17 tokens", "corrupted one as 3", "same number of tokens"]),
    ({"model": "s2s", "text": "15 juillet 2031", "corrupt": "15 mai 2031", "target": "2031-"}, 400,
     ["source reads as 15 tokens", "corrupted one as 11"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": "中文中文中文中文中文中文中文中文中"}, 400, ["corrupt:", "'中'"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "right": 5, "wrong": 5}, 400,
     ["right and wrong are the same token"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "right": 10_000}, 400, ["right", "from 0 to"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": 2, "head": 0}}, 400,
     ["head.layer: expected an integer from 0 to 1, got 2"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": -1, "head": 0}}, 400,
     ["head.layer: expected an integer from 0 to 1, got -1"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": 0, "head": 2}}, 400,
     ["head.head: expected an integer from 0 to 1, got 2"]),
    ({"model": "s2s", "text": "15 juillet 2031", "target": "2031-", "head": {"layer": 1, "head": 4}}, 400,
     ["head.head: expected an integer from 0 to 3, got 4"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": "1", "head": 0}}, 400,
     ["head.layer: expected an integer", "got '1'"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": 1, "head": 0.5}}, 400,
     ["head.head: expected an integer", "got 0.5"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": True, "head": 0}}, 400,
     ["head.layer: expected an integer", "got True"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": {"layer": 0, "heads": 0}}, 400,
     ["unknown field 'heads'"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "head": [1, 0]}, 400, ["head: expected an object"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": 7}, 400, ["corrupt: expected a string, got 7"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "wrong": "a"}, 400, ["wrong: expected an integer"]),
    ({"model": "gpt", "text": REPEAT, "corrupt": REPEAT, "all": "yes"}, 400, ["all: expected true or false"]),
    ({"model": "gpt", "text": "a"}, 400, ["a text of one token has no first half"]),
    ({"model": "gpt", "text": REPEAT, "colour": 1}, 400, ["unknown field 'colour'"]),
])
def test_bad_patch_requests_are_one_line_and_a_status(api, body, status, words):
    assert_refused(api, "patch", body, status, words)


def test_an_encoder_is_refused_in_both_languages(bert_api):
    with pytest.raises(ApiError) as err:
        bert_api.call("patch", {"text": "The cat sat on the mat.", "corrupt": "The dog sat on the mat."})
    assert err.value.status == 400 and "is an encoder" in err.value.message and "no next token" in err.value.message
    with pytest.raises(ApiError) as err:
        bert_api.call("patch", {"text": "The cat sat on the mat.", "lang": "zh"})
    assert "编码器" in err.value.message


def test_a_patch_leaves_the_model_as_it_was(api, models):
    model = models["gpt"][0]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    api.call("patch", {"model": "gpt", "text": REPEAT, "all": True, "head": {"layer": 0, "head": 0}})
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not model.training and all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())
