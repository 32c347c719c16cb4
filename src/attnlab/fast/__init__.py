"""Speed, in one place: what asks which machine it runs on, applied to plain modules by :func:`accelerate`.

attnlab's models are plain PyTorch (the book's path): ``nn.Linear``, ``torch.softmax``, torch's attention kernel.
Everything here makes them faster on a CPU without changing what they compute: fused projections, oneDNN's packed
linears, the few-row and few-query decoding kernels, the precision rule for half-precision training, the
weight-only quantized maps and attnlab's own C++ kernels (built ahead of time: :mod:`attnlab.fast.kernels`).
``generate``, ``attnlab sample``, ``translate``, the trainer and the benchmarks apply it by default; each takes one
switch (``GenerationConfig(accelerate=False)``, ``--plain``) to run the book's path instead.

Example:
    >>> from attnlab.fast import accelerate
    >>> from attnlab.models import GPT, GPTConfig
    >>> model = GPT(GPTConfig.from_preset("tiny")).eval()
    >>> fast = accelerate(model)                       # in place, parameters kept: the same logits, faster
"""

from attnlab.fast.accelerate import AccelerateWarning, accelerate, accelerated, is_accelerated, swap_modules

__all__ = ["AccelerateWarning", "accelerate", "accelerated", "is_accelerated", "swap_modules"]
