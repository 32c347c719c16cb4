from click.testing import CliRunner

from attnlab.cli import main
from attnlab.generation.translation import translate


def test_one_translation_per_line(dates_run, one_thread):
    out, model, vocab = dates_run
    texts = ["Friday, March 5, 2021", "5 mars 2021", "2021年3月5日"]
    result = CliRunner().invoke(main, ["translate", "--checkpoint", str(out), *texts])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [t.target for t in translate(model, vocab, texts)]
    beam = CliRunner().invoke(main, ["translate", "--checkpoint", str(out), "--beam", "3", *texts])
    assert beam.stdout.splitlines() == [t.target for t in translate(model, vocab, texts, beam=3)]


def test_heatmap_of_the_first_text(dates_run, tmp_path, one_thread):
    out, _, _ = dates_run
    result = CliRunner().invoke(main, ["translate", "--checkpoint", str(out), "5 mars 2021", "2021年3月5日",
                                       "--heatmap", str(tmp_path / "a.png"), "--layer", "0", "--head", "1"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_view_a_translation_in_three_modes(dates_run, tmp_path, one_thread):
    import json
    import re

    from attnlab.viz.webfont import covered

    out, _, _ = dates_run
    result = CliRunner().invoke(main, ["view", "2021年3月5日", "--checkpoint", str(out), "--mode", "encoder",
                                       "-o", str(tmp_path / "v.html")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "v.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="attnlab-data">(.*?)</script>', page, re.S).group(1))
    assert [m["name"] for m in data["modes"]] == ["encoder", "decoder", "cross"] and data["mode"] == 0
    assert data["modes"][0]["qtokens"] == list("2021年3月5日")
    css = " ".join(re.findall(r"@font-face \{.*?\}", page))
    assert covered("".join("".join(m["qtokens"] + m["ktokens"]) for m in data["modes"]), css)  # each glyph inside
