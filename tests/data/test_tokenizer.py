import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.data import BPETokenizer, CharTokenizer, load_tokenizer, save_tokenizer, train_tokenizer

CORPUS = ("The quality of mercy is not strain'd,\nIt droppeth as the gentle rain from heaven\n"
          "Upon the place beneath: it is twice blest;\n寫代碼的中年人 — naïve café\n") * 20


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(CORPUS, vocab_size=400)


def test_char_ids_follow_code_points():
    tok = CharTokenizer.train("hello")
    assert tok.chars == ["e", "h", "l", "o"]
    assert tok.encode("hole").tolist() == [1, 3, 2, 0]
    assert tok.decode([1, 0, 2, 2, 3]) == "hello"


def test_char_unknown_characters_are_named():
    with pytest.raises(ValueError, match=r"2 character\(s\) not in the vocabulary: 'x', '寫'"):
        CharTokenizer.train("hello").encode("hex寫")


@given(st.text(min_size=1, max_size=200))
def test_char_round_trip(text):
    tok = CharTokenizer.train(text)
    assert tok.decode(tok.encode(text)) == text


@given(st.text(max_size=300))
def test_bpe_round_trips_any_text_exactly(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_learns_merges(bpe):
    assert 300 < bpe.vocab_size <= 400  # stops early when no pair is left to merge
    ids = bpe.encode(CORPUS)
    assert len(ids) < 0.5 * len(CORPUS.encode("utf-8"))  # merged: far fewer tokens than bytes
    assert bpe.decode(ids) == CORPUS


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_save_and_load_json(tmp_path, kind):
    tok = train_tokenizer(kind, CORPUS, vocab_size=280)
    save_tokenizer(tok, tmp_path / "tokenizer.json")
    json.loads((tmp_path / "tokenizer.json").read_text())  # plain JSON
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert again.kind == kind and again.vocab_size == tok.vocab_size
    assert np.array_equal(again.encode(CORPUS), tok.encode(CORPUS))


def test_bad_arguments():
    with pytest.raises(ValueError, match="expected 'char' or 'bpe', got 'word'"):
        train_tokenizer("word", "abc")
    with pytest.raises(ValueError, match="vocab_size must be > 256"):
        BPETokenizer.train("abc", 100)
    with pytest.raises(ValueError, match="text is empty"):
        CharTokenizer.train("")
