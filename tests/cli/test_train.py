import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiny_runs import TEXT, TINY, run

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "romeo.txt").write_text(TEXT)
    return str(tmp_path / "romeo.txt")


def test_train_then_sample(corpus, tmp_path):
    out = tmp_path / "run"
    r = run("train", "--data", corpus, "--out", out, *TINY, "--max-iters", 10)
    assert r.exit_code == 0, r.output
    assert (out / "loss.png").exists() and (out / "tokenizer.json").exists()
    state = json.loads((out / json.loads((out / "checkpoint.json").read_text())["latest"] / "state.json").read_text())
    assert state["step"] == 10 and state["train_config"]["batch_size"] == 4
    greedy = [run("sample", "--checkpoint", out, "ROMEO", "--max-new-tokens", 30, "--temperature", 0) for _ in "ab"]
    assert greedy[0].exit_code == 0 and greedy[0].output == greedy[1].output  # greedy draws nothing: no seed to give
    assert greedy[0].stdout.startswith("ROMEO") and len(greedy[0].stdout) == len("ROMEO") + 30 + 1  # stderr: a note
    sampled = run("sample", "--checkpoint", out, "ROMEO", "--max-new-tokens", 30, "--top-k", 5, "--top-p", 0.9,
                  "--seed", 3)
    assert sampled.exit_code == 0 and sampled.stdout.startswith("ROMEO")


def test_resume_continues_and_the_config_comes_back(corpus, tmp_path):
    out = tmp_path / "run"
    assert run("train", "--data", corpus, "--out", out, *TINY, "--max-iters", 5).exit_code == 0
    r = run("train", "--out", out, "--resume", "--max-iters", 8, "-q")  # data, preset, sizes: from the checkpoint
    assert r.exit_code == 0, r.output
    state = json.loads((out / json.loads((out / "checkpoint.json").read_text())["latest"] / "state.json").read_text())
    assert state["step"] == 8 and state["train_config"]["data"] == corpus


def test_bpe_and_a_config_file(corpus, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('tokenizer = "bpe"\nvocab_size = 300\nmax_iters = 3\n[model]\nd_model = 16\n')
    out = tmp_path / "run"
    r = run("train", "--data", corpus, "--out", out, "--config", cfg, *TINY)
    assert r.exit_code == 0, r.output
    tok = json.loads((out / "tokenizer.json").read_text())
    assert tok["model"]["type"] == "BPE"
    assert run("sample", "--checkpoint", out, "Juliet", "--max-new-tokens", 5).exit_code == 0


@pytest.mark.parametrize(("extra", "message"), [
    (["--preset", "huge"], "preset: unknown preset 'huge'"),
    (["--config", "BAD"], "unknown key 'bach_size'; did you mean 'batch_size'?"),
    (["--out", "FILE/run"], "out: cannot write to the output directory"),
    (["--data", "EMPTY"], "is empty"),
])
def test_bad_input_is_a_clear_error(corpus, tmp_path, extra, message):
    (tmp_path / "bad.toml").write_text("bach_size = 3\n")
    (tmp_path / "file").write_text("")
    (tmp_path / "empty.txt").write_text("")
    subs = {"BAD": str(tmp_path / "bad.toml"), "FILE/run": str(tmp_path / "file" / "run"),
            "EMPTY": str(tmp_path / "empty.txt")}
    args = ["train", "--data", corpus, "--out", tmp_path / "run", *TINY, "--max-iters", 2]
    r = run(*args, *[subs.get(e, e) for e in extra])
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output


def test_sample_errors(corpus, tmp_path):
    out = tmp_path / "run"
    run("train", "--data", corpus, "--out", out, *TINY, "--max-iters", 2)
    r = run("sample", "--checkpoint", out, "Zq")
    assert r.exit_code == 1 and "character(s) not in the vocabulary: 'Z', 'q'" in r.output
    r = run("sample", "--checkpoint", out, "ROMEO", "--temperature", -1)
    assert r.exit_code == 1 and "temperature must be" in r.output
    r = run("sample", "--checkpoint", tmp_path)
    assert r.exit_code == 1 and "no checkpoint found" in r.output


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_exits_130(corpus, tmp_path):
    out = tmp_path / "run"
    attnlab = str(Path(sys.executable).with_name("attnlab"))
    proc = subprocess.Popen([attnlab, "train", "--data", corpus, "--out", str(out), *TINY, "--max-iters", "1000000",
                             "--eval-interval", "3"], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not (out / "checkpoint.json").exists() and proc.poll() is None:
        time.sleep(0.1)  # until it is training (the first checkpoint, at step 3), however long that takes
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "continue with --resume" in err.decode()
    state = json.loads((out / json.loads((out / "checkpoint.json").read_text())["latest"] / "state.json").read_text())
    assert 0 < state["step"] < 1_000_000


def test_flags_override_the_config_file(corpus, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("learning_rate = 5e-3\nmin_lr = 2e-3\nmax_iters = 50\n")  # min_lr > the default lr: fine here
    out = tmp_path / "run"
    r = run("train", "--data", corpus, "--out", out, "--config", cfg, *TINY, "--max-iters", 3, "--lr", 4e-3)
    assert r.exit_code == 0, r.output
    state = json.loads((out / json.loads((out / "checkpoint.json").read_text())["latest"] / "state.json").read_text())
    c = state["train_config"]
    assert (c["max_iters"], c["learning_rate"], c["min_lr"], c["batch_size"]) == (3, 4e-3, 2e-3, 4)


S2S_TINY = ["--task", "numbers", "--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1",
            "--num-decoder-layers", "1", "--d-ff", "32", "--context-length", "24", "--batch-size", "4",
            "--eval-interval", "5", "--eval-iters", "1", "--train-pairs", "50", "--val-pairs", "10", "--warmup", "2"]


@pytest.mark.parametrize("command", ["train", "train-seq2seq"])
def test_a_time_budget_and_steps_whichever_ends_first(command, corpus, tmp_path):
    """Ten minutes are far more than 12 steps need: the steps end the run, and the planned cosine ends with them."""
    flags = ["--data", corpus, *TINY[:-1], "--max-iters", 12] if command == "train" else [*S2S_TINY, "--steps", 12]
    r = run(command, "--out", tmp_path / "run", *flags, "--time-budget", 10)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # the console wraps long lines
    assert "time budget: " in text and ": 12 steps in all; warm-up 2, the cosine ends at step 11" in text
    assert "stopped at step 12 (max_iters), learning rate 0.0001;" in text
