"""attnlab.numpy imports and runs in a process where ``import torch`` fails."""

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
import numpy as np
from attnlab import numpy as anp
try:
    import torch  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("torch was importable")
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, 5, 4)).astype(np.float32) for _ in range(3))
a = anp.scaled_dot_product_attention(q, k, v, is_causal=True, backend="math")
b = anp.scaled_dot_product_attention(q, k, v, is_causal=True, backend="chunked")
assert np.abs(a - b).max() < 1e-6
p = {n: rng.standard_normal((4, 4)).astype(np.float32) for n in ("W_query.weight", "W_key.weight", "W_value.weight",
                                                                  "out_proj.weight")}
out = anp.multi_head_attention(rng.standard_normal((2, 3, 4)).astype(np.float32), p, 2)
assert out.shape == (2, 3, 4)
# the whole encoder: embeddings, post-LN blocks with LayerNorm, GELU feed-forward, padding
d, v = 8, 20
enc = {"embeddings.word_embeddings.weight": rng.standard_normal((v, d)), "embeddings.position_embeddings.weight":
       rng.standard_normal((16, d)), "embeddings.ln.weight": np.ones(d), "embeddings.ln.bias": np.zeros(d)}
for i in range(2):
    for name, shape in (("attn.W_query", (d, d)), ("attn.W_key", (d, d)), ("attn.W_value", (d, d)),
                        ("attn.out_proj", (d, d)), ("ff.linear1", (2 * d, d)), ("ff.linear2", (d, 2 * d))):
        enc[f"blocks.{i}.{name}.weight"] = rng.standard_normal(shape) * 0.3
        enc[f"blocks.{i}.{name}.bias"] = rng.standard_normal(shape[0]) * 0.1
    for ln in ("ln1", "ln2"):
        enc[f"blocks.{i}.{ln}.weight"], enc[f"blocks.{i}.{ln}.bias"] = np.ones(d), np.zeros(d)
params = anp.state_dict_to_arrays(enc)
ids, mask = np.array([[1, 5, 7, 0], [2, 3, 4, 9]]), np.array([[1, 1, 1, 0], [1, 1, 1, 1]])
hidden = anp.encoder_forward(ids, params, 2, mask)
assert hidden.shape == (2, 4, d) and hidden.dtype == np.float32 and np.isfinite(hidden).all()
np.testing.assert_allclose(hidden.mean(-1), 0.0, atol=1e-5)  # every row leaves a LayerNorm with β = 0
assert anp.sinusoidal_table(4, 8).shape == (4, 8)
assert "torch" not in {m.split(".")[0] for m, mod in sys.modules.items() if mod is not None}
print("ok")
"""


def test_numpy_twin_runs_without_torch():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
