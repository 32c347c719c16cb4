import json

import pytest
import torch
from safetensors.torch import load_file

from attnlab.data import SPECIALS, CharTokenizer, Pair, write_pairs
from attnlab.models.checkpoint import checkpoint_kind, load_trained
from attnlab.training import TrainConfig, train
from attnlab.training.config import Seq2SeqTrainConfig
from attnlab.training.seq2seq_trainer import Seq2SeqTrainer, train_seq2seq

TINY = {"d_model": 32, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 1, "d_ff": 64,
        "context_length": 40, "dropout": 0.0}


def config(tmp_path, name="run", **overrides):
    values = dict(task="numbers", out=str(tmp_path / name), preset="transformer-tiny", model=dict(TINY),
                  max_iters=12, batch_size=8, eval_interval=4, eval_iters=2, warmup_iters=2, train_pairs=200,
                  val_pairs=20, seed=7)
    return Seq2SeqTrainConfig(**{**values, **overrides})


def weights(out):
    return load_file(out / "checkpoints" / sorted(p.name for p in (out / "checkpoints").iterdir())[-1]
                     / "model.safetensors")


def test_resume_equals_uninterrupted_bitwise(tmp_path):
    # dropout and label smoothing on, and the paper's schedule: the restored RNG and step count matter
    extra = dict(model={**TINY, "dropout": 0.1}, label_smoothing=0.1, schedule="inverse-sqrt")
    straight = train_seq2seq(config(tmp_path, "a", **extra), quiet=True)
    cfg = config(tmp_path, "b", **extra)
    first = train_seq2seq(cfg, quiet=True, stop_at=6)
    assert first.stop_reason == "stop_at" and first.step == 6
    resumed = train_seq2seq(cfg, resume=True, quiet=True)
    assert resumed.train_losses == straight.train_losses  # the same floats, step by step
    assert [e for e in resumed.evals if e[0] != 6] == straight.evals
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_loss_falls_and_the_checkpoint_is_a_translation_model(tmp_path):
    result = train_seq2seq(config(tmp_path, max_iters=40, eval_interval=20, learning_rate=3e-3), quiet=True)
    first = sum(v for _, v in result.train_losses[:5]) / 5
    last = sum(v for _, v in result.train_losses[-5:]) / 5
    assert last < 0.8 * first, (first, last)
    state = json.loads((result.checkpoint / "state.json").read_text())
    assert state["architecture"] == "transformer" and state["train_config"]["task"] == "numbers"
    assert checkpoint_kind(result.out) == "seq2seq"
    model, vocab = load_trained(result.out, kind="seq2seq")
    assert vocab == CharTokenizer("0123456789零一二三四五六七八九十百千万亿", SPECIALS)
    assert model.config.vocab_size == vocab.vocab_size and not model.training
    # the vocabulary travels in every checkpoint directory, beside the weights
    assert (result.checkpoint / "tokenizer.json").is_file() and (result.checkpoint / "model.safetensors").is_file()


def test_tokens_per_step_counts_real_tokens_only(tmp_path):
    from attnlab.data import collate, stream_generator

    trainer = Seq2SeqTrainer(config(tmp_path), quiet=True)
    trainer.train_step()
    trainer.draw_batch("train", torch.Generator())  # as evaluation does: the next step counts afresh
    trainer.train_step()
    rows = torch.randint(len(trainer.train_data), (8,), generator=stream_generator(7, "train", 1, 0)).tolist()
    batch = collate([trainer.train_data[i] for i in rows])  # step 1's batch, drawn by hand
    assert trainer.tokens_per_step == int(batch.src_mask.sum() + batch.tgt_mask.sum())
    assert trainer.tokens_per_step < batch.src_ids.numel() + batch.tgt_in.numel()  # padding is not counted


def test_a_tsv_file_trains_and_its_characters_make_the_vocabulary(tmp_path):
    pairs = [Pair(f"{i} apples", f"{'I' * (i % 5 + 1)} pommes") for i in range(60)]
    write_pairs(pairs, tmp_path / "pairs.tsv")
    result = train_seq2seq(config(tmp_path, task=None, data=str(tmp_path / "pairs.tsv"), max_iters=4), quiet=True)
    _, vocab = load_trained(result.out)
    assert vocab == CharTokenizer.from_pairs(pairs)


def test_a_tsv_line_without_a_tab_names_file_and_line(tmp_path):
    (tmp_path / "bad.tsv").write_text("one\tun\ntwo deux\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.tsv:2: expected source<TAB>target .* found no tab"):
        train_seq2seq(config(tmp_path, task=None, data=str(tmp_path / "bad.tsv")), quiet=True)
    assert not (tmp_path / "run").exists()  # a run that cannot start leaves nothing behind


def test_a_source_longer_than_the_context_is_refused_unless_truncated(tmp_path):
    write_pairs([Pair("x" * 50, "y"), Pair("x", "y")], tmp_path / "long.tsv")
    with pytest.raises(ValueError, match=r"source of 50 characters, more than context_length=40 .* truncate"):
        train_seq2seq(config(tmp_path, task=None, data=str(tmp_path / "long.tsv")), quiet=True)
    result = train_seq2seq(config(tmp_path, task=None, data=str(tmp_path / "long.tsv"), truncate=True,
                                  max_iters=2), quiet=True)
    assert result.step == 2


@pytest.mark.parametrize(("overrides", "message"), [
    (dict(task=None), r"task, data: give exactly one"),
    (dict(data="x.tsv"), r"task, data: give exactly one"),
    (dict(task="poems"), r"task: expected 'dates' or 'numbers', got 'poems'"),
    (dict(label_smoothing=1.0), r"label_smoothing: expected in \[0, 1\), got 1.0"),
    (dict(schedule="linear"), r"schedule: expected 'cosine' or 'inverse-sqrt', got 'linear'"),
    (dict(schedule="inverse-sqrt", warmup_iters=0), r"warmup_iters: .* at least 1 warm-up step, got 0"),
    (dict(train_pairs=0), r"train_pairs: expected a positive integer, got 0"),
    (dict(arch="gpt"), r"arch: expected 'transformer', got 'gpt'"),
])
def test_bad_configs(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, **overrides)


def test_model_overrides_the_vocabulary_decides_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"model: unknown key 'vocab_size'"):
        train_seq2seq(config(tmp_path, model={**TINY, "vocab_size": 99}), quiet=True)


def test_a_gpt_run_cannot_be_resumed_as_a_translation_run(tmp_path, corpus):
    train(TrainConfig(data=str(corpus), out=str(tmp_path / "run"), preset="tiny", model={"context_length": 16},
                      max_iters=2, batch_size=2, eval_interval=2, eval_iters=1, warmup_iters=1), quiet=True)
    with pytest.raises(ValueError, match=r"resume: .* not a translation model's"):
        train_seq2seq(config(tmp_path), resume=True, quiet=True)


def test_the_docs_training_examples_run(tmp_path, monkeypatch):
    """docs/seq2seq.md's section "Training and translating" runs as written."""
    import re
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    text = (Path(__file__).resolve().parents[2] / "docs" / "seq2seq.md").read_text(encoding="utf-8")
    section = text.split("\n## Training and translating\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/seq2seq.md[training block {i}]", "exec"), {"__name__": "__docs__"})
