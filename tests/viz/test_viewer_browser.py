"""The viewer in a real browser: headless Chromium (Debian's), driven by Playwright, network off.

Chromium is installed with apt-get when missing (``make test`` does it too); the test skips, saying
why, only where it cannot be installed. A screenshot and the exported PNG are kept in test-artifacts/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from attnlab.inspect import Capture, capture
from attnlab.models import GPT, GPTConfig
from attnlab.viz.viewer import QUANT_ERROR, write_html
from browsers import ARGS, chromium_path

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def playwright():
    """One Playwright for this module's two browsers (the usual one and one that sees no CJK font)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright):
    """Debian's Chromium (tests/browsers.py), launched from this module's Playwright rather than conftest's."""
    b = playwright.chromium.launch(executable_path=chromium_path(), args=ARGS)
    yield b
    b.close()


@pytest.fixture
def offline_page(browser):
    """A page whose every non-file request is aborted and recorded; dialogs are recorded too."""
    context = browser.new_context(accept_downloads=True, offline=True, viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(0)  # every wait is for a state (the page ready, a download), however long it takes
    page.blocked, page.dialogs, page.errors = [], [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            page.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


@pytest.fixture(scope="module")
def two_layer():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny"))  # 2 layers, 2 heads, causal
    tokens = ["我", "爱", "学习", "AI", XSS, "</script><b>bold</b>", "한국어", "end"]
    return capture(model, torch.randint(0, 256, (len(tokens),)), tokens=tokens, qkv=False)


def _open(page, path: Path):
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']")


def _weights(page, side: str) -> list[float]:
    return [float(w) for w in page.eval_on_selector_all(f"#{side} .tok", "els => els.map(e => e.dataset.weight)")]


def test_viewer_in_chromium(offline_page, two_layer, tmp_path):
    page, cap = offline_page, two_layer
    _open(page, write_html(cap, tmp_path / "attention.html"))
    assert page.locator("#layer option").count() == 2 and page.locator("#head option").count() == 2
    page.select_option("#layer", "1")
    page.select_option("#head", "1")
    assert page.get_attribute("body", "data-layer") == "1" and page.get_attribute("body", "data-head") == "1"

    page.hover("#left .tok >> nth=5")  # query 5: the weights on the keys are highlighted
    shown = torch.tensor(_weights(page, "right"))
    expected = cap.attentions[1][1, 5]
    assert torch.allclose(shown, expected, atol=float(expected.max()) * QUANT_ERROR + 1e-6)
    assert "attends to" in page.text_content("#info")
    page.hover("#right .tok >> nth=2")  # key 2: who attends to it (a column)
    column = torch.tensor(_weights(page, "left"))
    expected = cap.attentions[1][1, :, 2]
    assert torch.allclose(column, expected, atol=QUANT_ERROR + 1e-6)
    page.click("#left .tok >> nth=3")  # click: isolate token 3, which stays after the mouse leaves
    page.mouse.move(1000, 700)
    assert page.locator("#left .tok.selected").count() == 1

    # the XSS token is text: shown literally, no element made of it, no dialog
    assert page.locator("#left .tok").nth(4).text_content() == XSS
    assert page.locator("#right .tok").nth(5).text_content() == "</script><b>bold</b>"
    assert page.locator("img").count() == 0 and page.locator("main b").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "viewer-head.png"), full_page=True)

    page.click("#tab-matrix")
    with page.expect_download() as download:
        page.click("#export-png")
    png = ARTIFACTS / "viewer-matrix-export.png"
    download.value.save_as(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    page.click("#tab-head")
    with page.expect_download() as download:
        page.click("#export-svg")
    svg = Path(download.value.path()).read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "&lt;img src=x onerror=alert(1)&gt;" in svg and "<img" not in svg

    page.click("#tab-grid")
    page.wait_for_selector("#grid[data-done='1']")
    assert page.locator("#grid figure").count() == cap.num_layers * cap.num_heads
    page.click("#grid figure >> nth=1")  # layer 0, head 1
    assert page.get_attribute("body", "data-layer") == "0" and page.get_attribute("body", "data-head") == "1"

    assert page.dialogs == [] and page.errors == [] and page.blocked == []


def test_a_layer_with_fewer_heads_leaves_its_cells_of_the_grid_empty(offline_page, two_layer, tmp_path):
    """A hybrid whose layers have different head counts (Qwen3-Next's): the grid draws each layer's own heads, an
    empty cell for each it has not (two_layer's capture, told that its layer 1 has one head)."""
    cap = Capture(**{**two_layer.__dict__, "heads_per_layer": [2, 1]})
    page = offline_page
    _open(page, write_html(cap, tmp_path / "hybrid.html"))
    page.click("#tab-grid")
    page.wait_for_selector("#grid[data-done='1']")
    assert page.locator("#grid figure canvas").count() == 3 and page.locator("#grid figure.absent").count() == 1
    page.click("#grid figure >> nth=2")  # layer 1, head 0
    assert page.get_attribute("body", "data-layer") == "1" and page.get_attribute("body", "data-head") == "0"
    assert page.errors == [] and page.blocked == []


def test_long_input_stays_responsive(offline_page, tmp_path):
    """512 tokens × 12 layers × 12 heads: loads, hovers and switches heads, and stays small where a browser's time
    goes: one element per token, the lines and matrices drawn on canvases (how long it takes is the machine's; a
    test cannot say it)."""
    torch.manual_seed(0)
    t = 512
    cap = Capture(tokens=[f"t{i}" for i in range(t)], model_name="synthetic",
                  attentions=[torch.softmax(torch.randn(12, t, t) * 3, -1) for _ in range(12)])
    path = write_html(cap, tmp_path / "long.html", embed_font=False, level=1)
    assert path.stat().st_size < 0.5 * 12 * 12 * t * t  # under half a byte per weight
    page = offline_page
    _open(page, path)
    page.hover("#left .tok >> nth=100")
    shown = torch.tensor(_weights(page, "right"))
    expected = cap.attentions[0][0, 100]
    assert torch.allclose(shown, expected, atol=float(expected.max()) * QUANT_ERROR + 1e-6)
    page.select_option("#head", "11")
    assert page.get_attribute("body", "data-head") == "11"
    elements = page.evaluate("document.querySelectorAll('*').length")
    assert elements < 2 * t + 200, elements  # two columns of tokens, the controls, a few weights: no element a line
    assert page.evaluate("document.querySelectorAll('canvas').length") <= 3
    assert page.errors == [] and page.blocked == []


#: fontconfig with one directory, matplotlib's own DejaVu fonts: Latin only, no CJK font anywhere, on any machine.
#: (With no directory at all Chromium cannot be tested: its font manager aborts on the first system font it asks for,
#: "SkFontMgr_FontConfigInterface.cpp: Not implemented", and a page's web fonts end in "error".)
LATIN_ONLY = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>{fonts}</dir><cachedir>{cache}</cachedir></fontconfig>
"""


@pytest.fixture(scope="module")
def no_cjk_browser(playwright, tmp_path_factory):
    """Chromium that sees no CJK font: only what a page embeds can draw Chinese."""
    import matplotlib

    root = tmp_path_factory.mktemp("fontconfig")
    conf = root / "fonts.conf"
    conf.write_text(LATIN_ONLY.format(fonts=Path(matplotlib.get_data_path()) / "fonts" / "ttf", cache=root / "cache"))
    b = playwright.chromium.launch(executable_path=chromium_path(), args=ARGS,
                                   env={**os.environ, "FONTCONFIG_FILE": str(conf)})
    yield b
    b.close()


def _cjk_width(page, stack: str) -> float:
    """How wide 我爱学习 is drawn at 20 px in ``stack``: 80 px in a CJK font (one em each), otherwise a fallback's."""
    return page.evaluate("""(stack) => { const c = document.createElement("canvas").getContext("2d");
        c.font = `20px ${stack}`; return c.measureText("我爱学习").width; }""", stack)


def test_the_chinese_viewer_draws_chinese_with_no_cjk_font_on_the_machine(no_cjk_browser, two_layer, tmp_path):
    from attnlab.i18n import set_language

    set_language("zh")
    page = no_cjk_browser.new_page()
    page.set_default_timeout(0)
    _open(page, write_html(two_layer, tmp_path / "zh.html"))
    fonts = page.evaluate("JSON.parse(document.getElementById('attnlab-data').textContent).fonts")
    assert page.evaluate("[...document.fonts].every(f => f.status === 'loaded')")
    assert page.evaluate("document.documentElement.lang") == "zh" and page.text_content("#tab-head") == "头视图"
    assert abs(_cjk_width(page, fonts) - 80) < 1  # the embedded face draws it
    assert abs(_cjk_width(page, "sans-serif") - 80) > 5  # the control: the machine's own fonts cannot
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "viewer-zh-no-cjk-font.png"))
    page.close()
