"""What a tokenizer reads as its unknown token: found by the tokens' offsets, checked against the vocabulary itself."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.cli.model_options import load_model
from attnlab.inspect.unknown import unknown_pieces, unknown_token

TEXT = "我 爱 学习 人工智能"


@pytest.fixture(scope="module")
def minilm_tokenizer():
    return load_model("bert")[1]


def test_the_pieces_read_as_unk_are_those_the_vocabulary_lacks(minilm_tokenizer):
    """The reference is the vocabulary: a CJK character (BERT splits them one by one) is unknown exactly when it has
    no entry, and an English word whose pieces are all there is never unknown."""
    vocab = minilm_tokenizer.get_vocab()
    chars = [c for c in TEXT if not c.isspace()]
    assert unknown_token(minilm_tokenizer) == "[UNK]"
    assert unknown_pieces(minilm_tokenizer, [TEXT]) == [c for c in dict.fromkeys(chars) if c not in vocab]
    assert unknown_pieces(minilm_tokenizer, [TEXT]) == ["爱", "习", "工", "能"]
    assert unknown_pieces(minilm_tokenizer, ["The cat sat on the mat.", "我 爱"]) == ["爱"]  # each once, in order
    assert unknown_pieces(minilm_tokenizer, ["The cat sat on the mat."]) == []


def test_a_byte_level_tokenizer_has_no_unknown_token(tmp_path):
    pytest.importorskip("transformers")
    from attnlab.pretrained import TextTokenizer
    from hf_checkpoints import write_checkpoint

    write_checkpoint("gpt2", tmp_path / "gpt2")
    tokenizer = TextTokenizer.from_dir(tmp_path / "gpt2")
    assert unknown_token(tokenizer) is None and unknown_pieces(tokenizer, [TEXT]) == []
    assert unknown_pieces(None, [TEXT]) == []  # the random model reads whitespace words: nothing is unknown


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_command_says_which_characters_and_which_model_in_one_line(tmp_path, lang):
    result = CliRunner().invoke(main, ["--lang", lang, "heads", "rollout", TEXT, "--model", "bert", "-o",
                                       str(tmp_path / "r.png")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "[UNK]" in line]
    assert len(notes) == 1 and all(c in notes[0] for c in "爱习工能") and "all-MiniLM-L6-v2" in notes[0], notes
    assert "学," not in notes[0] and "我," not in notes[0]  # the characters it knows are not named
    quiet = CliRunner().invoke(main, ["heads", "rollout", "The cat sat", "--model", "bert", "-o",
                                      str(tmp_path / "q.png")])
    assert quiet.exit_code == 0 and "[UNK]" not in quiet.stderr
