"""How big is the cache: the arithmetic against the book's figures, and against the bytes a real cache holds."""

import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.inspect.cache_size import table_rows
from attnlab.models import ModernDecoder, ModernDecoderConfig
from attnlab.models.caches.size import KeysAndValues, Latent, State, bytes_per_token, cache_bytes

WINDOWED = dict(vocab_size=50, context_length=32, d_model=32, num_layers=3, num_heads=4, num_kv_heads=2,
                sliding_window=4, layer_types=["sliding_attention", "full_attention", "sliding_attention"])


def test_llama_3_8b_at_32k_tokens_is_the_books_17_18_and_4_29_gb():
    """Build a Large Language Model From Scratch's GQA chapter: 32 layers of 32 heads × 128, bf16, batch 1."""
    rows = {label: total for label, _, _, _, total in table_rows(32768)}
    assert rows["Llama-3-8B (MHA)"] == 2 * 32 * 32 * 128 * 2 * 32768 == 17_179_869_184
    assert rows["Llama-3-8B"] == 2 * 32 * 8 * 128 * 2 * 32768 == 4_294_967_296


def test_each_kind_of_layer_by_hand():
    assert KeysAndValues(2, 8, 8, window=4).nbytes(10, torch.float32) == 4 * 2 * 16 * 4
    assert KeysAndValues(2, 8, 8, window=4).nbytes(3, torch.float32) == 3 * 2 * 16 * 4
    assert Latent(512, 64).nbytes(10, torch.bfloat16) == 10 * 576 * 2
    assert Latent(512, 64, index_dim=128).nbytes(10, torch.bfloat16) == 10 * 704 * 2
    state = State(heads=4, key_dim=8, value_dim=16, conv_channels=48, conv_kernel=4)
    assert state.nbytes(1, torch.bfloat16) == state.nbytes(10_000, torch.bfloat16) == 4 * 8 * 16 * 4 + 48 * 3 * 2
    layers = [KeysAndValues(2, 8, 8), KeysAndValues(2, 8, 8, window=4), Latent(512, 64), state]
    assert bytes_per_token(layers, torch.float32) == 2 * 16 * 4 + 576 * 4


@pytest.mark.parametrize("tokens", [3, 9])
def test_the_formula_is_what_a_filled_cache_holds(tokens):
    torch.manual_seed(0)
    config = ModernDecoderConfig(**WINDOWED)
    model = ModernDecoder(config).eval()
    cache = model.new_cache(1)
    with torch.no_grad():
        model(torch.randint(0, 50, (1, tokens)), kv_cache=cache)
    assert cache.length == tokens
    assert cache.filled_nbytes() == cache_bytes(config.cache_sizes(), tokens, torch.float32)
    assert cache.filled_nbytes() == config.cache_bytes(tokens, dtype=torch.float32)
    assert [s.window for s in config.cache_sizes()] == [4, None, 4]


def test_bad_lengths_are_refused_by_name():
    with pytest.raises(ValueError, match="tokens must be an integer >= 0, got -1"):
        ModernDecoderConfig(**WINDOWED).cache_bytes(-1)


def test_the_command_prints_the_table_and_draws_the_plot(tmp_path):
    result = CliRunner().invoke(main, ["cache-size", "--tokens", "32768", "--plot", str(tmp_path / "cache.png")],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "17.18 GB" in result.output and "4.29 GB" in result.output
    table = [line for line in result.output.splitlines() if not line.startswith("wrote ")]  # a path is as long as it is
    assert max(len(line) for line in table) <= 80
    assert (tmp_path / "cache.png").stat().st_size > 10_000


def test_the_command_refuses_a_plot_it_cannot_write(tmp_path):
    result = CliRunner().invoke(main, ["cache-size", "--plot", str(tmp_path / "cache.gif")])
    assert result.exit_code == 2 and "cache.gif" in result.output


BEGIN, END = "<!-- cache-size table: begin -->", "<!-- cache-size table: end -->"


@pytest.mark.parametrize("lang,page", [("en", "modern.md"), ("zh", "zh/modern.md")])
def test_the_docs_table_is_the_codes(lang, page):
    from pathlib import Path

    from attnlab.i18n import language, set_language
    from attnlab.inspect.cache_size import markdown_table

    text = (Path(__file__).resolve().parents[2] / "docs" / page).read_text(encoding="utf-8")
    shown = text.split(BEGIN)[1].split(END)[0].strip()
    before = language()
    set_language(lang)
    try:
        expected = markdown_table(32768)
    finally:
        set_language(before)
    assert shown == expected, f"docs/{page} between its cache-size markers should read:\n{expected}"
