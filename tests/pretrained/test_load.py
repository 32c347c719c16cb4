"""load_bert on good and bad model directories."""

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

from attnlab.pretrained import load_bert

SMALL_FILES = ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json")


def tiny_bert_dir(tmp_path, minilm_dir, hidden=32, layers=2, prefix="", seed=0):
    """A random small BERT checkpoint written the way Hugging Face lays one out (MiniLM's tokenizer)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                                  num_attention_heads=4, intermediate_size=4 * hidden, max_position_embeddings=64,
                                  attn_implementation="eager")
    model = transformers.BertModel(cfg).eval()
    d = tmp_path / "tiny"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**cfg.to_dict(), "model_type": "bert"}))
    state = {prefix + k: v.contiguous() for k, v in model.state_dict().items()}
    if prefix:  # a task model: its head is not part of the encoder and is skipped
        state |= {"classifier.weight": torch.zeros(2, hidden), "cls.predictions.bias": torch.zeros(30522)}
    save_file(state, str(d / "model.safetensors"))
    shutil.copy(minilm_dir / "vocab.txt", d / "vocab.txt")
    return d, model


@pytest.mark.parametrize("prefix", ["", "bert."])  # BertModel, or the encoder inside BertForMaskedLM etc.
def test_any_bert_checkpoint_matches_transformers(tmp_path, minilm_dir, prefix):
    d, ref = tiny_bert_dir(tmp_path, minilm_dir, prefix=prefix)
    bert = load_bert(d)  # vocab.txt only: the WordPiece tokenizer is built from it
    batch = bert.tokenize(["Who's there?", "Nay, answer me: stand, and unfold yourself.", ""])
    batch.token_type_ids[0, 2:] = 1  # a second segment
    with torch.inference_mode():
        want = ref(batch.input_ids, batch.attention_mask, batch.token_type_ids, output_attentions=True)
        got = bert(batch.input_ids, batch.attention_mask, batch.token_type_ids, return_weights=True)
    real = batch.attention_mask.bool()
    assert (got.last_hidden_state - want.last_hidden_state)[real].abs().max() <= 1e-5
    for w, w_ref in zip(got.attentions, want.attentions, strict=True):
        assert (w - w_ref)[real[:, None, :, None].expand_as(w)].abs().max() <= 1e-5
    assert batch.tokens[0][:3] == ["[CLS]", "who", "'"]


def copy_small(minilm_dir, tmp_path, skip=()):
    d = tmp_path / "model"
    d.mkdir()
    for name in SMALL_FILES:
        if name not in skip:
            shutil.copy(minilm_dir / name, d / name)
    return d


def test_missing_files(tmp_path, minilm_dir):
    with pytest.raises(FileNotFoundError, match="neither a bundled model"):
        load_bert(tmp_path / "nowhere")
    d = copy_small(minilm_dir, tmp_path, skip=("config.json",))
    with pytest.raises(FileNotFoundError, match=r"missing config\.json"):
        load_bert(d)
    shutil.copy(minilm_dir / "config.json", d / "config.json")
    with pytest.raises(FileNotFoundError, match=r"missing model\.safetensors"):
        load_bert(d)
    (d / "tokenizer.json").unlink()
    (d / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing tokenizer\.json"):
        load_bert(d)


@pytest.mark.parametrize(("change", "match"), [
    ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, "unsupported architecture model_type='gpt2'"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ({"hidden_act": "swish"}, "hidden_act"),
])
def test_unsupported_config(tmp_path, minilm_dir, change, match):
    d = copy_small(minilm_dir, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(ValueError, match=match):
        load_bert(d)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_safetensors(tmp_path, minilm_dir, damage):
    d = copy_small(minilm_dir, tmp_path)
    data = (minilm_dir / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 3] if damage == "truncated" else b"\x13" * 4096)
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        load_bert(d)


def test_wrong_tensor_shape_is_named(tmp_path, minilm_dir):
    d, ref = tiny_bert_dir(tmp_path, minilm_dir)
    state = {k: v.contiguous() for k, v in ref.state_dict().items()}
    state["encoder.layer.1.intermediate.dense.weight"] = torch.zeros(100, 32)
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(ValueError, match=r"'encoder.layer.1.intermediate.dense.weight' has shape \(100, 32\), "
                                         r"but the model in config.json expects \(128, 32\)"):
        load_bert(d)
    del state["encoder.layer.1.intermediate.dense.weight"]
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing tensor\(s\) for \['blocks.1.ff.linear1.weight'\]"):
        load_bert(d)


def test_bad_ids_and_too_many_tokens(bert, hamlet):
    with pytest.raises(ValueError, match=r"token ids must be in \[0, vocab_size=30522\)"):
        bert(torch.tensor([[101, 30522, 102]]))
    with pytest.raises(ValueError, match="exceed the model's context_length=512"):
        bert(torch.ones(1, 513, dtype=torch.long))
    long_text = " ".join(hamlet[:300])
    with pytest.raises(ValueError, match=r"text 1 has \d+ tokens, more than the model's 512 positions"):
        bert.tokenize(["short", long_text])
    with pytest.raises(ValueError, match="truncation=True"):
        bert.encode([long_text])
    batch = bert.tokenize(["short", long_text], truncation=True)
    assert batch.input_ids.shape == (2, 512) and batch.tokens[1][-1] == "[SEP]"
    with pytest.raises(TypeError, match="texts must be"):
        bert.encode([1, 2])
    with pytest.raises(ValueError, match="batch_size"):
        bert.encode(["a"], batch_size=0)


def test_bundled_model_and_sentence_embeddings(bert):
    assert bert.config.num_layers == 6 and bert.config.d_model == 384
    assert bert.encoder.num_parameters() == 22_565_376
    emb = bert.encode(["The cat sat on the mat.", "A cat was sitting on a mat.", "Stock prices fell sharply."])
    torch.testing.assert_close(emb.norm(dim=-1), torch.ones(3), atol=1e-6, rtol=0)
    sims = emb @ emb.T
    assert sims[0, 1] > 0.8 > 0.2 > sims[0, 2]  # paraphrases close, unrelated texts far
    assert bert.encode([]).shape == (0, 384)
