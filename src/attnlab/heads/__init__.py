"""What the heads learn: the experiments that answered it, run on a laptop (docs/heads.md).

* :mod:`~attnlab.heads.induction`: induction heads and their phase change (Olsson et al., 2022), on the
  attention-only models of :mod:`~attnlab.heads.attention_only` and the data of :mod:`~attnlab.heads.repeated_tokens`;
* :mod:`~attnlab.heads.roles`: what each head of a pretrained BERT looks at (Clark et al., 2019);
* :mod:`~attnlab.heads.rollout` and :mod:`~attnlab.heads.flow`: where a top-layer token's information came from
  (Abnar & Zuidema, 2020);
* :mod:`~attnlab.heads.importance`: head importance, ablation and pruning through the models' ``head_mask``
  (Michel et al., 2019).
"""

from attnlab.heads.flow import FLOW_MAX_TOKENS, attention_flow, layer_graph
from attnlab.heads.rollout import residual_attention, rollout

__all__ = ["FLOW_MAX_TOKENS", "attention_flow", "layer_graph", "residual_attention", "rollout"]
