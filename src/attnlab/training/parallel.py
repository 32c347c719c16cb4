"""Past one device, on PyTorch's own engine: sharded data parallelism (FSDP2), the heads split across processes
(tensor parallelism, DTensor) or both on a 2-D device mesh, and each block's activations recomputed in backward.

``--parallel`` picks how the processes of a ``torchrun`` share the work:

==========  ===================================================  ==========================================
mode        each process holds                                   each process sees
==========  ===================================================  ==========================================
``ddp``     the whole model, its gradients and AdamW's moments   its own micro-batches
``fsdp``    1/N of each (``fully_shard`` on every block, root)   its own micro-batches
``tp``      whole heads: 1/N of every attention and FFN matrix    the same batch as the others
``fsdp+tp`` 1/(dp·tp): heads split over ``tp``, sharded over dp  the batch of its data-parallel rank
==========  ===================================================  ==========================================

Why heads are the unit to split: a multi-head attention is ``num_heads`` attentions side by side, each reading its
own columns of ``W_query``, ``W_key``, ``W_value`` and writing its own rows of ``out_proj``'s input. A process that
holds a group of whole heads computes their scores and contexts with no word to the others; only ``out_proj``,
which mixes the heads, needs every group's part: each process multiplies its rows and one all-reduce sums them
(Megatron-LM's split). The feed-forward splits the same way over its hidden units. Under grouped-query attention a
key/value head serves a group of query heads, so the key/value heads are split too: both counts must divide by the
TP size, and process ``r`` then holds query heads ``r·H/tp ..`` and exactly the key/value heads they read.

The processes form a device mesh of ``dp × tp`` (``tp`` fastest: a TP group is neighbouring ranks, one machine's
GPUs); the data-parallel rank and size come from the mesh, never from the world, so the processes of one TP group
draw the same micro-batches.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

from attnlab.arguments import expect_one_of
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.i18n import tr
from attnlab.layers.feedforward import FeedForward
from attnlab.layers.swiglu import SwiGLU
from attnlab.training.config import PARALLEL_MODES
from attnlab.training.distributed import DistInfo

#: what tensor parallelism splits in each module: the maps that make its heads (or hidden units), column-parallel,
#: and the one that mixes them, row-parallel
SPLITS: dict[type[nn.Module], tuple[tuple[str, ...], str]] = {
    MultiHeadAttention: (("W_query", "W_key", "W_value"), "out_proj"),  # every attention module, and its fast twin
    FeedForward: (("linear1",), "linear2"),
    SwiGLU: (("gate_proj", "up_proj"), "down_proj"),
}


def split_of(module: nn.Module) -> tuple[tuple[str, ...], str] | None:
    """What tensor parallelism splits in ``module`` (its kind's row of :data:`SPLITS`, subclasses included: a fast
    twin splits as its plain module does); None for a module it leaves whole."""
    return next((split for kind, split in SPLITS.items() if isinstance(module, kind)), None)


def mesh_shape(mode: str, tp_size: int | None, world_size: int) -> tuple[int, int]:
    """``(dp, tp)``: the device mesh ``mode`` builds from ``world_size`` processes; a size that cannot be built is a
    ValueError naming both numbers."""
    expect_one_of("parallel", mode, PARALLEL_MODES, tr)
    if mode in ("ddp", "fsdp"):
        if tp_size not in (None, 1):
            raise ValueError(tr("tp_size: --parallel {mode} splits no heads; give --tp-size with --parallel tp or "
                                "fsdp+tp, got {tp_size}", mode=mode, tp_size=tp_size))
        return world_size, 1
    if mode == "tp":
        tp_size = world_size if tp_size is None else tp_size
        if tp_size != world_size:
            raise ValueError(tr("tp_size: --parallel tp splits the heads over all {world_size} processes, got "
                                "--tp-size {tp_size}; to split over fewer and shard over the rest, use --parallel "
                                "fsdp+tp", world_size=world_size, tp_size=tp_size))
        return 1, world_size
    if tp_size is None:
        raise ValueError(tr("tp_size: --parallel fsdp+tp needs --tp-size, the processes that split each block's "
                            "heads (it must divide the {world_size} processes)", world_size=world_size))
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1 or world_size % tp_size:
        raise ValueError(tr("tp_size: a mesh of {world_size} processes cannot be built with --tp-size {tp_size} "
                            "(it must divide the number of processes)", world_size=world_size, tp_size=tp_size))
    return world_size // tp_size, tp_size


@dataclass(frozen=True)
class Layout:
    """How this run's processes share the work: the mode, the mesh (None under ``ddp``) and this process' place."""

    mode: str = "ddp"
    dp_size: int = 1
    tp_size: int = 1
    dp_rank: int = 0
    mesh: Any = None  # a DeviceMesh with dims ("dp", "tp"), or None under ddp

    @property
    def sharded(self) -> bool:
        """The weights live in pieces (DTensors): checkpoints are written by every process with DCP."""
        return self.mode != "ddp"

    @property
    def world_size(self) -> int:
        return self.dp_size * self.tp_size


def join_one_process(device: torch.device) -> bool:
    """A sharded mode outside ``torchrun``: a process group of one (so the mesh, FSDP2 and DCP work as they do for
    N). Returns whether it made one."""
    if dist.is_initialized():
        return False
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=dist.HashStore(), rank=0,
                            world_size=1)
    return True


def build_layout(mode: str, tp_size: int | None, info: DistInfo) -> Layout:
    """The :class:`Layout` of ``mode`` over the processes of ``info``, its mesh built (every process calls it)."""
    dp, tp = mesh_shape(mode, tp_size, info.world_size)
    if mode == "ddp":
        return Layout(mode, dp, 1, info.rank)
    from torch.distributed.device_mesh import init_device_mesh

    join_one_process(info.device)
    mesh = init_device_mesh(info.device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    return Layout(mode, dp, tp, mesh["dp"].get_local_rank(), mesh)


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The model's blocks: every module in a ``ModuleList`` named ``*blocks`` (``blocks``, ``encoder_blocks``...)."""
    return [block for name, child in model.named_children()
            if isinstance(child, nn.ModuleList) and name.endswith("blocks") for block in child]


def checkpoint_activations(model: nn.Module) -> None:
    """Each block's forward recomputed in backward (``torch.utils.checkpoint``, non-reentrant): only each block's
    input is kept, and the activations inside it are made again when its gradient is needed. The state dict and
    the gradients are unchanged (the recomputation replays the same RNG state, so dropout draws the same masks)."""
    for block in blocks_of(model):
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)


def tensor_parallel_plan(model: nn.Module, tp_size: int) -> dict[str, Any]:
    """``parallelize_module``'s plan for ``model``: in every attention and feed-forward module (:data:`SPLITS`),
    the maps that make heads column-parallel and the mixing one row-parallel; each count split must divide."""
    from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

    plan: dict[str, ParallelStyle] = {}
    for name, module in model.named_modules():
        split = split_of(module)
        if split is None:
            continue
        check_divides(name, module, tp_size)
        columns, rows = split
        plan.update({f"{name}.{c}": ColwiseParallel() for c in columns})
        plan[f"{name}.{rows}"] = RowwiseParallel()
    return plan


def check_divides(name: str, module: nn.Module, tp_size: int) -> None:
    """Each of ``tp_size`` processes must hold whole heads (and whole hidden units): name what does not divide."""
    if isinstance(module, MultiHeadAttention):
        counts = [("num_heads", module.num_heads)]
        counts += [("num_kv_heads", module.num_kv_heads)] if module.num_kv_heads != module.num_heads else []
    else:
        split = split_of(module)
        assert split is not None  # the plan checks only the modules it splits
        first = getattr(module, split[0][0])
        counts = [("d_ff", first.out_features)]
    for what, n in counts:
        if n % tp_size:
            raise ValueError(tr("tp_size: {what} = {n} in {name} cannot be split over {tp_size} processes (each holds "
                                "whole heads); choose a --tp-size that divides {n}", what=what, n=n, name=name,
                                tp_size=tp_size))


def parallelize(model: nn.Module, layout: Layout, dtype: str, activation_checkpointing: bool) -> nn.Module:
    """Apply, in place and in this order, activation checkpointing, tensor parallelism over the mesh's ``tp`` and
    FSDP2 over its ``dp`` (every block, then the root); returns ``model``. Under ``--dtype bf16`` FSDP2 gathers the
    weights in bfloat16 and reduces the gradients in float32 into float32 master weights."""
    if activation_checkpointing:
        checkpoint_activations(model)
    if layout.mode in ("tp", "fsdp+tp"):
        from torch.distributed.tensor.parallel import parallelize_module

        parallelize_module(model, layout.mesh["tp"], tensor_parallel_plan(model, layout.tp_size))
    if layout.mode in ("fsdp", "fsdp+tp"):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if dtype == "bf16" else MixedPrecisionPolicy()
        for block in blocks_of(model):
            fully_shard(block, mesh=layout.mesh["dp"], mp_policy=policy)
        fully_shard(model, mesh=layout.mesh["dp"], mp_policy=policy)
    return model


@contextlib.contextmanager
def gradient_sync(model: nn.Module, sync: bool) -> Iterator[None]:
    """Inside, a backward sums gradients across the data-parallel processes only if ``sync`` (gradient accumulation
    syncs once, at the last micro-batch): DDP's ``no_sync``, FSDP2's ``set_requires_gradient_sync``."""
    if isinstance(model, DistributedDataParallel) and not sync:
        with model.no_sync():
            yield
        return
    set_sync = getattr(model, "set_requires_gradient_sync", None)  # an FSDPModule
    if set_sync is not None:
        set_sync(sync)
    yield


def local(t: Tensor) -> Tensor:
    """This process' piece of ``t`` (``t`` itself when it is a plain tensor)."""
    return t.to_local() if isinstance(t, DTensor) else t


def copies(t: Tensor, world_size: int) -> int:
    """How many processes hold the same piece of ``t``: a plain tensor every one; a DTensor those that its
    sharded mesh dimensions do not tell apart."""
    if not isinstance(t, DTensor):
        return world_size
    shards = math.prod(t.device_mesh.size(i) for i, p in enumerate(t.placements) if p.is_shard())
    return world_size // shards


def clip_grad_norm(parameters: Any, max_norm: float, world_size: int) -> Tensor:
    """``torch.nn.utils.clip_grad_norm_`` over parameters in pieces: every process sums the squares of its pieces
    (each divided by the processes holding the same piece), one all-reduce makes the global norm, and every piece
    is scaled by ``max_norm / (norm + 1e-6)`` when that is below 1 (torch's rule). Returns the norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.zeros((), dtype=torch.float32, device=local(grads[0]).device if grads else "cpu")
    for g in grads:
        total += local(g).float().pow(2).sum() / copies(g, world_size)
    if world_size > 1:
        dist.all_reduce(total)
    norm = total.sqrt()
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grads:
        local(g).mul_(coef.to(local(g).dtype))
    return norm


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """The bytes this process holds of the weights, their gradients and the optimizer's state (each storage counted
    once: a tied matrix, or FSDP2's padded shard, as it lies in memory)."""
    seen: set[int] = set()

    def nbytes(tensors: Sequence[Tensor]) -> int:
        total = 0
        for t in tensors:
            storage = local(t).untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        return total

    params = list(model.parameters())
    state = [v for slots in optimizer.state.values() for v in slots.values() if isinstance(v, Tensor)]
    return {"weights": nbytes(params), "gradients": nbytes([p.grad for p in params if p.grad is not None]),
            "optimizer": nbytes(state)}


def split_parameters(model: nn.Module) -> tuple[int, int]:
    """``(split, rest)``: the parameters tensor parallelism divides (the weights and biases of the maps that make
    heads, the weights of the maps that mix them) and the ones every process of a TP group keeps whole (embeddings,
    norms, the mixing maps' biases)."""
    split = 0
    for module in model.modules():
        columns, rows = split_of(module) or ((), None)
        maps = [getattr(module, name) for name in columns]
        split += sum(p.numel() for m in maps for p in m.parameters())
        split += getattr(module, rows).weight.numel() if rows else 0
    return split, sum(p.numel() for p in model.parameters()) - split
