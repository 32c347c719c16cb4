import numpy as np
import pytest
import torch

from attnlab import numpy as anp


def test_state_dict_to_arrays_converts_and_copies():
    sd = {"a.weight": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.bfloat16),
          "ids": torch.arange(3), "c": np.ones(2, dtype=np.float64)}
    arrays = anp.state_dict_to_arrays(sd)
    assert arrays["a.weight"].dtype == np.float32 and arrays["a.weight"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert arrays["b"].dtype == np.float32 and arrays["b"].tolist() == [1.0, 1.0]
    assert arrays["ids"].dtype == np.int64  # integer buffers keep their dtype
    assert arrays["c"].dtype == np.float32
    sd["a.weight"].add_(1)  # a copy, not a view of the torch storage
    assert arrays["a.weight"][0, 0] == 0


def test_state_dict_to_arrays_of_a_parameter_with_grad():
    lin = torch.nn.Linear(2, 2)
    assert np.array_equal(anp.state_dict_to_arrays(dict(lin.named_parameters()))["weight"], lin.weight.detach().numpy())


def test_float64_on_request():
    assert anp.state_dict_to_arrays({"w": torch.ones(1)}, dtype=np.float64)["w"].dtype == np.float64


def test_load_safetensors_round_trip(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.arange(4.0)}, tmp_path / "m.safetensors")
    assert anp.load_safetensors(tmp_path / "m.safetensors")["w"].tolist() == [0, 1, 2, 3]


def test_subtree():
    params = {"blocks.0.attn.w": np.ones(1), "blocks.1.attn.w": np.zeros(1)}
    assert list(anp.subtree(params, "blocks.0")) == ["attn.w"]
    with pytest.raises(KeyError, match=r"no parameters under 'blocks\.2'"):
        anp.subtree(params, "blocks.2")


@pytest.mark.parametrize(("args", "error", "match"), [
    (([1],), TypeError, "state_dict must be a mapping"),
    (({"w": [1.0]},), TypeError, r"state_dict\['w'\] must be a torch.Tensor or numpy.ndarray, got list"),
    (({"w": np.ones(1)}, np.int32), TypeError, "dtype must be a floating NumPy dtype"),
])
def test_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        anp.state_dict_to_arrays(*args)
