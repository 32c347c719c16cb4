"""Every command against bad input: a non-zero exit, one clear line, no traceback, nothing half-written.

Each case is one row of ``CASES``: an id, the command line (``{dir}`` is the fixtures' folder), the exit status,
and words the one ``Error:`` line must hold: the argument, the value given and what was expected. A case may
also name output paths that must not exist afterwards. docs/bad-input.md lists the same ids (tested).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnlab.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"
TINY = ["--preset", "tiny", "--context-length", "16", "--batch-size", "2", "--eval-interval", "4", "--eval-iters",
        "1", "--max-iters", "4", "-q"]
CJK = re.compile(r"[\u4e00-\u9fff]")
TRAIN = ["train", "--data", "{dir}/corpus.txt", "--out", "{dir}/new"]
SAMPLE = ["sample", "--checkpoint", "{dir}/run", "First"]
LONG = " ".join(["w"] * 70)
S2S_TINY = ["--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1", "--num-decoder-layers", "1", "--d-ff",
            "32", "--context-length", "24", "--batch-size", "4", "--steps", "2", "--eval-interval", "2",
            "--eval-iters", "1", "--train-pairs", "50", "--val-pairs", "10", "-q"]
S2S_TRAIN = ["train-seq2seq", "--task", "numbers", "--out", "{dir}/new"]
TRANSLATE = ["translate", "--checkpoint", "{dir}/s2s"]

# (id, argv, exit status, words the error line must hold, paths that must not exist afterwards)
CASES = [
    # train: the corpus
    ("train-data-missing", ["train", "--data", "{dir}/nope.txt", "--out", "{dir}/new"], 1,
     ["data:", "nope.txt", "no such file"], ["new"]),
    ("train-data-directory-without-text", ["train", "--data", "{dir}/emptydir", "--out", "{dir}/new"], 1,
     ["data:", "emptydir", ".txt/.md/.text"], ["new"]),
    ("train-data-not-utf8", ["train", "--data", "{dir}/binary.dat", "--out", "{dir}/new"], 1,
     ["data:", "binary.dat", "not UTF-8", "offset 3"], ["new"]),
    ("train-data-empty", ["train", "--data", "{dir}/empty.txt", "--out", "{dir}/new"], 1,
     ["data:", "empty.txt", "empty"], ["new"]),
    ("train-data-unreadable", ["train", "--data", "/proc/self/mem", "--out", "{dir}/new"], 1,
     ["data:", "/proc/self/mem", "cannot read"], ["new"]),
    ("train-data-shorter-than-one-block", ["train", "--data", "{dir}/short.txt", "--out", "{dir}/new",
                                           "--context-length", "200"], 1,
     ["data:", "train split", "context_length + 1 = 201"], ["new"]),
    # train: where it writes
    ("train-out-unwritable", [*TRAIN[:3], "--out", "/proc/attnlab-out"], 1, ["out:", "/proc/attnlab-out"], []),
    ("train-out-is-a-file", [*TRAIN[:3], "--out", "{dir}/plain.txt"], 1, ["out:", "plain.txt"], []),
    ("train-out-holds-a-run", [*TRAIN[:3], "--out", "{dir}/run"], 1, ["out:", "--resume", "--overwrite"], []),
    ("train-resume-nothing", [*TRAIN[:3], "--out", "{dir}/new", "--resume"], 1, ["resume:", "new"], ["new"]),
    # train: numbers and names
    ("train-max-iters-zero", [*TRAIN, "--max-iters", "0"], 1, ["max_iters", "positive", "got 0"], ["new"]),
    ("train-max-iters-not-a-number", [*TRAIN, "--max-iters", "abc"], 2, ["--max-iters", "'abc'", "integer"],
     ["new"]),
    ("train-batch-size-negative", [*TRAIN, "--batch-size", "-2"], 1, ["batch_size", "positive", "-2"], ["new"]),
    ("train-learning-rate-negative", [*TRAIN, "--lr", "-1"], 1, ["learning_rate", "positive", "-1.0"], ["new"]),
    ("train-val-fraction-out-of-range", [*TRAIN, "--val-fraction", "2"], 1, ["val_fraction", "(0, 1)", "2.0"],
     ["new"]),
    ("train-time-budget-zero", [*TRAIN, "--time-budget", "0"], 1, ["time_budget", "positive", "0.0"], ["new"]),
    ("train-dropout-out-of-range", [*TRAIN, "--dropout", "1.5"], 1, ["dropout", "[0, 1)", "1.5"], ["new"]),
    ("train-heads-do-not-divide", [*TRAIN, "--num-heads", "3"], 1, ["num_heads=3", "d_model=128"], ["new"]),
    ("train-preset-unknown", [*TRAIN, "--preset", "nope"], 1, ["preset", "'nope'", "tiny"], ["new"]),
    ("train-tokenizer-unknown", [*TRAIN, "--tokenizer", "nope"], 2, ["--tokenizer", "'nope'", "char", "bpe"],
     ["new"]),
    ("train-bpe-vocabulary-too-small", [*TRAIN, "--tokenizer", "bpe", "--vocab-size", "10"], 1,
     ["vocab_size", "256", "got 10"], ["new"]),
    ("train-arch-unknown", [*TRAIN, "--arch", "nope"], 2, ["--arch", "'nope'", "gpt", "modern"], ["new"]),
    ("train-dtype-unknown", [*TRAIN, "--dtype", "fp8"], 2, ["--dtype", "'fp8'", "fp32", "bf16"], ["new"]),
    ("train-fp16-on-a-cpu", [*TRAIN, "--dtype", "fp16"], 1, ["dtype", "'fp16'", "CUDA", "bf16"], ["new"]),
    ("train-device-absent", [*TRAIN, "--device", "cuda"], 1, ["device", "'cuda'", "not available"], ["new"]),
    ("train-device-unknown", [*TRAIN, "--device", "banana"], 1, ["device", "'banana'", "cuda:N"], ["new"]),
    # train: the config file
    ("train-config-missing", [*TRAIN, "--config", "{dir}/nope.toml"], 1, ["config", "nope.toml"], ["new"]),
    ("train-config-not-toml", [*TRAIN, "--config", "{dir}/bad.toml"], 1, ["config", "bad.toml", "not valid TOML"],
     ["new"]),
    ("train-config-unknown-key", [*TRAIN, "--config", "{dir}/unknown.toml"], 1,
     ["unknown.toml", "unknown key 'nonsense_key'"], ["new"]),
    ("train-config-directory", [*TRAIN, "--config", "{dir}/emptydir"], 2, ["--config", "emptydir", "directory"],
     ["new"]),
    # sample
    ("sample-checkpoint-missing", ["sample", "--checkpoint", "{dir}/nope", "To"], 2,
     ["--checkpoint", "nope", "does not exist"], []),
    ("sample-checkpoint-is-a-file", ["sample", "--checkpoint", "{dir}/plain.txt", "To"], 2,
     ["--checkpoint", "plain.txt", "is a file"], []),
    ("sample-no-checkpoint-inside", ["sample", "--checkpoint", "{dir}/emptydir", "To"], 1,
     ["checkpoint", "emptydir", "checkpoint.json"], []),
    ("sample-corrupt-state", ["sample", "--checkpoint", "{dir}/corrupt_state", "To"], 1,
     ["corrupt_state", "state.json", "not valid JSON"], []),
    ("sample-corrupt-weights", ["sample", "--checkpoint", "{dir}/corrupt_weights", "To"], 1,
     ["corrupt_weights", "model.safetensors", "corrupt"], []),
    ("sample-missing-tokenizer", ["sample", "--checkpoint", "{dir}/no_tokenizer", "To"], 1,
     ["no_tokenizer", "tokenizer.json", "missing"], []),
    ("sample-pointer-to-nothing", ["sample", "--checkpoint", "{dir}/bad_pointer", "To"], 1,
     ["bad_pointer", "no checkpoint found"], []),
    ("sample-no-model-given", ["sample", "To"], 2, ["--checkpoint", "--model", "exactly one"], []),
    ("sample-two-models-given", ["sample", "--checkpoint", "{dir}/run", "--model", "{dir}/run", "To"], 2,
     ["--checkpoint", "--model", "exactly one"], []),
    ("sample-temperature-negative", [*SAMPLE, "--temperature", "-1"], 1, ["temperature", ">= 0", "-1.0"], []),
    ("sample-temperature-not-a-number", [*SAMPLE, "--temperature", "hot"], 2, ["--temperature", "'hot'", "float"],
     []),
    ("sample-top-k-zero", [*SAMPLE, "--top-k", "0"], 1, ["top_k", ">= 1", "got 0"], []),
    ("sample-top-p-above-one", [*SAMPLE, "--top-p", "1.5"], 1, ["top_p", "(0, 1]", "1.5"], []),
    ("sample-max-new-tokens-negative", [*SAMPLE, "--max-new-tokens", "-1"], 2, ["--max-new-tokens", "-1", ">=0"],
     []),
    ("sample-prompt-empty", ["sample", "--checkpoint", "{dir}/run", ""], 1, ["prompt", "empty"], []),
    ("sample-prompt-unknown-characters", ["sample", "--checkpoint", "{dir}/run", "FirstΩ"], 1,
     ["prompt", "'Ω'", "not in the vocabulary"], []),
    ("sample-fp16-on-a-cpu", [*SAMPLE, "--dtype", "fp16"], 1, ["--dtype fp16", "CUDA", "bf16"], []),
    ("sample-device-unknown", [*SAMPLE, "--device", "banana"], 1, ["device", "'banana'", "cuda:N"], []),
    # explain, heatmap, view: the text and the model looked through
    ("explain-empty-text", ["explain", ""], 2, ["text", "empty"], []),
    ("explain-query-not-in-text", ["explain", "a b c", "--query", "z"], 2, ["query 'z'", "a, b, c"], []),
    ("explain-layer-out-of-range", ["explain", "a b c", "--layer", "5"], 2, ["layer", "0..0", "got 5"], []),
    ("explain-head-out-of-range", ["explain", "a b c", "--head", "9"], 2, ["head", "0..0", "got 9"], []),
    ("explain-model-unknown", ["explain", "a b c", "--model", "nope"], 2, ["--model", "random, bert", "'nope'"],
     []),
    ("explain-mechanism-unknown", ["explain", "a b c", "--mechanism", "nope"], 2, ["--mechanism", "'nope'",
                                                                                   "multihead"], []),
    ("explain-digits-out-of-range", ["explain", "a b c", "--digits", "0"], 2, ["--digits", "0", "1<=x<=12"], []),
    ("explain-text-too-long", ["explain", LONG], 2, ["70 words", "context_length=64"], []),
    ("explain-characters-unknown", ["explain", "First Ω", "--model", "{dir}/run"], 2, ["'Ω'", "not in the vocabulary"],
     []),
    ("explain-corrupt-checkpoint", ["explain", "To", "--model", "{dir}/corrupt_weights"], 2,
     ["model.safetensors", "corrupt"], []),
    ("heatmap-output-unwritable", ["heatmap", "a b", "-o", "/proc/attnlab.png"], 1,
     ["cannot write '/proc/attnlab.png'"], []),
    ("heatmap-output-suffix", ["heatmap", "a b", "-o", "{dir}/h.txt"], 2, [".png or .svg", "h.txt"], ["h.txt"]),
    ("heatmap-output-is-a-directory", ["heatmap", "a b", "-o", "{dir}/emptydir"], 2, [".png or .svg", "emptydir"],
     []),
    ("heatmap-layer-out-of-range", ["heatmap", "a b", "--layer", "3", "-o", "{dir}/h.png"], 2,
     ["layer", "got 3"], ["h.png"]),
    ("heatmap-head-negative", ["heatmap", "a b", "--head", "-1", "-o", "{dir}/h.png"], 2, ["head", "got -1"],
     ["h.png"]),
    ("view-output-suffix", ["view", "a b", "-o", "{dir}/v.txt"], 2, [".html", "v.txt"], ["v.txt"]),
    ("view-output-unwritable", ["view", "a b", "-o", "/proc/attnlab.html"], 1, ["cannot write '/proc/attnlab.html'"],
     []),
    ("view-empty-text", ["view", "", "-o", "{dir}/v.html"], 2, ["text", "empty"], ["v.html"]),
    # pe-plot
    ("pe-plot-context-length-zero", ["pe-plot", "--context-length", "0", "-o", "{dir}/p.png"], 2,
     ["--context-length", "0", "x>=1"], ["p.png"]),
    ("pe-plot-d-model-odd", ["pe-plot", "--d-model", "7", "-o", "{dir}/p.png"], 2, ["--d-model", "even", "7"],
     ["p.png"]),
    ("pe-plot-dims-out-of-range", ["pe-plot", "--dims", "99", "-o", "{dir}/p.png"], 2, ["dims", "0..63", "99"],
     ["p.png"]),
    ("pe-plot-dims-not-numbers", ["pe-plot", "--dims", "abc", "-o", "{dir}/p.png"], 2,
     ["--dims", "integers", "'abc'"], ["p.png"]),
    ("pe-plot-output-suffix", ["pe-plot", "-o", "{dir}/p.jpg"], 2, [".png or .svg", "p.jpg"], ["p.jpg"]),
    # bench, demo, the command itself
    ("bench-seq-lens-zero", ["bench", "--seq-lens", "0"], 2, ["--seq-lens", "'0'", "positive integer"], []),
    ("bench-seq-lens-not-numbers", ["bench", "--seq-lens", "abc"], 2, ["--seq-lens", "'abc'", "256,1024"], []),
    ("bench-backend-unknown", ["bench", "--backends", "nope"], 2, ["--backends", "'nope'", "math"], []),
    ("bench-out-unwritable", ["bench", "--quick", "--out", "/proc/attnlab-bench"], 1,
     ["--out", "/proc/attnlab-bench"], []),
    ("demo-part-unknown", ["demo", "nope"], 2, ["PART", "'nope'", "toy"], []),
    ("demo-out-is-a-file", ["demo", "--out", "{dir}/plain.txt"], 2, ["--out", "plain.txt", "is a file"], []),
    ("command-unknown", ["nope"], 2, ["No such command 'nope'"], []),
    # train-seq2seq and translate
    ("train-seq2seq-tsv-line-without-tab", [*S2S_TRAIN[:1], "--data", "{dir}/notab.tsv", *S2S_TRAIN[3:]], 1,
     ["notab.tsv:2", "no tab", "source<TAB>target"], ["new"]),
    ("train-seq2seq-task-and-data", [*S2S_TRAIN, "--data", "{dir}/pairs.tsv"], 2, ["--task", "--data", "not both"],
     ["new"]),
    ("train-seq2seq-label-smoothing-out-of-range", [*S2S_TRAIN, "--label-smoothing", "1.5"], 1,
     ["label_smoothing", "[0, 1)", "1.5"], ["new"]),
    ("train-seq2seq-target-too-long", [*S2S_TRAIN[:1], "--data", "{dir}/pairs.tsv", *S2S_TRAIN[3:],
                                       "--context-length", "4"], 1, ["target of", "context_length=4", "never"],
     ["new"]),
    ("translate-source-too-long", [*TRANSLATE, "1" * 30], 1, ["source 1", "30 characters", "context_length=24",
                                                               "--truncate"], []),
    ("translate-characters-unknown", [*TRANSLATE, "12ab"], 1, ["'a'", "'b'", "not in the vocabulary"], []),
    ("translate-empty-source", [*TRANSLATE, "12", " "], 1, ["source 2", "empty"], []),
    ("translate-no-source", TRANSLATE, 2, ["TEXTS"], []),
    ("translate-beam-zero", [*TRANSLATE, "12", "--beam", "0"], 1, ["beam", "positive", "got 0"], []),
    ("translate-alpha-negative", [*TRANSLATE, "12", "--beam", "2", "--alpha", "-1"], 1, ["alpha", ">= 0", "-1.0"],
     []),
    ("translate-heatmap-suffix", [*TRANSLATE, "12", "--heatmap", "{dir}/h.jpg"], 1, [".png or .svg", "h.jpg"],
     ["h.jpg"]),
    ("translate-gpt-checkpoint", ["translate", "--checkpoint", "{dir}/run", "First"], 1,
     ["{dir}/run", "decoder-only", "attnlab sample"], []),
    ("explain-checkpoint-not-a-translation-model", ["explain", "First", "--checkpoint", "{dir}/run"], 1,
     ["decoder-only", "attnlab sample"], []),
    ("explain-checkpoint-step-out-of-range", ["explain", "12", "--checkpoint", "{dir}/s2s", "--query", "99"], 2,
     ["query index", "got 99", "the translation is"], []),
    ("sample-seq2seq-checkpoint", ["sample", "--checkpoint", "{dir}/s2s", "12"], 1,
     ["{dir}/s2s", "encoder-decoder", "attnlab translate"], []),
    # heads
    ("heads-rollout-empty-text", ["heads", "rollout", "", "-o", "{dir}/r.png"], 2, ["text", "empty"], ["r.png"]),
    ("heads-rollout-layer-out-of-range", ["heads", "rollout", "a b c", "--layer", "5", "-o", "{dir}/r.png"], 2,
     ["--layer", "0..0", "got 5"], ["r.png"]),
    ("heads-rollout-output-suffix", ["heads", "rollout", "a b c", "-o", "{dir}/r.txt"], 2, [".png or .svg", "r.txt"],
     ["r.txt"]),
    ("heads-rollout-translation-checkpoint", ["heads", "rollout", "12", "--model", "{dir}/s2s", "-o", "{dir}/r.png"],
     2, ["encoder-decoder", "attnlab translate"], ["r.png"]),
    ("heads-induction-head-out-of-range", ["heads", "induction", "--out", "{dir}/ind", "--layer", "0", "--head", "7"],
     2, ["--head", "0..3", "got 7"], ["ind"]),
    ("heads-induction-layer-out-of-range", ["heads", "induction", "--out", "{dir}/ind", "--layer", "2", "--head",
                                            "0"], 2, ["--layer", "0..1", "2-layer", "got 2"], ["ind"]),
    ("heads-induction-steps-zero", ["heads", "induction", "--out", "{dir}/ind", "--steps", "0"], 1,
     ["steps", "positive", "got 0"], ["ind"]),
    ("heads-roles-text-empty", ["heads", "roles", "--text", "{dir}/empty.txt", "--out", "{dir}/roles"], 1,
     ["--text", "empty.txt", "no sentences"], ["roles"]),
    ("heads-roles-text-not-utf8", ["heads", "roles", "--text", "{dir}/binary.dat", "--out", "{dir}/roles"], 1,
     ["--text", "binary.dat", "not UTF-8", "offset 3"], ["roles"]),
    ("heads-roles-text-missing", ["heads", "roles", "--text", "{dir}/nope.txt", "--out", "{dir}/roles"], 1,
     ["--text", "nope.txt", "cannot read"], ["roles"]),
    ("heads-prune-step-zero", ["heads", "prune", "--checkpoint", "{dir}/run", "--step", "0", "--out", "{dir}/prune"],
     1, ["step", "(0, 1)", "got 0"], ["prune"]),
    ("heads-prune-step-one", ["heads", "prune", "--checkpoint", "{dir}/run", "--step", "1", "--out", "{dir}/prune"],
     1, ["step", "(0, 1)", "got 1"], ["prune"]),
    ("heads-prune-translation-checkpoint", ["heads", "prune", "--checkpoint", "{dir}/s2s", "--out", "{dir}/prune"], 1,
     ["encoder-decoder", "attnlab translate"], ["prune"]),
    ("heads-prune-checkpoint-without-attention", ["heads", "prune", "--checkpoint", "{dir}/no_attention", "--out",
                                                  "{dir}/prune"], 1,
     ["no_attention", "does not match the model", "missing", "attn"], ["prune"]),
    ("heads-prune-data-missing", ["heads", "prune", "--checkpoint", "{dir}/run", "--data", "{dir}/nope.txt", "--out",
                                  "{dir}/prune"], 1, ["data:", "nope.txt"], ["prune"]),
]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """Files of every kind a user might hand over, and a tiny trained run with damaged copies of it."""
    from corpora import TEXT

    d = tmp_path_factory.mktemp("bad")
    (d / "corpus.txt").write_text(TEXT, encoding="utf-8")
    (d / "short.txt").write_text("To be, or not to be.\n", encoding="utf-8")
    (d / "binary.dat").write_bytes(b"abc\xd0\xd1")
    (d / "empty.txt").write_text("", encoding="utf-8")
    (d / "plain.txt").write_text("a file, not a directory\n", encoding="utf-8")
    (d / "emptydir").mkdir()
    (d / "bad.toml").write_text("max_iters = \n", encoding="utf-8")
    (d / "unknown.toml").write_text("nonsense_key = 3\n", encoding="utf-8")
    (d / "pairs.tsv").write_text("one\tun\ntwo\tdeux\nthree\ttrois\n", encoding="utf-8")
    (d / "notab.tsv").write_text("one\tun\ntwo deux\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["train-seq2seq", "--task", "numbers", "--out", str(d / "s2s"), *S2S_TINY])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["train", "--data", str(d / "corpus.txt"), "--out", str(d / "run"), *TINY])
    assert result.exit_code == 0, result.output
    checkpoint = json.loads((d / "run" / "checkpoint.json").read_text())["latest"]
    for name, damage in (("corrupt_state", lambda c: (c / "state.json").write_text("{bad")),
                         ("corrupt_weights", lambda c: (c / "model.safetensors").write_bytes(b"\x00" * 100)),
                         ("no_tokenizer", lambda c: (c / "tokenizer.json").unlink()),
                         ("bad_pointer", lambda c: (c.parents[1] / "checkpoint.json").write_text(
                             '{"latest": "checkpoints/none"}')),
                         ("no_attention", _drop_attention_weights)):
        shutil.copytree(d / "run", d / name)
        damage(d / name / checkpoint)
    return d


def _drop_attention_weights(checkpoint: Path) -> None:
    """The checkpoint's weights without its attention layers' tensors (a model with no attention to measure)."""
    from safetensors.torch import load_file, save_file

    weights = load_file(checkpoint / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".attn." not in k}, checkpoint / "model.safetensors")


def test_at_least_sixty_cases_with_distinct_ids():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "argv", "status", "words", "absent"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(fixtures, one_thread, case_id, argv, status, words, absent):
    args = [a.replace("{dir}", str(fixtures)) for a in argv]
    before = set(fixtures.rglob("*"))
    result = CliRunner().invoke(main, args)
    out = result.output
    assert result.exit_code == status, out
    assert "Traceback" not in out and (result.exception is None or isinstance(result.exception, SystemExit)), out
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and out.strip().endswith(errors[0]), out  # one line, and the last thing said
    for word in words:
        word = word.replace("{dir}", str(fixtures))
        assert word in errors[0], (word, errors[0])
    for name in absent:
        assert not (fixtures / name).exists(), f"{name} was (partly) written"
    left = {p for p in set(fixtures.rglob("*")) - before if re.search(r"\.tmp|write-test", p.name)}
    assert not left, f"temporary files left behind: {sorted(map(str, left))}"


@pytest.mark.parametrize(("case_id", "argv", "status"), [c[:3] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_in_chinese(fixtures, one_thread, case_id, argv, status):
    """A reader of Chinese gets every one of these errors in Chinese: the command line checks what it hands to the
    building blocks, whose errors are English (docs/translations.md)."""
    result = CliRunner().invoke(main, ["--lang", "zh", *(a.replace("{dir}", str(fixtures)) for a in argv)])
    errors = [line for line in result.output.splitlines() if line.startswith("错误：")]
    assert result.exit_code == status and len(errors) == 1, result.output
    assert CJK.search(errors[0].removeprefix("错误：")), errors[0]


def test_the_docs_list_every_case():
    listed = set(re.findall(r"`([a-z0-9-]+)`", DOCS.read_text(encoding="utf-8")))
    missing = [c[0] for c in CASES if c[0] not in listed]
    assert not missing, f"add to docs/bad-input.md: {missing}"


def _interrupt(args: list[str], ready, workdir: Path, timeout: float = 120.0) -> tuple[int, str, str]:
    """Run ``attnlab args`` in ``workdir``, send SIGINT once ``ready(stdout so far)`` holds; (status, out, err)."""
    attnlab = str(Path(sys.executable).with_name("attnlab"))
    stdout = workdir / "stdout.txt"
    with stdout.open("w") as sink:
        proc = subprocess.Popen([attnlab, *args], cwd=workdir, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                stdout=sink, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + timeout
        while not ready(stdout.read_text(encoding="utf-8")) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    return proc.returncode, stdout.read_text(encoding="utf-8"), err


def test_sigint_while_sampling_exits_130_without_a_traceback(fixtures, tmp_path):
    status, out, err = _interrupt(["sample", "--checkpoint", str(fixtures / "run"), "First", "--max-new-tokens",
                                   "100000000"], ready=lambda out: len(out) > 20, workdir=tmp_path)
    assert out.startswith("First") and status == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "Interrupted."


def test_sigint_during_the_demo_stops_it_before_the_report(tmp_path):
    status, _, err = _interrupt(["demo", "--out", "out"], ready=lambda out: "The toy" in out, workdir=tmp_path)
    assert status == 130 and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "out" / "report.html").exists()
    assert not [p for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]
