"""What the heads learn, and which heads cause an output: the experiments that answered it, run on a laptop
(docs/heads.md).

* :mod:`~attnlab.heads.induction`: induction heads and their phase change (Olsson et al., 2022), on the
  attention-only models of :mod:`~attnlab.heads.attention_only` and the data of :mod:`~attnlab.heads.repeated_tokens`;
* :mod:`~attnlab.heads.roles`: what each head of a pretrained BERT looks at (Clark et al., 2019);
* :mod:`~attnlab.heads.rollout` and :mod:`~attnlab.heads.flow`: where a top-layer token's information came from
  (Abnar & Zuidema, 2020);
* :mod:`~attnlab.heads.importance`: head importance, ablation and pruning through the models' ``head_mask``
  (Michel et al., 2019);
* :mod:`~attnlab.heads.patching`, :mod:`~attnlab.heads.path_patching`, :mod:`~attnlab.heads.attribution` and
  :mod:`~attnlab.heads.logit_attribution`: activation patching, path patching, attribution patching and direct
  logit attribution, through forward hooks at the places :mod:`~attnlab.heads.sites` names; the experiments with a
  known answer in :mod:`~attnlab.heads.induction_circuit` and :mod:`~attnlab.heads.month_heads`.
"""

from attnlab.heads.attribution import attribute_heads
from attnlab.heads.flow import FLOW_MAX_TOKENS, attention_flow, layer_graph
from attnlab.heads.logit_attribution import LogitAttribution, answer_direction, logit_attribution
from attnlab.heads.patching import Patch, baselines, patch_heads, patch_residual, recovered, run_patched
from attnlab.heads.path_patching import path_patch
from attnlab.heads.rollout import residual_attention, rollout

__all__ = ["FLOW_MAX_TOKENS", "LogitAttribution", "Patch", "answer_direction", "attention_flow", "attribute_heads",
           "baselines", "layer_graph", "logit_attribution", "patch_heads", "patch_residual", "path_patch", "recovered",
           "residual_attention", "rollout", "run_patched"]
