"""``out/report.html``: one page a learner can open and read — the four mechanisms on the example
sentence (with the arithmetic for one token), a pretrained BERT's heads, the positional encoding, and,
when trained models are in the output folder, a GPT's loss curve and a sample of its text, and the dates
translation model's translations and cross-attention alignment.

Images are embedded as base64 PNG, the packaged Noto Sans CJK cut to the page's characters as an ``@font-face``
(:mod:`attnlab.viz.webfont`: the Chinese report reads on a machine with no CJK font), and all text is escaped, so the
page is one self-contained file.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import torch
from rich.console import Console
from torch import Tensor

from attnlab.attention import CausalAttention, MultiHeadAttention, SelfAttentionV1, SimpleSelfAttention
from attnlab.demo.context import Demo
from attnlab.demo.mechanisms import EMBEDDINGS, TOKENS
from attnlab.files import atomic_write
from attnlab.generation import GenerationConfig, cropping_expected, stream_text
from attnlab.i18n import N_, _, language, tr
from attnlab.inspect import Explanation, capture, explain
from attnlab.models import load_trained
from attnlab.models.checkpoint import checkpoint_kind, read_state, resolve_checkpoint
from attnlab.pretrained import load_bert
from attnlab.viz.heatmap import head_figure, heads_figure
from attnlab.viz.loss_curve import loss_figure
from attnlab.viz.pe_plot import pe_figure
from attnlab.viz.viewer import write_html
from attnlab.viz.webfont import font_face_css, font_stack

BERT_SENTENCE = "The cat sat on the mat because it was tired."
FONTS = font_stack("system-ui", "Noto Sans")  # the embedded face after the Latin ones
CSS = """body{font:16px/1.55 @@FONTS@@;max-width:980px;margin:2em auto;
padding:0 1em;color:#1d2330}h1{font-size:1.8em}h2{margin-top:2em;border-bottom:1px solid #ddd}img{max-width:100%}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}td,th{border:1px solid #ddd;padding:2px 8px;
text-align:right}th{background:#f5f7fa}td:first-child{text-align:left}.note{color:#667085}pre{background:#f5f7fa;
padding:1em;white-space:pre-wrap}"""


@dataclass
class Section:
    title: str
    body: str  # HTML, already escaped


def png_img(fig, alt: str, dpi: int = 90) -> str:
    """``<img>`` with the figure inline as a base64 PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def p(text: str, cls: str | None = None) -> str:
    return f"<p{' class=' + chr(34) + cls + chr(34) if cls else ''}>{html.escape(text)}</p>"


def explain_table(e: Explanation, digits: int = 4) -> str:
    """The arithmetic for one query as an HTML table: q·k, scaled, softmax, contribution."""
    def vec(t: Tensor) -> str:
        return "[" + ", ".join(f"{x:.{digits}f}" for x in t.tolist()) + "]"

    head = "".join(f"<th>{html.escape(_(h))}</th>" for h in (N_("key"), "q · k", N_("× scale"), "softmax",
                                                            N_("weight × value")))
    head, masked = f"<tr>{head}</tr>", html.escape(tr("−∞ (masked)"))
    rows = [
        f"<tr><td>{html.escape(tok)}</td><td>{e.raw_scores[j]:.{digits}f}</td>"
        f"<td>{f'{e.scaled_scores[j]:.{digits}f}' if e.allowed[j] else masked}</td>"
        f"<td>{e.weights[j]:.{digits}f}</td><td>{vec(e.contributions[j])}</td></tr>"
        for j, tok in enumerate(e.tokens)
    ]
    rows.append(f"<tr><th>{html.escape(tr('sum'))}</th><th></th><th></th><th>{e.weights.sum():.{digits}f}</th>"
                f"<th>{html.escape(tr('{context} = context', context=vec(e.context)))}</th></tr>")
    intro = p(tr("Query {query_token!r}: q = {q}, scale = {scale:.{digits}f}. Checked against the model's forward "
                 "pass: max |Δ| {max_abs_diff_weights:.1e}.", query_token=e.query_token, q=vec(e.query),
                 scale=e.scale, digits=digits, max_abs_diff_weights=e.max_abs_diff_weights))
    return intro + "<table>" + head + "".join(rows) + "</table>"


def mechanisms_section(tokens: list[str], x: Tensor, seed: int) -> Section:
    """The four mechanisms on the example sentence: a heatmap each, and the arithmetic of one token."""
    torch.manual_seed(seed)
    scaled = SelfAttentionV1(x.shape[-1], 2)
    torch.manual_seed(seed)
    causal = CausalAttention(x.shape[-1], 2, context_length=len(tokens), dropout=0.0)
    torch.manual_seed(seed)
    multi = MultiHeadAttention(x.shape[-1], 4, len(tokens), 0.0, 2)
    parts = [p(tr("Each row is a query token, each column a key; a row's weights sum to 1. Same sentence, same "
                  "embeddings (seed {seed}), four mechanisms.", seed=seed))]
    for label, module, text in (
        (N_("Simplified: softmax(X Xᵀ) X"), SimpleSelfAttention(),
         N_("No trainable weights: similar embeddings attend.")),
        (N_("Scaled dot-product: softmax(Q Kᵀ/√d_k) V"), scaled,
         N_("Trainable W_q, W_k, W_v; scores divided by √d_k.")),
        (N_("Causal"), causal, N_("The same, with every key after the query masked: the upper triangle is 0.")),
        (N_("Multi-head (2 heads)"), multi, N_("Each head has its own projections and its own pattern.")),
    ):
        cap = capture(module, x, tokens=tokens, name=label)
        fig = heads_figure(cap, 0) if cap.num_heads > 1 else head_figure(cap, 0, 0)
        parts += [f"<h3>{html.escape(_(label))}</h3>", p(_(text)), png_img(fig, _(label))]
        if module is scaled:
            parts += [p(tr("The arithmetic for one token, every number:")), explain_table(explain(cap, 1))]
    return Section(tr("1. The four mechanisms on one sentence"), "".join(parts))


def bert_section(out_dir: Path, sentence: str = BERT_SENTENCE) -> Section:
    """A real pretrained model's heads, and the interactive viewer written beside the report."""
    try:
        model = load_bert()
    except ImportError as err:
        return Section(tr("2. A pretrained BERT's heads"), p(tr("Skipped: {err}. Install attnlab[pretrained].",
                                                            err=err), "note"))
    cap = capture(model, sentence, tokenizer=model.tokenizer, qkv=False, name="all-MiniLM-L6-v2")
    viewer = write_html(cap, out_dir / "attention.html")
    parts = [p(tr("all-MiniLM-L6-v2 ({num_layers} layers × {num_heads} heads) reading {sentence!r}. Early heads look "
                  "at neighbours or at [CLS]/[SEP]; later ones at related words.", num_layers=cap.num_layers,
                  num_heads=cap.num_heads, sentence=sentence)),
             with_link(tr("Explore every layer and head: {link} (works offline).", link=LINK), viewer.name)]
    for layer in (0, cap.num_layers - 1):
        parts.append(png_img(heads_figure(cap, layer), tr("BERT, layer {layer}", layer=layer), dpi=70))
    return Section(tr("2. A pretrained BERT's heads"), "".join(parts))


def pe_section() -> Section:
    return Section(tr("3. Where is each token? The sinusoidal positional encoding"),
                   p(tr("Attention alone is blind to order, so each position adds its own pattern of sines and "
                        "cosines: fast in the first dimensions, slow in the last.")) +
                   png_img(pe_figure(), tr("the sinusoidal positional encoding")))


def trained_section(out_dir: Path, prompt: str = "\n", tokens: int = 300) -> Section | None:
    """The loss curve and a sample of the first trained model found under ``out_dir``, and what to make of them
    (None if there is none)."""
    from attnlab.demo.shakespeare import sample_guide

    runs = sorted(d.parent for d in out_dir.rglob("checkpoint.json") if checkpoint_kind(d.parent) == "decoder")
    if not runs:
        return None
    run = runs[0]
    state = read_state(resolve_checkpoint(run))
    history = state["history"]  # the losses the checkpoint recorded
    parts = [p(tr("The model trained in {run}.", run=run)),
             png_img(loss_figure([tuple(x) for x in history["train"]], [tuple(x) for x in history["eval"]]),
                     tr("loss curve"))]
    model, tokenizer = load_trained(run)
    with cropping_expected():  # past a GPT's position table it crops: the guide below says so
        text = "".join(stream_text(model, tokenizer, prompt, tokens, GenerationConfig(temperature=0.8, seed=1337)))
    parts += [p(tr("A sample ({tokens} tokens, temperature 0.8, seed 1337):",
                   tokens=tokens)), f"<pre>{html.escape(text)}</pre>", p(sample_guide(model, tokenizer, state))]
    return Section(tr("4. A model we trained: loss and sample"), "".join(parts))


def translation_section(out_dir: Path) -> Section | None:
    """The dates model the demo trained: its loss, a held-out day in seven languages early in training and at the
    end, what the mistakes mean, and one alignment (None if the demo trained none)."""
    from attnlab.demo.dates import ALIGNMENT, draw_alignment, example_pairs, explanation, snapshots, verdict

    runs = sorted(d.parent for d in out_dir.rglob("checkpoint.json") if checkpoint_kind(d.parent) == "seq2seq")
    if not runs:
        return None
    run = runs[0]
    history = read_state(resolve_checkpoint(run))["history"]
    model, vocab = load_trained(run, kind="seq2seq")
    pairs, shots = example_pairs(), snapshots(run)
    head = "".join(f"<th>{html.escape(x)}</th>" for x in
                   [_("source"), *(tr("after {step} steps", step=s.step) for s in shots)])
    rows = "".join("<tr><td>" + html.escape(pair.source) + "</td>" + "".join(
        f"<td>{html.escape(s.translations[i].target)} {html.escape(verdict(s.translations[i].target, pair.target))}"
        "</td>" for s in shots) + "</tr>" for i, pair in enumerate(pairs))
    french = shots[-1].translations[2]
    alignment = draw_alignment(model, vocab, french, run / ALIGNMENT)
    data = base64.b64encode(alignment.read_bytes()).decode("ascii")
    parts = [p(tr("An encoder-decoder Transformer (the paper's architecture, {count:,} parameters) trained in {run} "
                  "to read dates in seven languages and write them as ISO 8601. The day below was held out: the "
                  "model never saw it, in any language. Its translations (beam 4) early in training and at the end:",
                  count=model.num_parameters(), run=run)),
             png_img(loss_figure([tuple(x) for x in history["train"]], [tuple(x) for x in history["eval"]]),
                     tr("loss curve")),
             f"<table><tr>{head}</tr>{rows}</table>",
             "<ul>" + "".join(f"<li>{html.escape(s.summary(pairs))}</li>" for s in shots) + "</ul>",
             p(explanation()),
             p(_("Cross-attention while it translated the French date: each row is one step of the decoder (the "
                 "character it wrote), each column a source character. Once trained, the steps that write the year "
                 "look at the year, the month's digits at the month's name, the day's at the day.")),
             f'<img alt="{html.escape(tr("cross-attention while translating"))}" src="data:image/png;base64,{data}">']
    return Section(tr("5. Translation: the original encoder-decoder Transformer"), "".join(parts))


def trained_runs(out_dir: Path) -> list[Path]:
    """The runs the demo trained under ``out_dir``, decoders first (the GPT, then the translation model)."""
    found = {kind: sorted(d.parent for d in out_dir.rglob("checkpoint.json") if checkpoint_kind(d.parent) == kind)
             for kind in ("decoder", "seq2seq")}
    return [*found["decoder"], *found["seq2seq"]]


def explore_command(out_dir: Path) -> str | None:
    """``attnlab explore --checkpoint …`` for every run trained under ``out_dir`` (None: none was)."""
    runs = trained_runs(out_dir)
    return " ".join(["attnlab explore", *(f"--checkpoint {run}" for run in runs)]) if runs else None


def explore_section(out_dir: Path) -> Section | None:
    """What to do next with the models trained here: play with them live (None if the demo trained none)."""
    command = explore_command(out_dir)
    if command is None:
        return None
    return Section(tr("6. Next: play with these models live"),
                   p(tr("Type a text and watch every layer and head answer, work one head out step by step, move "
                        "the temperature, top-k and top-p sliders, append tokens and see what the cache keeps, "
                        "switch heads off and see the loss change; a page on this machine where every number is the "
                        "model's:")) + f"<pre>{html.escape(command)}</pre>")
LINK = "\x00link\x00"  # where a link goes in a translated sentence, once the sentence is escaped


def with_link(sentence: str, target: str) -> str:
    """``<p>sentence</p>`` with :data:`LINK` made a link to ``target`` (its text: ``target``)."""
    link = f'<a href="{html.escape(target)}">{html.escape(target)}</a>'
    return f"<p>{html.escape(sentence).replace(LINK, link)}</p>"


class _Text(HTMLParser):
    """The text a page shows: its elements' text and the images' alternative text."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.parts += [value or "" for name, value in attrs if name in ("alt", "title")]


def page_text(page: str) -> str:
    """Every character ``page`` (HTML without style or script) shows: its text, its images' alternative text and
    titles, what its embedded font must hold."""
    parser = _Text()
    parser.feed(page)
    return "".join(parser.parts)


def render(sections: list[Section], title: str | None = None) -> str:
    """The page: the sections under ``title``, with a font that holds every character they show."""
    title = title or tr("attnlab: attention, seen")
    body = f"<h1>{html.escape(title)}</h1>" + "".join(f"<h2>{html.escape(s.title)}</h2>{s.body}" for s in sections)
    font = font_face_css(page_text(f"<title>{html.escape(title)}</title>{body}"))
    return (f'<!DOCTYPE html><html lang="{language()}"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" '
            "content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:\">"
            f"<title>{html.escape(title)}</title><style>{font}{CSS.replace('@@FONTS@@', FONTS)}</style></head>"
            f"<body>{body}</body></html>")


def write_report(out_dir: str | Path, tokens: list[str], embeddings: Tensor, seed: int,
                 console: Console | None = None, sample_tokens: int = 200) -> Path:
    """Build every section and write ``out_dir/report.html`` atomically (a trained model's sample has
    ``sample_tokens`` tokens)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = [mechanisms_section(tokens, embeddings, seed), bert_section(out), pe_section()]
    trained = trained_section(out, tokens=sample_tokens)
    if trained is None and console is not None:
        console.print(tr("[dim]No trained model under the output folder: the report skips that section.[/dim]"))
    sections += [trained] if trained is not None else []
    translation = translation_section(out)
    sections += [translation] if translation is not None else []
    explore = explore_section(out)
    sections += [explore] if explore is not None else []
    page = render(sections)
    return atomic_write(out / "report.html", lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))


def report_step(demo: Demo) -> None:
    """The demo's last step: write the report."""
    demo.console.rule(tr("[bold]Report: everything above, in one page"))
    path = write_report(demo.out_dir, TOKENS, EMBEDDINGS, demo.seed, demo.console)
    demo.console.print(tr("Wrote {path}: open it in a browser (it needs no network).", path=path))
    command = explore_command(demo.out_dir)
    if command is not None:
        demo.console.print(tr("Next, play with the models you trained, live: every layer and head as you type, the "
                              "next token under the sliders, heads switched off:"), highlight=False)
        demo.console.print(f"  {command}", highlight=False, markup=False)
