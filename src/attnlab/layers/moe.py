"""A mixture of experts (Shazeer et al., 2017, arXiv:1701.06538; DeepSeekMoE, arXiv:2401.06066): the feed-forward
network of DeepSeek-V2/V3 and Qwen3-Next, in place of the one SwiGLU of a dense block.

    scores  = score(x · W_routerᵀ)              (N, E)   one score per token and expert: softmax or sigmoid
    chosen  = top_k(scores)                      (N, k)   the k experts each token goes to (within groups: below)
    y       = Σ_{e ∈ chosen} w_e · SwiGLU_e(x)  + shared(x)

``E`` experts, each a small SwiGLU of width ``d_expert``; each token runs through ``k`` of them only, so the layer
holds E times the weights of one expert but spends k experts' arithmetic per token (DeepSeek-V3: 256 experts, 8 per
token, 37 B of its 671 B parameters active). Shared experts run on every token, beside the routed ones.

The routers, each as its model computes it (transformers' ``DeepseekV3TopkRouter``, ``DeepseekV2TopkRouter``,
``Qwen3NextTopKRouter``; ties broken by ``torch.topk`` as theirs are, the same calls on the same tensors):

============================  =================================================================================
``topk_method``               how the k experts are chosen
============================  =================================================================================
``"greedy"``                  the k highest scores (DeepSeek-V2, Qwen3-Next, Qwen3.5)
``"group_limited_greedy"``    the experts are split into ``n_group`` groups; each group is ranked by its best
                              score, the ``topk_group`` best groups kept, and the k highest scores taken among
                              their experts (DeepSeek-V2: a token's experts sit on few devices)
``"noaux_tc"``                DeepSeek-V3: groups ranked by the sum of their two best scores, and the scores
                              used to *choose* are ``scores + e_score_correction_bias``: a bias per expert, moved
                              during training to balance the load without an auxiliary loss ("aux-loss-free");
                              the weights are the scores without the bias
============================  =================================================================================

then the chosen scores are the weights, divided by their sum if ``norm_topk_prob``, times
``routed_scaling_factor``. Qwen3-Next's shared expert is gated per token: ``σ(x · w_gate) · shared(x)``, with
``w_gate`` a linear map to one number (``shared_expert_gate``).

Two forms of the experts, proven equal (tests/layers/test_moe.py):

* :meth:`Experts.loop`: the textbook: for each expert, the tokens routed to it, through its SwiGLU, weighted, added
  back to their rows (transformers' eager form);
* :meth:`Experts.batched`: the (token, expert) pairs sorted by expert into one padded batch ``(E, C, D)`` (``C``:
  the busiest expert's load, so no token is dropped, where GShard and Switch drop those over a capacity), three
  batched matmuls for every expert at once, and the rows added back in the same order.

Which layers have a mixture and which a dense SwiGLU: :func:`moe_layers`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int, expect_one_of
from attnlab.layers.swiglu import GATES, SwiGLU

#: how a router scores the experts
SCORINGS = ("softmax", "sigmoid")
#: how it chooses among them (DeepSeek's ``topk_method`` names)
TOPK_METHODS = ("greedy", "group_limited_greedy", "noaux_tc")
#: the forms of the experts' computation (equal)
FORMS = ("loop", "batched")
#: the initial weights' std (transformers' ``initializer_range``, GPT-2's)
STD = 0.02


def moe_layers(num_layers: int, *, first_dense: int = 0, sparse_step: int = 1,
               dense_layers: Sequence[int] = ()) -> tuple[bool, ...]:
    """Which of ``num_layers`` layers have a mixture of experts (True) rather than a dense feed-forward.

    Layer ``i`` (from 0) is a mixture when ``i >= first_dense`` (DeepSeek's ``first_k_dense_replace``: its first
    layers stay dense), ``(i + 1) % sparse_step == 0`` (Qwen's ``decoder_sparse_step``: every step-th layer) and ``i``
    is not in ``dense_layers`` (Qwen's ``mlp_only_layers``), as transformers' decoder layers decide it.

    Example:
        >>> moe_layers(5, first_dense=1)                        # DeepSeek-V3's layout, 3 dense there
        (False, True, True, True, True)
        >>> moe_layers(4, sparse_step=2, dense_layers=[3])      # Qwen: layers 1 and 3, but 3 kept dense
        (False, True, False, False)
    """
    check_positive_int("moe_layers", "num_layers", num_layers)
    check_positive_int("moe_layers", "sparse_step", sparse_step)
    if isinstance(first_dense, bool) or not isinstance(first_dense, int) or first_dense < 0:
        raise ValueError(f"moe_layers: first_dense must be an int >= 0, got {first_dense!r}")
    dense = set(dense_layers)
    return tuple(i >= first_dense and (i + 1) % sparse_step == 0 and i not in dense for i in range(num_layers))


@dataclass(frozen=True)
class MoESpec:
    """A mixture of experts, all it is but its weights; ``spec.build()`` makes the module (what
    :class:`~attnlab.layers.ModernBlockSpec`'s ``ff`` takes in place of the SwiGLU).

    Attributes:
        d_model: input and output width.
        num_experts: routed experts ``E`` (DeepSeek's ``n_routed_experts``, Qwen's ``num_experts``).
        top_k: experts per token (``num_experts_per_tok``).
        d_expert: each routed expert's SwiGLU width (``moe_intermediate_size``).
        scoring: ``"softmax"`` over the experts (DeepSeek-V2, Qwen) or ``"sigmoid"`` of each (DeepSeek-V3).
        topk_method: ``"greedy"``, ``"group_limited_greedy"`` or ``"noaux_tc"`` (the module docstring's table).
        n_group: groups the experts are split into (the group-limited methods); must divide ``num_experts``.
        topk_group: groups kept per token.
        norm_topk_prob: the chosen weights divided by their sum.
        routed_scaling_factor: the routed experts' weights multiplied by it (DeepSeek-V3: 2.5).
        correction_bias: a buffer ``e_score_correction_bias (E,)`` added to the scores to choose (``noaux_tc``).
        d_shared: the shared experts' SwiGLU width, all of them as one (DeepSeek: ``n_shared_experts ·
            moe_intermediate_size``; Qwen: ``shared_expert_intermediate_size``); 0: none.
        shared_gate: the shared experts' output times ``σ(shared_expert_gate(x))``, one number per token (Qwen).
        shared_bias: biases on the shared experts' projections (DeepSeek-V2's ``mlp_bias``).
        float32_router: the router's logits and weights in float32 whatever the input's dtype (DeepSeek keeps its
            router in float32); False: the logits in the input's dtype, softmax in float32, the weights cast back
            (Qwen).
        activation: the experts' gate, ``"silu"``.
        form: ``"loop"`` over the experts or ``"batched"`` (equal; see the module docstring).
    """

    d_model: int
    num_experts: int
    top_k: int
    d_expert: int
    scoring: str = "softmax"
    topk_method: str = "greedy"
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = False
    routed_scaling_factor: float = 1.0
    correction_bias: bool = False
    d_shared: int = 0
    shared_gate: bool = False
    shared_bias: bool = False
    float32_router: bool = True
    activation: str = "silu"
    form: str = "loop"

    def __post_init__(self) -> None:
        for name in ("d_model", "num_experts", "top_k", "d_expert", "n_group", "topk_group"):
            check_positive_int("MoESpec", name, getattr(self, name))
        expect_one_of("MoESpec: scoring", self.scoring, SCORINGS)
        expect_one_of("MoESpec: topk_method", self.topk_method, TOPK_METHODS)
        expect_one_of("MoESpec: activation", self.activation, tuple(GATES))
        expect_one_of("MoESpec: form", self.form, FORMS)
        if self.top_k > self.num_experts:
            raise ValueError(f"MoESpec: top_k={self.top_k} must be at most num_experts={self.num_experts}")
        if self.num_experts % self.n_group:
            raise ValueError(f"MoESpec: num_experts={self.num_experts} must be divisible by n_group={self.n_group} "
                             "(the experts are split into equal groups)")
        if self.topk_group > self.n_group:
            raise ValueError(f"MoESpec: topk_group={self.topk_group} must be at most n_group={self.n_group}")
        per_group = self.num_experts // self.n_group
        if self.topk_method != "greedy" and self.top_k > self.topk_group * per_group:
            raise ValueError(f"MoESpec: top_k={self.top_k} experts cannot come from topk_group={self.topk_group} "
                             f"groups of {per_group}")
        if self.topk_method == "noaux_tc" and per_group < 2:
            raise ValueError(f"MoESpec: topk_method='noaux_tc' ranks each group by its two best experts, but "
                             f"num_experts={self.num_experts} in n_group={self.n_group} leaves {per_group} a group")
        if isinstance(self.d_shared, bool) or not isinstance(self.d_shared, int) or self.d_shared < 0:
            raise ValueError(f"MoESpec: d_shared must be an int >= 0 (0: no shared experts), got {self.d_shared!r}")
        if self.shared_gate and not self.d_shared:
            raise ValueError("MoESpec: shared_gate gates the shared experts, but d_shared=0 has none")
        factor = self.routed_scaling_factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not math.isfinite(factor) or factor <= 0:
            raise ValueError(f"MoESpec: routed_scaling_factor must be a finite number > 0, got {factor!r}")

    def build(self) -> MixtureOfExperts:
        """The module this spec describes."""
        return MixtureOfExperts(self)


class Router(nn.Module):
    """Scores every expert for every token and chooses ``top_k``: ``x (N, D)`` -> weights and indices ``(N, k)``.

    ``weight (E, D)``: one row per expert (transformers' ``gate.weight``); ``e_score_correction_bias (E,)`` with
    ``correction_bias``. The weights are float32 with ``float32_router``, else the input's dtype.
    """

    def __init__(self, spec: MoESpec) -> None:
        super().__init__()
        self.spec = spec
        self.weight = nn.Parameter(torch.randn(spec.num_experts, spec.d_model) * STD)
        if spec.correction_bias:
            self.register_buffer("e_score_correction_bias", torch.zeros(spec.num_experts))
        else:
            self.e_score_correction_bias = None

    def logits(self, x: Tensor) -> Tensor:
        """``(N, E)``: x · W_routerᵀ (in float32 with ``float32_router``)."""
        if self.spec.float32_router:
            return F.linear(x.float(), self.weight.float())
        return F.linear(x, self.weight)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        s = self.spec
        logits = self.logits(x)                                            # (N, E)
        scores = logits.sigmoid() if s.scoring == "sigmoid" else logits.softmax(dim=-1, dtype=torch.float32)
        if s.topk_method == "greedy":
            weights, chosen = torch.topk(scores, s.top_k, dim=-1)
        elif s.topk_method == "group_limited_greedy":
            kept = self.kept_groups(scores.view(-1, s.n_group, s.num_experts // s.n_group).amax(dim=-1))
            weights, chosen = torch.topk(scores.masked_fill(~kept, 0.0), s.top_k, dim=-1, sorted=False)
        else:  # noaux_tc: the bias only chooses; the weights are the scores themselves
            biased = scores if self.e_score_correction_bias is None else scores + self.e_score_correction_bias
            best_two = biased.view(-1, s.n_group, s.num_experts // s.n_group).topk(2, dim=-1)[0].sum(dim=-1)
            kept = self.kept_groups(best_two)
            chosen = torch.topk(biased.masked_fill(~kept, float("-inf")), s.top_k, dim=-1, sorted=False)[1]
            weights = scores.gather(1, chosen)
        if s.norm_topk_prob:  # DeepSeek-V3 adds 1e-20, for sigmoids that underflow; Qwen divides a softmax's as is
            weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if s.scoring == "sigmoid" else 0.0))
        weights = weights * s.routed_scaling_factor
        return (weights if s.float32_router else weights.to(logits.dtype)), chosen

    def kept_groups(self, group_scores: Tensor) -> Tensor:
        """``group_scores (N, n_group)`` -> bool ``(N, E)``: the experts of each token's ``topk_group`` best groups."""
        s = self.spec
        best = torch.topk(group_scores, s.topk_group, dim=-1, sorted=False)[1]
        groups = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
        return groups.repeat_interleave(s.num_experts // s.n_group, dim=1)

    def extra_repr(self) -> str:
        s = self.spec
        groups = f", n_group={s.n_group}, topk_group={s.topk_group}" if s.topk_method != "greedy" else ""
        return f"{s.num_experts} experts, top_k={s.top_k}, {s.scoring}, {s.topk_method}{groups}"


class Experts(nn.Module):
    """``E`` SwiGLU experts of width ``d_expert``, their weights stacked: ``gate_proj``, ``up_proj`` ``(E, d_expert,
    D)`` and ``down_proj`` ``(E, D, d_expert)``; expert ``e`` is ``down_proj[e] (silu(gate_proj[e] x) ⊙ up_proj[e]
    x)``. Stacked so that the batched form reads them without a copy; a checkpoint's one tensor per expert goes
    into row ``e``."""

    def __init__(self, num_experts: int, d_model: int, d_expert: int, activation: str = "silu") -> None:
        super().__init__()
        self.num_experts, self.activation = num_experts, activation
        self.gate_proj = nn.Parameter(torch.randn(num_experts, d_expert, d_model) * STD)
        self.up_proj = nn.Parameter(torch.randn(num_experts, d_expert, d_model) * STD)
        self.down_proj = nn.Parameter(torch.randn(num_experts, d_model, d_expert) * STD)

    def expert(self, e: int, x: Tensor) -> Tensor:
        """Expert ``e`` on ``x (n, D)`` -> ``(n, D)``."""
        return F.linear(self.gate(F.linear(x, self.gate_proj[e])) * F.linear(x, self.up_proj[e]), self.down_proj[e])

    def gate(self, x: Tensor) -> Tensor:
        """The experts' gate, ``silu`` (or another of :data:`~attnlab.layers.swiglu.GATES`)."""
        gate = cast("Callable[[Tensor], Tensor]", GATES[self.activation])   # GATES mixes two signatures
        return gate(x)

    def loop(self, x: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
        """The textbook form: ``x (N, D)``, ``weights`` and ``chosen`` ``(N, k)`` -> ``Σ_k weights · expert(x)``
        ``(N, D)``, one expert at a time (only those some token chose)."""
        out = torch.zeros_like(x)
        for e in chosen.unique().tolist():                 # one read of the chosen set, ascending
            tokens, slot = torch.where(chosen == e)        # the tokens routed to e, and in which of their k slots
            y = self.expert(e, x[tokens]) * weights[tokens, slot, None]
            out.index_add_(0, tokens, y.to(out.dtype))
        return out

    def batched(self, x: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
        """The same sum with every expert at once: the (token, slot) pairs sorted by expert into a padded batch
        ``(E, C, D)``, ``C`` the busiest expert's load; three batched matmuls; the rows added back in the loop's
        order (expert by expert), so the sums round alike."""
        n, k = chosen.shape
        if n == 0:
            return torch.zeros_like(x)
        flat = chosen.reshape(-1)                                         # (N·k,) each pair's expert
        order = flat.argsort(stable=True)                                 # pairs grouped by expert, tokens ascending
        experts, tokens = flat[order], order // k
        load = torch.bincount(flat, minlength=self.num_experts)           # (E,) pairs per expert
        first = load.cumsum(0) - load                                     # where each expert's pairs start in order
        rows = torch.arange(n * k, device=x.device) - first[experts]      # each pair's row in its expert's batch
        batch = x.new_zeros(self.num_experts, int(load.max()), x.shape[-1])   # one host read: the capacity C
        batch[experts, rows] = x[tokens]
        hidden = self.gate(batch @ self.gate_proj.transpose(1, 2)) * (batch @ self.up_proj.transpose(1, 2))
        y = (hidden @ self.down_proj.transpose(1, 2))[experts, rows]      # (N·k, D), pair by pair
        y = y * weights.reshape(-1)[order, None]
        return torch.zeros_like(x).index_add_(0, tokens, y.to(x.dtype))

    def extra_repr(self) -> str:
        e, d_expert, d = self.gate_proj.shape
        return f"{e} × SwiGLU({d} -> {d_expert} -> {d})"


class MixtureOfExperts(nn.Module):
    """Routed experts (and shared ones) in place of a feed-forward network: ``(..., D)`` -> ``(..., D)``.

    Submodules: ``router`` (:class:`Router`), ``experts`` (:class:`Experts`), with ``d_shared`` ``shared_experts``
    (a :class:`~attnlab.layers.SwiGLU`) and with ``shared_gate`` ``shared_expert_gate`` (``Linear(D, 1)``).

    Example:
        >>> moe = MoESpec(d_model=16, num_experts=8, top_k=2, d_expert=12, scoring="sigmoid",
        ...               topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
        ...               correction_bias=True, d_shared=12).build()
        >>> moe(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, spec: MoESpec) -> None:
        super().__init__()
        if not isinstance(spec, MoESpec):
            raise TypeError(f"MixtureOfExperts: spec must be a MoESpec, got {type(spec).__name__}")
        self.spec = spec
        self.router = Router(spec)
        self.experts = Experts(spec.num_experts, spec.d_model, spec.d_expert, spec.activation)
        if spec.d_shared:
            self.shared_experts = SwiGLU(spec.d_model, spec.d_shared, bias=spec.shared_bias,
                                         activation=spec.activation)
        if spec.shared_gate:
            self.shared_expert_gate = nn.Linear(spec.d_model, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        if shape[-1] != self.spec.d_model:
            raise ValueError(f"MixtureOfExperts: x must have last dim {self.spec.d_model} (d_model), got shape "
                             f"{tuple(shape)}")
        tokens = x.reshape(-1, shape[-1])                                  # (N, D): every token on its own
        weights, chosen = self.router(tokens)                              # (N, k) each
        experts = self.experts.loop if self.spec.form == "loop" else self.experts.batched
        out = experts(tokens, weights, chosen)
        if self.spec.d_shared:
            shared = self.shared_experts(tokens)
            if self.spec.shared_gate:
                shared = torch.sigmoid(self.shared_expert_gate(tokens)) * shared
            out = out + shared
        return out.view(shape)

    def residual_weights(self) -> list[Tensor]:
        """The projections that write into the residual stream (a model scales their initial weights with depth)."""
        shared = [self.shared_experts.down_proj.weight] if self.spec.d_shared else []
        return [self.experts.down_proj, *shared]
