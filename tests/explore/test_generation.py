"""Appending tokens: ``generate``'s own, greedy or with a seeded generator; and each new token's attention over what
its cache kept, against the attention of the whole sequence computed without a cache."""

import pytest
import torch

from attnlab.explore.checks import ApiError
from attnlab.generation import GenerationConfig, cropping_expected, generate
from attnlab.models import SinkKVCache
from explore_reference import TEXT


def ids_of(tok, text):
    return torch.as_tensor(tok.encode(text), dtype=torch.long)[None]


@pytest.mark.parametrize(("temperature", "top_k", "top_p", "seed"), [(0.0, None, None, None), (0.9, None, None, 7),
                                                                      (1.3, 10, 0.8, 123)])
def test_appended_tokens_are_generates(api, models, temperature, top_k, top_p, seed):
    model, tok = models["modern"]
    answer = api.call("generate", {"model": "modern", "text": TEXT[:40], "max_new_tokens": 6,
                                   "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed})
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    out = generate(model, ids_of(tok, TEXT[:40]), 6,
                   GenerationConfig(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator))
    assert answer["ids"] == out[0, 40:].tolist()
    assert answer["appended"] == tok.decode(answer["ids"]) and answer["sampling"]["seed"] == seed


def greedy_and_read_whole(api, models, name: str, n: int):
    """``n`` greedy tokens after the text's first 20 characters, the whole sequence, and its attention read at once
    (no cache): the reference every step's weights are held to."""
    model, tok = models[name]
    answer = api.call("generate", {"model": name, "text": TEXT[:20], "max_new_tokens": n, "temperature": 0})
    seq = ids_of(tok, TEXT[:20])[0].tolist() + answer["ids"]
    with torch.no_grad():
        return answer, seq, model(torch.tensor([seq]), return_weights=True).attentions


def test_a_full_cache_keeps_every_position_with_the_weights_of_the_whole_sequence(api, models):
    answer, seq, whole = greedy_and_read_whole(api, models, "gpt", 5)
    for k, step in enumerate(answer["steps"]):
        position = 20 + k
        assert step["position"] == position and step["id"] == seq[position]
        for layer, shown in enumerate(step["layers"]):
            assert shown["kept"] == list(range(position + 1))
            expected = whole[layer][0, :, position, : position + 1]
            assert torch.allclose(torch.tensor(shown["weights"]), expected, atol=1e-6)


def test_a_learned_position_table_crops_and_recomputes_as_generate_does(api, models):
    model, tok = models["gpt"]  # 64 positions
    text = (TEXT * 2)[:62]
    answer = api.call("generate", {"model": "gpt", "text": text, "max_new_tokens": 5, "temperature": 0})
    with cropping_expected():  # the warning the page puts in its own words
        assert answer["ids"] == generate(model, ids_of(tok, text), 5, GenerationConfig(temperature=0))[0, 62:].tolist()
    seq = ids_of(tok, text)[0].tolist() + answer["ids"]
    last = answer["steps"][-1]  # position 66: the window is positions 3 .. 66
    assert last["layers"][0]["kept"] == list(range(3, 67))
    with torch.no_grad():
        window = model(torch.tensor([seq[3:67]]), return_weights=True).attentions[1][0, :, -1]
    assert torch.allclose(torch.tensor(last["layers"][1]["weights"]), window, atol=1e-6)


def test_a_sliding_window_layer_keeps_its_last_positions(api, models):
    answer, _, whole = greedy_and_read_whole(api, models, "windowed", 4)  # sliding_window = 8
    for k, step in enumerate(answer["steps"]):
        position = 20 + k
        shown = step["layers"][0]
        assert sorted(shown["kept"]) == list(range(position - 7, position + 1))
        expected = whole[0][0, :, position, shown["kept"]]  # the same keys, in the ring's order
        assert torch.allclose(torch.tensor(shown["weights"]), expected, atol=1e-6)


def test_a_sink_cache_keeps_the_first_positions_and_a_window(api, models):
    model, tok = models["modern"]
    answer = api.call("generate", {"model": "modern", "text": TEXT[:20], "max_new_tokens": 6, "temperature": 0.7,
                                   "seed": 3, "cache": {"kind": "sink", "sink_tokens": 2, "sliding_window": 6}})
    sink = SinkKVCache.for_model(model, 1, sink_tokens=2, sliding_window=6)
    out = generate(model, ids_of(tok, TEXT[:20]), 6,
                   GenerationConfig(temperature=0.7, generator=torch.Generator().manual_seed(3)), cache=sink)
    assert answer["ids"] == out[0, 20:].tolist()
    for k, step in enumerate(answer["steps"]):
        n = 21 + k  # positions seen
        for shown in step["layers"]:
            assert shown["kept"] == [0, 1, *range(n - 6, n)]
            assert torch.allclose(torch.tensor(shown["weights"]).sum(-1), torch.ones(4), atol=1e-5)


@pytest.mark.parametrize(("body", "words"), [
    ({"model": "gpt", "text": "abc", "cache": {"kind": "sink", "sink_tokens": 2, "sliding_window": 4}},
     ["gpt cannot decode with a sink cache", "full"]),
    ({"model": "modern", "text": "abc", "cache": {"kind": "sink"}}, ["needs sink_tokens and sliding_window"]),
    ({"model": "modern", "text": "abc", "max_new_tokens": 65}, ["max_new_tokens", "from 1 to 64"]),
    ({"model": "modern", "text": "abc", "seed": -1}, ["seed", "-1"]),
    ({"model": "s2s", "text": "15 mai"}, ["s2s is not a decoder"]),
])
def test_bad_generation_requests(api, body, words):
    with pytest.raises(ApiError) as err:
        api.call("generate", body)
    assert err.value.status == 400
    for word in words:
        assert word in err.value.message, (word, err.value.message)
