"""``attnlab bench``: how fast attention runs here, how much memory it takes, and how close it
comes to the machine's own limit (a large fp32 matrix multiply, measured in the same run).

>>> from attnlab.bench import attention_flops
>>> attention_flops(1, 4, 8, 2, is_causal=True).scores      # 2 · B · h · T(T+1)/2 · d_h
160
"""

from attnlab.bench.cases import BACKENDS, BenchConfig, Case
from attnlab.bench.flops import AttentionFlops, attention_flops

__all__ = ["BACKENDS", "AttentionFlops", "BenchConfig", "Case", "attention_flops"]
