import itertools
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnlab.training import TrainConfig, Trainer, train


def weights(out):
    return load_file(out / "checkpoints" / sorted(p.name for p in (out / "checkpoints").iterdir())[-1]
                     / "model.safetensors")


def test_loss_decreases_on_a_tiny_corpus(tiny_config):
    result = train(tiny_config(max_iters=40, eval_interval=10, learning_rate=3e-3, min_lr=3e-4), quiet=True)
    first, last = np.mean([v for _, v in result.train_losses[:5]]), np.mean([v for _, v in result.train_losses[-5:]])
    # a 30-character vocabulary starts near ln(30) = 3.4 nats; the repeated text is quickly learnt
    assert first > 3.0 and last < 0.8 * first, (first, last)
    assert result.evals[-1][2] < result.evals[0][2]
    assert result.stop_reason == "max_iters" and result.step == 40
    assert not (result.out / "loss.png").exists()  # the trainer saves; drawing is the CLI's and the demo's


def test_resume_equals_uninterrupted_bitwise(tiny_config, tmp_path):
    # dropout on, so the restored RNG state matters too
    straight = train(tiny_config(out=str(tmp_path / "a"), model={"context_length": 16, "dropout": 0.1}), quiet=True)
    cfg = tiny_config(out=str(tmp_path / "b"), model={"context_length": 16, "dropout": 0.1})
    first = train(cfg, quiet=True, stop_at=6)  # stops between two evals: a checkpoint at step 6
    assert first.stop_reason == "stop_at" and first.step == 6
    resumed = train(cfg, resume=True, quiet=True)
    assert resumed.train_losses == straight.train_losses  # exactly: same floats, step by step
    # the stopped run also estimated the loss at step 6, where it stopped; nothing else differs
    assert [e for e in resumed.evals if e[0] != 6] == straight.evals
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_time_budget_stops_cleanly(tiny_config):
    """A budget of 1.2 s on a clock that moves on 10 ms each time it is read: the run stops on its budget after the
    same steps on any machine (a real clock would make them the machine's speed), with a checkpoint there."""
    ticks = itertools.count(start=1000.0, step=0.01)
    with torch.enable_grad():
        result = Trainer(tiny_config(max_iters=100_000, time_budget=0.02), quiet=True,
                         clock=lambda: next(ticks)).train()
    assert result.stop_reason == "time_budget" and 0 < result.step < 100_000
    state = json.loads((result.checkpoint / "state.json").read_text())
    assert state["step"] == result.step and result.evals[-1][0] == result.step


def test_grad_accum_equals_a_bigger_batch_when_batches_line_up(tiny_config, tmp_path):
    """Accumulating k micro-batches averages their gradients; the loss reported is their mean."""
    r = train(tiny_config(out=str(tmp_path / "acc"), grad_accum=3, max_iters=2), quiet=True)
    assert len(r.train_losses) == 2 and r.step == 2
    assert Trainer(tiny_config(out=str(tmp_path / "x"), grad_accum=3), quiet=True).tokens_per_step == 4 * 3 * 16


# ---- bad input ----------------------------------------------------------------------------------
def test_empty_corpus(tiny_config, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n")
    with pytest.raises(ValueError, match="is empty"):
        train(tiny_config(data=str(empty)), quiet=True)


@pytest.mark.parametrize(("text", "message"), [
    ("To be, or not.", r"the train split has 13 tokens, fewer than one block \(context_length \+ 1 = 17\)"),
    ("To be, or not to be, that is the question.", r"the validation split has 4 tokens, fewer than one block"),
])
def test_corpus_shorter_than_one_block(tiny_config, tmp_path, text, message):
    short = tmp_path / "short.txt"
    short.write_text(text)
    with pytest.raises(ValueError, match=message):
        train(tiny_config(data=str(short)), quiet=True)


def test_unwritable_output_directory_fails_before_training(tiny_config, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    import attnlab.training.trainer as trainer_module

    def never(*args, **kwargs):
        raise AssertionError("the corpus was read before the output directory was checked")

    monkeypatch.setattr(trainer_module, "load_text", never)
    with pytest.raises(ValueError, match=r"out: cannot write to the output directory '.*a-file/run'"):
        train(tiny_config(out=str(blocker / "run")), quiet=True)


def test_resume_with_a_different_model_shape(tiny_config):
    train(tiny_config(max_iters=4), quiet=True)
    with pytest.raises(ValueError, match=r"resume: .* different shape \(d_model: checkpoint 32, asked 64"):
        train(tiny_config(model={"context_length": 16, "d_model": 64}), resume=True, quiet=True)


def test_resume_without_a_checkpoint(tiny_config):
    with pytest.raises(ValueError, match="no checkpoint found"):
        train(tiny_config(), resume=True, quiet=True)


def test_grad_accum_must_split_over_processes(tiny_config):
    cfg = TrainConfig(**{**tiny_config().to_dict(), "grad_accum": 1})
    assert cfg.grad_accum == 1  # one process: anything goes (the multi-process check is in test_distributed)


def test_a_fresh_run_will_not_mix_with_an_old_checkpoint(tiny_config):
    train(tiny_config(max_iters=4), quiet=True)
    with pytest.raises(ValueError, match=r"already holds a checkpoint \(step_0000004\); resume it with --resume"):
        train(tiny_config(max_iters=4), quiet=True)
    result = train(tiny_config(max_iters=2), quiet=True, overwrite=True)
    assert [p.name for p in (result.out / "checkpoints").iterdir()] == ["step_0000002"]


def test_the_modern_decoder_trains_and_its_checkpoint_says_so(tiny_config):
    from attnlab.models import ModernDecoder, load_trained

    result = train(tiny_config(arch="modern", max_iters=40, eval_interval=10, learning_rate=3e-3, min_lr=3e-4),
                   quiet=True)
    first, last = np.mean([v for _, v in result.train_losses[:5]]), np.mean([v for _, v in result.train_losses[-5:]])
    assert first > 3.0 and last < 0.8 * first, (first, last)
    state = json.loads((result.checkpoint / "state.json").read_text())
    assert state["architecture"] == "modern" and state["model_config"]["num_kv_heads"] == 2
    model, _ = load_trained(result.out)
    assert isinstance(model, ModernDecoder) and model.config.context_length == 16


def test_a_preset_of_the_other_architecture_is_named(tiny_config):
    with pytest.raises(ValueError, match=r"unknown preset 'llama-3.2-1b' \(it is a preset of --arch modern\)"):
        Trainer(tiny_config(preset="llama-3.2-1b"), quiet=True)
    with pytest.raises(ValueError, match=r"arch: expected 'gpt', 'modern', 'diffllama', 'smollm3', 'qwen3_next', "
                                         r"'deepseek', 'gemma4' or 'kimi_linear', got 'llama'"):
        tiny_config(arch="llama")
