"""How big is the cache, for real models: the table and plot of the docs, from attnlab's presets of published
checkpoints.

What each layer keeps and its bytes are :mod:`attnlab.models.caches.size`'s, read from each config's
``cache_sizes()``; :data:`REAL_MODELS` names the configs the docs' table and plot show, each built from attnlab's
own preset of the published model (its config.json's numbers), so the page is the code's arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.i18n import N_, _
from attnlab.models.caches.size import bytes_per_token, cache_bytes


@dataclass(frozen=True)
class RealModel:
    """A published model's shape, as an attnlab preset: ``label`` in the table, what kind of cache it shows."""

    label: str
    mechanism: str  # English, shown through attnlab.i18n._
    config: Callable[[], Any]


def _preset(architecture: str, preset: str, **overrides: Any) -> Callable[[], Any]:
    def build() -> Any:
        from attnlab.models.config import Presets
        from attnlab.models.registry import architecture as row

        config: type[Presets] = row(architecture).config
        return config.from_preset(preset, **overrides)
    return build


#: the rows of the docs' table and plot: each the preset of a published checkpoint (its config.json's numbers)
REAL_MODELS: list[RealModel] = [
    RealModel("Llama-3-8B (MHA)", N_("MHA, 32 KV heads"), _preset("modern", "llama-3-8b", num_kv_heads=32)),
    RealModel("Llama-3-8B", N_("GQA, 8 KV heads"), _preset("modern", "llama-3-8b")),
    RealModel("Gemma-3-1B", N_("window 512, 5:1"), _preset("modern", "gemma-3-1b")),
    RealModel("Qwen3.5-9B", N_("DeltaNet 3:1 + GQA"), _preset("qwen3_next", "qwen3.5-9b")),
    RealModel("Qwen3-Next-80B", N_("DeltaNet 3:1 + GQA"), _preset("qwen3_next", "qwen3-next-80b-a3b")),
    RealModel("DeepSeek-V3", N_("MLA 512 + rope 64"), _preset("deepseek", "deepseek-v3")),
    RealModel("DeepSeek-V3.2", N_("DSA: MLA + index 128"), _preset("deepseek", "deepseek-v3.2")),
    RealModel("Gemma 4 (defaults)", N_("window 512, 5:1, global heads 512"), _preset("gemma4", "gemma-4-text")),
    RealModel("Kimi-Linear-48B", N_("KDA 3:1 + MLA"), _preset("kimi_linear", "kimi-linear-48b-a3b")),
]


def real_models() -> list[RealModel]:
    """:data:`REAL_MODELS`, each a config on no device (nothing is allocated)."""
    return list(REAL_MODELS)


def table_rows(tokens: int, dtype: torch.dtype = torch.bfloat16,
               models: Sequence[RealModel] | None = None) -> list[tuple[str, str, int, int, int]]:
    """``(label, mechanism, bytes each token adds past every window, bytes kept whatever the length, bytes at
    tokens)`` for each real model, one sequence."""
    rows = []
    for model in models if models is not None else real_models():
        sizes = model.config().cache_sizes()
        rows.append((model.label, model.mechanism, bytes_per_token(sizes, dtype), cache_bytes(sizes, 0, dtype),
                     cache_bytes(sizes, tokens, dtype)))
    return rows


#: the table's columns (English; translated where shown), ``{tokens}`` filled in
HEADERS = (N_("model"), N_("attention"), N_("per token"), N_("fixed"), N_("at {tokens:,}"))


def shown_bytes(n: int) -> str:
    """Bytes as the table shows them, in decimal units as the book counts them (17.18 GB): exact below a kB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,} B"


def markdown_table(tokens: int = 32768, dtype: torch.dtype = torch.bfloat16) -> str:
    """The table as docs/modern.md shows it (in the reader's language), one sequence of ``tokens`` in ``dtype``."""
    lines = ["| " + " | ".join(_(h).format(tokens=tokens) for h in HEADERS) + " |", "|---|---|---:|---:|---:|"]
    for label, mechanism, per_token, fixed, total in table_rows(tokens, dtype):
        cells = (label, _(mechanism), shown_bytes(per_token), shown_bytes(fixed), shown_bytes(total))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
