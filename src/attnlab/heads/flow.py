"""Attention flow (Abnar & Zuidema, 2020, §4): the layers as a graph, and how much can flow from a token at the top
to each input token when every edge's capacity is its attention weight.

Nodes are ``(layer, token)`` for layers ``0..L`` (0: the inputs); node ``(l, i)`` has an edge to ``(l-1, j)`` of
capacity ``Â_l[i, j]``, the residual-augmented attention of :func:`attnlab.heads.rollout.residual_attention`.
Where rollout multiplies the weights along every path and adds the paths up, flow asks how much can pass through
the narrowest edges at once: the maximum flow from ``(L, i)`` to ``(0, j)``, computed by networkx. Each row is then
normalised to sum to 1, as in the paper's code.

One maximum-flow problem per (output, input) pair makes flow far slower than rollout: ``T²`` problems on a graph
of ``(L+1)·T`` nodes and up to ``L·T²`` edges, so it is offered for short inputs (:data:`FLOW_MAX_TOKENS`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnlab.heads.rollout import check_attentions, residual_attention
from attnlab.i18n import tr

#: the longest input attention flow is computed for: T² max-flow problems, a few seconds at 16 tokens and 6 layers
FLOW_MAX_TOKENS = 16


def import_networkx():
    """networkx, or an ImportError that says how to install it."""
    try:
        import networkx
    except ImportError:
        raise ImportError(tr("attention flow needs the networkx package: pip install 'attnlab[heads]'")) from None
    return networkx


def layer_graph(attentions: Sequence[Tensor]):
    """The directed graph of the paper: ``(l, i) -> (l-1, j)`` with capacity ``Â_l[i, j]`` (zero edges left out)."""
    nx = import_networkx()
    graph = nx.DiGraph()
    for layer, weights in enumerate(check_attentions(attentions), start=1):
        mixed = residual_attention(weights)
        graph.add_nodes_from((layer, i) for i in range(mixed.shape[0]))
        rows, cols = torch.nonzero(mixed > 0, as_tuple=True)
        graph.add_edges_from(((layer, i), (layer - 1, j), {"capacity": float(mixed[i, j])})
                             for i, j in zip(rows.tolist(), cols.tolist(), strict=True))
    return graph


def attention_flow(attentions: Sequence[Tensor], max_tokens: int = FLOW_MAX_TOKENS) -> Tensor:
    """Attention flow of per-layer weights ``(H, T, T)`` (first layer first) -> ``(T, T)`` float64, rows summing to 1.

    ``max_tokens``: refuse longer inputs (the cost grows as ``T²`` max-flow problems).
    """
    layers = check_attentions(attentions)
    t, top = layers[0].shape[-1], len(layers)
    if t > max_tokens:
        raise ValueError(tr("attention flow: the input has {t} tokens; flow is computed for at most {max_tokens} "
                            "(one max-flow problem per pair of tokens): shorten the text, or use rollout",
                            t=t, max_tokens=max_tokens))
    import_networkx()
    from networkx.algorithms.flow import build_residual_network, shortest_augmenting_path

    graph = layer_graph(layers)
    residual = build_residual_network(graph, "capacity")  # built once; each problem resets its flows
    flow = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        for j in range(t):
            # the fastest of networkx's algorithms on these small dense graphs (about 3x preflow-push)
            solved = shortest_augmenting_path(graph, (top, i), (0, j), residual=residual)
            flow[i, j] = solved.graph["flow_value"]
    return flow / flow.sum(dim=-1, keepdim=True)
