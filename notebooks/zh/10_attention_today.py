# %% [markdown]
# # 10. 今天的注意力：MHA → GQA → MLA → 线性注意力
#
# 书中的多头注意力（multi-head attention）对读过的每个词元（token），都保留每个头的键和值：这就是 KV 缓存，文本一长，
# 占满内存的是它，而不是权重。今天的开源模型换了注意的方式，保留得更少。下面每一步都回答同一个问题——*一层为每个词元
# 保留什么？*——给出四种答案，每种都有它的算式，并实际量出字节数：
#
# 1. **MHA**（多头注意力，书中的）：每个词元 `2 · H · d_head` 个数。
# 2. **GQA**（grouped-query attention，Llama 3、Qwen）：各个查询（query）头共享 `H_kv` 个键/值头。
# 3. **MLA**（多头潜在注意力，DeepSeek-V2/V3、Kimi）：每个词元一个小小的潜向量，所有头共用。
# 4. **线性注意力**（门控 delta 规则，Qwen3-Next 的 Gated DeltaNet）：一个在任何长度下大小都相同的状态。

# %%
# %matplotlib inline
import torch

from attnlab.attention import AttentionSpec, MultiHeadAttention
from attnlab.attention.delta_rule import delta_rule_chunked, delta_rule_recurrent, l2_normalise
from attnlab.attention.latent import LatentAttentionSpec
from attnlab.inspect.cache_size import markdown_table
from attnlab.models import ModernDecoder, ModernDecoderConfig
from attnlab.viz.cache_size_figure import cache_size_figure

torch.set_grad_enabled(False)  # 只做前向计算
torch.set_printoptions(precision=4, sci_mode=False)
torch.manual_seed(0)
x = torch.randn(1, 6, 32)  # (B, T, d_model)：六个宽 32 的词元

# %% [markdown]
# ## 1. MHA：每个头保留自己的键和值
#
# 一个 2 层、4 个头、每头 8 维的解码器：每个词元在每层的缓存里留下 `2（键和值）· 4 个头 · 8 = 64` 个数。我们用 6 个词元
# 填满一个真实的缓存，数一数它的字节（float32：每个数 4 字节）。

# %%
mha_config = ModernDecoderConfig(vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4)
mha_model = ModernDecoder(mha_config).eval()
cache = mha_model.new_cache(1)
mha_model(torch.randint(0, 50, (1, 6)), kv_cache=cache)
print(cache[0].keys.shape)  # (B, H_kv, 位置, d_head)
print(cache.filled_nbytes(), "=", 2, "layers ·", 6, "tokens ·", 2 * 4 * 8, "numbers · 4 bytes")
assert cache.filled_nbytes() == 2 * 6 * (2 * 4 * 8) * 4 == mha_config.cache_bytes(6, dtype=torch.float32)

# %% [markdown]
# ## 2. GQA：查询头共享键/值头
#
# `num_kv_heads = 1` 时 4 个查询头都读同一个键/值头（多查询注意力），等于 2 时每两个头共享一个。查询的数目不变，
# 变小的只有缓存。共享等于把每个键/值头为它那一组重复几遍，我们正是这样核对算式的：GQA 等于在重复后的键和值上做
# 普通的注意力。

# %%
spec = AttentionSpec(32, 32, num_heads=4, num_kv_heads=2, out_bias=False)
gqa = MultiHeadAttention.from_spec(spec).eval()
out, weights = gqa(x, return_weights=True)
print(gqa.W_key.weight.shape, "← 2 key heads of 8, not 4")
q = gqa.W_query(x).view(1, 6, 4, 8).transpose(1, 2)                          # (B, 4, T, 8)
k = gqa.W_key(x).view(1, 6, 2, 8).transpose(1, 2).repeat_interleave(2, 1)   # 每个键头被 2 个查询头读
scores = (q @ k.transpose(-2, -1)) / 8**0.5
by_hand = torch.softmax(scores + torch.full((6, 6), float("-inf")).triu(1), dim=-1)
print(f"max |GQA − repeated MHA| = {(weights - by_hand).abs().max():.1e}")
assert torch.allclose(weights, by_hand, atol=1e-6)
for kv_heads in (4, 2, 1):
    c = ModernDecoderConfig(vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4,
                            num_kv_heads=kv_heads)
    print(f"{kv_heads} key/value heads: {c.cache_bytes_per_token(torch.float32)} bytes a token")

# %% [markdown]
# ## 3. MLA：每个词元一个潜向量，所有头共用
#
# DeepSeek 把每个词元压缩成一个 `kv_lora_rank` 个数的潜向量 `c_kv`；每个头的键和值都是它的线性映射（`kv_b_proj`）。
# 位置信息无法穿过这次压缩，所以旁边还带着一个所有头共享的小 rope 键。缓存每个词元只保留 `kv_lora_rank +
# qk_rope_head_dim` 个数，与头数无关。教科书的写法把每个潜向量上投影成键和值；*吸收*的写法把 `W_UK` 并入查询、
# `W_UV` 并入输出，直接在潜向量上做注意力。两者算出的数相同：

# %%
mla_spec = LatentAttentionSpec(d_model=32, num_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                               v_head_dim=8, q_lora_rank=24)
mla = mla_spec.build().eval()
q_nope, q_rope = mla.queries(x, mla.query_latent(x))   # (B, H, T, 8) 和 (B, H, T, 4)
c_kv, k_rope = mla.latents(x)                          # (B, T, 16) 和 (B, T, 4)：缓存只保留这些
textbook, _ = mla.naive(q_nope, q_rope, c_kv, k_rope, None, True)
absorbed, _ = mla.absorbed(q_nope, q_rope, c_kv, k_rope, None, True)
print(f"cache per token: {sum(mla_spec.cache_widths)} numbers (MHA over the same heads: {2 * 4 * 8})")
print(f"max |textbook − absorbed| = {(textbook - absorbed).abs().max():.1e}")
assert torch.allclose(textbook, absorbed, atol=1e-5)

# %% [markdown]
# ## 4. 线性注意力：用一个状态代替缓存
#
# 门控 delta 规则为每个头保留一个矩阵 `S`。每个词元先让它按 `α`（门）衰减，再把 `S` 对键 `k` 记得的内容朝值 `v`
# 移动一步 `β`，然后用查询读出：
#
# $$S_t = \alpha_t S_{t-1}(I - \beta_t k_t k_t^\top) + \beta_t v_t k_t^\top, \qquad o_t = S_t q_t$$
#
# 一个词元一个词元地写，它就是一个循环；分块的写法按词元块算出同样的结果（用于训练，以及一次读入整个提示的
# prefill）。无论多长，状态都是每个头 `d_k × d_v` 个数。

# %%
B, H, T, d = 1, 2, 10, 4
q, k = l2_normalise(torch.randn(B, H, T, d)), l2_normalise(torch.randn(B, H, T, d))
v = torch.randn(B, H, T, d)
log_alpha = -torch.rand(B, H, T)   # log α ≤ 0：每一步忘掉多少
beta = torch.rand(B, H, T)         # 步长，在 (0, 1) 之内
o_loop, state = delta_rule_recurrent(q, k, v, log_alpha, beta)
o_chunks, state_chunks = delta_rule_chunked(q, k, v, log_alpha, beta, chunk_size=4)
print(state.shape, "← the whole memory after", T, "tokens")
print(f"max |loop − chunks| = {(o_loop - o_chunks).abs().max():.1e}")
assert torch.allclose(o_loop, o_chunks, atol=1e-5) and torch.allclose(state, state_chunks, atol=1e-5)

# %% [markdown]
# ## 真实模型的账单
#
# 同样的算式用在已发布的配置上（一个序列，bf16），取自 attnlab 对它们的预设：前两行就是书中 32k 词元时的 17.18 GB
# 和 4.29 GB。线性注意力与完整注意力的混合模型付出一个固定的状态，以及四分之一的每词元代价。

# %%
print(markdown_table(32768))
cache_size_figure(max_tokens=32768)

# %% [markdown]
# ## 练习
#
# Llama-3-8B（32 层，8 个键/值头、每头 128 维）对一个 32,768 词元的序列，用 bf16（每个数 2 字节）要保留多少字节的
# 缓存？从这些形状算出来，赋给 `answer`（一个整数）。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
answer = 32 * 32768 * 2 * 8 * 128 * 2  # 层数 · 词元数 ·（键和值）· 键值头数 · d_head · 字节

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = ModernDecoderConfig.from_preset("llama-3-8b").cache_bytes(32768, dtype=torch.bfloat16)
assert isinstance(answer, int), f"an integer expected, got {type(answer).__name__}"
assert answer == expected, f"{answer:,} bytes; expected {expected:,}"
print(f"✓ {answer:,} bytes = {answer / 1e9:.2f} GB")
