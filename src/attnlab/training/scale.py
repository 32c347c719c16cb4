"""The tables of ``docs/scale.md``: bytes per GPU of training attnlab's large presets under DDP, FSDP and FSDP + TP,
and the batch that fits an 80 GiB GPU; computed here from the formulas of :mod:`attnlab.training.footprint` (a test
checks the docs against this, and the formula against what two processes hold).

    python -m attnlab.training.scale        # prints the tables
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attnlab.memory import format_bytes
from attnlab.models.registry import architecture
from attnlab.training.footprint import activation_bytes, state_bytes
from attnlab.training.parallel import split_parameters

#: the presets worked out, each with the sequence length it is trained at here
PRESETS = (("gpt", "gpt2-small", 1024), ("modern", "llama-3.2-1b", 2048), ("modern", "mistral-7b", 4096))
#: (name, data-parallel size, tensor-parallel size): the layouts the tables compare
LAYOUTS = (("DDP", 1, 1), ("FSDP ×8", 8, 1), ("FSDP ×64", 64, 1), ("FSDP ×16 + TP ×4", 16, 4))
GPU = 80 * 2**30  # an 80 GB GPU (H100, A100): 80 GiB


@dataclass(frozen=True)
class Preset:
    name: str
    config: Any
    split: int  # parameters tensor parallelism divides
    rest: int   # ... and the ones it keeps whole
    tokens: int  # one sequence

    @property
    def params(self) -> int:
        return self.split + self.rest

    def block_params(self) -> int:
        """Parameters of one block: what FSDP gathers whole (in bf16) while the block runs."""
        return self.split // self.config.num_layers

    def states(self, dp: int, tp: int) -> float:
        return state_bytes(self.split, self.rest, dp, tp)

    def batch_that_fits(self, dp: int, tp: int, checkpointing: bool) -> int:
        """Sequences one process (one TP group) can take at once on a :data:`GPU`: what the states and FSDP's two
        gathered blocks in bf16 (the running one, the next prefetched) leave, over one sequence's activations."""
        gathered = 2 * 2 * self.block_params() // tp if dp > 1 else 0
        left = GPU - self.states(dp, tp) - gathered
        return max(0, int(left // activation_bytes(self.config, self.tokens, tp, checkpointing)))


def presets() -> list[Preset]:
    """The presets of :data:`PRESETS`, counted on the meta device (no memory allocated)."""
    found = []
    for arch, name, tokens in PRESETS:
        row = architecture(arch)
        config = row.config.from_preset(name)
        with torch.device("meta"):
            split, rest = split_parameters(row.model(config))
        found.append(Preset(name, config, split, rest, tokens))
    return found


def states_table() -> str:
    """Markdown: parameters, and the weights + gradients + AdamW's moments each GPU holds under each layout."""
    head = "| preset | parameters | " + " | ".join(name for name, _, _ in LAYOUTS) + " |"
    lines = [head, "|" + "---|" * (2 + len(LAYOUTS))]
    for p in presets():
        cells = [format_bytes(p.states(dp, tp)) for _, dp, tp in LAYOUTS]
        lines.append(f"| {p.name} | {p.params / 1e9:.3f} B | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def activations_table() -> str:
    """Markdown: one sequence's activations (bf16) without and with activation checkpointing, and the sequences an
    80 GiB GPU takes under each layout (without / with)."""
    head = ("| preset | tokens | activations | with checkpointing | "
            + " | ".join(f"batch, {name}" for name, _, _ in LAYOUTS) + " |")
    lines = [head, "|" + "---|" * (4 + len(LAYOUTS))]
    for p in presets():
        fits = [f"{p.batch_that_fits(dp, tp, False)} / {p.batch_that_fits(dp, tp, True)}" for _, dp, tp in LAYOUTS]
        lines.append(f"| {p.name} | {p.tokens} | {format_bytes(activation_bytes(p.config, p.tokens))} | "
                     f"{format_bytes(activation_bytes(p.config, p.tokens, checkpointing=True))} | "
                     + " | ".join(fits) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(states_table(), activations_table(), sep="\n\n")
