"""*Build a Large Language Model From Scratch*, chapter 3, called exactly as the book calls it.

Each class is built with the book's positional arguments, seeded as the book seeds it, and run on the book's
six-token sentence; the results are the numbers the book prints (four decimals, so 5e-5). The book's code
and attnlab's must agree for a reader to move from one to the other.
"""

import torch

from attnlab.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
    SimpleSelfAttention,
)

PRINTED = 5e-5  # the book prints four decimals

inputs = torch.tensor(
    [[0.43, 0.15, 0.89],  # Your     (x^1)
     [0.55, 0.87, 0.66],  # journey  (x^2)
     [0.57, 0.85, 0.64],  # starts   (x^3)
     [0.22, 0.58, 0.33],  # with     (x^4)
     [0.77, 0.25, 0.10],  # one      (x^5)
     [0.05, 0.80, 0.55]]  # step     (x^6)
)
d_in, d_out = inputs.shape[1], 2
batch = torch.stack((inputs, inputs), dim=0)  # (2, 6, 3), as in §3.5.3
context_length = batch.shape[1]


def close(got, printed):
    torch.testing.assert_close(got.detach(), torch.tensor(printed), atol=PRINTED, rtol=0)


def test_3_3_simplified_self_attention():
    query = inputs[1]
    attn_scores_2 = torch.empty(inputs.shape[0])
    for i, x_i in enumerate(inputs):
        attn_scores_2[i] = torch.dot(x_i, query)
    close(attn_scores_2, [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    context, weights = SimpleSelfAttention()(inputs, return_weights=True)
    close(weights[1], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    close(context[1], [0.4419, 0.6515, 0.5683])
    torch.testing.assert_close(context, torch.softmax(inputs @ inputs.T, dim=-1) @ inputs)  # the book's last line


def test_3_4_self_attention_v1():
    torch.manual_seed(123)
    sa_v1 = SelfAttentionV1(d_in, d_out)
    close(sa_v1(inputs), [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                          [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])


def test_3_4_self_attention_v2():
    torch.manual_seed(789)
    sa_v2 = SelfAttentionV2(d_in, d_out)
    close(sa_v2(inputs), [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                          [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])


def test_3_5_causal_attention():
    torch.manual_seed(123)
    ca = CausalAttention(d_in, d_out, context_length, 0.0)
    context_vecs = ca(batch)
    assert context_vecs.shape == (2, 6, 2)
    close(context_vecs[0], [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                            [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])


def test_3_6_1_multi_head_attention_wrapper():
    torch.manual_seed(123)
    mha = MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2)
    context_vecs = mha(batch)
    assert context_vecs.shape == (2, 6, 4)
    close(context_vecs[0], [[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257],
                            [-0.6300, -0.0632, 0.6202, 0.3860], [-0.5675, -0.0843, 0.5478, 0.3589],
                            [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]])


def test_3_6_2_multi_head_attention_with_weight_splits():
    torch.manual_seed(123)
    mha = MultiHeadAttention(d_in, d_out, context_length, 0.0, num_heads=2)
    context_vecs = mha(batch)
    assert context_vecs.shape == (2, 6, 2)
    close(context_vecs[0], [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
                            [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]])


def test_every_positional_call_of_the_book():
    """The book passes (d_in, d_out, context_length, dropout, num_heads, qkv_bias) by position."""
    MultiHeadAttention(3, 2, 6, 0.0, 2)
    MultiHeadAttention(3, 2, 6, 0.0, 2, False)
    MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, False)
    CausalAttention(3, 2, 6, 0.0, False)
    SelfAttentionV2(3, 2, False)
    SelfAttentionV1(3, 2)


def test_chapter_4_keyword_call():
    """Chapter 4's TransformerBlock builds the attention with keywords from its config dict."""
    cfg = {"emb_dim": 768, "context_length": 1024, "n_heads": 12, "drop_rate": 0.1, "qkv_bias": False}
    att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                             num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
    assert att.head_dim == 64 and att.W_query.bias is None and att.is_causal
    assert att(torch.randn(2, 4, 768)).shape == (2, 4, 768)


def test_the_book_masks_after_the_softmax_and_renormalises_we_mask_before():
    """§3.5.1: softmax, zero the future, divide by the row sums — equal to -inf before the softmax (§3.5.2)."""
    torch.manual_seed(123)
    ca = CausalAttention(d_in, d_out, context_length, 0.0)
    _, weights = ca(inputs, return_weights=True)
    q, k = ca.W_query(inputs), ca.W_key(inputs)
    simple = torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1)
    masked_simple = simple * torch.tril(torch.ones(context_length, context_length))
    torch.testing.assert_close(weights, masked_simple / masked_simple.sum(dim=-1, keepdim=True), atol=1e-6, rtol=0)
