"""The induction circuit found, not just seen: which heads make the prediction, and through which of their inputs
the previous-token head feeds them (Elhage et al., 2021; Olsson et al., 2022).

The models are those of :mod:`attnlab.heads.induction`. The inputs:

* **clean**: distinct random tokens whose second half repeats the first (:func:`repeated_halves`), so every token
  of the second half but the last can be predicted by looking up what followed it the first time;
* **corrupted**: the same second half after a first half re-drawn from the tokens the second half does not hold,
  so nothing of the second half repeats and no lookup can help.

The metric: the mean log-probability of each second-half token's successor (the 15 predictions a repeat makes
possible; the successors are the same tokens in both runs). The analyses:

* activation patching (clean into corrupted) of each head's output, at all positions and one at a time; the
  residual stream; attribution patching beside it;
* path patching the other way round, the re-drawn run's layer-0 head into the repeated run (*noising*): how much
  of the repeat's advantage is lost when that head reaches each layer-1 head through its queries, its keys or its
  values alone. The previous-token head writes, at every position, which token came before it; an induction head
  finds the position after the earlier occurrence of the current token by matching its *query* (the current
  token) against those *keys*: K-composition. (In the other direction, clean into corrupted, no layer-0 head can
  show it: the induction head would look at the right place and copy the re-drawn token found there.)
* direct logit attribution of the clean run onto each successor's logit above the mean logit.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnlab.data.tokens import stream_generator
from attnlab.heads.attention_only import AttentionOnlyTransformer
from attnlab.heads.attribution import attribute_heads
from attnlab.heads.induction import InductionConfig, InductionRun
from attnlab.heads.logit_attribution import logit_attribution
from attnlab.heads.patching import Metric, baselines, listed, patch_heads, patch_residual, recovered
from attnlab.heads.path_patching import path_patch
from attnlab.heads.repeated_tokens import repeated_halves

#: the sequences every analysis runs on
CIRCUIT_BATCH = 64
PATH_SITES = ("query", "key", "value")


def induction_pair(config: InductionConfig, batch: int = CIRCUIT_BATCH) -> tuple[Tensor, Tensor]:
    """``(clean, corrupted)``, ``(batch, 2 · half)`` each: repeated halves, and the same with the first half re-drawn
    from the tokens its second half does not hold (distinct, so that nothing repeats)."""
    g = stream_generator(config.seed, "induction", "patching")
    clean = repeated_halves(batch, config.half, config.vocab_size, g)
    corrupt = clean.clone()
    for row in corrupt:
        others = torch.tensor([t for t in range(config.vocab_size) if t not in set(row[config.half:].tolist())])
        row[: config.half] = others[torch.randperm(len(others), generator=g)[: config.half]]
    return clean, corrupt


def repeat_metric(clean: Tensor, half: int) -> Metric:
    """logits ``(B, 2 · half, V)`` -> the mean log-probability of each second-half token's successor."""
    targets = clean[:, half + 1:]  # (B, half - 1): what positions half .. 2·half - 2 should predict

    def metric(logits: Tensor) -> Tensor:
        logp = torch.log_softmax(logits[:, half:-1].float(), dim=-1)
        return logp.gather(-1, targets[..., None]).mean()

    return metric


def previous_token_scores(model: nn.Module, ids: Tensor) -> Tensor:
    """``(num_layers, num_heads)``: each head's mean weight on the token just before the query (queries 1..T-1)."""
    with torch.no_grad():
        weights = model(ids, return_weights=True).attentions
    t = ids.shape[1]
    rows = torch.arange(1, t)
    return torch.stack([a[:, :, rows, rows - 1].mean(dim=(0, 2)) for a in weights])


def analyse(model: AttentionOnlyTransformer, clean: Tensor, corrupt: Tensor, half: int) -> dict[str, Any]:
    """Every analysis of one model on ``(clean, corrupt)``; fractions are of the way from the corrupted metric to the
    clean one (1: all of it restored), or, for path patching, of the repeat's advantage lost."""
    metric = repeat_metric(clean, half)
    clean_value, corrupt_value = baselines(model, clean, corrupt, metric)
    heads = patch_heads(model, clean, corrupt, metric)
    each = patch_heads(model, clean, corrupt, metric, positions="each")
    estimate = attribute_heads(model, clean, corrupt, metric) + corrupt_value
    residual = patch_residual(model, clean, corrupt, metric)
    result: dict[str, Any] = {"clean_metric": clean_value, "corrupt_metric": corrupt_value,
                               "patching": listed(recovered(heads, clean_value, corrupt_value)),
                               "attribution": listed(recovered(estimate, clean_value, corrupt_value)),
                               "patching_by_position": listed(recovered(each, clean_value, corrupt_value)),
                               "residual_by_position": listed(recovered(residual, clean_value, corrupt_value)),
                               "previous_token": listed(previous_token_scores(model, clean))}
    layers, num_heads = heads.shape
    paths = {}
    for sender in range(num_heads) if layers > 1 else ():
        # noising: the re-drawn run's head into the repeated run; the loss of the advantage, as a fraction
        paths[sender] = {site: listed(recovered(path_patch(model, corrupt, clean, metric, (0, sender), site=site),
                                                  corrupt_value, clean_value)[1:]) for site in PATH_SITES}
    result["paths_from_layer_0"] = paths
    successors = clean[:, half + 1:]
    direction = torch.nn.functional.one_hot(successors, model.config.vocab_size).float() - 1 / model.config.vocab_size
    dla = logit_attribution(model, clean, direction, position=list(range(half, 2 * half - 1)))
    result["logit_attribution"] = {"total": round(float(dla.total), 5), "heads": listed(dla.heads),
                                   **{name: listed(part.reshape(-1)) for name, part in dla.parts.items()}}
    return result


def training_picture(run: InductionRun, clean: Tensor, corrupt: Tensor, half: int) -> list[dict[str, Any]]:
    """At every evaluation of a two-layer run (kept with ``snapshots``): the best prefix-matching score, the most a
    single head's patch restores, and, for the layer-0 head that loses the most through them, the share of the
    repeat's advantage lost through the layer-1 heads' queries, keys and values (summed over the receivers)."""
    metric = repeat_metric(clean, half)
    picture = []
    for evaluation in run.history:
        model = run.at_step(evaluation.step)
        clean_value, corrupt_value = baselines(model, clean, corrupt, metric)
        gap = clean_value - corrupt_value
        best = float(recovered(patch_heads(model, clean, corrupt, metric), clean_value, corrupt_value).max()) \
            if abs(gap) > 1e-3 else 0.0
        lost = {site: 0.0 for site in PATH_SITES}
        if abs(gap) > 1e-3:
            per_sender = [{site: float(recovered(path_patch(model, corrupt, clean, metric, (0, h), site=site)[1],
                                                 corrupt_value, clean_value).sum()) for site in PATH_SITES}
                          for h in range(model.config.num_heads)]
            lost = max(per_sender, key=lambda d: d["key"] + d["query"] + d["value"])
        picture.append({"step": evaluation.step, "prefix_matching": evaluation.best, "gap": round(gap, 5),
                        "best_head_restores": round(best, 5), **{f"{s}_path": round(v, 5) for s, v in lost.items()}})
    return picture


def induction_circuit(config: InductionConfig, runs: dict[str, InductionRun]) -> dict[str, Any]:
    """What ``patch_induction.json`` holds: each model's analyses, the two-layer one's at every evaluation too.

    On one thread, as the training: matrices this small gain nothing from a second, which on a busy machine spins."""
    clean, corrupt = induction_pair(config)
    out: dict[str, Any] = {"batch": CIRCUIT_BATCH, "half": config.half, "models": {}}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, run in runs.items():
            out["models"][name] = analyse(run.model, clean, corrupt, config.half)
        deepest = f"{max(config.layers)}-layer"
        if runs[deepest].snapshots:
            out["training"] = training_picture(runs[deepest], clean, corrupt, config.half)
    finally:
        torch.set_num_threads(threads)
    return out
