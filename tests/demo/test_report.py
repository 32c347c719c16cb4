"""out/report.html: one self-contained page with every section, a trained model's included when present."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from attnlab.demo import STEPS
from attnlab.demo.mechanisms import EMBEDDINGS, TOKENS
from attnlab.demo.report import report_step, trained_section, write_report


@pytest.fixture(scope="module")
def trained_out(tmp_path_factory):
    """An output folder holding a tiny trained model (a few steps on a small text)."""
    from attnlab.training import TrainConfig, train

    root = tmp_path_factory.mktemp("out")
    corpus = root / "corpus.txt"
    corpus.write_text("To be, or not to be, that is the question.\n" * 200, encoding="utf-8")
    config = TrainConfig(data=str(corpus), out=str(root / "train"), preset="tiny", max_iters=4, batch_size=2,
                         eval_interval=4, eval_iters=1, warmup_iters=1, device="cpu")
    train(config, quiet=True)
    return root


def test_report_has_every_section_and_is_self_contained(trained_out):
    path = write_report(trained_out, TOKENS, EMBEDDINGS, seed=123, console=Console(quiet=True), sample_tokens=20)
    page = path.read_text(encoding="utf-8")
    for heading in ("1. The four mechanisms", "Simplified", "Scaled dot-product", "Causal", "Multi-head",
                    "2. A pretrained BERT", "3. Where is each token", "4. A model we trained"):
        assert heading in page, heading
    images = re.findall(r'<img alt="[^"]*" src="([^"]*)"', page)
    assert len(images) >= 8 and all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r"""(src|href)="(https?:)?//""", page)
    assert "<pre>" in page and 'alt="loss curve"' in page  # the trained model's sample and loss curve
    assert "<th>1.0000</th>" in page and "q · k" in page  # the arithmetic table, weights summing to 1
    assert (trained_out / "attention.html").exists()     # the BERT viewer the report links to
    assert 'href="attention.html"' in page
    assert "6. Next: play with these models live" in page  # and what to run next
    assert f"attnlab explore --checkpoint {trained_out / 'train'}" in page


def test_the_demo_ends_by_saying_how_to_explore_what_it_trained(trained_out):
    from attnlab.demo import Demo

    console = Console(record=True, width=200)
    report_step(Demo(console, 123, trained_out))
    said = console.export_text()
    assert f"attnlab explore --checkpoint {trained_out / 'train'}" in said and "play with the models" in said


def test_no_trained_model_is_skipped(tmp_path):
    assert trained_section(tmp_path) is None


def test_report_is_the_demos_last_step():
    assert STEPS[-1] is report_step


def test_views_read_a_trained_checkpoint(trained_out, tmp_path):
    from click.testing import CliRunner

    from attnlab.cli import main
    from attnlab.cli.model_options import load_model
    from attnlab.inspect import capture, explain

    model, tokenizer = load_model(str(trained_out / "train"))
    cap = capture(model, "to be", tokenizer=tokenizer)
    assert cap.tokens == list("to be") and cap.is_causal and cap.num_layers == 2
    e = explain(cap, 4, layer=1, head=1)
    assert e.max_abs_diff_weights < 1e-6 and e.max_abs_diff_context < 1e-6
    out = tmp_path / "trained.png"
    ok = CliRunner().invoke(main, ["heatmap", "to be", "--model", str(trained_out / "train"), "-o", str(out)])
    assert ok.exit_code == 0 and out.exists(), ok.output
    bad = CliRunner().invoke(main, ["explain", "toΩ", "--model", str(trained_out / "train")])
    assert bad.exit_code == 2 and "not in the vocabulary" in bad.output


def test_the_chinese_report_carries_a_font_for_every_character_it_shows():
    """The page embeds fonts (attnlab.viz.webfont) holding a glyph for each character it shows, read back from the
    page by fontTools: a machine with no CJK font (or none at all) draws it as this one does."""
    import html

    from attnlab.demo.report import mechanisms_section, pe_section, render
    from attnlab.i18n import set_language
    from attnlab.viz.webfont import covered

    set_language("zh")
    page = render([mechanisms_section(TOKENS, EMBEDDINGS, 123), pe_section()])
    assert page.startswith('<!DOCTYPE html><html lang="zh">') and "font-src data:" in page
    css = " ".join(re.findall(r"@font-face \{.*?\}", page))
    body = page.split("<body>", 1)[1]
    shown = html.unescape(re.sub(r"<[^>]+>", " ", body) + " ".join(re.findall(r'alt="([^"]*)"', body)))
    assert "注意力" in shown and "ᵀ" in shown and covered(shown, css)
    assert not covered(shown + "鬱", css)  # the control: what the page does not show, its fonts do not hold
