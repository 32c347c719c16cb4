"""What the heads learn: the experiments that answered it, run on a laptop.

* :mod:`~attnlab.heads.rollout` and :mod:`~attnlab.heads.flow`: where a top-layer token's information came from
  (Abnar & Zuidema, 2020);
"""

from attnlab.heads.flow import FLOW_MAX_TOKENS, attention_flow, layer_graph
from attnlab.heads.rollout import residual_attention, rollout

__all__ = ["FLOW_MAX_TOKENS", "attention_flow", "layer_graph", "residual_attention", "rollout"]
