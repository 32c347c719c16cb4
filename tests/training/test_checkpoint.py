import json
import os

import pytest
import torch

import attnlab.models.checkpoint.write as checkpoint_module
from attnlab.data import CharTokenizer
from attnlab.models import GPT, GPTConfig
from attnlab.training import configure_optimizer, latest_checkpoint, load_checkpoint, save_checkpoint


def trained_pair(seed: int):
    """A tiny model and an AdamW that has taken two steps (so it has moments to save)."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig.from_preset("tiny", vocab_size=5, context_length=8))
    opt = configure_optimizer(model, 1e-2, 0.1, (0.9, 0.99))
    for _ in range(2):
        model(torch.randint(0, 5, (2, 8))).logits.square().mean().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def save(out, step, seed):
    model, opt = trained_pair(seed)
    tok = CharTokenizer("abcde")
    path = save_checkpoint(out, step, model, opt, {"note": seed}, tok, {"cpu.rank0": torch.get_rng_state()})
    return path, model, opt


def test_round_trip_weights_optimizer_and_tokenizer(tmp_path):
    path, model, opt = save(tmp_path, 3, seed=1)
    assert latest_checkpoint(tmp_path) == path
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.step == 3 and ckpt.state["note"] == 1 and ckpt.tokenizer.decode([0, 4]) == "ae"
    fresh, fresh_opt = trained_pair(seed=2)
    ckpt.load_weights(fresh)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    fresh_opt.load_state_dict(ckpt.optimizer)
    saved, loaded = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert saved.keys() == loaded.keys()
    for i in saved:
        assert all(torch.equal(saved[i][k], loaded[i][k]) for k in ("exp_avg", "exp_avg_sq", "step")), i
    assert fresh_opt.param_groups[0]["betas"] == (0.9, 0.99)
    assert fresh_opt.param_groups[1]["weight_decay"] == 0.0


def test_no_pickle_anywhere(tmp_path):
    path, _, _ = save(tmp_path, 1, seed=1)
    assert sorted(p.name for p in path.iterdir()) == [
        "model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json", "tokenizer.json"]


def test_killed_between_write_and_rename_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    first, model, _ = save(tmp_path, 1, seed=1)

    def crash(src, dst):
        raise KeyboardInterrupt("killed")  # the process dies after writing, before the rename

    monkeypatch.setattr(checkpoint_module.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, 2, seed=2)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == first
    ckpt = load_checkpoint(tmp_path)
    assert ckpt.step == 1
    fresh, _ = trained_pair(seed=3)
    ckpt.load_weights(fresh)
    assert torch.equal(fresh.tok_emb.weight, model.tok_emb.weight)
    assert not list((tmp_path / "checkpoints").glob(".step_*"))  # the temporary was cleaned up


def test_killed_while_updating_the_pointer_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save(tmp_path, 1, seed=1)
    real_replace = os.replace

    def crash_on_pointer(src, dst):
        if str(dst).endswith("checkpoint.json"):
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_pointer)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, 2, seed=2)
    monkeypatch.undo()
    assert json.loads((tmp_path / "checkpoint.json").read_text()) == {"latest": "checkpoints/step_0000001"}
    assert load_checkpoint(tmp_path).step == 1


def test_keeps_only_the_newest(tmp_path):
    for step in (1, 2, 3):
        save(tmp_path, step, seed=step)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_0000002", "step_0000003"]


def test_different_shape_is_a_clear_error(tmp_path):
    save(tmp_path, 1, seed=1)
    other = GPT(GPTConfig.from_preset("tiny", vocab_size=5, context_length=8, d_model=16))
    with pytest.raises(ValueError, match=r"different shape: .*W_key.weight: checkpoint \(32, 32\), model \(16, 16\)"):
        load_checkpoint(tmp_path).load_weights(other)


def test_no_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint found in"):
        load_checkpoint(tmp_path)
