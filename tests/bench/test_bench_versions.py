"""benchmarks/bench_versions.py: both versions run every case they are given, in turn, and the table says so; each
case speaks the API of the attnlab it runs on.

The figures are for a quiet machine (the lead's); here cheap cases, two rounds, against HEAD.
"""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark_scripts import benchmark_script

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_versions.py"


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_versions") as module:
        yield module


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PATH), *args], capture_output=True, text=True)


def test_a_case_against_head_gives_a_row_with_its_ratio():
    result = run("--base", "HEAD", "--cases", "generate_overhead", "--rounds", "2", "--reps", "1")
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("| generate_overhead ")]
    base, new, ratio = map(float, re.findall(r"\d+\.\d+", row))
    assert base > 0 and new > 0 and abs(ratio - new / base) < 2e-3


def test_an_unknown_case_is_named():
    result = run("--cases", "nope")
    assert result.returncode == 2 and "unknown cases ['nope']" in result.stderr


def test_the_beam_search_parts_run_by_name_and_not_by_default(tmp_path):
    out = tmp_path / "versions.md"
    result = run("--base", "HEAD", "--cases", "beam_setup_tiny,beam_steps_tiny", "--rounds", "2", "--reps", "1",
                 "--workers", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip() for line in result.stdout.splitlines() if line.startswith("| beam_")}
    assert rows == {"beam_setup_tiny", "beam_steps_tiny"}
    default = " ".join(run("--help").stdout.split()).split("the measured figures:")[1].split("]")[0]  # wrapped
    assert "beam_search_cached" in default and "beam_steps" not in default
    assert "decode_gpt2_b8_int8" in default and "train_step_compiled" in default and "_plain" not in default
    # the results file: the same rows, the command that made them and what each side ran on
    text = out.read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if line.startswith("| beam_")] == \
        [line for line in result.stdout.splitlines() if line.startswith("| beam_")]
    assert "Command: `python benchmarks/bench_versions.py --base HEAD --cases beam_setup_tiny,beam_steps_tiny " \
        "--rounds 2 --reps 1 --workers 1 --out " in text
    assert "HEAD: the " in text and "this tree: the new API" in text and "CPU: " in text


class Recorder:
    """A fake ``generate``: the calls it was given."""

    def __init__(self) -> None:
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "tokens"


def test_the_old_api_gets_its_keywords_and_the_new_one_a_config(bench):
    old = SimpleNamespace(generate=Recorder())
    new = SimpleNamespace(generate=Recorder(), GenerationConfig=lambda **fields: ("config", fields))
    assert not bench.new_api(old) and bench.new_api(new)
    assert bench.greedy(old, "model", "prompt", 8, compile=True)() == "tokens"
    assert old.generate.calls == [(("model", "prompt", 8, 0), {"use_cache": True, "compile": True})]
    bench.greedy(new, "model", "prompt", 8, use_cache=False)()
    config = ("config", {"temperature": 0, "use_cache": False, "compile": False, "accelerate": True})
    assert new.generate.calls == [(("model", "prompt", 8, config), {})]
    assert not new.generate.calls[0][1]  # nothing else: the config holds every option


def test_a_model_called_directly_runs_as_users_run_it(bench):
    old, new = SimpleNamespace(), SimpleNamespace(GenerationConfig=object)
    fast = SimpleNamespace(accelerate=lambda m: ("accelerated", m), swap_modules=lambda m: ("swapped", m))
    inference, training = SimpleNamespace(training=False), SimpleNamespace(training=True)
    assert bench.as_users_run(inference, fast=fast, generation=new) == ("accelerated", inference)
    assert bench.as_users_run(training, fast=fast, generation=new) == ("swapped", training)  # as the trainer does
    assert bench.as_users_run(inference, plain=True, fast=fast, generation=new) is inference
    assert bench.as_users_run(inference, fast=fast, generation=old) is inference  # its speed was woven in


def test_every_case_has_a_name_of_its_figure_and_the_plain_ones_are_apart(bench):
    decodes = [c for c in bench.FIGURES if c.startswith("decode_")]
    assert len(decodes) == 2 * 2 * 3 and all(bench.needs_kernels(c) for c in decodes)
    assert {"mha_block", "encoder_forward", "train_step", "attention_math"} <= set(bench.FIGURES)
    assert all(c.endswith("_plain") for c in bench.PLAIN) and not set(bench.PLAIN) & set(bench.FIGURES)
    assert not bench.needs_kernels("mha_block")


def test_the_command_line_names_only_what_differs_from_the_defaults(bench):
    from argparse import Namespace

    args = Namespace(base="de041e5", cases=",".join(bench.FIGURES), rounds=12, reps=3, workers=4, plain=False,
                     out=bench.RESULTS)
    assert bench.command(args) == "python benchmarks/bench_versions.py --base de041e5 --out"  # results/versions.md
    args = Namespace(**{**vars(args), "cases": "mha_block", "workers": 2, "plain": True, "out": None})
    assert bench.command(args) == "python benchmarks/bench_versions.py --base de041e5 --cases mha_block --workers 2 " \
        "--plain"
