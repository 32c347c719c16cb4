"""What the bad-input tests share: the files a hostile user hands over (a tiny trained run of each kind and damaged
copies of it, FIFOs, configs of the wrong type), and the check every case passes.

A case is a row ``(id, argv, exit status, words, absent)``: ``{dir}`` in argv is the folder :func:`make_bad_dir`
filled; the one ``Error:`` line must hold every word (the argument, the value given, what was expected); the
paths in ``absent`` must not exist afterwards. docs/bad-input.md lists every id (each test file checks its own).
"""

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from attnlab.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "bad-input.md"
TINY = ["--preset", "tiny", "--context-length", "16", "--batch-size", "2", "--eval-interval", "4", "--eval-iters",
        "1", "--max-iters", "4", "-q"]
S2S_TINY = ["--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1", "--num-decoder-layers", "1", "--d-ff",
            "32", "--context-length", "24", "--batch-size", "4", "--steps", "2", "--eval-interval", "2",
            "--eval-iters", "1", "--train-pairs", "50", "--val-pairs", "10", "-q"]


def _replace_tensor(path: Path, shape: tuple[int, ...]) -> None:
    """Give the first tensor of a safetensors file another shape (a file from another model, or damaged)."""
    tensors = load_file(path)
    tensors[sorted(tensors)[0]] = torch.zeros(shape)
    save_file(tensors, path)


def _edit_state(edit):
    def apply(checkpoint: Path) -> None:
        state = json.loads((checkpoint / "state.json").read_text())
        edit(state)
        (checkpoint / "state.json").write_text(json.dumps(state))
    return apply


def _drop_attention_weights(checkpoint: Path) -> None:
    """The checkpoint's weights without its attention layers' tensors (a model with no attention to measure)."""
    from safetensors.torch import load_file, save_file

    weights = load_file(checkpoint / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".attn." not in k}, checkpoint / "model.safetensors")


#: name -> how a copy of the trained run is damaged (applied to its checkpoint directory)
DAMAGES = {
    "corrupt_state": lambda c: (c / "state.json").write_text("{bad"),
    "corrupt_weights": lambda c: (c / "model.safetensors").write_bytes(b"\x00" * 100),
    "no_tokenizer": lambda c: (c / "tokenizer.json").unlink(),
    "bad_pointer": lambda c: (c.parents[1] / "checkpoint.json").write_text('{"latest": "checkpoints/none"}'),
    "truncated_tokenizer": lambda c: (c / "tokenizer.json").write_text((c / "tokenizer.json").read_text()[:12]),
    "truncated_pointer": lambda c: (c.parents[1] / "checkpoint.json").write_text('{"latest": "checkp'),
    "pointer_array": lambda c: (c.parents[1] / "checkpoint.json").write_text("[]"),
    "no_state": lambda c: (c / "state.json").unlink(),
    "other_tokenizer": lambda c: (c / "tokenizer.json").write_text('{"kind": "char", "chars": ["a", "b"]}'),
    "tokenizer_without_chars": lambda c: (c / "tokenizer.json").write_text('{"kind": "char"}'),
    "state_without_model": _edit_state(lambda s: s.pop("model_config")),
    "state_without_optimizer": _edit_state(lambda s: s.pop("optimizer")),
    "state_without_history": _edit_state(lambda s: s.pop("history")),
    "no_attention": _drop_attention_weights,
    "truncated_optimizer": lambda c: (c / "optimizer.safetensors").write_bytes(
        (c / "optimizer.safetensors").read_bytes()[:100]),
    "reshaped_optimizer": lambda c: _replace_tensor(c / "optimizer.safetensors", (3,)),
    "truncated_rng": lambda c: (c / "rng.safetensors").write_bytes((c / "rng.safetensors").read_bytes()[:50]),
    "no_rng": lambda c: (c / "rng.safetensors").unlink(),
    # files of the wrong kind where a checkpoint's JSON should be: a directory, a FIFO, bytes that are not UTF-8
    "state_directory": lambda c: ((c / "state.json").unlink(), (c / "state.json").mkdir()),
    "state_fifo": lambda c: ((c / "state.json").unlink(), os.mkfifo(c / "state.json")),
    "state_not_utf8": lambda c: (c / "state.json").write_bytes(b'{"step": 4, "\xde": 1}'),
    "pointer_directory": lambda c: ((c.parents[1] / "checkpoint.json").unlink(),
                                    (c.parents[1] / "checkpoint.json").mkdir()),
    "tokenizer_not_utf8": lambda c: (c / "tokenizer.json").write_bytes(b'{"kind": "char", "chars": ["\xff"]}'),
}

#: name -> a TOML config that is wrong in one way
CONFIGS = {
    "bad.toml": "max_iters = \n",
    "unknown.toml": "nonsense_key = 3\n",
    "string_for_int.toml": 'max_iters = "abc"\n',
    "string_for_float.toml": 'learning_rate = "fast"\n',
    "float_seed.toml": "seed = 1.5\n",
    "string_for_flag.toml": 'compile = "yes"\n',
    "nan_float.toml": "learning_rate = nan\n",
    "model_not_a_table.toml": "model = 3\n",
    "model_key_at_top.toml": "dropout = 0.1\n",
    "string_for_model_flag.toml": '[model]\nbias = "no"\n',
    "float_for_model_int.toml": "[model]\ncontext_length = 16.0\n",
    "window_wider_than_context.toml": 'arch = "modern"\npreset = "tiny"\n[model]\nsliding_window = 40\n',  # of 32
    "huge_seed.toml": f"seed = {2**64}\n",
    "not_utf8.toml": b"max_iters = 1 # \xff\n",
}


def _edited_copy(src: Path, dst: Path, config: dict | None = None, tensors=None) -> None:
    """A copy of the model directory ``src``: ``config`` merged into its config.json, ``tensors`` applied to its
    weights (a dict of tensors in, one out)."""
    shutil.copytree(src, dst)
    if config:
        raw = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps({**raw, **config}))
    if tensors:
        weights = next(dst.glob("*.safetensors"))
        save_file(tensors(load_file(weights)), weights, metadata={"format": "pt"})


def make_model_dirs(d: Path) -> None:
    """Hugging Face model directories (tiny ones written by transformers), each wrong in one way: ``hf_*``."""
    from hf_checkpoints import write_checkpoint

    for arch in ("qwen3", "gemma2", "mistral"):
        write_checkpoint(arch, d / f"hf_{arch}")
    _edited_copy(d / "hf_qwen3", d / "hf_quantised", {"quantization_config": {"bits": 4}})
    _edited_copy(d / "hf_gemma2", d / "hf_softcap_zero", {"attn_logit_softcapping": 0.0})
    _edited_copy(d / "hf_gemma2", d / "hf_final_softcap_negative", {"final_logit_softcapping": -1.0})
    _edited_copy(d / "hf_mistral", d / "hf_window_wider_than_context", {"sliding_window": 100})  # of 64
    name = "model.layers.0.mlp.up_proj.weight"  # (48, 32) in the config
    _edited_copy(d / "hf_qwen3", d / "hf_tensor_of_another_shape", tensors=lambda t: {**t, name: torch.zeros(47, 32)})
    shutil.copytree(d / "hf_qwen3", d / "hf_config_not_utf8")
    config = d / "hf_config_not_utf8" / "config.json"
    config.write_bytes(config.read_bytes().replace(b"{", b'{"\xde": 0, ', 1))
    shutil.copytree(d / "hf_qwen3", d / "hf_config_directory")
    (d / "hf_config_directory" / "config.json").unlink()
    (d / "hf_config_directory" / "config.json").mkdir()


def make_bad_dir(d: Path) -> Path:
    """Fill ``d`` with files of every kind a user might hand over, two tiny trained runs and damaged copies."""
    from corpora import TEXT

    (d / "corpus.txt").write_text(TEXT, encoding="utf-8")
    (d / "short.txt").write_text("To be, or not to be.\n", encoding="utf-8")
    (d / "binary.dat").write_bytes(b"abc\xd0\xd1")
    (d / "empty.txt").write_text("", encoding="utf-8")
    (d / "plain.txt").write_text("a file, not a directory\n", encoding="utf-8")
    (d / "emptydir").mkdir()
    (d / "foreign").mkdir()
    (d / "foreign" / "notes.txt").write_text("someone else's\n", encoding="utf-8")
    (d / "hf_no_architectures").mkdir()
    (d / "hf_no_architectures" / "config.json").write_text("[1]", encoding="utf-8")
    for name, text in CONFIGS.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    (d / "pairs.tsv").write_text("one\tun\ntwo\tdeux\nthree\ttrois\n", encoding="utf-8")
    (d / "notab.tsv").write_text("one\tun\ntwo deux\n", encoding="utf-8")
    (d / "one_source.tsv").write_text("one\tun\none\tune\n", encoding="utf-8")
    for fifo in ("fifo.txt", "fifo.tsv", "fifo.toml"):
        os.mkfifo(d / fifo)
    # links to what is no regular file, as a reader and as an output: each must be refused, and stay as it was
    for link, target in (("link_to_fifo.txt", d / "fifo.txt"), ("link_to_zero.txt", Path("/dev/zero")),
                         ("link_to_zero.toml", Path("/dev/zero")), ("link_to_fifo.png", d / "fifo.txt"),
                         ("link_to_fifo.safetensors", d / "fifo.txt")):
        (d / link).symlink_to(target)
    for args in (["train-seq2seq", "--task", "numbers", "--out", str(d / "s2s"), *S2S_TINY],
                 ["train", "--data", str(d / "corpus.txt"), "--out", str(d / "run"), *TINY],
                 ["train", "--data", str(d / "corpus.txt"), "--out", str(d / "sharded"), *TINY, "--parallel", "fsdp"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
    checkpoint = json.loads((d / "run" / "checkpoint.json").read_text())["latest"]
    for name, damage in DAMAGES.items():
        shutil.copytree(d / "run", d / name)
        damage(d / name / checkpoint)
    shutil.copytree(d / "sharded", d / "sharded_half_written")  # a write cut short: DCP's metadata comes last
    (d / "sharded_half_written" / checkpoint / "sharded" / ".metadata").unlink()
    if importlib.util.find_spec("transformers"):  # the cases on hf_* directories are skipped without it
        make_model_dirs(d)
    return d


def run_case(d: Path, argv: list[str], status: int, words: list[str], absent: list[str]) -> str:
    """Run one case in process and check it (see the module); returns the error line."""
    args = [a.replace("{dir}", str(d)) for a in argv]
    skip_without_model_dirs(d, argv)
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file() and not p.is_fifo()}
    result = CliRunner().invoke(main, args)
    out = result.output
    assert result.exit_code == status, out
    assert "Traceback" not in out and (result.exception is None or isinstance(result.exception, SystemExit)), out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), out  # one line, and nothing said before it
    for word in words:
        assert word.replace("{dir}", str(d)) in lines[0], (word, lines[0])
    for name in absent:
        assert not (d / name).exists(), f"{name} was (partly) written"
    after = {p for p in d.rglob("*") if p.is_file() and not p.is_fifo()}
    left = after - set(before)  # a command that fails writes nothing: no temporary file, no cache, no log
    assert not left, f"files left behind: {sorted(map(str, left))}"
    assert all(not p.is_symlink() or p.resolve().exists() for p in d.iterdir()), "a link's target was removed"
    assert all(p.is_fifo() for p in d.iterdir() if p.name.startswith("fifo")), "a FIFO was replaced"
    changed = [str(p) for p, t in before.items() if not p.exists() or p.stat().st_mtime_ns != t]
    assert not changed, f"files changed or removed by a command that failed: {changed}"
    return lines[0]


def skip_without_model_dirs(d: Path, argv: list[str]) -> None:
    """Skip a case on an ``hf_*`` model directory where transformers could not write them."""
    if any("{dir}/hf_" in a for a in argv) and not (d / "hf_qwen3").exists():
        pytest.skip("the Hugging Face model directories need transformers")


def run_case_in_chinese(d: Path, argv: list[str], status: int) -> str:
    """Run one case with ``--lang zh``: the same status, one line, and it is Chinese (docs/translations.md)."""
    skip_without_model_dirs(d, argv)
    result = CliRunner().invoke(main, ["--lang", "zh", *(a.replace("{dir}", str(d)) for a in argv)])
    errors = [line for line in result.output.splitlines() if line.startswith("错误：")]
    assert result.exit_code == status and len(errors) == 1, result.output
    assert re.search(r"[\u4e00-\u9fff]", errors[0].removeprefix("错误：")), errors[0]
    return errors[0]


def undocumented(cases: list[tuple]) -> list[str]:
    """The ids of ``cases`` that docs/bad-input.md does not name (in backticks)."""
    documented = set(re.findall(r"`([a-z0-9-]+)`", DOCS.read_text(encoding="utf-8")))
    return [case[0] for case in cases if case[0] not in documented]
