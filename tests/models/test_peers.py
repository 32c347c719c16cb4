"""attnlab's GPT against the two GPTs a reader meets first: nanoGPT's ``model.py`` and the book's ``GPTModel``.

Each peer is written here, in its own layout and parameter names (nanoGPT: one fused ``c_attn``, a
``transformer`` ModuleDict, ``(logits, loss)`` from ``forward(idx, targets)``; the book: ``trf_blocks``, its own
LayerNorm with ``scale``/``shift``, an untied ``out_head``). Its weights are mapped into attnlab's GPT, and
both must give the same logits and loss (≤ 1e-5) and the same tokens.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.generation import GenerationConfig, generate
from attnlab.models import GPT, GPTConfig

VOCAB, CONTEXT, WIDTH, LAYERS, HEADS = 67, 24, 48, 3, 4
GREEDY = GenerationConfig(temperature=0)


class NanoAttention(nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH, bias=bias)
        self.c_proj = nn.Linear(WIDTH, WIDTH, bias=bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class NanoBlock(nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH, bias=bias)
        self.attn = NanoAttention(bias)
        self.ln_2 = nn.LayerNorm(WIDTH, bias=bias)
        self.mlp = nn.Sequential()
        self.mlp.c_fc = nn.Linear(WIDTH, 4 * WIDTH, bias=bias)
        self.mlp.gelu = nn.GELU()  # nanoGPT's GELU is the exact (erf) one
        self.mlp.c_proj = nn.Linear(4 * WIDTH, WIDTH, bias=bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's layout: weight-tied lm_head, (logits, loss), and its sampling loop."""

    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, WIDTH), wpe=nn.Embedding(CONTEXT, WIDTH),
            h=nn.ModuleList(NanoBlock(bias) for _ in range(LAYERS)), ln_f=nn.LayerNorm(WIDTH, bias=bias)))
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for p in self.parameters():
            nn.init.normal_(p, std=0.2)  # anything but the default init, so a wrong mapping shows

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.shape[1])
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -CONTEXT:])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
        return idx


def from_nanogpt(ref: NanoGPT, bias: bool) -> GPT:
    config = GPTConfig(vocab_size=VOCAB, context_length=CONTEXT, d_model=WIDTH, num_layers=LAYERS, num_heads=HEADS,
                       activation="gelu", bias=bias, qkv_bias=bias)
    ours = GPT(config).eval()
    sd = ref.state_dict()
    mapped = {"tok_emb.weight": sd["transformer.wte.weight"], "pos_emb.weight": sd["transformer.wpe.weight"],
              "head.weight": sd["lm_head.weight"]}
    names = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_proj": "attn.out_proj", "mlp.c_fc": "ff.linear1",
             "mlp.c_proj": "ff.linear2"}
    for key, value in sd.items():
        if key.startswith("transformer.ln_f."):
            mapped[key.replace("transformer.ln_f", "ln_f")] = value
        if not key.startswith("transformer.h."):
            continue
        i, rest = key.removeprefix("transformer.h.").split(".", 1)
        part, kind = rest.rsplit(".", 1)
        if part == "attn.c_attn":  # one fused (3·D, D) matrix: queries, keys, values stacked
            for name, chunk in zip(("W_query", "W_key", "W_value"), value.split(WIDTH), strict=True):
                mapped[f"blocks.{i}.attn.{name}.{kind}"] = chunk
        else:
            mapped[f"blocks.{i}.{names[part]}.{kind}"] = value
    ours.load_state_dict(mapped, strict=True)
    return ours


class BookLayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.eps, self.scale, self.shift = 1e-5, nn.Parameter(torch.ones(emb_dim)), nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean, var = x.mean(dim=-1, keepdim=True), x.var(dim=-1, keepdim=True, unbiased=False)
        return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift


class BookGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))


class BookBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        from attnlab.attention import MultiHeadAttention  # the book's chapter-4 block builds chapter 3's module

        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                                      num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
        self.ff = nn.Sequential(nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]), BookGELU(),
                                nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]))
        self.norm1, self.norm2 = BookLayerNorm(cfg["emb_dim"]), BookLayerNorm(cfg["emb_dim"])

    def forward(self, x):
        x = x + self.att(self.norm1(x))
        return x + self.ff(self.norm2(x))


class BookGPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.trf_blocks = nn.Sequential(*[BookBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = BookLayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)  # untied, as in the book

    def forward(self, in_idx):
        x = self.tok_emb(in_idx) + self.pos_emb(torch.arange(in_idx.shape[1]))
        return self.out_head(self.final_norm(self.trf_blocks(x)))


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, -context_size:])
        idx = torch.cat((idx, torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)), dim=1)
    return idx


BOOK_CFG = {"vocab_size": VOCAB, "context_length": CONTEXT, "emb_dim": WIDTH, "n_heads": HEADS, "n_layers": LAYERS,
            "drop_rate": 0.0, "qkv_bias": False}


def from_book(ref: BookGPTModel) -> GPT:
    config = GPTConfig(vocab_size=VOCAB, context_length=CONTEXT, d_model=WIDTH, num_layers=LAYERS, num_heads=HEADS,
                       qkv_bias=False, tie_weights=False)
    ours = GPT(config).eval()
    names = {"att": "attn", "ff.0": "ff.linear1", "ff.2": "ff.linear2", "norm1": "ln1", "norm2": "ln2"}
    mapped = {}
    for key, value in ref.state_dict().items():
        key = key.replace("scale", "weight").replace("shift", "bias").replace("out_head", "head")
        key = key.replace("final_norm", "ln_f").replace("trf_blocks", "blocks")
        if key.startswith("blocks."):
            _, i, rest = key.split(".", 2)
            part, kind = rest.rsplit(".", 1)
            key = f"blocks.{i}.{names.get(part, part.replace('att.', 'attn.'))}.{kind}"
        mapped[key.replace("pos_emb.weight", "pos_emb.weight")] = value
    ours.load_state_dict(mapped, strict=True)
    return ours


@pytest.mark.parametrize("bias", [True, False])
def test_equals_nanogpt(bias):
    torch.manual_seed(0)
    ref = NanoGPT(bias).eval()
    ours = from_nanogpt(ref, bias)
    idx, targets = torch.randint(0, VOCAB, (3, CONTEXT)), torch.randint(0, VOCAB, (3, CONTEXT))
    with torch.no_grad():
        want_logits, want_loss = ref(idx, targets)
        got = ours(idx, targets=targets)
    torch.testing.assert_close(got.logits, want_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.loss, want_loss, atol=1e-5, rtol=0)
    assert ours.head.weight is ours.tok_emb.weight
    assert bias or all(m.bias is None for m in ours.modules() if isinstance(m, nn.Linear))


def test_same_tokens_as_nanogpt_greedy_and_sampled():
    torch.manual_seed(1)
    ref = NanoGPT(True).eval()
    ours = from_nanogpt(ref, True)
    prompt = torch.randint(0, VOCAB, (2, 5))
    # top_k=1 makes nanoGPT's sampler greedy; 40 tokens run past the context, so both crop and recompute
    assert torch.equal(generate(ours, prompt, 40, GREEDY), ref.generate(prompt, 40, top_k=1))
    torch.manual_seed(7)
    want = ref.generate(prompt, 12, temperature=0.8, top_k=10)
    torch.manual_seed(7)  # the same draws from the global generator, as nanoGPT uses it
    sampled = GenerationConfig(temperature=0.8, top_k=10, use_cache=False)
    assert torch.equal(generate(ours, prompt, 12, sampled), want)


def test_equals_the_books_gpt_model():
    torch.manual_seed(123)
    ref = BookGPTModel(BOOK_CFG).eval()
    for p in ref.parameters():
        nn.init.normal_(p, std=0.2)
    ours = from_book(ref)
    assert ours.head.weight is not ours.tok_emb.weight  # the book's out_head is its own matrix
    idx = torch.randint(0, VOCAB, (2, CONTEXT))
    with torch.no_grad():
        torch.testing.assert_close(ours(idx).logits, ref(idx), atol=1e-5, rtol=0)
    prompt = torch.randint(0, VOCAB, (1, 4))
    assert torch.equal(generate(ours, prompt, 30, GREEDY), generate_text_simple(ref, prompt, 30, CONTEXT))


def test_untied_head_has_its_own_parameters():
    tied = GPT(GPTConfig.from_preset("tiny"))
    untied = GPT(GPTConfig.from_preset("tiny", tie_weights=False))
    assert untied.num_parameters() - tied.num_parameters() == 256 * 32
    assert math.isclose(untied.head.weight.std().item(), 0.02, rel_tol=0.1)


def test_stop_on_eos():
    """Rows stop when they produce the end-of-sequence token; finished rows are filled with it."""
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny")).eval()
    prompt = torch.randint(0, 256, (2, 3))
    free = generate(model, prompt, 20, GREEDY)[:, 3:]
    eos = int(free[0, 4])  # row 0's fifth new token
    ends = [int((row == eos).nonzero()[0]) + 1 if (row == eos).any() else 20 for row in free]  # tokens until eos
    stopped = generate(model, prompt, 20, GREEDY.replace(stop_tokens=(eos,)))[:, 3:]
    assert stopped.shape[1] == max(ends)  # decoding ends once every row has finished
    for row, end in enumerate(ends):
        assert torch.equal(stopped[row, :end], free[row, :end])  # the same tokens up to and with its eos
        assert torch.all(stopped[row, end:] == eos)  # then only eos
    assert torch.equal(generate(model, prompt, 20, GREEDY.replace(stop_tokens=eos))[:, 3:], stopped)  # an int: one
