"""Bad files handed over (corpora, pairs, configs, checkpoints, tokenizers, FIFOs and devices) and files written
(symbolic links, directories that are not a run's): one clear line naming the file, nothing half-written, nothing
overwritten that was not the named output. Each case is a row of ``CASES`` (see tests/bad_inputs.py).
"""

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnlab.cli import main
from bad_inputs import S2S_TINY, run_case, run_case_in_chinese, undocumented

TRAIN = ["train", "--data", "{dir}/corpus.txt", "--out", "{dir}/new"]
S2S_TRAIN = ["train-seq2seq", "--task", "numbers", "--out", "{dir}/new"]
RESUME = ["--resume", "--max-iters", "6", "-q"]


def config(name: str) -> list[str]:
    return [*TRAIN, "--config", "{dir}/" + name]


def sample(run: str) -> list[str]:
    return ["sample", "--checkpoint", "{dir}/" + run, "To"]


def model(directory: str) -> list[str]:
    return ["sample", "--model", "{dir}/" + directory, "To"]


# (id, argv, exit status, words the error line must hold, paths that must not exist afterwards)
CASES = [
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
    ("train-config-missing", [*TRAIN, "--config", "{dir}/nope.toml"], 1, ["config", "nope.toml"], ["new"]),
    ("train-config-not-toml", [*TRAIN, "--config", "{dir}/bad.toml"], 1, ["config", "bad.toml", "not valid TOML"],
     ["new"]),
    ("train-config-unknown-key", [*TRAIN, "--config", "{dir}/unknown.toml"], 1,
     ["unknown.toml", "unknown key 'nonsense_key'"], ["new"]),
    ("train-config-directory", [*TRAIN, "--config", "{dir}/emptydir"], 2, ["--config", "emptydir", "directory"],
     ["new"]),
    ("explore-no-checkpoint-inside", ["explore", "--checkpoint", "{dir}/emptydir"], 1,
     ["emptydir", "cannot be explored", "checkpoint.json"], []),
    ("explore-corrupt-weights", ["explore", "--checkpoint", "{dir}/corrupt_weights"], 1,
     ["corrupt_weights", "cannot be explored", "model.safetensors", "corrupt"], []),
    ("explore-model-dir-without-config", ["explore", "--model-dir", "{dir}/emptydir"], 1,
     ["emptydir", "cannot be explored", "config.json"], []),
    ("sample-no-checkpoint-inside", ["sample", "--checkpoint", "{dir}/emptydir", "To"], 1,
     ["checkpoint", "emptydir", "checkpoint.json"], []),
    ("sample-corrupt-state", ["sample", "--checkpoint", "{dir}/corrupt_state", "To"], 1,
     ["corrupt_state", "state.json", "not valid JSON"], []),
    ("sample-corrupt-weights", ["sample", "--checkpoint", "{dir}/corrupt_weights", "To"], 1,
     ["corrupt_weights", "model.safetensors", "corrupt"], []),
    ("sample-missing-tokenizer", ["sample", "--checkpoint", "{dir}/no_tokenizer", "To"], 1,
     ["no_tokenizer", "tokenizer.json", "missing"], []),
    ("sample-pointer-to-nothing", ["sample", "--checkpoint", "{dir}/bad_pointer", "To"], 1,
     ["bad_pointer", "checkpoint.json", "points at", "checkpoints/none", "does not exist"], []),
    ("explain-corrupt-checkpoint", ["explain", "To", "--model", "{dir}/corrupt_weights"], 2,
     ["model.safetensors", "corrupt"], []),
    ("train-seq2seq-tsv-line-without-tab", [*S2S_TRAIN[:1], "--data", "{dir}/notab.tsv", *S2S_TRAIN[3:]], 1,
     ["notab.tsv:2", "no tab", "source<TAB>target"], ["new"]),
    ("train-seq2seq-tsv-one-source", [*S2S_TRAIN[:1], "--data", "{dir}/one_source.tsv", *S2S_TRAIN[3:]], 1,
     ["data:", "one_source.tsv", "at least 2 distinct sources", "got 1"], ["new"]),
    # not a regular file: refused before reading, never a hang, no output folder left behind
    ("train-data-fifo", ["train", "--data", "{dir}/fifo.txt", "--out", "{dir}/new"], 1,
     ["data:", "fifo.txt", "not a regular file"], ["new"]),
    ("train-data-device", ["train", "--data", "/dev/zero", "--out", "{dir}/new"], 1,
     ["data:", "/dev/zero", "not a regular file"], ["new"]),
    ("train-seq2seq-data-fifo", [*S2S_TRAIN[:1], "--data", "{dir}/fifo.tsv", *S2S_TRAIN[3:]], 1,
     ["data:", "fifo.tsv", "not a regular file"], ["new"]),
    ("train-config-fifo", [*TRAIN, "--config", "{dir}/fifo.toml"], 1, ["config:", "fifo.toml", "not a regular file"],
     ["new"]),
    # every reader of files, every file option: a FIFO, a link to one, a link to /dev/zero, a directory, bytes that
    # are not UTF-8; one line naming the option and the path, never a hang
    ("train-data-link-to-fifo", ["train", "--data", "{dir}/link_to_fifo.txt", "--out", "{dir}/new"], 1,
     ["data:", "link_to_fifo.txt", "not a regular file"], ["new"]),
    ("train-data-link-to-device", ["train", "--data", "{dir}/link_to_zero.txt", "--out", "{dir}/new"], 1,
     ["data:", "link_to_zero.txt", "not a regular file"], ["new"]),
    ("train-config-link-to-device", [*TRAIN, "--config", "{dir}/link_to_zero.toml"], 1,
     ["config:", "link_to_zero.toml", "not a regular file"], ["new"]),
    ("train-seq2seq-data-link-to-device", [*S2S_TRAIN[:1], "--data", "{dir}/link_to_zero.txt", *S2S_TRAIN[3:]], 1,
     ["data:", "link_to_zero.txt", "not a regular file"], ["new"]),
    ("train-seq2seq-data-not-utf8", [*S2S_TRAIN[:1], "--data", "{dir}/binary.dat", *S2S_TRAIN[3:]], 1,
     ["data:", "binary.dat", "not UTF-8", "offset 3"], ["new"]),
    ("train-seq2seq-data-directory", [*S2S_TRAIN[:1], "--data", "{dir}/emptydir", *S2S_TRAIN[3:]], 2,
     ["--data", "emptydir", "directory"], ["new"]),
    ("heads-roles-text-fifo", ["heads", "roles", "--text", "{dir}/fifo.txt", "--out", "{dir}/roles"], 1,
     ["--text", "fifo.txt", "not a regular file"], ["roles"]),
    ("heads-roles-text-link-to-fifo", ["heads", "roles", "--text", "{dir}/link_to_fifo.txt", "--out", "{dir}/roles"],
     1, ["--text", "link_to_fifo.txt", "not a regular file"], ["roles"]),
    ("heads-roles-text-link-to-device", ["heads", "roles", "--text", "{dir}/link_to_zero.txt", "--out",
                                         "{dir}/roles"], 1, ["--text", "link_to_zero.txt", "not a regular file"],
     ["roles"]),
    ("heads-roles-text-directory", ["heads", "roles", "--text", "{dir}/emptydir", "--out", "{dir}/roles"], 2,
     ["--text", "emptydir", "directory"], ["roles"]),
    ("heads-prune-data-fifo", ["heads", "prune", "--checkpoint", "{dir}/run", "--data", "{dir}/fifo.txt", "--out",
                               "{dir}/prune"], 1, ["data:", "fifo.txt", "not a regular file"], ["prune"]),
    ("heads-prune-data-link-to-device", ["heads", "prune", "--checkpoint", "{dir}/run", "--data",
                                         "{dir}/link_to_zero.txt", "--out", "{dir}/prune"], 1,
     ["data:", "link_to_zero.txt", "not a regular file"], ["prune"]),
    ("heads-prune-data-not-utf8", ["heads", "prune", "--checkpoint", "{dir}/run", "--data", "{dir}/binary.dat",
                                   "--out", "{dir}/prune"], 1, ["data:", "binary.dat", "not UTF-8"], ["prune"]),
    ("sample-state-is-a-directory", sample("state_directory"), 1, ["checkpoint:", "state.json", "is a directory"], []),
    ("sample-state-fifo", sample("state_fifo"), 1, ["checkpoint:", "state.json", "not a regular file"], []),
    ("sample-state-not-utf8", sample("state_not_utf8"), 1, ["checkpoint:", "state.json", "not UTF-8", "0xde"], []),
    ("sample-pointer-is-a-directory", sample("pointer_directory"), 1,
     ["checkpoint:", "checkpoint.json", "is a directory"], []),
    ("sample-tokenizer-not-utf8", sample("tokenizer_not_utf8"), 1, ["tokenizer.json", "not UTF-8", "0xff"], []),
    ("sample-model-config-not-utf8", model("hf_config_not_utf8"), 1,
     ["model:", "hf_config_not_utf8/config.json", "not UTF-8", "0xde"], []),
    ("sample-model-config-is-a-directory", model("hf_config_directory"), 1,
     ["model:", "hf_config_directory/config.json", "is a directory"], []),
    ("explain-model-state-is-a-directory", ["explain", "To", "--model", "{dir}/state_directory"], 2,
     ["state.json", "is a directory"], []),
    ("heads-rollout-model-config-not-utf8", ["heads", "rollout", "To", "--model", "{dir}/hf_config_not_utf8", "-o",
                                             "{dir}/r.png"], 2, ["config.json", "not UTF-8"], ["r.png"]),
    ("heads-roles-model-config-not-utf8", ["heads", "roles", "--model", "{dir}/hf_config_not_utf8", "--text",
                                           "{dir}/short.txt", "--out", "{dir}/roles"], 1,
     ["model:", "config.json", "not UTF-8"], ["roles"]),
    ("export-state-is-a-directory", ["export", "--checkpoint", "{dir}/state_directory", "--out",
                                     "{dir}/x.safetensors"], 1, ["state.json", "is a directory"], ["x.safetensors"]),
    ("train-resume-state-is-a-directory", ["train", "--out", "{dir}/state_directory", *RESUME], 1,
     ["state.json", "is a directory"], []),
    # an output that is a link to what is no regular file: refused, and the FIFO stays a FIFO
    ("heatmap-output-link-to-fifo", ["heatmap", "a b", "-o", "{dir}/link_to_fifo.png"], 1,
     ["cannot write", "link_to_fifo.png", "links to", "fifo.txt", "not a regular file"], []),
    ("export-out-link-to-fifo", ["export", "--checkpoint", "{dir}/run", "--out", "{dir}/link_to_fifo.safetensors"],
     1, ["cannot write", "link_to_fifo.safetensors", "not a regular file"], []),
    ("translate-heatmap-link-to-fifo", ["translate", "--checkpoint", "{dir}/s2s", "12", "--heatmap",
                                        "{dir}/link_to_fifo.png"], 1, ["link_to_fifo.png", "not a regular file"],
     []),
    # config values of the wrong type: the key, the value, the type expected
    ("train-config-string-for-int", config("string_for_int.toml"), 1,
     ["string_for_int.toml", "max_iters = 'abc'", "expected an integer"], ["new"]),
    ("train-config-string-for-float", config("string_for_float.toml"), 1,
     ["learning_rate = 'fast'", "expected a finite number"], ["new"]),
    ("train-config-float-seed", config("float_seed.toml"), 1, ["seed = 1.5", "expected an integer"], ["new"]),
    ("train-config-seed-too-big", config("huge_seed.toml"), 1, ["seed", "2**64 - 1", str(2**64)], ["new"]),
    ("train-config-string-for-flag", config("string_for_flag.toml"), 1, ["compile = 'yes'", "true or false"],
     ["new"]),
    ("train-config-nan", config("nan_float.toml"), 1, ["learning_rate = nan", "finite number"], ["new"]),
    ("train-config-model-not-a-table", config("model_not_a_table.toml"), 1, ["model = 3", "a table"], ["new"]),
    ("train-config-model-key-at-top", config("model_key_at_top.toml"), 1, ["'dropout'", "[model] table"], ["new"]),
    ("train-config-string-for-model-flag", config("string_for_model_flag.toml"), 1,
     ["[model]", "bias = 'no'", "true or false"], ["new"]),
    ("train-config-float-for-model-int", config("float_for_model_int.toml"), 1,
     ["[model]", "context_length = 16.0", "an integer"], ["new"]),
    ("train-config-window-wider-than-context", config("window_wider_than_context.toml"), 1,
     ["sliding_window=40", "wider than context_length=32"], ["new"]),
    ("train-config-not-utf8", config("not_utf8.toml"), 1, ["config:", "not_utf8.toml", "not UTF-8", "0xff"], ["new"]),
    # damaged checkpoints: the file named, and what is wrong with it
    ("sample-truncated-tokenizer", sample("truncated_tokenizer"), 1,
     ["truncated_tokenizer", "tokenizer.json", "not valid JSON", "truncated"], []),
    ("sample-tokenizer-without-chars", sample("tokenizer_without_chars"), 1,
     ["tokenizer.json", "not a tokenizer", "'chars'"], []),
    ("sample-tokenizer-of-another-model", sample("other_tokenizer"), 1,
     ["tokenizer.json holds 2 tokens", "trained on"], []),
    ("sample-truncated-pointer", sample("truncated_pointer"), 1,
     ["truncated_pointer", "checkpoint.json", "not valid JSON", "truncated"], []),
    ("sample-pointer-not-an-object", sample("pointer_array"), 1, ["checkpoint.json", "JSON array", "JSON object"],
     []),
    ("sample-pointer-to-a-checkpoint-without-state", sample("no_state"), 1,
     ["no_state", "checkpoint.json", "points at", "has no state.json"], []),
    ("sample-state-without-model-config", sample("state_without_model"), 1,
     ["state.json", "'model_config' is missing"], []),
    ("sample-config-json-without-architectures", ["sample", "--model", "{dir}/hf_no_architectures", "To"], 1,
     ["hf_no_architectures", "config.json", "architectures", "no attnlab checkpoint"], []),
    # Hugging Face model directories: the field or the tensor named, with its value and what was expected
    ("sample-model-config-field-not-implemented", model("hf_quantised"), 1,
     ["hf_quantised", "config.json", "cannot honour quantization_config={'bits': 4}", "does not implement"], []),
    ("sample-model-softcap-zero", model("hf_softcap_zero"), 1,
     ["config.json", "attn_logit_softcapping=0.0", "needs cap > 0"], []),
    ("sample-model-final-softcap-negative", model("hf_final_softcap_negative"), 1,
     ["config.json", "final_logit_softcapping=-1.0", "needs cap > 0"], []),
    ("sample-model-window-wider-than-context", model("hf_window_wider_than_context"), 1,
     ["config.json", "sliding_window=100", "at most max_position_embeddings=64"], []),
    ("sample-model-tensor-of-another-shape", model("hf_tensor_of_another_shape"), 1,
     ["model.safetensors", "'model.layers.0.mlp.up_proj.weight'", "(47, 32)", "expects (48, 32)"], []),
    ("explain-model-tensor-of-another-shape", ["explain", "To be", "--model", "{dir}/hf_tensor_of_another_shape"],
     2, ["'model.layers.0.mlp.up_proj.weight'", "(47, 32)", "expects (48, 32)"], []),
    # resuming from a damaged checkpoint: nothing trained, nothing of the run changed
    ("train-resume-truncated-optimizer", ["train", "--out", "{dir}/truncated_optimizer", *RESUME], 1,
     ["optimizer.safetensors", "cannot be read", "truncated or corrupt"], []),
    ("train-resume-optimizer-of-another-shape", ["train", "--out", "{dir}/reshaped_optimizer", *RESUME], 1,
     ["optimizer.safetensors", "exp_avg", "shape (3,)", "the parameter has shape"], []),
    ("train-resume-state-without-optimizer", ["train", "--out", "{dir}/state_without_optimizer", *RESUME], 1,
     ["state.json", "'optimizer' is missing"], []),
    ("train-resume-state-without-history", ["train", "--out", "{dir}/state_without_history", *RESUME], 1,
     ["state.json", "'history' is missing"], []),
    ("train-resume-truncated-rng", ["train", "--out", "{dir}/truncated_rng", *RESUME], 1,
     ["rng.safetensors", "cannot be read"], []),
    ("train-resume-missing-rng", ["train", "--out", "{dir}/no_rng", *RESUME], 1,
     ["no_rng", "rng.safetensors", "cannot be read", "No such file"], []),
    ("train-resume-missing-tokenizer", ["train", "--out", "{dir}/no_tokenizer", *RESUME], 1,
     ["no_tokenizer", "tokenizer.json is missing"], []),
    # where a run writes: never among someone else's files
    ("train-out-holds-other-files", [*TRAIN[:3], "--out", "{dir}/foreign"], 1,
     ["out:", "foreign", "notes.txt", "new or empty directory"], ["foreign/tokenizer.json", "foreign/cache"]),
]


def test_distinct_ids():
    assert len({c[0] for c in CASES}) == len(CASES) >= 45


@pytest.mark.parametrize(("case_id", "argv", "status", "words", "absent"), CASES, ids=[c[0] for c in CASES])
def test_bad_file(bad_dir, one_thread, case_id, argv, status, words, absent):
    run_case(bad_dir, argv, status, words, absent)


@pytest.mark.parametrize(("case_id", "argv", "status"), [c[:3] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_file_in_chinese(bad_dir, one_thread, case_id, argv, status):
    run_case_in_chinese(bad_dir, argv, status)


def test_the_docs_list_every_case():
    assert not undocumented(CASES), f"add to docs/bad-input.md: {undocumented(CASES)}"


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_an_output_that_is_a_symbolic_link_is_written_through(tmp_path, suffix):
    """As cp does: the link's target gets the new content, the link stays a link (also when it dangles)."""
    target, dangling = tmp_path / "real" / f"target{suffix}", tmp_path / "real" / f"new{suffix}"
    target.parent.mkdir()
    target.write_text("old")
    for link, points_at in ((tmp_path / f"link{suffix}", target), (tmp_path / f"dangling{suffix}", dangling)):
        link.symlink_to(points_at)
        result = CliRunner().invoke(main, ["heatmap", "a b", "-o", str(link)])
        assert result.exit_code == 0, result.output
        assert link.is_symlink() and os.readlink(link) == str(points_at)
        assert points_at.read_bytes()[:4] in (b"\x89PNG", b"<?xm")
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["real", f"target{suffix}", f"new{suffix}", f"link{suffix}", f"dangling{suffix}"])


def test_a_checkpoint_pointer_that_is_a_symbolic_link_stays_one(tmp_path):
    """A run whose checkpoint.json is a link (kept elsewhere): a new checkpoint writes through it."""
    out, kept = tmp_path / "run", tmp_path / "kept.json"
    args = ["train-seq2seq", "--task", "numbers", "--out", str(out), *S2S_TINY]
    assert CliRunner().invoke(main, args).exit_code == 0
    kept.write_text((out / "checkpoint.json").read_text())
    (out / "checkpoint.json").unlink()
    (out / "checkpoint.json").symlink_to(kept)
    result = CliRunner().invoke(main, [*args[:5], "--resume", "--steps", "4", "-q"])
    assert result.exit_code == 0, result.output
    assert (out / "checkpoint.json").is_symlink() and "step_0000004" in kept.read_text()
    assert Path(out / "checkpoints" / "step_0000004").is_dir()
