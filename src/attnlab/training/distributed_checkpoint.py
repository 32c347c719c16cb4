"""Checkpoints in pieces: every process writes its shards of the weights and of AdamW's state with
``torch.distributed.checkpoint`` (DCP), and any number of processes reads them back, each taking what its own
layout holds (saved by 2, resumed by 1 or by 4: DCP reshards on load).

A sharded checkpoint is the usual directory (:mod:`attnlab.models.checkpoint`) with ``sharded/`` (DCP's ``.distcp``
files and its ``.metadata``) in place of ``model.safetensors`` and ``optimizer.safetensors``, and ``"sharded":
true`` in ``state.json``. It is written into a hidden directory and renamed into place by the first process once
every shard and DCP's metadata are written; only then does ``checkpoint.json`` move to it. A run killed mid-write
leaves the pointer on the previous checkpoint, whole.

:func:`export` turns any checkpoint, sharded or not, into one safetensors file that ``sample``, ``heatmap`` and
``view`` read.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    OptimizerStateType,
    ValueType,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from attnlab.data.tokenizer import Tokenizer
from attnlab.i18n import tr
from attnlab.models.checkpoint import (
    SHARDED,
    Checkpoint,
    checkpoint_name,
    export_weights,
    load_weights,
    model_of,
    publish_checkpoint,
    read_state,
    read_tensors,
    read_tokenizer,
    resolve_checkpoint,
)

#: DCP writes this file last, once every process' shards are written: without it the write was cut short
METADATA = ".metadata"


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def save_sharded(out_dir: str | Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                 state: dict[str, Any], tokenizer: Tokenizer, rng: dict[str, Tensor], keep: int,
                 is_main: bool) -> Path | None:
    """Every process writes its shards of ``model`` and ``optimizer``; the first completes and publishes the
    checkpoint (returning its path; the others return None). Every process must call it."""
    root = Path(out_dir) / "checkpoints"
    tmp = root / f".{checkpoint_name(step)}.partial"
    if is_main:
        shutil.rmtree(tmp, ignore_errors=True)  # a write of the same step cut short before
        (tmp / SHARDED).mkdir(parents=True)
    barrier()
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=tmp / SHARDED)
    barrier()  # every shard and the metadata are on disk
    path = publish_checkpoint(out_dir, tmp, step, {**state, "sharded": True}, tokenizer, rng, keep) \
        if is_main else None
    barrier()
    return path


def check_complete(checkpoint: Path) -> Path:
    """The DCP directory of a sharded checkpoint, which must hold DCP's metadata (written last)."""
    where = checkpoint / SHARDED
    if not (where / METADATA).is_file():
        raise ValueError(tr("checkpoint {checkpoint!r}: {where!r} holds no {metadata}: the checkpoint was not "
                            "written to the end (a run stopped mid-write?); use an earlier one",
                            checkpoint=str(checkpoint), where=str(where), metadata=METADATA))
    return where


def check_shapes(where: Path, wanted: dict[str, Any], prefix: str, fields: str = "") -> None:
    """Every tensor asked for is in the checkpoint with the same (global) shape: name the first that is not (and the
    model config's ``fields`` that differ, when the caller knows them)."""
    saved = dcp.FileSystemReader(str(where)).read_metadata().state_dict_metadata
    for key, value in wanted.items():
        if not isinstance(value, Tensor):
            continue
        found = saved.get(f"{prefix}.{key}")
        if found is None:
            raise ValueError(tr("resume: the checkpoint in {where!r} holds no tensor {key!r}; it belongs to another "
                                "model", where=str(where), key=key))
        shape = tuple(getattr(found, "size", ()))
        if shape != tuple(value.shape):
            raise ValueError(tr("resume: {key!r} is {saved} in the checkpoint in {where!r} but {asked} in this model; "
                                "it is a model of other shapes{fields}", key=key, saved=shape, where=str(where),
                                asked=tuple(value.shape), fields=f" ({fields})" if fields else ""))


def read_shards(wanted: dict[str, Any], where: Path, alone: bool | None = None) -> None:
    """``dcp.load`` of ``wanted`` from ``where``; ``alone`` (default: without a process group) this process reads
    every shard by itself, which is what export and a run of one process mean: DCP's warning about it is left
    unsaid."""
    alone = not dist.is_initialized() if alone is None else alone
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(wanted, checkpoint_id=where, no_dist=alone)


def load_sharded(checkpoint: Path, model: nn.Module, optimizer: torch.optim.Optimizer, fields: str = "") -> None:
    """Read a sharded checkpoint's weights and optimizer state into ``model`` and ``optimizer``, whatever their
    layout (sharded over any number of processes, or whole in one); ``fields``: see :func:`check_shapes`."""
    where = check_complete(checkpoint)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    check_shapes(where, model_state, "model", fields)
    wanted: dict[str, Any] = {"model": model_state, "optimizer": optimizer_state}  # what dcp.load fills in place
    read_shards(wanted, where)
    set_state_dict(model, optimizer, model_state_dict=wanted["model"], optim_state_dict=wanted["optimizer"])


def load_whole(checkpoint: Checkpoint, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """A checkpoint of whole tensors (written under ``ddp``) into a model in pieces: every process reads the whole
    weights and AdamW's moments and keeps its own pieces (``set_state_dict`` with ``full_state_dict``)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    checkpoint.check_optimizer(optimizer)  # the moments' shapes against the parameters' (global) shapes
    weights: dict[str, ValueType] = dict(read_tensors(checkpoint.path, "model.safetensors"))
    tied: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        tied.setdefault(id(param), []).append(name)
    for names in tied.values():  # the file holds a tied matrix once, under one of its names
        saved = [weights[n] for n in names if n in weights]
        weights |= {n: saved[0] for n in names if saved and n not in weights}
    name_of = {id(p): names[0] for p, names in ((p, tied[id(p)]) for p in model.parameters())}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    moments = checkpoint.optimizer
    full: OptimizerStateType = {
        "state": {name_of[id(params[i])]: slots for i, slots in moments["state"].items()},
        "param_groups": [{**group, "params": [name_of[id(p)] for p in mine["params"]]}
                         for group, mine in zip(moments["param_groups"], optimizer.param_groups, strict=True)]}
    set_state_dict(model, optimizer, model_state_dict=weights, optim_state_dict=full,
                   options=StateDictOptions(full_state_dict=True))


def export(checkpoint: str | Path, out: str | Path) -> Path:
    """Turn the checkpoint at ``checkpoint`` (an output directory or one checkpoint directory, sharded or not) into
    one safetensors file at ``out``, weights and what loading them needs; returns ``out``."""
    path = resolve_checkpoint(checkpoint)
    state = read_state(path)
    model = model_of(state, checkpoint, None, str(path / "state.json"))
    if state.get("sharded"):
        where = check_complete(path)
        weights = get_model_state_dict(model)
        check_shapes(where, weights, "model")
        wanted = {"model": weights}
        read_shards(wanted, where, alone=True)
        set_model_state_dict(model, wanted["model"])
    else:
        load_weights(path, model)
    return export_weights(model, state, read_tokenizer(path, state["model_config"]), out)
