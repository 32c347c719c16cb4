from types import SimpleNamespace

import pytest
import torch

from attnlab.generation import GenerationConfig, encode_prompt, stream_text
from attnlab.models import load_trained
from attnlab.training import train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from attnlab.training import TrainConfig
    from corpora import TEXT

    root = tmp_path_factory.mktemp("inference")
    (root / "c.txt").write_text(TEXT)
    torch.set_num_threads(1)
    train(TrainConfig(data=str(root / "c.txt"), out=str(root / "run"), preset="tiny", model={"context_length": 16},
                      max_iters=30, batch_size=8, eval_interval=30, eval_iters=1, learning_rate=3e-3, min_lr=3e-4,
                      warmup_iters=2), quiet=True)
    return load_trained(root / "run")


def reference_logits(model, ids):
    """The last position's logits, recomputed from scratch on the last context_length tokens (no cache)."""
    ctx = model.config.context_length
    with torch.no_grad():
        return model(torch.tensor([ids[-ctx:]])).logits[0, -1].double()


def streamed_ids(tokenizer, prompt, pieces):
    return [int(i) for i in tokenizer.encode(prompt + "".join(pieces))]


def test_temperature_zero_is_deterministic_and_equals_argmax(trained):
    model, tok = trained
    prompt = "First"
    a = list(stream_text(model, tok, prompt, 40, GenerationConfig(temperature=0, seed=1)))
    b = list(stream_text(model, tok, prompt, 40, GenerationConfig(temperature=0, seed=2)))
    assert a == b
    ids = [int(i) for i in tok.encode(prompt)]
    for _ in range(40):  # runs past the 16-token context: the crop-and-recompute path too
        ids.append(int(reference_logits(model, ids).argmax()))
    assert prompt + "".join(a) == tok.decode(ids)


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 3, None), (1.5, 1, None), (1.0, None, 0.5),
                                                             (0.7, None, 0.9), (1.2, 4, 0.6)])
def test_top_k_and_top_p_stay_in_the_allowed_set(trained, temperature, top_k, top_p):
    model, tok = trained
    prompt = "All:"
    for seed in range(3):
        config = GenerationConfig(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        ids = streamed_ids(tok, prompt, stream_text(model, tok, prompt, 30, config))
        for pos in range(len(tok.encode(prompt)), len(ids)):
            logits = reference_logits(model, ids[:pos]) / temperature
            allowed = set(range(len(logits)))
            if top_k is not None:  # the k largest logits (and ties with the k-th)
                allowed &= {i for i, v in enumerate(logits.tolist()) if v >= logits.topk(top_k).values[-1]}
            if top_p is not None:  # smallest prefix of the sorted distribution with mass >= top_p
                masked = torch.full_like(logits, float("-inf"))
                masked[list(allowed)] = logits[list(allowed)]
                probs = torch.softmax(masked, -1)
                order = probs.argsort(descending=True).tolist()
                nucleus, mass = set(), 0.0
                for i in order:
                    nucleus.add(i)
                    mass += probs[i].item()
                    if mass >= top_p - 1e-9:
                        break
                allowed &= nucleus
            assert ids[pos] in allowed, (pos, ids[pos], sorted(allowed))


def test_seeded_sampling_repeats(trained):
    model, tok = trained
    config = GenerationConfig(temperature=1.0, seed=4)
    assert list(stream_text(model, tok, "A", 20, config)) == list(stream_text(model, tok, "A", 20, config))
    assert list(stream_text(model, tok, "A", 20, config)) != list(stream_text(model, tok, "A", 20,
                                                                               config.replace(seed=5)))


def test_unknown_characters_in_a_char_prompt(trained):
    _, tok = trained
    with pytest.raises(ValueError, match=r"prompt: .* character\(s\) not in the vocabulary: 'Z', 'é'"):
        encode_prompt(tok, "Zé")
    with pytest.raises(ValueError, match="empty prompt"):
        encode_prompt(tok, "")


def test_bpe_pieces_never_split_a_character():
    """Byte-level tokens can end inside a UTF-8 character: such pieces wait until the character is whole."""
    from attnlab.data import BPETokenizer

    text = "naïve 寫代碼的中年人 ok"
    bpe = BPETokenizer.train("plain ascii text only\n" * 5, vocab_size=260)  # CJK stays in single bytes
    ids = [int(i) for i in bpe.encode(text)]
    assert len(ids) > len(text)  # some characters really are split over several tokens

    class Scripted(torch.nn.Module):  # a "model" whose most likely next token is the next of the given ids
        config = SimpleNamespace(context_length=1000)

        def __init__(self):
            super().__init__()
            self.w, self.step = torch.nn.Parameter(torch.zeros(1)), 0

        def new_cache(self, batch):
            return None  # no cache: every step is a full forward

        def forward(self, idx, kv_cache=None):
            logits = torch.zeros(idx.shape[0], idx.shape[1], bpe.vocab_size)
            logits[:, -1, ids[self.step]] = 1.0
            self.step += 1
            return SimpleNamespace(logits=logits)

    pieces = list(stream_text(Scripted(), bpe, "x", len(ids), GenerationConfig(temperature=0)))
    assert "".join(pieces) == text and all("\ufffd" not in p for p in pieces)
    assert len(pieces) > 1
