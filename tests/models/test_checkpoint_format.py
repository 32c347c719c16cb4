"""The checkpoint format's history: a checkpoint written by an older attnlab is read with today's names."""

import json

import pytest

from attnlab.models.checkpoint import FORMAT, read_state


def _write(tmp_path, state):
    (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(("norm_first", "norm"), [(True, "pre"), (False, "post")])
def test_format_2_said_norm_first(tmp_path, norm_first, norm):
    state = {"format": 2, "architecture": "transformer", "model_config": {"vocab_size": 9, "norm_first": norm_first},
             "train_config": {"model": {"norm_first": norm_first, "d_model": 32}}}
    read = read_state(_write(tmp_path, state))
    assert read["format"] == FORMAT == 3
    assert read["model_config"] == {"vocab_size": 9, "norm": norm}
    assert read["train_config"]["model"] == {"d_model": 32, "norm": norm}


def test_format_1_said_n_layers_and_n_heads(tmp_path):
    state = {"format": 1, "model_config": {"n_layers": 2, "n_heads": 4, "d_model": 8}, "train_config": {}}
    read = read_state(_write(tmp_path, state))
    assert read["model_config"] == {"num_layers": 2, "num_heads": 4, "d_model": 8}
    assert read["train_config"]["model"] == {}


def test_an_unknown_format_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"unknown format 9, expected 3$"):
        read_state(_write(tmp_path, {"format": 9}))
