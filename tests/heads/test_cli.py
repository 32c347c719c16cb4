"""``attnlab heads …`` end to end: what each command prints and writes, against the library's own numbers."""

from __future__ import annotations

import json

import click
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.heads import attention_flow, rollout
from attnlab.inspect import RandomModel, RandomModelConfig, capture


def run(*args, lang="en"):
    result = CliRunner().invoke(main, [str(a) for a in args] + ["--lang", lang], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A GPT trained for a few steps with attnlab train (enough for a checkpoint with heads to measure)."""
    from tiny_runs import TEXT, TINY

    d = tmp_path_factory.mktemp("tiny")
    (d / "corpus.txt").write_text(TEXT, encoding="utf-8")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run("train", "--data", d / "corpus.txt", "--out", d / "run", *TINY, "--max-iters", "6")
    finally:
        torch.set_num_threads(before)
    return d / "run"


def test_rollout_prints_the_row_it_draws(tmp_path):
    text = "the cat sat on the mat"
    out = run("heads", "rollout", text, "-o", tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 1000
    cap = capture(RandomModel(RandomModelConfig(mechanism="multihead", seed=123)), text)
    rolled, flow = rollout(cap.attentions), attention_flow(cap.attentions)
    row = cap.seq_len - 1 if cap.is_causal else 0
    lines = [line for line in out.splitlines() if line.startswith("│")]
    assert len(lines) == cap.seq_len
    for j, line in enumerate(lines):
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert cells[0] == cap.tokens[j]
        assert cells[2] == f"{rolled[row, j]:.3f}" and cells[3] == f"{flow[row, j]:.3f}"


def test_rollout_of_a_trained_decoder_reads_its_last_token(tiny_run, tmp_path):
    out = run("heads", "rollout", "But, soft!", "--model", tiny_run, "--layer", "0", "-o", tmp_path / "r.svg")
    assert "where '!' gets its information from" in out and "raw, layer 0" in out
    assert (tmp_path / "r.svg").read_text(encoding="utf-8").startswith("<?xml")


def test_rollout_skips_flow_for_a_long_text(tmp_path):
    out = run("heads", "rollout", " ".join(["w"] * 20), "-o", tmp_path / "r.png")
    assert "attention flow is computed for at most 16 tokens; this text has 20" in out


def test_induction_writes_its_json_and_figures(tmp_path):
    out = run("heads", "induction", "--out", tmp_path, "--steps", "4", "--layer", "1", "--head", "3")
    result = json.loads((tmp_path / "induction.json").read_text(encoding="utf-8"))
    assert set(result["models"]) == {"1-layer", "2-layer"}
    for name, layers in (("1-layer", 1), ("2-layer", 2)):
        model = result["models"][name]
        assert len(model["prefix_matching"]) == layers and all(len(row) == 4 for row in model["prefix_matching"])
        assert all(0.0 <= s <= 1.0 for row in model["prefix_matching"] for s in row)
        assert isinstance(model["icl_score"], float)
        assert [e["step"] for e in model["history"]] == [0, 4]
        assert set(model["history"][0]) == {"step", "loss", "repeated_loss", "icl_score", "prefix_matching"}
    assert result["config"]["steps"] == 4
    for name in ("induction_training.png", "induction_head.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "2-layer step    4" in out and "phase change" in out


def test_roles_on_a_text_file(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text("The cat sat on the mat.\nTo be, or not to be: that is the question.\n", encoding="utf-8")
    out = run("heads", "roles", "--text", text, "--out", tmp_path)
    result = json.loads((tmp_path / "roles.json").read_text(encoding="utf-8"))
    assert len(result["layers"]) == 6 and all(len(layer) == 12 for layer in result["layers"])
    assert set(result["layers"][0][0]) == {"cls", "sep", "punct", "prev", "next", "self", "entropy"}
    assert result["sentences"] == 2 and result["queries"] == 9 + 15  # [CLS] and [SEP] rows included
    assert "strongest previous head" in out
    for name in ("roles_special_tokens.png", "roles_positional_heads.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_prune_a_trained_gpt(tiny_run, tmp_path):
    out = run("heads", "prune", "--checkpoint", tiny_run, "--data", tiny_run.parent / "corpus.txt", "--batches", "2",
              "--batch-size", "2", "--step", "0.5", "--out", tmp_path)
    result = json.loads((tmp_path / "prune.json").read_text(encoding="utf-8"))
    assert (result["num_layers"], result["num_heads"]) == (2, 2)
    assert [p["pruned"] for p in result["curve"]] == [0, 2, 4]
    assert result["curve"][0]["loss"] == pytest.approx(result["base_loss"])
    assert sorted(map(tuple, result["order"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert "heads removed" in out
    for name in ("prune_curve.png", "prune_heads.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_heads_speaks_chinese(tmp_path):
    out = run("heads", "rollout", "a b c", "-o", tmp_path / "r.png", lang="zh")
    assert "写入" in out or "已写" in out
    assert "注意力" in run("heads", "--help", lang="zh")


def test_patch_prompt_writes_what_the_library_computes(tiny_run, tmp_path):
    from attnlab.heads import baselines, patch_heads, recovered
    from attnlab.models import load_trained

    out = run("heads", "patch", "prompt", "--model", tiny_run, "--clean", "soft! what", "--corrupt", "east, and ",
              "--right", "l", "--wrong", "i", "--sender", "0.1", "--out", tmp_path)
    result = json.loads((tmp_path / "patch_prompt.json").read_text(encoding="utf-8"))
    model, tokenizer = load_trained(tiny_run, kind="decoder")
    clean, corrupt = (torch.tensor([[int(i) for i in tokenizer.encode(t)]]) for t in ("soft! what", "east, and "))
    right, wrong = int(tokenizer.encode("l")[0]), int(tokenizer.encode("i")[0])

    def metric(logits):
        return (logits[:, -1, right] - logits[:, -1, wrong]).mean()

    top, bottom = baselines(model, clean, corrupt, metric)
    expected = recovered(patch_heads(model, clean, corrupt, metric), top, bottom)
    torch.testing.assert_close(torch.tensor(result["patching"]), expected, atol=1e-4, rtol=0)
    assert result["paths"]["sender"] == [0, 1] and result["paths"]["key"][0] == [None, None]
    assert abs(result["logit_attribution"]["total"] - top) < 1e-4
    for name in ("patch_prompt.png", "patch_prompt_logits.png", "patch_prompt_paths.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert f"clean {top:.3f}" in out


def test_patch_induction_writes_its_json_and_figures(tmp_path):
    out = run("heads", "patch", "induction", "--out", tmp_path, "--steps", "4", lang="zh")
    result = json.loads((tmp_path / "patch_induction.json").read_text(encoding="utf-8"))
    assert set(result["models"]) == {"1-layer", "2-layer"} and [e["step"] for e in result["training"]] == [0, 4]
    assert len(result["models"]["2-layer"]["paths_from_layer_0"]) == 4
    for name in ("heads", "positions", "paths", "training", "logits"):
        assert (tmp_path / f"patch_induction_{name}.png").stat().st_size > 1000
    assert "哪些头恢复了重复" in out


def test_patch_dates_writes_what_the_library_computes(tmp_path):
    pytest.importorskip("babel", reason="the dates task needs attnlab[seq2seq]")
    from attnlab.heads.month_heads import month_heads
    from attnlab.models import load_trained
    from bad_inputs import S2S_TINY

    run("train-seq2seq", "--task", "dates", "--out", tmp_path / "dates", *S2S_TINY, "--context-length", "40")
    out = run("heads", "patch", "dates", "--checkpoint", tmp_path / "dates", "--out", tmp_path / "patch")
    result = json.loads((tmp_path / "patch" / "patch_dates.json").read_text(encoding="utf-8"))
    expected = month_heads(*load_trained(tmp_path / "dates", kind="seq2seq"))
    assert result["french"]["patching"] == expected["french"]["patching"]
    assert len(result["french"]["key_by_source_position"][0][0]) == len("15 juillet 2031")
    for name in ("heads", "keys", "values"):
        assert (tmp_path / "patch" / f"patch_dates_{name}.png").stat().st_size > 1000
    assert "15 juillet" in out and "août" in out


def test_the_patch_options_offer_the_sites_and_positions_of_the_library():
    from attnlab.cli.heads_patch import prompt_command
    from attnlab.heads.sites import POSITIONS, SITES

    choices = {p.name: tuple(p.type.choices) for p in prompt_command.params if isinstance(p.type, click.Choice)}
    assert choices["site"] == SITES and choices["positions"] == POSITIONS
