"""``attnlab explore --export DIR``: one text's views in a page that needs no server (``DIR/index.html``).

The page is the explorer's, with a snapshot in place of the API: per model, the full attention of every layer ×
head (float32, base64), the overview, the next token at ``generate``'s defaults, and one head step by step for
every query (for the last query alone where that would be too much). The text, the sliders, the heads' switches
and generation are fixed: it is a picture of one reading, to share. Everything is inline; its
Content-Security-Policy forbids every request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.explore.api import Api
from attnlab.explore.entry import Entry
from attnlab.files import atomic_write_text, check_writable_dir
from attnlab.i18n import tr
from attnlab.models import Transformer

#: the most weights (layers × heads × T × T, over every attention) one model may put in a snapshot: 64 MB as float32
MAX_WEIGHTS = 16 * 1024 * 1024
#: every query's steps while layers × heads × queries stays under this many; past it, the last query's alone
ALL_QUERIES = 1024
POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
          "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
MARK = 'id="attnlab-boot"'


def held(api: Api, entry: Entry, overview: int) -> dict[str, Any]:
    """What the snapshot holds of one model (see the module); a translation model's target is its own greedy
    translation of the text."""
    ask = {"model": entry.name, "text": entry.text}
    if entry.kind == "seq2seq":
        from attnlab.generation.translation import translate

        assert isinstance(entry.model, Transformer)  # a seq2seq entry is a translation model
        ask["target"] = translate(entry.model, entry.tokenizer, [entry.text], truncate=True)[0].target
    base = api.call("forward", {**ask, "encoding": "base64", "detail": None})
    full = api.call("forward", {**ask, "encoding": "base64"})
    modes = {"attentions": ["self"] if "decoder_attentions" not in full else ["encoder"],
             "decoder_attentions": ["decoder"], "cross_attentions": ["cross"]}
    kept = {mode: full[key] for key, names in modes.items() if key in full for mode in names}
    weights = sum(a["shape"][0] * a["shape"][1] * a["shape"][2] * a["shape"][3] for a in kept.values())
    if weights > MAX_WEIGHTS:
        raise ValueError(tr("--export: {name} holds {n:,} attention weights for this text; a snapshot keeps at most "
                            "{limit:,}: shorten --text", name=entry.name, n=weights, limit=MAX_WEIGHTS))
    views = {mode: api.call("forward", {**ask, "encoding": "base64", "mode": mode, "overview": overview})["overview"]
             for mode in kept}
    describe = {**entry.describe(), "target": ask.get("target", "")}
    return {"name": entry.name, "describe": describe, "steps": steps(api, ask, entry, base),
            "forward": {"modes": list(kept), "base": base, "full": kept, "overview": views}}


def steps(api: Api, ask: dict[str, Any], entry: Entry, base: dict[str, Any]) -> dict[str, Any]:
    """One head step by step: every (layer, head, query), or every (layer, head) at the last query."""
    mode = "cross" if entry.kind == "seq2seq" else "self"
    rows = len(base["target_tokens"]) if mode == "cross" else len(base["tokens"])
    queries = range(rows) if entry.num_layers * entry.num_heads * rows <= ALL_QUERIES else [rows - 1]
    out = {}
    for layer in range(entry.num_layers):
        for head in range(entry.num_heads):
            for query in queries:
                out[f"{mode},{layer},{head},{query}"] = api.call(
                    "head", {**ask, "layer": layer, "head": head, "query": query})
    return out


def write_snapshot(api: Api, out_dir: str | Path, text: str | None, lang: str, overview: int = 32) -> Path:
    """Write ``out_dir/index.html``: every model of ``api`` reading its text (``text``, or each kind's own)."""
    from attnlab.explore.launch import boot_data, launch_font, named_face
    from attnlab.explore.page import page_html

    out = Path(out_dir)
    page = out / "index.html"
    if page.exists() and MARK not in page.read_text(encoding="utf-8", errors="replace"):
        raise ValueError(tr("--export: {path} is not an attnlab snapshot; choose a new or empty directory",
                            path=str(page)))
    check_writable_dir(out, "--export")
    snapshot = {"models": [held(api, entry, overview) for entry in api.entries.values()]}
    bases = [m["forward"]["base"] for m in snapshot["models"]]
    shown = "".join("".join([*b["tokens"], *b.get("target_tokens", []), *(n["token"] for n in b["next_tokens"])])
                    for b in bases)  # no cut on request in a snapshot: every glyph it shows is in its face
    face = launch_font(api, shown + (text or ""))
    boot = boot_data(api, lang, snapshot=snapshot)
    boot["models"] = [m["describe"] for m in snapshot["models"]]
    boot["font"] = named_face(face)
    return atomic_write_text(page, page_html(boot, face["css"], policy=POLICY))
