import pytest

from attnlab.training import Seq2SeqTrainConfig, TrainConfig, build_model_config, load_toml


def test_toml_round_trip(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('preset = "tiny"\nmax_iters = 7\nlearning_rate = 3e-3\n[model]\nd_model = 48\n')
    cfg = TrainConfig.from_dict(load_toml(path))
    assert (cfg.preset, cfg.max_iters, cfg.learning_rate, cfg.model) == ("tiny", 7, 3e-3, {"d_model": 48})
    model_cfg = build_model_config(cfg, vocab_size=65)
    assert (model_cfg.d_model, model_cfg.vocab_size, model_cfg.num_layers) == (48, 65, 2)


def test_unknown_key_names_it_and_suggests_the_nearest():
    with pytest.raises(ValueError, match=r"unknown key 'lerning_rate'; did you mean 'learning_rate'\?"):
        TrainConfig.from_dict({"lerning_rate": 1e-3})


def test_unknown_key_without_a_near_one_lists_the_keys():
    with pytest.raises(ValueError, match=r"unknown key 'zzz'; known keys: .*batch_size"):
        TrainConfig.from_dict({"zzz": 1})


def test_unknown_model_key_suggests_the_nearest():
    with pytest.raises(ValueError, match=r"model: unknown key 'n_layer'; did you mean 'num_layers'\?"):
        build_model_config(TrainConfig(model={"n_layer": 2}), vocab_size=10)


def test_unknown_preset():
    with pytest.raises(ValueError, match=r"preset: unknown preset 'huge'; choose from \[.*'baby'.*'tiny'"):
        build_model_config(TrainConfig(preset="huge"), vocab_size=10)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("tokenizer", "word", "tokenizer: expected 'char' or 'bpe', got 'word'"),
    ("batch_size", 0, "batch_size: expected a positive integer, got 0"),
    ("max_iters", 2.5, "max_iters: expected a positive integer, got 2.5"),
    ("min_lr", 1.0, "min_lr: expected 0 < min_lr <= learning_rate"),
    ("val_fraction", 1.0, "val_fraction: expected in"),
    ("time_budget", -1.0, "time_budget: expected a positive number of minutes"),
])
def test_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        TrainConfig(**{field: value})


def test_bad_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("max_iters = = 3\n")
    with pytest.raises(ValueError, match="is not valid TOML"):
        load_toml(path)
    with pytest.raises(ValueError, match="no such file"):
        load_toml(tmp_path / "missing.toml")


def test_the_docstrings_toml_example_is_a_valid_config():
    """The example in attnlab.training.config's docstring must build (it once named a field the model lacks)."""
    import tomllib

    import attnlab.training.config as module

    example = module.__doc__.split("e.g.::")[1].split("\n\n")[1]
    values = tomllib.loads("\n".join(line.strip() for line in example.splitlines()))
    config = TrainConfig.from_dict(values)
    assert build_model_config(config, vocab_size=65).d_model == 192


def test_a_gpt_run_without_a_corpus_is_refused_by_name():
    with pytest.raises(ValueError, match=r"data: a GPT trains on a text corpus.*got None"):
        TrainConfig(data=None)
    assert Seq2SeqTrainConfig(task=None, data="pairs.tsv").data == "pairs.tsv"  # a translation run's data
