"""The viewer's encoder-decoder modes: the page's own script, run in node against a stub DOM, shows each attention
with its own tokens (target rows, source columns for cross-attention) and the captured weights."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from attnlab.generation.translation import translate
from attnlab.inspect.encoder_decoder import capture_translation
from attnlab.viz.viewer import QUANT_ERROR, payload, write_html

HARNESS = Path(__file__).with_name("viewer_harness.js")


@pytest.fixture(scope="module")
def cap(dates_run):
    _, model, vocab = dates_run
    out = translate(model, vocab, ["15 juillet 2031"])[0]
    return capture_translation(model, vocab, "15 juillet 2031", out.ids, name="dates")


def test_the_payload_has_three_modes_cross_first(cap):
    data = payload(cap, embed_font=False)
    assert [m["name"] for m in data["modes"]] == ["encoder", "decoder", "cross"] and data["mode"] == 2
    cross = data["modes"][2]
    assert cross["qtokens"] == cap.target_tokens and cross["ktokens"] == cap.source_tokens
    assert cross["layers"] == len(cap.cross) and cross["heads"] == cap.cross[0].shape[0]
    assert payload(cap, embed_font=False, mode="encoder")["mode"] == 0
    with pytest.raises(ValueError, match="mode: expected one of encoder, decoder, cross, got 'both'"):
        payload(cap, mode="both")


def test_the_page_shows_each_mode_with_its_tokens_and_weights(cap, tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the viewer's script is checked in a browser by test_viewer_browser.py")
    page = write_html(cap, tmp_path / "v.html", embed_font=False)
    done = subprocess.run([node, str(HARNESS), str(page), "[0, 1]"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert [s["mode"] for s in shown] == [2, 0, 1]
    expected = {2: (cap.target_tokens, cap.source_tokens, cap.cross[0][0]),
                0: (cap.source_tokens, cap.source_tokens, cap.encoder[-1][1]),
                1: (cap.target_tokens, cap.target_tokens, cap.decoder[-1][1])}
    for s in shown:
        rows, cols, weights = expected[s["mode"]]
        assert s["left"] == rows and s["right"] == cols and s["rows"] == rows and s["cols"] == cols
        w = torch.tensor(s["w"])
        assert w.shape == weights.shape
        assert (w - weights).abs().max() <= QUANT_ERROR * weights.max() + 1e-6
    assert "cross-attention" in shown[0]["title"] and "encoder self-attention" in shown[1]["title"]
