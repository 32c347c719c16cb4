"""Attention rollout against a 2-layer example worked by hand, and attention flow against networkx on a graph built
here (its own node names, networkx's default algorithm), and against the same example worked by hand."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.heads import FLOW_MAX_TOKENS, attention_flow, residual_attention, rollout

# two layers of two heads over two tokens
LAYER_1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]],
                        [[1.0, 0.0], [0.1, 0.9]]], dtype=torch.float64)
LAYER_2 = torch.tensor([[[0.6, 0.4], [0.2, 0.8]],
                        [[0.2, 0.8], [0.6, 0.4]]], dtype=torch.float64)
# by hand: the heads' means are [[1, 0], [.3, .7]] and [[.4, .6], [.4, .6]]; half and half with the identity:
A1 = torch.tensor([[1.0, 0.0], [0.15, 0.85]], dtype=torch.float64)
A2 = torch.tensor([[0.7, 0.3], [0.2, 0.8]], dtype=torch.float64)
# rollout = A2 @ A1 = [[.7 + .3·.15, .3·.85], [.2 + .8·.15, .8·.85]]
ROLLOUT = torch.tensor([[0.745, 0.255], [0.32, 0.68]], dtype=torch.float64)
# flow from the top token 0 to input 0: .7 through (1, 0), min(.3, .15) through (1, 1): .85; to input 1: min(.3, .85)
# = .3 (no edge from (1, 0) to input 1). From top token 1: .2 + min(.8, .15) = .35 and min(.8, .85) = .8. Rows / 1.15.
FLOW = torch.tensor([[0.85, 0.3], [0.35, 0.8]], dtype=torch.float64) / 1.15


def test_rollout_of_the_hand_worked_example():
    torch.testing.assert_close(residual_attention(LAYER_1), A1, atol=1e-12, rtol=0)
    torch.testing.assert_close(residual_attention(LAYER_2), A2, atol=1e-12, rtol=0)
    torch.testing.assert_close(rollout([LAYER_1, LAYER_2]), ROLLOUT, atol=1e-12, rtol=0)


def test_flow_of_the_hand_worked_example():
    torch.testing.assert_close(attention_flow([LAYER_1, LAYER_2]), FLOW, atol=1e-12, rtol=0)


def test_one_layer_flow_is_the_residual_attention_is_the_rollout():
    a = torch.softmax(torch.randn(3, 5, 5), dim=-1)
    torch.testing.assert_close(attention_flow([a]), residual_attention(a.double()), atol=1e-9, rtol=0)
    torch.testing.assert_close(rollout([a]), residual_attention(a.double()), atol=0, rtol=0)


def reference_flow(attentions: list[torch.Tensor]) -> torch.Tensor:
    """The paper's construction, built here: string node names, the residual mix by hand, networkx's default
    max-flow algorithm (preflow-push), one graph per call."""
    import networkx as nx

    t, top = attentions[0].shape[-1], len(attentions)
    graph = nx.DiGraph()
    for layer, a in enumerate(attentions, start=1):
        mean = a.double().mean(dim=0)
        for i in range(t):
            row = [0.5 * mean[i, j].item() + (0.5 if i == j else 0.0) for j in range(t)]
            total = sum(row)
            for j, w in enumerate(row):
                if w > 0:
                    graph.add_edge(f"L{layer}_{i}", f"L{layer - 1}_{j}", capacity=w / total)
    flow = torch.zeros(t, t, dtype=torch.float64)
    for i in range(t):
        for j in range(t):
            flow[i, j] = nx.maximum_flow_value(graph, f"L{top}_{i}", f"L0_{j}")
    return flow / flow.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("causal", [False, True])
def test_flow_equals_networkx_on_a_graph_built_here(causal):
    g = torch.Generator().manual_seed(7)
    t = 6
    scores = torch.randn(3, 4, t, t, generator=g) * 2
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -torch.inf)
    attentions = list(torch.softmax(scores, dim=-1))
    flow = attention_flow(attentions)
    torch.testing.assert_close(flow, reference_flow(attentions), atol=1e-9, rtol=0)
    if causal:  # nothing flows to a later token
        assert (flow.triu(1) == 0).all()


@settings(max_examples=20)
@given(st.integers(1, 4), st.integers(1, 7), st.integers(0, 2**31 - 1), st.booleans())
def test_rollout_rows_are_distributions_and_causal_stays_causal(layers, t, seed, causal):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(layers, 2, t, t, generator=g)
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -torch.inf)
    r = rollout(list(torch.softmax(scores, dim=-1)))
    assert (r >= 0).all()
    torch.testing.assert_close(r.sum(dim=-1), torch.ones(t, dtype=torch.float64), atol=1e-12, rtol=0)
    if causal:
        assert (r.triu(1) == 0).all()


@pytest.mark.parametrize(("attentions", "words"), [
    ([], ["non-empty list", "(H, T, T)"]),
    ([torch.ones(2, 3, 3), torch.ones(2, 4, 4)], ["attentions[1]", "(H, T, T)", "layer 0 (3)", "(2, 4, 4)"]),
    ([torch.ones(3, 3)], ["attentions[0]", "(3, 3)"]),
])
def test_bad_attentions_are_named(attentions, words):
    for fn in (rollout, attention_flow):
        with pytest.raises(ValueError) as info:
            fn(attentions)
        assert all(w in str(info.value) for w in words), str(info.value)


def test_flow_refuses_a_long_input_before_any_work():
    t = FLOW_MAX_TOKENS + 1
    with pytest.raises(ValueError, match=f"the input has {t} tokens; flow is computed for at most {FLOW_MAX_TOKENS}"):
        attention_flow([torch.full((1, t, t), 1.0 / t)])
