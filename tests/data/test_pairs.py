import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.data import (
    SPECIALS,
    Batch,
    CharTokenizer,
    Pair,
    collate,
    encode_pairs,
    iter_batches,
    load_tokenizer,
    read_pairs,
    save_tokenizer,
    split_pairs,
    stream_generator,
    write_pairs,
)
from attnlab.data.pairs import BOS, EOS, PAD

PAIRS = [Pair("go", "va"), Pair("hi", "salut"), Pair("run!", "cours !"), Pair("hi", "bonjour"),
         Pair("wait", "attends"), Pair("stop", "arrête"), Pair("寫", "écris"), Pair("a b", "un deux")]


def write(tmp_path, data: bytes, name="pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- TSV


def test_read_pairs_keeps_text_exactly(tmp_path):
    data = "\ufeffgo\tva\r\n\n  hi \tsalut !\n寫代碼\t写代码\n\n".encode()  # BOM, CRLF, blank lines, spaces
    assert read_pairs(write(tmp_path, data)) == [Pair("go", "va"), Pair("  hi ", "salut !"), Pair("寫代碼", "写代码")]


def test_write_then_read_round_trips(tmp_path):
    path = write_pairs(PAIRS, tmp_path / "out" / "pairs.tsv")
    assert read_pairs(path) == PAIRS
    with pytest.raises(ValueError, match=r"pair 1 has a target that is empty or holds a tab or line break: 'x\\ty'"):
        write_pairs([Pair("a", "b"), Pair("c", "x\ty")], tmp_path / "bad.tsv")
    assert not (tmp_path / "bad.tsv").exists()


@pytest.mark.parametrize(("data", "message"), [
    (b"go\tva\nhello world\n", r"pairs\.tsv:2: expected source<TAB>target \(exactly one tab\), found no tab in "
                               r"'hello world'"),
    (b"go\tva\n\nx\ty\tz\n", r"pairs\.tsv:3: expected source<TAB>target \(exactly one tab\), found 2 tabs"),
    (b"go\tva\n\tsalut\n", r"pairs\.tsv:2: the source is empty \(or only whitespace\)"),
    (b"go\t  \n", r"pairs\.tsv:1: the target is empty \(or only whitespace\)"),
    (b"go\tva\nhi\tsal\xffut\n", r"pairs\.tsv' is not UTF-8 text \(byte 0xff at offset 12, line 2\)"),
    # a byte-order mark, then a character cut short
    (b"\xef\xbb\xbfgo\tva\n\xe5\xaf\n", r"pairs\.tsv' is not UTF-8 text \(byte 0xe5 at offset 9, line 2\)"),
    (b"", r"pairs\.tsv: empty file: expected source<TAB>target lines, found none"),
    (b"\n\r\n\n", r"pairs\.tsv: empty file"),
])
def test_read_pairs_errors_name_file_and_line(tmp_path, data, message):
    with pytest.raises(ValueError, match=message):
        read_pairs(write(tmp_path, data))


# ---------------------------------------------------------------- split


def test_split_is_by_source_and_deterministic():
    pairs = [Pair(f"s{i % 40}", f"t{i}") for i in range(120)]  # each source three times, with three targets
    train, held = split_pairs(pairs, held_out_fraction=0.25, seed=3)
    assert (train, held) == split_pairs(pairs, held_out_fraction=0.25, seed=3)
    assert {p.source for p in train}.isdisjoint({p.source for p in held})
    assert len({p.source for p in held}) == 10  # 25 % of the 40 distinct sources, with all their pairs
    assert sorted(train + held) == sorted(pairs) and len(held) == 30
    assert train == [p for p in pairs if p in set(train)]  # file order kept
    assert split_pairs(pairs, held_out_fraction=0.25, seed=4) != (train, held)


def test_split_is_the_same_on_any_machine():
    pairs = [Pair(f"s{i}", f"t{i}") for i in range(10)]
    assert [p.source for p in split_pairs(pairs, held_out_fraction=0.3, seed=0)[1]] == ["s1", "s7", "s8"]


def test_split_always_leaves_both_sides_something():
    train, held = split_pairs([Pair("a", "x"), Pair("b", "y")], held_out_fraction=0.01)
    assert len(train) == len(held) == 1
    train, held = split_pairs([Pair("a", "x"), Pair("b", "y")], held_out_fraction=0.99)
    assert len(train) == len(held) == 1


def test_split_errors():
    with pytest.raises(ValueError, match=r"held_out_fraction must be in \(0, 1\), got 1.0"):
        split_pairs(PAIRS, held_out_fraction=1.0)
    with pytest.raises(ValueError, match="need at least 2 distinct sources to split, got 1"):
        split_pairs([Pair("a", "x"), Pair("a", "y")])


# ---------------------------------------------------------------- vocabulary


def test_vocab_ids_specials_first_then_code_points():
    vocab = CharTokenizer.from_pairs([Pair("ba", "cb")])
    assert (PAD, BOS, EOS) == (0, 1, 2)
    assert vocab.chars == ["a", "b", "c"] and vocab.vocab_size == 6
    assert vocab.encode("cab").tolist() == [5, 3, 4]
    assert vocab.decode([BOS, 5, 3, PAD, 4, EOS, 3, 3]) == "cab"  # skips <bos>/<pad>, stops at <eos>


def test_vocab_is_shared_by_both_sides():
    vocab = CharTokenizer.from_pairs(PAIRS)
    for source, target in PAIRS:
        assert vocab.decode(vocab.encode(source)) == source
        assert vocab.decode(vocab.encode(target)) == target
    assert set(vocab.chars) == set("".join(s + t for s, t in PAIRS))


def test_vocab_unknown_characters_are_listed():
    vocab = CharTokenizer.from_texts(["hello"])
    with pytest.raises(ValueError, match=r"2 character\(s\) not in the vocabulary: 'x', '寫' in 'hex寫' "
                                         r"\(the tokenizer knows 4 characters"):
        vocab.encode("hex寫")
    with pytest.raises(ValueError, match=r"id 7 is outside the vocabulary \[0, 7\)"):
        vocab.decode([3, 7])


def test_vocab_json_round_trip(tmp_path):
    vocab = CharTokenizer.from_pairs(PAIRS)
    path = tmp_path / "vocab.json"
    save_tokenizer(vocab, path)
    assert json.loads(path.read_text(encoding="utf-8"))["specials"] == ["<pad>", "<bos>", "<eos>"]
    again = load_tokenizer(path)
    assert again == vocab and again.chars == vocab.chars and again.specials == SPECIALS
    assert [again.encode(s).tolist() for s, _ in PAIRS] == [vocab.encode(s).tolist() for s, _ in PAIRS]
    assert again != CharTokenizer(vocab.chars)  # the same characters without the specials: another vocabulary


def test_a_vocabulary_saved_by_an_older_attnlab_still_loads(tmp_path):
    """Before one class served both, a translation vocabulary was saved as kind "char-pairs"."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"kind": "char-pairs", "specials": ["<pad>", "<bos>", "<eos>"], "chars": ["a", "b"]}))
    assert load_tokenizer(path) == CharTokenizer("ab", SPECIALS)


@given(st.text(min_size=1, max_size=100))
def test_vocab_round_trips_any_text(text):
    vocab = CharTokenizer.from_texts([text])
    ids = vocab.encode(text)
    assert min(ids) >= 3 and max(ids) < vocab.vocab_size
    assert vocab.decode(ids) == text


def test_vocab_bad_arguments():
    with pytest.raises(ValueError, match="distinct single characters"):
        CharTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="the texts hold no characters"):
        CharTokenizer.from_texts(["", ""])


# ---------------------------------------------------------------- batches


def test_collate_hand_worked():
    vocab = CharTokenizer("abc", SPECIALS)  # a=3, b=4, c=5
    batch = collate(encode_pairs([Pair("ab", "c"), Pair("c", "aab")], vocab))
    assert isinstance(batch, Batch)
    assert batch.src_ids.tolist() == [[3, 4], [5, 0]]
    assert batch.src_mask.tolist() == [[1, 1], [1, 0]]
    assert batch.tgt_in.tolist() == [[1, 5, 0, 0], [1, 3, 3, 4]]
    assert batch.tgt_out.tolist() == [[5, 2, 0, 0], [3, 3, 4, 2]]
    assert batch.tgt_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert all(t.dtype == torch.long for t in batch)


def test_batches_shapes_and_shift():
    vocab = CharTokenizer.from_pairs(PAIRS)
    encoded = encode_pairs(PAIRS, vocab)
    batches = list(iter_batches(encoded, batch_size=3, generator=0))
    assert [b.src_ids.shape[0] for b in batches] == [3, 3, 2]
    for b in batches:
        (n, s), t = b.src_ids.shape, b.tgt_in.shape[1]
        assert b.src_mask.shape == (n, s) and b.tgt_out.shape == b.tgt_mask.shape == (n, t)
        assert (b.tgt_in[:, 0] == BOS).all()
        real = b.tgt_mask.bool()
        assert torch.equal(b.tgt_in[:, 1:][real[:, 1:]], b.tgt_out[:, :-1][real[:, 1:]])  # shifted by one
        assert (b.tgt_out[real].eq(EOS).sum() == n) and (b.tgt_out[~real] == PAD).all()
        assert torch.equal(b.src_mask.bool(), b.src_ids != PAD) and b.src_mask.sum(1).min() > 0
    seen = sorted((vocab.decode(b.src_ids[i].tolist()), vocab.decode(b.tgt_out[i].tolist()))
                  for b in batches for i in range(b.src_ids.shape[0]))
    assert seen == sorted(PAIRS)  # one epoch: every pair exactly once


def test_batches_are_reproducible_from_the_generator():
    encoded = encode_pairs(PAIRS, CharTokenizer.from_pairs(PAIRS))

    def order(generator, **kw):
        return [b.src_ids.tolist() for b in iter_batches(encoded, 2, generator, **kw)]

    assert order(stream_generator(0, "train", 1)) == order(stream_generator(0, "train", 1))
    assert order(5) == order(torch.Generator().manual_seed(5))
    assert order(5) != order(6)
    assert order(5, bucket_by_length=True) == order(5, bucket_by_length=True)


def test_bucketing_groups_similar_lengths():
    pairs = [Pair("x" * n, "y") for n in range(1, 41)]
    encoded = encode_pairs(pairs, CharTokenizer("xy", SPECIALS))
    plain = list(iter_batches(encoded, 4, 0))
    bucketed = list(iter_batches(encoded, 4, 0, bucket_by_length=True))
    lengths = sorted(tuple(b.src_mask.sum(1).tolist()) for b in bucketed)
    assert lengths == [tuple(range(i, i + 4)) for i in range(1, 41, 4)]  # sorted chunks of the length order
    padding = [sum(int((b.src_mask == 0).sum()) for b in bs) for bs in (plain, bucketed)]
    assert padding[1] == 10 * 6 < padding[0]  # each bucketed batch pads 3 + 2 + 1 + 0


def test_drop_last_and_batch_size_errors():
    encoded = encode_pairs(PAIRS, CharTokenizer.from_pairs(PAIRS))
    assert [b.src_ids.shape[0] for b in iter_batches(encoded, 3, 0, drop_last=True)] == [3, 3]
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        next(iter_batches(encoded, 0, 0))
    with pytest.raises(ValueError, match="no pairs to batch"):
        next(iter_batches([], 2, 0))


def test_context_length_limits():
    vocab = CharTokenizer("abcdef", SPECIALS)
    pairs = [Pair("ab", "cd"), Pair("abcdef", "e")]
    with pytest.raises(ValueError, match=r"pair 1 has a source of 6 characters, more than context_length=4 "
                                         r"\('abcdef'\); pass truncate=True"):
        encode_pairs(pairs, vocab, context_length=4)
    assert encode_pairs(pairs, vocab, context_length=4, truncate=True) == [([3, 4], [5, 6]), ([3, 4, 5, 6], [7])]
    assert encode_pairs(pairs, vocab, context_length=6)[1][0] == [3, 4, 5, 6, 7, 8]  # == limit: fine
    with pytest.raises(ValueError, match=r"pair 0 has a target of 4 characters, which with <bos> exceeds "
                                         r"context_length=4"):
        encode_pairs([Pair("a", "abcd")], vocab, context_length=4, truncate=True)
    with pytest.raises(ValueError, match="context_length must be an int >= 2 or None, got 1"):
        encode_pairs(pairs, vocab, context_length=1)
    with pytest.raises(ValueError, match="pair 0 has an empty source"):
        encode_pairs([Pair("", "a")], vocab)
    with pytest.raises(ValueError, match=r"1 character\(s\) not in the vocabulary: 'z'"):
        encode_pairs([Pair("az", "a")], vocab)
