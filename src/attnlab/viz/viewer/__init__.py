"""``attnlab view``: one self-contained HTML file to explore a :class:`~attnlab.inspect.Capture`.

Everything is inline (HTML, CSS, JavaScript, data, and the packaged Noto Sans CJK cut to the page's characters by
:mod:`attnlab.viz.webfont`), so the file works from ``file://`` with no network and draws Chinese on a machine with
no CJK font; a Content-Security-Policy forbids every fetch anyway. What the page says (its controls, the lines its
script writes) is in the reader's language (:data:`UI`), and ``<html lang>`` says which.

Safety: the data sits in a ``<script type="application/json">`` block with ``<``, ``>`` and ``&``
written as ``\\u003c``/``\\u003e``/``\\u0026``, so no token can close the block; the script shows
tokens with ``textContent`` only, so a token is always text, never HTML.

Size and speed: each weight is stored as one byte relative to the maximum of its row
(``w ≈ q/255 · rowmax``, error ≤ rowmax/510), deflate-compressed and base64-encoded; the row maxima
are float32. The page draws with canvas (lines grouped into 16 opacity levels, one path each;
matrices as bitmaps) and draws the all-heads grid a few thumbnails per frame, so 512 tokens ×
12 layers × 12 heads stays responsive.
"""

from __future__ import annotations

import base64
import html
import json
import re
import zlib
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from attnlab.files import atomic_write
from attnlab.i18n import N_, _, language, tr
from attnlab.inspect import Capture, shown_name
from attnlab.inspect.encoder_decoder import MODE_TITLES, MODES, Seq2SeqCapture
from attnlab.viz.webfont import FAMILY, font_face_css, font_stack

#: the largest quantisation error of a weight, as a fraction of its row's maximum
QUANT_ERROR = 1 / 510
#: what the page says: the controls of its HTML, and the templates its script fills in (``{fields}``)
UI = {
    "attention": N_("Attention"), "layer": N_("Layer"), "head": N_("Head"), "head_view": N_("Head view"),
    "matrix": N_("Matrix"), "all_heads": N_("All heads"), "export_png": N_("Export PNG"),
    "export_svg": N_("Export SVG"), "hover": N_("Hover a token to see where it looks; click it to keep it selected."),
    "query_attends": N_('Query {i} "{token}" attends to (layer {layer}, head {head}):'),
    "key_attended": N_('Key {i} "{token}" is attended to by (layer {layer}, head {head}):'),
    "cell": N_('query {i} "{query}" → key {j} "{key}": {weight}'), "thumb": N_("L{layer} H{head}"),
    "export_title": N_("{title} · layer {layer} · head {head}"), "layer_option": N_("layer {n}"),
    "head_option": N_("head {n}"), "cannot_load": N_("Could not load the weights: {error}"),
    "no_decompression": N_("this browser cannot decompress (DecompressionStream missing)"),
}
#: the Latin fonts before the embedded face, for text and for the weights' columns
LATIN, MONO = ("system-ui", "-apple-system", "Segoe UI", "Noto Sans"), ("ui-monospace", "monospace")


def quantise(attentions: list[torch.Tensor]) -> tuple[bytes, bytes]:
    """Per-layer ``(H, Tq, Tk)`` weights -> (uint8 bytes ``(L, H, Tq, Tk)``, float32 row maxima ``(L, H, Tq)``)."""
    w = torch.stack([a.float() for a in attentions]).clamp(min=0).numpy()  # (L, H, T, T)
    rowmax = w.max(axis=-1, keepdims=True)
    safe = np.where(rowmax > 0, rowmax, 1.0)
    q = np.rint(w / safe * 255).astype(np.uint8)
    return q.tobytes(), rowmax[..., 0].astype("<f4").tobytes()


def dequantise(q: bytes, rowmax: bytes, shape: tuple[int, int, int, int]) -> np.ndarray:
    """Inverse of :func:`quantise` (what the page computes): ``(L, H, Tq, Tk)`` float32."""
    qa = np.frombuffer(q, dtype=np.uint8).reshape(shape).astype(np.float32)
    return qa / 255 * np.frombuffer(rowmax, dtype="<f4").reshape(shape[:3])[..., None]


def _page_text(data: dict) -> str:
    """Every character the page can show: its title and tokens (each mode's), the modes' names and what it says."""
    modes = data.get("modes", [data])
    parts = [data["title"], *data["ui"].values()]
    for m in modes:
        parts += [m.get("title", ""), m.get("label", ""), *m.get("qtokens", m.get("tokens", [])),
                  *m.get("ktokens", [])]
    return "".join(parts)


def seq2seq_payload(cap: Seq2SeqCapture, title: str | None = None, mode: str = "cross", embed_font: bool = True,
                    level: int = 6) -> dict:
    """The JSON for an encoder-decoder: one mode per attention (encoder self-attention, decoder self-attention,
    cross-attention), each with its query tokens (rows) and key tokens (columns); ``mode`` is shown first."""
    if mode not in MODES:
        raise ValueError(tr("mode: expected one of {choices}, got {mode!r}", choices=", ".join(MODES), mode=mode))
    sides = {"encoder": (cap.source_tokens, cap.source_tokens), "decoder": (cap.target_tokens, cap.target_tokens),
             "cross": (cap.target_tokens, cap.source_tokens)}
    modes = []
    for name in MODES:
        maps = cap.weights(name)
        q, rowmax = quantise(maps)
        rows, cols = sides[name]
        modes.append({"name": name, "label": _(MODE_TITLES[name]),
                      "title": tr("{model}: {what}", model=shown_name(cap.model_name), what=_(MODE_TITLES[name])),
                      "qtokens": list(rows), "ktokens": list(cols), "layers": len(maps), "heads": maps[0].shape[0],
                      "causal": name == "decoder", "compressed": True,
                      "weights": base64.b64encode(zlib.compress(q, level)).decode("ascii"),
                      "rowmax": base64.b64encode(rowmax).decode("ascii")})
    return {"title": title or tr("{model}: attention", model=shown_name(cap.model_name)), "modes": modes,
            "mode": MODES.index(mode), "layer": 0, "head": 0, **_words(embed_font)}


def payload(cap: Capture | Seq2SeqCapture, title: str | None = None, layer: int = 0, head: int = 0,
            embed_font: bool = True, level: int = 6, mode: str = "cross") -> dict:
    """The JSON the page reads (``level``: deflate level, 1 fast … 9 small); an encoder-decoder's capture gives
    :func:`seq2seq_payload`'s three modes (``mode`` first)."""
    if isinstance(cap, Seq2SeqCapture):
        return seq2seq_payload(cap, title, mode, embed_font=embed_font, level=level)
    cap.check_layer_head(layer, head)
    q, rowmax = quantise(cap.attentions)
    return {
        "title": title or tr("{model}: attention", model=shown_name(cap.model_name)), "tokens": list(cap.tokens),
        "T": cap.seq_len, "layers": cap.num_layers, "heads": cap.num_heads, "layer_heads": cap.heads_per_layer,
        "layer": layer, "head": head,
        "causal": cap.is_causal, "compressed": True,
        "weights": base64.b64encode(zlib.compress(q, level)).decode("ascii"),
        "rowmax": base64.b64encode(rowmax).decode("ascii"), **_words(embed_font),
    }


def _words(embed_font: bool) -> dict:
    """What the payload says in the reader's language (:data:`UI`), and the fonts it is drawn with: the embedded
    face's name (None without it) in the stack after the Latin fonts."""
    return {"ui": {key: _(text) for key, text in UI.items()}, "fonts": font_stack(*LATIN),
            "font_family": FAMILY if embed_font else None}


def _json_for_script(obj: dict) -> str:
    """JSON that cannot end the ``<script>`` block it sits in, nor start an HTML comment or entity."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _asset(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def build_html(cap: Capture | Seq2SeqCapture, title: str | None = None, layer: int = 0, head: int = 0,
               embed_font: bool = True, level: int = 6, mode: str = "cross") -> str:
    """The whole page as one string: with ``embed_font``, an ``@font-face`` holding every character it can show."""
    data = payload(cap, title, layer, head, embed_font, level, mode)
    parts = {"TITLE": html.escape(data["title"]), "CSS": _asset("viewer.css"), "JS": _asset("viewer.js"),
             "DATA": _json_for_script(data), "LANG": language(), "FONTS": data["fonts"], "MONO": font_stack(*MONO),
             "FONTFACE": font_face_css(_page_text(data)) if embed_font else "",
             **{f"UI:{key}": html.escape(text) for key, text in data["ui"].items()}}
    # one pass, so nothing inserted is itself searched for placeholders
    return re.sub(r"@@(TITLE|CSS|JS|DATA|LANG|FONTS|MONO|FONTFACE|UI:\w+)@@", lambda m: parts[m.group(1)],
                  _asset("template.html"))


def write_html(cap: Capture | Seq2SeqCapture, path: str | Path, **kwargs) -> Path:
    """Write :func:`build_html` to ``path`` atomically (UTF-8)."""
    page = build_html(cap, **kwargs)
    return atomic_write(path, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))


class AttentionView:
    """The viewer inline in Jupyter: ``AttentionView(capture)`` as the last line of a cell.

    The page goes into an ``<iframe srcdoc>``, so its script and styles stay out of the notebook's.
    """

    def __init__(self, cap: Capture, height: int = 640, **kwargs) -> None:
        self.cap, self.height, self.kwargs = cap, height, kwargs

    def _repr_html_(self) -> str:
        page = build_html(self.cap, **self.kwargs)
        return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:{self.height}px;'
                f'border:1px solid #ddd" sandbox="allow-scripts allow-downloads"></iframe>')


def show(cap: Capture, **kwargs) -> AttentionView:
    """Display the viewer inline in a notebook (returns the object Jupyter renders)."""
    return AttentionView(cap, **kwargs)
