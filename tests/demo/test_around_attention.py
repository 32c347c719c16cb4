import torch
from rich.console import Console

from attnlab.demo import Demo
from attnlab.demo.around_attention import around_attention_step


def test_demo_step_prints_sizes_and_similarities(tmp_path):
    console = Console(record=True, width=200)
    with torch.no_grad():
        around_attention_step(Demo(console, 123, tmp_path))
    text = console.export_text()
    assert "124,439,808" in text and "1,557,611,200" in text
    row = next(line for line in text.splitlines() if "0: To be, or not to be" in line)
    sims = [float(v) for v in row.split("│")[2:6]]
    assert sims[0] == 1.0 and sims[1] > 0.3 > sims[2]  # the paraphrase is closer than the cat
    assert "goes to [CLS]/[SEP]" in text
