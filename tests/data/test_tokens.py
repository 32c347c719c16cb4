import numpy as np
import pytest
import torch

from attnlab.data import CharTokenizer, encode_cached, get_batch, stream_generator, train_val_split
from attnlab.data.tokens import check_long_enough, token_dtype


def test_encoded_once_then_read_from_the_cache(tmp_path, monkeypatch):
    tok = CharTokenizer.train("abcabc")
    first = encode_cached("abcabc", tok, tmp_path)
    assert isinstance(first, np.memmap) and first.dtype == np.uint16 and first.tolist() == [0, 1, 2, 0, 1, 2]
    monkeypatch.setattr(CharTokenizer, "encode", lambda *a: pytest.fail("encoded twice"))
    assert encode_cached("abcabc", tok, tmp_path).tolist() == first.tolist()
    monkeypatch.undo()
    assert encode_cached("cba", tok, tmp_path).tolist() == [2, 1, 0]  # other text, other cache file
    assert len(list(tmp_path.iterdir())) == 2


def test_dtype_grows_with_the_vocabulary():
    assert token_dtype(65_536) == np.uint16 and token_dtype(65_537) == np.uint32


def test_split_is_the_tail():
    train, val = train_val_split(np.arange(100), 0.1)
    assert train.tolist() == list(range(90)) and val.tolist() == list(range(90, 100))


def test_batches_are_windows_with_shifted_targets():
    tokens = np.arange(1000, dtype=np.uint16)
    x, y = get_batch(tokens, 8, 5, stream_generator(1, "train", 0, 0))
    assert x.shape == y.shape == (5, 8) and x.dtype == torch.int64
    assert torch.equal(y, x + 1) and torch.equal(x[:, 1:] - x[:, :-1], torch.ones(5, 7, dtype=torch.int64))
    assert int(x.max()) + 1 <= int(y.max()) <= 999


def test_streams_are_pure_functions_of_their_path():
    tokens = np.arange(1000, dtype=np.uint16)
    a = get_batch(tokens, 8, 4, stream_generator(1, "train", 3, 0))[0]
    assert torch.equal(a, get_batch(tokens, 8, 4, stream_generator(1, "train", 3, 0))[0])
    for other in [(2, "train", 3, 0), (1, "train", 4, 0), (1, "train", 3, 1), (1, "eval", 3, 0)]:
        assert not torch.equal(a, get_batch(tokens, 8, 4, stream_generator(*other))[0])


def test_too_short():
    check_long_enough(np.zeros(9), 8, "train")
    with pytest.raises(ValueError, match=r"the val split has 8 tokens, fewer than one block \(context_length \+ 1"):
        check_long_enough(np.zeros(8), 8, "val")
