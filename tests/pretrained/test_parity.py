"""Our encoder with all-MiniLM-L6-v2's weights against Hugging Face transformers' BertModel (eager)."""

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

CHINESE = [
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
    "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？",
    "千里之行，始于足下。",
]


@pytest.fixture(scope="module")
def texts(hamlet):
    picks = [hamlet[i] for i in (0, 1, 5, 12, 40, 77, 150, 300, 451, 700, 1000, 1234, 1500, 1800, 2100, 2500)]
    picks += ["The cat sat on the mat.", "Attention is all you need, or so the paper says."]
    long_text = " ".join(hamlet[:400])  # far more than 512 tokens; truncated to exactly 512
    return [*picks, *CHINESE, long_text, ""]


@pytest.fixture(scope="module")
def reference(minilm_dir):
    model = transformers.BertModel.from_pretrained(str(minilm_dir), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    return model, tokenizer


@pytest.mark.slow
def test_matches_transformers_bert(bert, reference, texts):
    hf, hf_tok = reference
    batch = bert.tokenize(texts, truncation=True)
    want_ids = hf_tok(texts, padding=True, truncation=True, max_length=512, return_tensors="pt")
    assert torch.equal(batch.input_ids, want_ids["input_ids"])  # tokenization agrees too
    assert torch.equal(batch.attention_mask, want_ids["attention_mask"])
    lengths = batch.attention_mask.sum(1)
    assert len(texts) >= 20 and lengths.max() == 512 and lengths.min() == 2  # the 512-token text, the empty one
    real = batch.attention_mask.bool()
    with torch.inference_mode():
        ref = hf(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                 output_attentions=True)
        ours = bert(batch.input_ids, batch.attention_mask, batch.token_type_ids, return_weights=True,
                    return_hidden_states=True)
        fast = bert(batch.input_ids, batch.attention_mask, batch.token_type_ids)
    assert ours.attentions is not None and len(ours.attentions) == len(ref.attentions) == 6
    for layer, (w, w_ref) in enumerate(zip(ours.attentions, ref.attentions, strict=True)):
        q = real[:, None, :, None].expand_as(w)  # every real query row, all of its keys (padding included)
        err = (w - w_ref)[q].abs().max().item()
        assert err <= 1e-5, f"layer {layer}: attention weights differ by {err}"
    for out in (ours, fast):
        err = (out.last_hidden_state - ref.last_hidden_state)[real].abs().max().item()
        assert err <= 1e-5, f"last_hidden_state differs by {err}"
        m = batch.attention_mask[..., None].float()
        ref_emb = F.normalize((ref.last_hidden_state * m).sum(1) / m.sum(1), dim=-1)
        cos = (out.sentence_embedding() * ref_emb).sum(-1)
        assert cos.min().item() >= 0.99999
    assert len(ours.hidden_states) == 7
    torch.testing.assert_close(ours.hidden_states[-1], ours.last_hidden_state, atol=0, rtol=0)


def test_encode_matches_transformers(bert, reference, hamlet):
    """encode() sorts by length and pads per bucket; the embeddings are those of a plain padded batch."""
    hf, hf_tok = reference
    lines = [*hamlet[100:160], *CHINESE, ""]
    emb = bert.encode(lines, batch_size=16)
    with torch.inference_mode():
        b = hf_tok(lines, padding=True, return_tensors="pt")
        hidden = hf(**b).last_hidden_state
    m = b["attention_mask"][..., None].float()
    ref = F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
    assert emb.shape == (len(lines), 384)
    assert (emb * ref).sum(-1).min().item() >= 0.99999
    torch.testing.assert_close(bert.encode(lines[:5], batch_size=2), emb[:5], atol=1e-6, rtol=0)  # any batching
