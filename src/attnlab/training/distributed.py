"""Data-parallel set-up: one process per device under ``torchrun``, or a plain single process.

``torchrun --nproc_per_node=N`` sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; we join the process
group (gloo on the CPU, nccl on CUDA) and pick this process' device. Without them, nothing is
initialised and the run is an ordinary single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from attnlab.i18n import tr

CPU = torch.device("cpu")


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = CPU

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``"auto"``: this process' CUDA device if there is one, else the CPU."""
    if name == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda"):  # mps, meta, xla...: attnlab runs on neither
        raise ValueError(tr("device: expected 'auto', 'cpu', 'cuda' or 'cuda:N', got {name!r}", name=name))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(tr("device: {name!r} was asked for but CUDA is not available", name=name))
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(tr("device: {name!r} was asked for but this machine has {count} CUDA device(s), "
                            "cuda:0 to cuda:{last}", name=name, count=torch.cuda.device_count(),
                            last=torch.cuda.device_count() - 1))
    if device.type == "cuda" and device.index is None:
        device = torch.device(f"cuda:{local_rank}")
    return device


def setup_distributed(device_name: str = "auto") -> DistInfo:
    """Join the process group if launched by torchrun; return this process' rank and device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(device=pick_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name, local_rank)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
    return DistInfo(rank, world, local_rank, device)


def teardown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def all_reduce_sum(info: DistInfo, values: list[float]) -> list[float]:
    """Element-wise sum of ``values`` over all processes (the values themselves when alone)."""
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=info.device)
    dist.all_reduce(t)
    return t.tolist()


def gather_rng_states(info: DistInfo) -> dict[str, torch.Tensor]:
    """Every process' torch RNG state (CPU, and CUDA if used), keyed ``cpu.rank{r}`` / ``cuda.rank{r}``."""
    states = {"cpu": torch.get_rng_state()}
    if info.device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state(info.device)
    out = {}
    for kind, state in states.items():
        if info.enabled:
            parts = [torch.empty_like(state) for _ in range(info.world_size)]
            if info.device.type == "cuda":  # nccl moves CUDA tensors only
                gathered = [p.to(info.device) for p in parts]
                dist.all_gather(gathered, state.to(info.device))
                parts = [g.cpu() for g in gathered]
            else:
                dist.all_gather(parts, state)
        else:
            parts = [state]
        out.update({f"{kind}.rank{r}": p for r, p in enumerate(parts)})
    return out


def restore_rng_state(info: DistInfo, states: dict[str, torch.Tensor]) -> bool:
    """Restore this process' RNG state; False if the checkpoint has none for this rank."""
    key = f"cpu.rank{info.rank}"
    if key not in states:
        return False
    torch.set_rng_state(states[key])
    if info.device.type == "cuda" and f"cuda.rank{info.rank}" in states:
        torch.cuda.set_rng_state(states[f"cuda.rank{info.rank}"], info.device)
    return True
