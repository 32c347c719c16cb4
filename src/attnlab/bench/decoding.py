"""The limit of decoding: a step reads every weight once, so tokens/s can be at most bandwidth / bytes read.

At batch 1 a decoding step multiplies one vector by each weight matrix: two FLOPs per weight read, far below what
the matrix units can do, so the time is the time to stream the weights from memory. :func:`bytes_per_step` counts
what a step must read (each linear map's weight and bias, quantized ones at their stored size, the norms; of the
embeddings one row per token, nothing to count; a tied head reads the embedding matrix once more, as a map), and
:func:`step_limit` turns a measured read bandwidth (:func:`attnlab.bench.machine.read_bandwidth`) into steps per
second. A batch of B shares each step's reads, so its tokens/s limit is B times higher, until the matrix units, not
memory, bound it.
"""

from __future__ import annotations

from torch import nn

from attnlab.fast.quantized_linear import QuantizedLinear
from attnlab.layers.positional import LearnedPositionalEmbedding

TABLES = (nn.Embedding, LearnedPositionalEmbedding)  # looked up one row per token


def _nbytes(t) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def bytes_per_step(model: nn.Module) -> int:
    """Bytes of weights one decoding step reads: every linear map (quantized ones as stored) and every parameter
    outside the embeddings (norms, biases); embeddings contribute one row per token, left out."""
    total, seen = 0, set()
    for module in model.modules():
        if isinstance(module, QuantizedLinear):
            total += module.weight_bytes() + _nbytes(module.bias)
        elif isinstance(module, nn.Linear):
            total += _nbytes(module.weight) + _nbytes(module.bias)
            seen.add(id(module.weight))  # a tied head: counted here, as the map it is, not as the embedding
        elif not isinstance(module, TABLES):
            total += sum(_nbytes(p) for p in module.parameters(recurse=False) if id(p) not in seen)
    return total


def step_limit(read_gb_per_s: float, nbytes: int) -> float:
    """Decoding steps per second if each step streamed ``nbytes`` at ``read_gb_per_s`` and did nothing else."""
    return read_gb_per_s * 1e9 / nbytes
