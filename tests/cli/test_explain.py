"""``attnlab explain``: tables and JSON for one query, and clear errors for bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attnlab.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_tables_show_every_step():
    result = run("explain", "我 爱 学习 AI", "--query", "爱")
    assert result.exit_code == 0, result.output
    for step in ("1. Tokens", "+ position", "2. Query q of '爱'", "q · k_j", "÷ √4", "softmax a_j", "a_j · v_j",
                 "4. Context vector", "The weights sum to 1.000000"):
        assert step in result.output, step


@pytest.mark.parametrize("mechanism", ["simple", "scaled", "causal", "multihead"])
def test_json_weights_sum_to_one(mechanism):
    result = run("explain", "我 爱 学习 AI", "--query", "爱", "--mechanism", mechanism, "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    assert d["query"] == {"index": 1, "token": "爱"}
    assert sum(d["weights"]) == pytest.approx(1.0, abs=1e-12)
    assert d["check"]["max_abs_diff_weights"] <= 1e-6 and d["check"]["max_abs_diff_context"] <= 1e-6


def test_markup_in_tokens_is_printed_literally():
    result = run("explain", "[bold]x[/bold] y", "--query", "y")
    assert result.exit_code == 0 and "[bold]x[/bold]" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["", "--query", "x"], "empty text"),
    (["我 爱 学习 AI", "--query", "你"], "'你' is not a token of the sentence; the tokens are: 我, 爱, 学习, AI"),
    (["我 爱", "--head", "3", "--mechanism", "multihead"], "head must be in 0..1 (2 heads), got 3"),
    (["我 爱", "--layer", "1"], "layer must be in 0..0 (1 layers), got 1"),
    ([" ".join(["w"] * 65)], "65 words; this model accepts at most context_length=64"),
    (["我 爱", "--model", "no/such/dir"], "--model must be random, bert, a checkpoint directory"),
])
def test_bad_input_is_a_clear_usage_error(args, message):
    result = run("explain", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_cross_attention_of_a_translation_model(dates_run, one_thread):
    out, _, _ = dates_run
    result = CliRunner().invoke(main, ["explain", "5 mars 2021", "--checkpoint", str(out), "--layer", "1",
                                      "--query", "0", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["tokens"] == list("5␣mars␣2021") and data["query"]["index"] == 0
    assert data["query"]["token"] == data["query_tokens"][0] and data["layer"] == 1
    assert data["check"]["max_abs_diff_weights"] < 1e-6 and abs(data["weights_sum"] - 1) < 1e-12
    table = CliRunner().invoke(main, ["explain", "5 mars 2021", "--checkpoint", str(out)])
    assert table.exit_code == 0 and "Decoding step 0 wrote" in table.stdout and "encoder output" in table.stdout
