import pytest
import torch

from attnlab.generation.seq2seq import beam_search, greedy_decode
from attnlab.generation.translation import encode_sources, translate

SOURCES = ["Friday, March 5, 2021", "5 mars 2021", "2021年3月5日", "05.03.2021"]


def test_greedy_translation_is_greedy_decode_read_back(dates_run):
    _, model, vocab = dates_run
    src, mask = encode_sources(SOURCES, vocab, model.config.context_length)
    tokens = greedy_decode(model, src, src_mask=mask)
    out = translate(model, vocab, SOURCES)
    assert [t.target for t in out] == [vocab.decode(row.tolist()) for row in tokens]
    assert [t.source for t in out] == SOURCES and all(t.score is None for t in out)
    assert all(vocab.decode(t.ids) == t.target and 2 not in t.ids for t in out)


def test_beam_translation_carries_the_beams_scores(dates_run):
    _, model, vocab = dates_run
    src, mask = encode_sources(SOURCES, vocab, model.config.context_length)
    tokens, scores = beam_search(model, src, src_mask=mask, beam_size=3, alpha=0.6)
    out = translate(model, vocab, SOURCES, beam=3)
    assert [t.target for t in out] == [vocab.decode(row.tolist()) for row in tokens]
    assert [t.score for t in out] == pytest.approx(scores.tolist(), abs=0)


def test_padding_a_source_into_a_batch_changes_nothing(dates_run):
    _, model, vocab = dates_run
    together = translate(model, vocab, SOURCES)
    alone = [translate(model, vocab, [s])[0] for s in SOURCES]
    assert [t.ids for t in together] == [t.ids for t in alone]


def test_encode_sources_pads_with_a_mask():
    from attnlab.data import SPECIALS, CharTokenizer

    vocab = CharTokenizer("abc", SPECIALS)
    src, mask = encode_sources(["ab", "c"], vocab, 8)
    assert src.tolist() == [[3, 4], [5, 0]] and mask.tolist() == [[1, 1], [1, 0]]


@pytest.mark.parametrize(("texts", "kwargs", "message"), [
    ([], {}, r"text: expected one or more sources"),
    (["5 mars 2021", " "], {}, r"text: source 2 is empty"),
    (["5 mars 2021Ω"], {}, r"not in the vocabulary: 'Ω'"),
    (["1" * 41], {}, r"source 1 has 41 characters, more than the model's context_length=40 .*--truncate"),
    (["2021"], {"beam": 0}, r"beam: expected a positive integer \(1 = greedy\), got 0"),
    (["2021"], {"alpha": -0.5}, r"alpha: expected a length penalty >= 0, got -0.5"),
])
def test_bad_input(dates_run, texts, kwargs, message):
    _, model, vocab = dates_run
    with pytest.raises(ValueError, match=message):
        translate(model, vocab, texts, **kwargs)


def test_truncate_translates_the_cut_source(dates_run):
    _, model, vocab = dates_run
    long = "Friday, March 5, 2021" * 2  # 42 characters, the context is 40
    assert translate(model, vocab, [long], truncate=True)[0].ids == translate(model, vocab, [long[:40]])[0].ids
    assert torch.is_grad_enabled()  # decoding ran under no_grad without leaking it


def test_a_beam_steps_reorder_moves_the_filled_positions_only(dates_run):
    _, model, _ = dates_run
    memory = torch.randn(3, 5, model.config.d_model)
    cache = model.new_cache(memory)
    for layer in cache.layers:
        layer.update(torch.randn(3, model.config.num_heads, 4, model.config.head_dim),
                     torch.randn(3, model.config.num_heads, 4, model.config.head_dim))
    before = [(kv.keys[:, :, :4].clone(), kv.values[:, :, :4].clone()) for kv in cache.layers]
    memory_kv = [layer.memory_kv for layer in cache.layers]
    index = torch.tensor([2, 2, 0])
    cache.reorder(index, memory=False)
    for kv, (k, v) in zip(cache.layers, before, strict=True):
        assert torch.equal(kv.keys[:, :, :4], k[index]) and torch.equal(kv.values[:, :, :4], v[index])
    assert all(a is b for a, b in zip(memory_kv, [layer.memory_kv for layer in cache.layers], strict=True))
