# %% [markdown]
# # 10. Attention today: MHA → GQA → MLA → linear attention
#
# The book's multi-head attention keeps, for every token it has read, every head's key and value: that is the KV
# cache, and for long texts it, not the weights, fills the memory. Today's open models attend in ways that keep
# less. Each step below is the same question, *what does a layer keep for each token?*, answered four ways, with
# its arithmetic and the bytes measured:
#
# 1. **MHA** (multi-head attention, the book's): `2 · H · d_head` numbers a token.
# 2. **GQA** (grouped-query attention, Llama 3, Qwen): query heads share `H_kv` key/value heads.
# 3. **MLA** (multi-head latent attention, DeepSeek-V2/V3, Kimi): one small latent a token, for all heads.
# 4. **Linear attention** (the gated delta rule, Qwen3-Next's Gated DeltaNet): a state of the same size at every
#    length.

# %%
# %matplotlib inline
import torch

from attnlab.attention import AttentionSpec, MultiHeadAttention
from attnlab.attention.delta_rule import delta_rule_chunked, delta_rule_recurrent, l2_normalise
from attnlab.attention.latent import LatentAttentionSpec
from attnlab.inspect.cache_size import markdown_table
from attnlab.models import ModernDecoder, ModernDecoderConfig
from attnlab.viz.cache_size_figure import cache_size_figure

torch.set_grad_enabled(False)  # forward passes only
torch.set_printoptions(precision=4, sci_mode=False)
torch.manual_seed(0)
x = torch.randn(1, 6, 32)  # (B, T, d_model): six tokens of width 32

# %% [markdown]
# ## 1. MHA: every head keeps its own key and value
#
# A decoder of 2 layers, 4 heads of 8: each token leaves `2 (key and value) · 4 heads · 8 = 64` numbers in each
# layer's cache. We fill a real cache with 6 tokens and count its bytes (float32: 4 bytes a number).

# %%
mha_config = ModernDecoderConfig(vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4)
mha_model = ModernDecoder(mha_config).eval()
cache = mha_model.new_cache(1)
mha_model(torch.randint(0, 50, (1, 6)), kv_cache=cache)
print(cache[0].keys.shape)  # (B, H_kv, positions, d_head)
print(cache.filled_nbytes(), "=", 2, "layers ·", 6, "tokens ·", 2 * 4 * 8, "numbers · 4 bytes")
assert cache.filled_nbytes() == 2 * 6 * (2 * 4 * 8) * 4 == mha_config.cache_bytes(6, dtype=torch.float32)

# %% [markdown]
# ## 2. GQA: query heads share key/value heads
#
# With `num_kv_heads = 1` all 4 query heads read one key/value head (multi-query attention), with 2 each pair shares
# one. The queries stay as many; only the cache shrinks. Sharing is the same as repeating each key/value head for
# its group, which is how the arithmetic is checked: GQA equals plain attention over the repeated keys and values.

# %%
spec = AttentionSpec(32, 32, num_heads=4, num_kv_heads=2, out_bias=False)
gqa = MultiHeadAttention.from_spec(spec).eval()
out, weights = gqa(x, return_weights=True)
print(gqa.W_key.weight.shape, "← 2 key heads of 8, not 4")
q = gqa.W_query(x).view(1, 6, 4, 8).transpose(1, 2)                          # (B, 4, T, 8)
k = gqa.W_key(x).view(1, 6, 2, 8).transpose(1, 2).repeat_interleave(2, 1)   # each key head read by 2 query heads
scores = (q @ k.transpose(-2, -1)) / 8**0.5
by_hand = torch.softmax(scores + torch.full((6, 6), float("-inf")).triu(1), dim=-1)
print(f"max |GQA − repeated MHA| = {(weights - by_hand).abs().max():.1e}")
assert torch.allclose(weights, by_hand, atol=1e-6)
for kv_heads in (4, 2, 1):
    c = ModernDecoderConfig(vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4,
                            num_kv_heads=kv_heads)
    print(f"{kv_heads} key/value heads: {c.cache_bytes_per_token(torch.float32)} bytes a token")

# %% [markdown]
# ## 3. MLA: one latent a token, for every head
#
# DeepSeek compresses each token into a latent `c_kv` of `kv_lora_rank` numbers; every head's key and value are
# linear maps of it (`kv_b_proj`). Positions cannot pass through that compression, so a small rope key, shared by
# all heads, travels beside it. The cache keeps only `kv_lora_rank + qk_rope_head_dim` numbers a token, whatever the
# heads. The textbook form up-projects every latent into keys and values; the *absorbed* form folds `W_UK` into the
# query and `W_UV` into the output, and attends over the latents themselves. They are the same numbers:

# %%
mla_spec = LatentAttentionSpec(d_model=32, num_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                               v_head_dim=8, q_lora_rank=24)
mla = mla_spec.build().eval()
q_nope, q_rope = mla.queries(x, mla.query_latent(x))   # (B, H, T, 8) and (B, H, T, 4)
c_kv, k_rope = mla.latents(x)                          # (B, T, 16) and (B, T, 4): all the cache keeps
textbook, _ = mla.naive(q_nope, q_rope, c_kv, k_rope, None, True)
absorbed, _ = mla.absorbed(q_nope, q_rope, c_kv, k_rope, None, True)
print(f"cache per token: {sum(mla_spec.cache_widths)} numbers (MHA over the same heads: {2 * 4 * 8})")
print(f"max |textbook − absorbed| = {(textbook - absorbed).abs().max():.1e}")
assert torch.allclose(textbook, absorbed, atol=1e-5)

# %% [markdown]
# ## 4. Linear attention: a state instead of a cache
#
# The gated delta rule keeps one matrix `S` per head. Each token first lets it fade by `α` (the gate), then moves
# what `S` recalls for the key `k` a step `β` towards the value `v`, and reads it with the query:
#
# $$S_t = \alpha_t S_{t-1}(I - \beta_t k_t k_t^\top) + \beta_t v_t k_t^\top, \qquad o_t = S_t q_t$$
#
# Written one token at a time it is a loop; the chunked form computes the same in blocks of tokens (for training
# and prefill). Whatever the length, the state is `d_k × d_v` numbers a head.

# %%
B, H, T, d = 1, 2, 10, 4
q, k = l2_normalise(torch.randn(B, H, T, d)), l2_normalise(torch.randn(B, H, T, d))
v = torch.randn(B, H, T, d)
log_alpha = -torch.rand(B, H, T)   # log α ≤ 0: how much each step forgets
beta = torch.rand(B, H, T)         # the step size, in (0, 1)
o_loop, state = delta_rule_recurrent(q, k, v, log_alpha, beta)
o_chunks, state_chunks = delta_rule_chunked(q, k, v, log_alpha, beta, chunk_size=4)
print(state.shape, "← the whole memory after", T, "tokens")
print(f"max |loop − chunks| = {(o_loop - o_chunks).abs().max():.1e}")
assert torch.allclose(o_loop, o_chunks, atol=1e-5) and torch.allclose(state, state_chunks, atol=1e-5)

# %% [markdown]
# ## The bill, for real models
#
# The same arithmetic for published configs (one sequence, bf16), from attnlab's presets of them: the first two rows
# are the book's 17.18 GB and 4.29 GB at 32k tokens. A hybrid of linear and full attention pays a fixed state and a
# quarter of the per-token cost.

# %%
print(markdown_table(32768))
cache_size_figure(max_tokens=32768)

# %% [markdown]
# ## Exercise
#
# How many bytes of cache does Llama-3-8B (32 layers, 8 key/value heads of 128) keep for one sequence of 32,768
# tokens in bf16 (2 bytes a number)? Compute it from the shapes and assign it to `answer` (an integer).

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
answer = 32 * 32768 * 2 * 8 * 128 * 2  # layers · tokens · (key and value) · kv heads · d_head · bytes

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = ModernDecoderConfig.from_preset("llama-3-8b").cache_bytes(32768, dtype=torch.bfloat16)
assert isinstance(answer, int), f"an integer expected, got {type(answer).__name__}"
assert answer == expected, f"{answer:,} bytes; expected {expected:,}"
print(f"✓ {answer:,} bytes = {answer / 1e9:.2f} GB")
