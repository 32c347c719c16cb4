"""The explorer in a real browser (Debian's Chromium, driven by Playwright) against a real server: what the page shows
is the model's own numbers. Every request the page makes is recorded (and any to another host aborted), every console
error and uncaught exception fails the test, and screenshots at two sizes go to test-artifacts/.
"""

import re
from pathlib import Path

import pytest
import torch

from attnlab.data.tokenizer import CharTokenizer
from attnlab.explore.api import Api
from attnlab.explore.entry import entry_for
from attnlab.explore.launch import local_server
from attnlab.generation import GenerationConfig, generate
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig
from explore_reference import TEXT, patched_by_hand, reference_probs

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TOKEN = "browser-token"
TOL = 1e-6
# what the Chinese page writes as it is written everywhere: attnlab's name, file formats, functions in formulas
NOTATION = {"attnlab", "PNG", "SVG", "softmax", "tanh"}


@pytest.fixture(scope="module")
def served(models, tokenizer):
    """A server on a free port over the test models and one that reads 200 tokens (its head view pages)."""
    torch.manual_seed(1)
    long = ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size,
                                                         context_length=200)).eval()
    entries = [entry_for(model, tok, name) for name, (model, tok) in models.items()]
    entries.append(entry_for(long, tokenizer, "long"))
    chinese = CharTokenizer.train("我爱学习注意力。麒麟来了")
    entries.append(entry_for(GPT(GPTConfig.from_preset("tiny", vocab_size=chinese.vocab_size)).eval(), chinese, "zh",
                             "我爱学习"))
    api = Api(entries)
    base, stop = local_server(api, TOKEN)
    yield {"base": base, "models": {**models, "long": (long, tokenizer)}, "api": api}
    stop()


@pytest.fixture
def page(browser, served):
    """The explorer's page; every request recorded, any to another host aborted; errors collected."""
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.requests, page.errors, page.aborted = [], [], []
    base = served["base"]

    def route(r):
        page.requests.append(r.request.url)
        if r.request.url.startswith((base + "/", "data:", "blob:")):
            r.continue_()
        else:
            page.aborted.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(f"{base}/?token={TOKEN}")
    ready(page, served["api"].entries["gpt"].text)
    yield page
    assert page.errors == [], page.errors
    assert page.aborted == [], page.aborted
    assert all(u.startswith((base + "/", "data:", "blob:")) for u in page.requests), page.requests
    context.close()


def ready(page, text: str, **state) -> None:
    """Wait until the page shows its answer for ``text`` (and the given data-* state, by its camelCase name)."""
    page.wait_for_function("""([text, state]) => {
      const root = document.querySelector('[data-testid=explorer]');
      return root && root.dataset.text === text &&
        Object.entries(state).every(([key, value]) => root.dataset[key] === value);
    }""", arg=[text, state], timeout=120_000)


def choose(page, model: str, text: str | None = None) -> None:
    page.select_option("[data-testid=model-select]", model)
    page.wait_for_selector("[data-testid=explorer][data-kind]", state="attached")
    if text is not None:
        page.fill("[data-testid=text-input]", text)
    ready(page, text if text is not None else page.input_value("[data-testid=text-input]"))


def cells(page, layer: int, head: int) -> torch.Tensor:
    """The head matrix the page shows, from its cells' data-weight."""
    found = page.eval_on_selector_all(
        f"[data-testid=head-cell][data-layer='{layer}'][data-head='{head}']",
        "els => els.map(e => [Number(e.dataset.query), Number(e.dataset.key), Number(e.dataset.weight)])")
    rows, cols = max(f[0] for f in found) + 1, max(f[1] for f in found) + 1
    out = torch.full((rows, cols), float("nan"), dtype=torch.float64)
    for q, k, w in found:
        out[q, k] = w
    return out


def select_head(page, layer: int, head: int) -> None:
    page.click("[data-testid=tab-overview]")
    page.click(f"[data-testid=overview-cell][data-layer='{layer}'][data-head='{head}']")
    page.click("[data-testid=tab-head]")
    page.wait_for_selector(f"[data-testid=head-cell][data-layer='{layer}'][data-head='{head}']", state="attached")


def ids_of(tok, text):
    return torch.as_tensor(tok.encode(text), dtype=torch.long)[None]


@pytest.mark.parametrize("name", ["gpt", "modern"])
def test_typed_text_shows_every_heads_weights_as_the_model_computes_them(page, served, name):
    model, tok = served["models"][name]
    text = "But, soft! what light"
    choose(page, name, text[:-1])
    page.click("[data-testid=text-input]")
    page.keyboard.press("End")
    page.keyboard.type(text[-1])  # one keystroke: the view follows
    ready(page, text)
    with torch.no_grad():
        weights = model(ids_of(tok, text), return_weights=True).attentions
    assert page.eval_on_selector_all("[data-testid=token]", "els => els.length") == len(text)
    for layer in range(model.config.num_layers):
        for head in range(model.config.num_heads):
            select_head(page, layer, head)
            shown = cells(page, layer, head)
            assert torch.allclose(shown, weights[layer][0, head].double(), atol=TOL, rtol=0), (layer, head)


def test_each_slider_gives_softmax_of_logits_over_t_after_top_k_and_top_p(page, served):
    model, tok = served["models"]["gpt"]
    text = page.input_value("[data-testid=text-input]")
    with torch.no_grad():
        logits = model(ids_of(tok, text)).logits[0, -1].tolist()
    moves = [("temperature", "ArrowLeft", 4, {"temperature": 0.8, "top_k": None, "top_p": None}),
             ("top-k", "ArrowRight", 5, {"temperature": 0.8, "top_k": 5, "top_p": None}),
             ("top-p", "ArrowLeft", 10, {"temperature": 0.8, "top_k": 5, "top_p": 0.5}),
             ("top-k", "Home", 1, {"temperature": 0.8, "top_k": None, "top_p": 0.5}),
             ("temperature", "Home", 1, {"temperature": 0, "top_k": None, "top_p": 0.5})]
    for testid, key, times, settings in moves:
        page.focus(f"[data-testid={testid}]")
        for _ in range(times):
            page.keyboard.press(key)
        page.wait_for_function("s => JSON.stringify(JSON.parse(document.querySelector('[data-testid=explorer]')"
                               ".dataset.settings || '{}')) === JSON.stringify(s)", arg=settings)
        bars = page.eval_on_selector_all("[data-testid=next-token]", "els => els.map(e => [e.dataset.token, "
                                         "Number(e.dataset.prob)])")
        expected = reference_probs(logits, settings["temperature"], settings["top_k"], settings["top_p"])
        top = sorted(range(len(expected)), key=lambda i: -expected[i])[:10]
        assert [b[0] for b in bars] == [tok.decode([i]) for i in top if expected[i] > 0], testid
        assert all(abs(p - expected[i]) <= TOL for (_, p), i in zip(bars, top, strict=False)), testid


def test_appended_tokens_are_generates_greedy_and_seeded_ones(page, served):
    model, tok = served["models"]["modern"]
    choose(page, "modern", "To be, or not")
    page.click("[data-testid=append-greedy]")
    greedy = generate(model, ids_of(tok, "To be, or not"), 1, GenerationConfig(temperature=0))[0, -1]
    ready(page, "To be, or not" + tok.decode([int(greedy)]))
    text = page.input_value("[data-testid=text-input]")
    page.fill("[data-testid=seed]", "41")
    page.click("[data-testid=append-sample]")  # temperature 1, no top-k, no top-p: generate's defaults
    page.wait_for_selector("[data-testid=append-note][data-seed='41']", state="attached")
    drawn = generate(model, ids_of(tok, text), 1, GenerationConfig(generator=torch.Generator().manual_seed(41)))[0, -1]
    assert page.get_attribute("[data-testid=append-note]", "data-id") == str(int(drawn))
    assert page.input_value("[data-testid=seed]") == "42"  # the next draw: the next seed, shown
    ready(page, text + tok.decode([int(drawn)]))


def test_a_head_switched_off_is_head_mask_for_the_loss_and_the_next_token(page, served):
    model, tok = served["models"]["gpt"]
    text = page.input_value("[data-testid=text-input]")
    page.check("[data-testid=head-switch][data-layer='1'][data-head='0']")  # on already: nothing changes
    page.uncheck("[data-testid=head-switch][data-layer='1'][data-head='0']")
    ready(page, text, headMask="[[1,0]]")
    idx = ids_of(tok, text)
    mask = torch.ones(2, 2)
    mask[1, 0] = 0
    with torch.no_grad():
        off = model(idx[:, :-1], targets=idx[:, 1:], head_mask=mask).loss
        whole = model(idx[:, :-1], targets=idx[:, 1:]).loss
        probs = torch.softmax(model(idx, head_mask=mask).logits[0, -1].double(), -1)
    assert float(page.get_attribute("[data-testid=loss]", "data-loss")) == pytest.approx(float(off), abs=1e-5)
    assert float(page.get_attribute("[data-testid=baseline-loss]", "data-loss")) == pytest.approx(float(whole),
                                                                                                   abs=1e-5)
    bars = page.eval_on_selector_all("[data-testid=next-token]", "els => els.map(e => Number(e.dataset.prob))")
    assert bars == pytest.approx(probs.sort(descending=True).values[:10].tolist(), abs=TOL)


def open_patch(page) -> None:
    """The Patch tab, once its corrupted text is proposed (the server's redraw of the text's first half)."""
    page.click("[data-testid=tab-patch]")
    page.wait_for_selector("[data-testid=explorer][data-patch-state=ready]", state="attached")
    assert page.input_value("[data-testid=corrupt-input]") != ""


def patched_inputs(page, served, name):
    """The two runs the page patches, as attnlab.heads takes them, and the metric of the tokens it chose."""
    model, tok = served["models"][name]
    text, corrupt = page.input_value("[data-testid=text-input]"), page.input_value("[data-testid=corrupt-input]")
    right = int(page.input_value("[data-testid=patch-right]"))
    wrong = int(page.input_value("[data-testid=patch-wrong]"))
    clean, corrupted = ids_of(tok, text), ids_of(tok, corrupt)
    if name == "s2s":
        target = torch.tensor([[1, *tok.encode(page.input_value("[data-testid=target-input]"))]])
        clean, corrupted = (clean, target), (corrupted, target)
    return model, clean, corrupted, lambda logits: (logits[:, -1, right] - logits[:, -1, wrong]).mean()


@pytest.mark.parametrize(("name", "text", "head"), [("gpt", None, (1, 0)), ("s2s", "15 juillet 2031", (1, 2))])
def test_clicking_a_head_patches_it_with_attnlab_heads_numbers(page, served, name, text, head):
    """A click on a head shows run_patched's metric and the patched run's next tokens; the button, patch_heads'
    map (≤ 1e-5 each)."""
    from attnlab.heads import Patch, baselines, patch_heads, run_patched

    if name != "gpt":
        choose(page, name, text)
    open_patch(page)
    layer, h = head
    page.click(f"[data-testid=patch-cell][data-layer='{layer}'][data-head='{h}']")
    page.wait_for_selector(f"[data-testid=explorer][data-patched='{layer},{h}'][data-patch-state=ready]",
                           state="attached")
    model, clean, corrupted, metric = patched_inputs(page, served, name)
    result = "[data-testid=patch-result]"
    assert (page.get_attribute(result, "data-layer"), page.get_attribute(result, "data-head")) == (str(layer), str(h))
    want = run_patched(model, clean, corrupted, metric, [Patch(layer, h)])
    assert float(page.get_attribute(result, "data-metric")) == pytest.approx(float(want), abs=1e-5)
    clean_value, corrupt_value = baselines(model, clean, corrupted, metric)
    share = (float(want) - corrupt_value) / (clean_value - corrupt_value)
    assert float(page.get_attribute(result, "data-recovered")) == pytest.approx(share, abs=1e-5)
    layers = [b.cross_attn for b in model.decoder_blocks] if name == "s2s" else [b.attn for b in model.blocks]
    logits = patched_by_hand(model, layers, clean, corrupted, layer, h)[0, -1]
    probs = torch.softmax(logits.double(), -1)
    bars = page.eval_on_selector_all("[data-testid=patch-next-token]", "els => els.map(e => Number(e.dataset.prob))")
    assert bars == pytest.approx(probs.sort(descending=True).values[:10].tolist(), abs=1e-5)
    assert page.locator("[data-testid=patch-clean-token]").count() == 10
    page.click("[data-testid=patch-all]")
    page.wait_for_selector("[data-testid=explorer][data-patch-map='1'][data-patch-state=ready]", state="attached")
    shown = page.eval_on_selector_all("[data-testid=patch-value]", "els => els.map(e => [Number(e.dataset.layer), "
                                      "Number(e.dataset.head), Number(e.dataset.metric)])")
    every = patch_heads(model, clean, corrupted, metric)
    assert len(shown) == every.numel()
    for row, col, value in shown:
        assert value == pytest.approx(float(every[row, col]), abs=1e-5), (row, col)
    page.click("[data-testid=patch-cell][data-layer='0'][data-head='1']")  # the map stays while heads are clicked
    page.wait_for_selector("[data-testid=explorer][data-patched='0,1'][data-patch-state=ready]", state="attached")
    assert page.get_attribute("[data-testid=patch-value][data-layer='0'][data-head='0']", "data-metric") != ""


def test_a_corrupted_text_of_other_length_is_one_line_in_the_patch_view(page):
    open_patch(page)
    page.fill("[data-testid=corrupt-input]", "abc")
    page.click("[data-testid=patch-cell][data-layer='0'][data-head='0']")
    page.wait_for_selector("[data-testid=explorer][data-patch-state=error]", state="attached")
    shown = page.text_content("[data-testid=patch-error]")
    assert "same number of tokens" in shown and "\n" not in shown
    page.click("[data-testid=corrupt-default]")
    page.wait_for_selector("[data-testid=explorer][data-patch-state=ready]", state="attached")
    assert page.text_content("[data-testid=patch-error]") == ""
    assert [e for e in page.errors if "status of 400" not in e] == []
    page.errors.clear()  # the 400 answer above is logged by the browser as a failed load, as it should be


def test_one_head_step_by_step_shows_the_models_weights(page, served):
    model, tok = served["models"]["gpt"]
    text = page.input_value("[data-testid=text-input]")
    select_head(page, 1, 1)
    page.click("[data-testid=tab-steps]")
    page.select_option("[data-testid=step-query]", "7")
    page.wait_for_selector("[data-testid=explorer][data-steps='1,1,7']", state="attached")
    shown = page.eval_on_selector_all("[data-testid=step-weight]", "els => els.map(e => Number(e.dataset.weight))")
    with torch.no_grad():
        weights = model(ids_of(tok, text), return_weights=True).attentions[1][0, 1, 7]
    assert torch.allclose(torch.tensor(shown, dtype=torch.float64), weights.double(), atol=TOL)
    assert "÷" in page.text_content("[data-testid=steps]") and page.locator(".ax-step").count() == 6


def test_a_long_text_pages_through_its_matrix(page, served):
    model, tok = served["models"]["long"]
    text = (TEXT * 3)[:150]
    choose(page, "long", text)
    select_head(page, 1, 2)
    assert page.locator("[data-testid=head-cell]").count() == 64 * 64
    page.click("[data-testid=page-down]")
    page.click("[data-testid=page-right]")
    shown = cells(page, 1, 2)
    with torch.no_grad():
        weights = model(ids_of(tok, text), return_weights=True).attentions[1][0, 2]
    assert torch.allclose(shown[64:128, 64:128], weights[64:128, 64:128].double(), atol=TOL, rtol=0)


def test_the_translation_models_target_and_cross_attention(page, served):
    model, vocab = served["models"]["s2s"]
    from attnlab.generation.translation import translate

    choose(page, "s2s", "5 mars 2021")
    page.click("[data-testid=translate]")
    target = translate(model, vocab, ["5 mars 2021"])[0].target
    ready(page, "5 mars 2021", target=target)
    select_head(page, 1, 3)
    with torch.no_grad():
        written = vocab.encode(target)[: model.config.context_length - 1]  # <bos> and what fits after it
        out = model(ids_of(vocab, "5 mars 2021"), torch.tensor([[1, *written]]), return_weights=True)
    assert torch.allclose(cells(page, 1, 3), out.cross_attentions[1][0, 3].double(), atol=TOL, rtol=0)


def test_generating_with_a_sink_cache_shows_what_it_keeps_and_drops(page, served):
    choose(page, "modern", TEXT[:20])
    page.click("[data-testid=tab-generate]")
    page.select_option("[data-testid=cache-kind]", "sink")
    page.fill("[data-testid=sink-tokens]", "2")
    page.fill("[data-testid=cache-window]", "6")
    page.fill("[data-testid=generate-steps]", "5")
    page.click("[data-testid=generate-run]")
    page.wait_for_selector("[data-testid=explorer][data-generated='1']", state="attached")
    kept = page.eval_on_selector_all("[data-testid=cache-cell][data-step='4'][data-kept='true']",
                                     "els => els.map(e => Number(e.dataset.position))")
    assert kept == [0, 1, 19, 20, 21, 22, 23, 24]  # the sinks, and the window of the last 6 positions


def test_bad_input_is_one_clear_line_in_the_page_and_the_server_stays_up(page, served):
    page.fill("[data-testid=text-input]", "")
    page.wait_for_selector("[data-testid=explorer][data-state=error]", state="attached")
    assert "text is empty" in page.text_content("[data-testid=message]")
    page.fill("[data-testid=text-input]", "中文")  # not in the GPT's characters
    page.wait_for_function("() => document.querySelector('[data-testid=message]').textContent.includes('中')")
    assert "not in the vocabulary" in page.text_content("[data-testid=message]")
    page.evaluate("t => { const box = document.querySelector('[data-testid=text-input]'); box.value = t; "
                  "box.dispatchEvent(new Event('input')); }", "a" * 100_001)
    page.wait_for_function("() => document.querySelector('[data-testid=message]').textContent.includes('100,000')")
    page.fill("[data-testid=text-input]", "To be")
    ready(page, "To be", state="ready")
    assert page.text_content("[data-testid=message]") == ""
    page.errors.clear()  # the 4xx answers above are logged by the browser as failed loads, as they should be


def test_the_keyboard_moves_through_heads_tabs_and_the_matrix(page):
    page.focus("[data-testid=overview-cell][data-layer='0'][data-head='0']")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    assert page.get_attribute("[data-testid=overview-cell][data-layer='1'][data-head='1']", "aria-pressed") == "true"
    page.keyboard.press("Enter")
    assert page.get_attribute("[data-testid=tab-head]", "aria-selected") == "true"
    page.focus("[data-testid=head-matrix]")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert "looks at" in page.text_content("[data-testid=head-info]")
    page.focus("[data-testid=tab-head]")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute("[data-testid=tab-steps]", "aria-selected") == "true"


def visible_words(page) -> list[str]:
    """The words of the page's visible text and titles, model text (tokens, the text, model names), formulas and
    the language switch left out."""
    return page.evaluate(r"""() => {
      const skip = (e) => e.closest('.mt, .ax-f, [data-testid=lang-en], code, textarea, input, option, select');
      const words = [];
      const walker = document.createTreeWalker(document.querySelector('.ax'), NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const e = n.parentElement;
        if (!e || skip(e) || !e.offsetParent) continue;
        words.push(...(n.textContent.match(/[A-Za-z]{2,}/g) || []));
      }
      for (const e of document.querySelectorAll('.ax [title], .ax [aria-label]')) {
        const said = e.title + ' ' + (e.getAttribute('aria-label') || '');
        if (!skip(e)) words.push(...(said.match(/[A-Za-z]{2,}/g) || []));
      }
      return words;
    }""")


def drawn(page, selector: str) -> bool:
    """Whether every CJK character of the element's own text is drawn with the embedded face (Chromium says which
    fonts drew a node's text: CSS.getPlatformFontsForNode), not with a font that has no glyph for it (a box)."""
    own = page.evaluate("s => Array.from(document.querySelector(s).childNodes).filter(n => n.nodeType === 3)"
                        ".map(n => n.textContent).join('')", selector)
    wanted = len(re.findall(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", own))
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    finally:
        cdp.detach()
    embedded = sum(f["glyphCount"] for f in fonts if f["isCustomFont"] and f["familyName"] == "Noto Sans CJK SC")
    return wanted > 0 and embedded >= wanted


def test_the_chinese_page_has_no_english_word_left_and_draws_its_glyphs(page):
    page.click("[data-testid=lang-zh]")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    for selector in ("h1", ".ax-side h2", "[data-testid=tab-overview]", "[data-testid=lang-zh]", ".ax-help"):
        assert drawn(page, selector), selector  # glyphs, not the boxes of missing ones
    page.click("[data-testid=lang-en]")
    assert drawn(page, "[data-testid=lang-zh]")  # laid out on the English page, when the page was built
    page.click("[data-testid=lang-zh]")
    assert drawn(page, "h1")
    page.evaluate("() => document.querySelector('.ax').style.setProperty('--ax-cjk', 'nothing-at-all')")
    assert not drawn(page, "h1")  # the check itself: without the embedded face, no font draws them
    assert not any("/api/font" in u for u in page.requests)  # the page's own words are in the launch face
    assert page.get_attribute("[data-testid=explorer]", "lang") == "zh-Hans"
    left = set()
    for tab in ("overview", "head", "steps", "generate", "patch"):
        page.click(f"[data-testid=tab-{tab}]")
        if tab == "steps":
            page.wait_for_selector("[data-testid=step-table]", state="attached")
        if tab == "patch":
            page.wait_for_selector("[data-testid=explorer][data-patch-state=ready]", state="attached")
            page.click("[data-testid=patch-cell][data-layer='1'][data-head='1']")
            page.wait_for_selector("[data-testid=explorer][data-patched='1,1'][data-patch-state=ready]",
                                   state="attached")
        if tab == "generate":
            page.click("[data-testid=generate-run]")
            page.wait_for_selector("[data-testid=cache-grid]", state="attached")
        left |= set(visible_words(page)) - NOTATION
    assert not left, sorted(left)
    assert "下一个词元" in page.text_content(".ax-side")


def test_characters_the_page_has_no_glyph_for_are_cut_and_drawn(page, served):
    from attnlab.viz.webfont import covered

    # 我爱学习 is in the launch face; 麒 and 麟, in no word of the page, arrive with the next tokens (the model's
    # other characters): the page asks for their glyphs
    with page.expect_response(lambda r: "/api/font?" in r.url and "麒" in r.json().get("chars", "")) as font:
        choose(page, "zh")
    face = font.value.json()
    assert covered("麒麟", face["css"]) and face["family"].startswith("attnlab Noto Sans CJK ")
    page.fill("[data-testid=text-input]", "麒麟来了")
    ready(page, "麒麟来了")
    page.wait_for_function("f => getComputedStyle(document.querySelector('.ax')).fontFamily.includes(f)",
                           arg=face["family"])  # the family joins the page's list once it is loaded
    assert drawn(page, "[data-testid=token][data-index='0']")  # 麒, in the strip of tokens


@pytest.mark.parametrize(("width", "height"), [(1280, 720), (420, 860)])
def test_screenshots_at_two_sizes_and_nothing_wider_than_the_window(page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.evaluate("() => document.fonts.ready.then(() => true)")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"explore-{width}x{height}.png"))
    page.click("[data-testid=lang-zh]")
    select_head(page, 1, 0)
    page.evaluate("() => document.fonts.ready.then(() => true)")
    page.screenshot(path=str(ARTIFACTS / f"explore-head-zh-{width}x{height}.png"))
    open_patch(page)
    page.click("[data-testid=patch-all]")
    page.wait_for_selector("[data-testid=explorer][data-patch-map='1'][data-patch-state=ready]", state="attached")
    page.click("[data-testid=patch-cell][data-layer='1'][data-head='0']")
    page.wait_for_selector("[data-testid=explorer][data-patched='1,0'][data-patch-state=ready]", state="attached")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(ARTIFACTS / f"explore-patch-zh-{width}x{height}.png"), full_page=True)


def test_every_view_exports_as_png_and_svg(page):
    for tab in ("overview", "head", "steps", "generate", "patch"):
        page.click(f"[data-testid=tab-{tab}]")
        if tab == "steps":
            page.wait_for_selector("[data-testid=step-table]", state="attached")
        with page.expect_download() as download:
            page.click("[data-testid=export-svg]")
        svg = Path(download.value.path()).read_text(encoding="utf-8")
        assert svg.startswith("<svg") and "<script" not in svg, tab
        with page.expect_download() as download:
            page.click("[data-testid=export-png]")
        png = Path(download.value.path()).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000, tab
    with page.expect_download() as download:
        page.click("[data-testid=export-next-svg]")
    svg = Path(download.value.path()).read_text(encoding="utf-8")
    assert svg.startswith("<svg") and svg.count("<rect") >= 10  # the background and a bar per token


def test_a_snapshot_opens_from_a_file_with_no_request_and_shows_the_models_numbers(browser, served, tmp_path):
    from attnlab.explore.snapshot import write_snapshot

    api = Api([entry_for(*served["models"]["gpt"], "gpt", "To be, or not"),
               entry_for(*served["models"]["s2s"], "s2s", "5 mars 2021")])
    page_file = write_snapshot(api, tmp_path / "snap", None, "en")
    context = browser.new_context(offline=True, accept_downloads=True, viewport={"width": 1280, "height": 720})
    page = context.new_page()
    asked, errors = [], []
    page.route("**/*", lambda r: (asked.append(r.request.url), r.continue_() if r.request.url.startswith(
        ("file:", "data:", "blob:")) else r.abort()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(page_file.as_uri())
    ready(page, "To be, or not")
    assert page.get_attribute("[data-testid=text-input]", "readonly") is not None
    select_head(page, 1, 1)
    model, tok = served["models"]["gpt"]
    with torch.no_grad():
        weights = model(ids_of(tok, "To be, or not"), return_weights=True).attentions[1][0, 1]
    assert torch.allclose(cells(page, 1, 1), weights.double(), atol=TOL, rtol=0)
    page.click("[data-testid=tab-steps]")
    page.wait_for_selector("[data-testid=step-table]", state="attached")
    page.select_option("[data-testid=model-select]", "s2s")
    ready(page, "5 mars 2021")
    assert page.input_value("[data-testid=target-input]") != ""  # the model's own translation, held
    assert errors == [] and all(u.startswith(("file:", "data:", "blob:")) for u in asked), (errors, asked)
    context.close()


def test_the_notebook_widgets_module_renders_the_explorer_and_asks_the_kernel(browser, served):
    """The widget's ES module in Chromium, with anywidget's model played by the test: its messages go to
    ``ExploreWidget.answer`` (what the kernel runs) and the answers come back; the cells show the model's weights."""
    pytest.importorskip("anywidget")
    from attnlab.explore.widget import ExploreWidget

    model, tok = served["models"]["gpt"]
    widget = ExploreWidget(Api([entry_for(model, tok, "gpt", "To be, or not")]), "en")
    replies = []
    widget.send = replies.append  # the kernel's side of the comm

    def kernel(message: dict) -> dict:
        widget.answer(widget, message)
        return replies.pop()

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.expose_function("kernel", kernel)
    page.set_content("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><div id='cell'></div></body>"
                     "</html>")
    page.evaluate("""async ([esm, css, boot]) => {
      const style = document.createElement('style');
      style.textContent = css;
      document.head.append(style);
      const handlers = {};
      const model = {get: (key) => (key === 'boot' ? boot : undefined), on: (event, fn) => { handlers[event] = fn; },
                     send: (message) => window.kernel(message).then((reply) => handlers['msg:custom'](reply))};
      const module = await import(URL.createObjectURL(new Blob([esm], {type: 'text/javascript'})));
      module.default.render({model, el: document.getElementById('cell')});
    }""", [widget._esm, widget._css, widget.boot])
    ready(page, "To be, or not")
    select_head(page, 0, 1)
    with torch.no_grad():
        weights = model(ids_of(tok, "To be, or not"), return_weights=True).attentions[0][0, 1]
    assert torch.allclose(cells(page, 0, 1), weights.double(), atol=TOL, rtol=0)
    assert errors == [], errors
    context.close()
