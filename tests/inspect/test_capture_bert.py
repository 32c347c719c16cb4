"""capture and explain on the real pretrained all-MiniLM-L6-v2, against Hugging Face's own numbers."""

from __future__ import annotations

import pytest
import torch

from attnlab.cli.model_options import load_model
from attnlab.inspect import capture, explain

SENTENCE = "The cat sat on the mat"


@pytest.fixture(scope="module")
def bert():
    return load_model("bert")


def test_bert_capture_and_explain_match_transformers(bert):
    transformers = pytest.importorskip("transformers")
    from attnlab.pretrained import resolve_model_dir

    model, tokenizer = bert
    cap = capture(model, SENTENCE, tokenizer=tokenizer)
    assert cap.tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert (cap.num_layers, cap.num_heads) == (6, 12) and not cap.is_causal
    ref = transformers.BertModel.from_pretrained(resolve_model_dir("all-MiniLM-L6-v2"), attn_implementation="eager")
    ids = torch.tensor([tokenizer.encode(SENTENCE).ids])
    with torch.no_grad():
        hf = ref(ids, output_attentions=True).attentions
    for layer in (0, 5):
        assert torch.allclose(cap.attentions[layer], hf[layer][0], atol=1e-5)
        e = explain(cap, "cat", layer=layer, head=7)
        assert torch.allclose(e.weights.float(), hf[layer][0, 7, 2], atol=1e-5)
        assert e.max_abs_diff_context < 1e-5


def test_bert_too_long_and_unknown_query(bert):
    model, tokenizer = bert
    with pytest.raises(ValueError, match="the sentence has 602 tokens; PretrainedBert accepts at most 512"):
        capture(model, "word " * 600, tokenizer=tokenizer)
    cap = capture(model, "我爱你", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="the tokens are: \\[CLS\\], 我"):
        explain(cap, "猫")
