"""Every command against bad arguments: a non-zero exit, one clear line, no traceback, nothing half-written.

Each case is one row of ``CASES`` (see tests/bad_inputs.py for the check every row passes); bad files handed over
are in test_bad_files.py. Also here: NaN and infinity for every float option, a closed pipe, and Ctrl-C from the
first moment.
"""

import os
import select
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import click
import pytest

from attnlab.cli import COMMANDS, main
from attnlab.cli.params import SEED
from bad_inputs import run_case, run_case_in_chinese, undocumented

TRAIN = ["train", "--data", "{dir}/corpus.txt", "--out", "{dir}/new"]
SAMPLE = ["sample", "--checkpoint", "{dir}/run", "First"]
LONG = " ".join(["w"] * 70)
S2S_TRAIN = ["train-seq2seq", "--task", "numbers", "--out", "{dir}/new"]
TRANSLATE = ["translate", "--checkpoint", "{dir}/s2s"]
PATCH = ["heads", "patch", "prompt", "--model", "{dir}/run", "--clean", "First", "--corrupt", "Secon", "--right", "t",
         "--wrong", "s", "--out", "{dir}/patch"]

# (id, argv, exit status, words the error line must hold, paths that must not exist afterwards)
CASES = [
    # train: the corpus
    ("train-data-shorter-than-one-block", ["train", "--data", "{dir}/short.txt", "--out", "{dir}/new",
                                           "--context-length", "200"], 1,
     ["data:", "train split", "context_length + 1 = 201"], ["new"]),
    # train: where it writes
    ("train-out-unwritable", [*TRAIN[:3], "--out", "/proc/attnlab-out"], 1, ["out:", "/proc/attnlab-out"], []),
    ("train-out-is-a-file", [*TRAIN[:3], "--out", "{dir}/plain.txt"], 1, ["out:", "plain.txt"], []),
    ("train-out-holds-a-run", [*TRAIN[:3], "--out", "{dir}/run"], 1, ["out:", "--resume", "--overwrite"], []),
    ("train-resume-nothing", [*TRAIN[:3], "--out", "{dir}/new", "--resume"], 1, ["resume:", "new"], ["new"]),
    # train: numbers and names
    ("train-max-iters-zero", [*TRAIN, "--max-iters", "0"], 1, ["max_iters", "positive", "got 0"], ["new"]),
    ("train-max-iters-not-a-number", [*TRAIN, "--max-iters", "abc"], 2, ["--max-iters", "'abc'", "integer"],
     ["new"]),
    ("train-batch-size-negative", [*TRAIN, "--batch-size", "-2"], 1, ["batch_size", "positive", "-2"], ["new"]),
    ("train-lr-decay-iters-zero", [*TRAIN, "--lr-decay-iters", "0"], 1, ["lr_decay_iters", "positive", "got 0"],
     ["new"]),
    ("train-learning-rate-negative", [*TRAIN, "--lr", "-1"], 1, ["learning_rate", "positive", "-1.0"], ["new"]),
    ("train-val-fraction-out-of-range", [*TRAIN, "--val-fraction", "2"], 1, ["val_fraction", "(0, 1)", "2.0"],
     ["new"]),
    ("train-time-budget-zero", [*TRAIN, "--time-budget", "0"], 1, ["time_budget", "positive", "0.0"], ["new"]),
    ("train-dropout-out-of-range", [*TRAIN, "--dropout", "1.5"], 1, ["dropout", "[0, 1)", "1.5"], ["new"]),
    ("train-heads-do-not-divide", [*TRAIN, "--num-heads", "3"], 1, ["num_heads=3", "d_model=128"], ["new"]),
    ("train-preset-unknown", [*TRAIN, "--preset", "nope"], 1, ["preset", "'nope'", "tiny"], ["new"]),
    ("train-tokenizer-unknown", [*TRAIN, "--tokenizer", "nope"], 2, ["--tokenizer", "'nope'", "char", "bpe"],
     ["new"]),
    ("train-bpe-vocabulary-too-small", [*TRAIN, "--tokenizer", "bpe", "--vocab-size", "10"], 1,
     ["vocab_size", "256", "got 10"], ["new"]),
    ("train-arch-unknown", [*TRAIN, "--arch", "nope"], 2, ["--arch", "'nope'", "gpt", "modern"], ["new"]),
    ("train-dtype-unknown", [*TRAIN, "--dtype", "fp8"], 2, ["--dtype", "'fp8'", "fp32", "bf16"], ["new"]),
    ("train-fp16-on-a-cpu", [*TRAIN, "--dtype", "fp16"], 1, ["dtype", "'fp16'", "CUDA", "bf16"], ["new"]),
    ("train-device-absent", [*TRAIN, "--device", "cuda"], 1, ["device", "'cuda'", "not available"], ["new"]),
    # train: the layout of the processes (outside torchrun: one process)
    ("train-parallel-unknown", [*TRAIN, "--parallel", "pipeline"], 2, ["--parallel", "'pipeline'", "fsdp+tp"],
     ["new"]),
    ("train-parallel-tp-size-not-every-process", [*TRAIN, "--parallel", "tp", "--tp-size", "2"], 1,
     ["tp_size", "all 1 processes", "--tp-size 2", "fsdp+tp"], ["new"]),
    ("train-parallel-mesh-cannot-be-built", [*TRAIN, "--parallel", "fsdp+tp", "--tp-size", "3"], 1,
     ["tp_size", "mesh of 1 processes", "--tp-size 3"], ["new"]),
    ("train-parallel-tp-size-without-tp", [*TRAIN, "--parallel", "fsdp", "--tp-size", "2"], 1,
     ["tp_size", "--parallel fsdp", "got 2"], ["new"]),
    ("train-parallel-tp-size-zero", [*TRAIN, "--parallel", "fsdp+tp", "--tp-size", "0"], 1,
     ["tp_size", "positive", "got 0"], ["new"]),
    ("train-resume-sharded-into-other-shapes", ["train", "--data", "{dir}/corpus.txt", "--out", "{dir}/sharded",
                                                "--resume", "--d-model", "64", "--max-iters", "6"], 1,
     ["resume:", "tok_emb.weight", "(", "64)", "d_model: checkpoint 32, asked 64"], []),
    # export
    ("export-half-written", ["export", "--checkpoint", "{dir}/sharded_half_written", "--out", "{dir}/x.safetensors"],
     1, ["sharded_half_written", ".metadata", "not written to the end"], ["x.safetensors"]),
    ("export-out-unwritable", ["export", "--checkpoint", "{dir}/run", "--out", "/proc/m.safetensors"], 1,
     ["/proc/m.safetensors"], []),
    ("export-not-a-checkpoint", ["export", "--checkpoint", "{dir}/emptydir", "--out", "{dir}/x.safetensors"], 1,
     ["emptydir", "no checkpoint"], ["x.safetensors"]),
    ("train-device-unknown", [*TRAIN, "--device", "banana"], 1, ["device", "'banana'", "cuda:N"], ["new"]),
    # train: the config file
    # sample
    ("sample-checkpoint-missing", ["sample", "--checkpoint", "{dir}/nope", "To"], 2,
     ["--checkpoint", "nope", "does not exist"], []),
    ("sample-checkpoint-is-a-file", ["sample", "--checkpoint", "{dir}/plain.txt", "To"], 1,
     ["checkpoint", "plain.txt", "not a safetensors file"], []),
    ("sample-safetensors-without-metadata", ["sample", "--checkpoint",
                                             "{dir}/run/checkpoints/step_0000004/model.safetensors", "First"], 1,
     ["model.safetensors", "without attnlab's metadata", "attnlab export"], []),
    ("sample-sharded-checkpoint", ["sample", "--checkpoint", "{dir}/sharded", "First"], 1,
     ["sharded", "1 processes", "attnlab export --checkpoint"], []),
    ("sample-no-model-given", ["sample", "To"], 2, ["--checkpoint", "--model", "exactly one"], []),
    ("sample-two-models-given", ["sample", "--checkpoint", "{dir}/run", "--model", "{dir}/run", "To"], 2,
     ["--checkpoint", "--model", "exactly one"], []),
    ("sample-temperature-negative", [*SAMPLE, "--temperature", "-1"], 1, ["temperature", ">= 0", "-1.0"], []),
    ("sample-temperature-not-a-number", [*SAMPLE, "--temperature", "hot"], 2, ["--temperature", "'hot'", "float"],
     []),
    ("sample-top-k-zero", [*SAMPLE, "--top-k", "0"], 1, ["top_k", ">= 1", "got 0"], []),
    ("sample-top-p-above-one", [*SAMPLE, "--top-p", "1.5"], 1, ["top_p", "(0, 1]", "1.5"], []),
    ("sample-max-new-tokens-negative", [*SAMPLE, "--max-new-tokens", "-1"], 2, ["--max-new-tokens", "-1", ">=0"],
     []),
    ("sample-prompt-empty", ["sample", "--checkpoint", "{dir}/run", ""], 1, ["prompt", "empty"], []),
    ("sample-prompts-one-empty", ["sample", "--checkpoint", "{dir}/run", "First", ""], 1,
     ["prompts[1]", "empty prompt"], []),
    ("sample-model-prompts-one-empty", ["sample", "--model", "{dir}/hf_mistral", "To be", "", "or"], 1,
     ["prompts[1]", "empty prompt", "at least one token"], []),
    ("sample-sink-tokens-on-a-learned-position-table", [*SAMPLE, "--sink-tokens", "4", "--sliding-window", "8"], 1,
     ["sink cache", "rotary positions", "learned position table"], []),
    ("sample-sliding-window-without-sink-tokens", [*SAMPLE, "--sliding-window", "8"], 1,
     ["--sliding-window 8", "window of a sink cache", "give --sink-tokens"], []),
    ("sample-int8-cache-and-compile", [*SAMPLE, "--int8-cache", "--compile"], 1,
     ["--int8-cache, --compile", "a cache of its own", "give one of them"], []),
    ("sample-prompts-compiled", ["sample", "--checkpoint", "{dir}/run", "First", "Fir", "--compile"], 1,
     ["--compile", "several prompts"], []),
    ("sample-prompt-unknown-characters", ["sample", "--checkpoint", "{dir}/run", "FirstΩ"], 1,
     ["prompt", "'Ω'", "not in the vocabulary"], []),
    ("sample-fp16-on-a-cpu", [*SAMPLE, "--dtype", "fp16"], 1, ["--dtype fp16", "CUDA", "bf16"], []),
    ("sample-device-unknown", [*SAMPLE, "--device", "banana"], 1, ["device", "'banana'", "cuda:N"], []),
    ("sample-quantize-unknown", [*SAMPLE, "--quantize", "int3"], 2, ["--quantize", "'int3'", "'int8'", "'int4'"],
     []),
    ("sample-quantize-int4-group-does-not-divide", [*SAMPLE, "--quantize", "int4"], 1,
     ["int4", "blocks.0.attn.W_query", "(32, 32)", "group_size=128", "32 inputs", "'int8'"], []),
    # explain, heatmap, view: the text and the model looked through
    ("explain-empty-text", ["explain", ""], 2, ["text", "empty"], []),
    ("explain-query-not-in-text", ["explain", "a b c", "--query", "z"], 2, ["query 'z'", "a, b, c"], []),
    ("explain-layer-out-of-range", ["explain", "a b c", "--layer", "5"], 2, ["layer", "0..0", "got 5"], []),
    ("explain-head-out-of-range", ["explain", "a b c", "--head", "9"], 2, ["head", "0..0", "got 9"], []),
    ("explain-model-unknown", ["explain", "a b c", "--model", "nope"], 2, ["--model", "random, bert", "'nope'"],
     []),
    ("explain-mechanism-unknown", ["explain", "a b c", "--mechanism", "nope"], 2, ["--mechanism", "'nope'",
                                                                                   "multihead"], []),
    ("explain-digits-out-of-range", ["explain", "a b c", "--digits", "0"], 2, ["--digits", "0", "1<=x<=12"], []),
    ("explain-text-too-long", ["explain", LONG], 2, ["70 words", "context_length=64"], []),
    ("explain-characters-unknown", ["explain", "First Ω", "--model", "{dir}/run"], 2, ["'Ω'", "not in the vocabulary"],
     []),
    ("heatmap-output-unwritable", ["heatmap", "a b", "-o", "/proc/attnlab.png"], 1,
     ["cannot write '/proc/attnlab.png'"], []),
    ("heatmap-output-suffix", ["heatmap", "a b", "-o", "{dir}/h.txt"], 2, [".png or .svg", "h.txt"], ["h.txt"]),
    ("heatmap-output-is-a-directory", ["heatmap", "a b", "-o", "{dir}/emptydir"], 2, [".png or .svg", "emptydir"],
     []),
    ("heatmap-layer-out-of-range", ["heatmap", "a b", "--layer", "3", "-o", "{dir}/h.png"], 2,
     ["layer", "got 3"], ["h.png"]),
    ("heatmap-head-negative", ["heatmap", "a b", "--head", "-1", "-o", "{dir}/h.png"], 2, ["head", "got -1"],
     ["h.png"]),
    ("view-output-suffix", ["view", "a b", "-o", "{dir}/v.txt"], 2, [".html", "v.txt"], ["v.txt"]),
    ("view-output-unwritable", ["view", "a b", "-o", "/proc/attnlab.html"], 1, ["cannot write '/proc/attnlab.html'"],
     []),
    ("view-empty-text", ["view", "", "-o", "{dir}/v.html"], 2, ["text", "empty"], ["v.html"]),
    # pe-plot
    ("pe-plot-context-length-zero", ["pe-plot", "--context-length", "0", "-o", "{dir}/p.png"], 2,
     ["--context-length", "0", "x>=1"], ["p.png"]),
    ("pe-plot-d-model-odd", ["pe-plot", "--d-model", "7", "-o", "{dir}/p.png"], 2, ["--d-model", "even", "7"],
     ["p.png"]),
    ("pe-plot-dims-out-of-range", ["pe-plot", "--dims", "99", "-o", "{dir}/p.png"], 2, ["dims", "0..63", "99"],
     ["p.png"]),
    ("pe-plot-dims-not-numbers", ["pe-plot", "--dims", "abc", "-o", "{dir}/p.png"], 2,
     ["--dims", "integers", "'abc'"], ["p.png"]),
    ("pe-plot-output-suffix", ["pe-plot", "-o", "{dir}/p.jpg"], 2, [".png or .svg", "p.jpg"], ["p.jpg"]),
    ("cache-size-tokens-zero", ["cache-size", "--tokens", "0"], 2, ["--tokens", "0", "x>=1"], []),
    ("cache-size-dtype-unknown", ["cache-size", "--dtype", "int8"], 2, ["--dtype", "int8", "'bf16'"], []),
    ("cache-size-plot-suffix", ["cache-size", "--plot", "{dir}/c.jpg"], 2, [".png or .svg", "c.jpg"], ["c.jpg"]),
    # bench, demo, the command itself
    ("bench-seq-lens-zero", ["bench", "--seq-lens", "0"], 2, ["--seq-lens", "'0'", "positive integer"], []),
    ("bench-seq-lens-not-numbers", ["bench", "--seq-lens", "abc"], 2, ["--seq-lens", "'abc'", "256,1024"], []),
    ("bench-backend-unknown", ["bench", "--backends", "nope"], 2, ["--backends", "'nope'", "math"], []),
    ("bench-out-unwritable", ["bench", "--quick", "--out", "/proc/attnlab-bench"], 1,
     ["--out", "/proc/attnlab-bench"], []),
    ("demo-part-unknown", ["demo", "nope"], 2, ["PART", "'nope'", "toy"], []),
    ("demo-out-is-a-file", ["demo", "--out", "{dir}/plain.txt"], 2, ["--out", "plain.txt", "is a file"], []),
    ("command-unknown", ["nope"], 2, ["No such command 'nope'"], []),
    # train-seq2seq and translate
    ("train-seq2seq-task-and-data", [*S2S_TRAIN, "--data", "{dir}/pairs.tsv"], 2, ["--task", "--data", "not both"],
     ["new"]),
    ("train-seq2seq-label-smoothing-out-of-range", [*S2S_TRAIN, "--label-smoothing", "1.5"], 1,
     ["label_smoothing", "[0, 1)", "1.5"], ["new"]),
    ("train-seq2seq-target-too-long", [*S2S_TRAIN[:1], "--data", "{dir}/pairs.tsv", *S2S_TRAIN[3:],
                                       "--context-length", "4"], 1, ["target of", "context_length=4", "never"],
     ["new"]),
    ("translate-source-too-long", [*TRANSLATE, "1" * 30], 1, ["source 1", "30 characters", "context_length=24",
                                                               "--truncate"], []),
    ("translate-characters-unknown", [*TRANSLATE, "12ab"], 1, ["'a'", "'b'", "not in the vocabulary"], []),
    ("translate-empty-source", [*TRANSLATE, "12", " "], 1, ["source 2", "empty"], []),
    # explore: every option is checked, and every model loaded, before anything is served
    ("explore-text-only-spaces", ["explore", "--text", " ", "--export", "{dir}/snap"], 2, ["--text", "only spaces"],
     ["snap"]),
    ("explore-export-with-port", ["explore", "--checkpoint", "{dir}/run", "--export", "{dir}/snap", "--port", "9000"],
     2, ["--port 9000", "--export"], ["snap"]),
    ("translate-no-source", TRANSLATE, 2, ["TEXTS"], []),
    ("translate-beam-zero", [*TRANSLATE, "12", "--beam", "0"], 1, ["beam", "positive", "got 0"], []),
    ("translate-alpha-negative", [*TRANSLATE, "12", "--beam", "2", "--alpha", "-1"], 1, ["alpha", ">= 0", "-1.0"],
     []),
    ("translate-heatmap-suffix", [*TRANSLATE, "12", "--heatmap", "{dir}/h.jpg"], 1, [".png or .svg", "h.jpg"],
     ["h.jpg"]),
    ("translate-gpt-checkpoint", ["translate", "--checkpoint", "{dir}/run", "First"], 1,
     ["{dir}/run", "decoder-only", "attnlab sample"], []),
    ("explain-checkpoint-not-a-translation-model", ["explain", "First", "--checkpoint", "{dir}/run"], 1,
     ["decoder-only", "attnlab sample"], []),
    ("explain-checkpoint-step-out-of-range", ["explain", "12", "--checkpoint", "{dir}/s2s", "--query", "99"], 2,
     ["query index", "got 99", "the translation is"], []),
    ("sample-seq2seq-checkpoint", ["sample", "--checkpoint", "{dir}/s2s", "12"], 1,
     ["{dir}/s2s", "encoder-decoder", "attnlab translate"], []),    # every command: what the shell hands over
    ("train-out-empty", [*TRAIN[:3], "--out", ""], 2, ["--out", "expected a value", "empty string"], []),
    ("train-data-empty-string", ["train", "--data", "", "--out", "{dir}/new"], 2, ["--data", "empty string"],
     ["new"]),
    ("train-config-empty-string", [*TRAIN, "--config", ""], 2, ["--config", "empty string"], ["new"]),
    ("bench-out-empty", ["bench", "--quick", "--out", ""], 2, ["--out", "empty string"], []),
    ("demo-out-empty", ["demo", "toy", "--out", ""], 2, ["--out", "empty string"], []),
    ("heatmap-output-empty", ["heatmap", "a b", "-o", ""], 2, ["--output", "empty string"], []),
    ("train-seed-too-big", [*TRAIN, "--seed", str(2**64)], 2, ["--seed", str(2**64), f"0<=x<={2**64 - 1}"],
     ["new"]),
    ("train-seed-negative", [*TRAIN, "--seed", "-1"], 2, ["--seed", "-1", "0<=x"], ["new"]),
    ("train-seq2seq-seed-too-big", [*S2S_TRAIN, "--seed", str(2**70)], 2, ["--seed", str(2**70)], ["new"]),
    ("sample-seed-too-big", [*SAMPLE, "--seed", str(2**64)], 2, ["--seed", str(2**64)], []),
    ("explain-seed-too-big", ["explain", "a b", "--seed", str(2**64)], 2, ["--seed", str(2**64)], []),
    ("demo-seed-too-big", ["demo", "toy", "--seed", str(2**64), "--out", "{dir}/demo"], 2, ["--seed"], ["demo"]),
    ("explain-text-not-utf8", ["explain", "a \udcff b"], 2, ["TEXT", "not UTF-8", "byte 0xff at character 2"], []),
    ("explain-query-not-utf8", ["explain", "a b", "--query", "b\udce9"], 2, ["--query", "byte 0xe9"], []),
    ("sample-prompt-not-utf8", [*SAMPLE[:3], "\udced\udca0\udc80"], 2, ["PROMPT", "not UTF-8", "byte 0xed"], []),
    ("translate-text-not-utf8", [*TRANSLATE, "1\udcff"], 2, ["TEXTS", "not UTF-8", "0xff"], []),
    ("heatmap-output-not-utf8", ["heatmap", "a b", "-o", "{dir}/\udcff.png"], 2, ["--output", "not UTF-8"], []),
    ("sample-device-mps", [*SAMPLE, "--device", "mps"], 1, ["device", "'mps'", "'cuda:N'"], []),
    ("sample-device-meta", [*SAMPLE, "--device", "meta"], 1, ["device", "'meta'", "'cuda:N'"], []),
    # sizes that cannot fit in memory: refused before allocating, with the bytes
    ("train-model-too-large", [*TRAIN, "--preset", "tiny", "--d-model", "1000000", "--num-heads", "1"], 1,
     ["model sizes", "would need at least", "TiB", "bytes)", "memory"], ["new"]),
    ("train-batch-too-large", [*TRAIN, "--preset", "tiny", "--context-length", "16", "--batch-size", "1000000000"], 1,
     ["batch_size", "1,000,000,000 × 16", "would need at least"], ["new"]),
    ("train-seq2seq-too-many-pairs", [*S2S_TRAIN, "--train-pairs", "10000000000"], 1,
     ["train_pairs", "10,000,000,", "would need at least"], ["new"]),
    ("pe-plot-table-too-large", ["pe-plot", "--context-length", "1000000000000", "-o", "{dir}/p.png"], 2,
     ["--context-length", "1,000,000,000,000 × 64", "would need at least", "TiB"], ["p.png"]),
    ("translate-beam-larger-than-vocabulary", [*TRANSLATE, "12", "--beam", "1000"], 1,
     ["beam", "at most", "<pad> and <bos>", "got 1000"], []),
    # options that do nothing where they are given
    ("translate-layer-without-heatmap", [*TRANSLATE, "12", "--layer", "0"], 2, ["--layer 0", "without --heatmap"],
     []),
    ("translate-heatmap-layer-out-of-range", [*TRANSLATE, "12", "--heatmap", "{dir}/a.png", "--layer", "9"], 1,
     ["layer", "got 9"], ["a.png"]),
    ("view-mode-without-checkpoint", ["view", "a b", "--mode", "encoder", "-o", "{dir}/v.html"], 2,
     ["--mode encoder", "without --checkpoint"], ["v.html"]),
    ("explain-checkpoint-and-model", ["explain", "12", "--checkpoint", "{dir}/s2s", "--model", "bert"], 2,
     ["--model bert", "with --checkpoint"], []),
    ("train-resume-and-overwrite", [*TRAIN[:3], "--out", "{dir}/run", "--resume", "--overwrite"], 2,
     ["--resume", "--overwrite", "give one of them"], []),
    ("train-seq2seq-resume-and-overwrite", [*S2S_TRAIN[:3], "--out", "{dir}/s2s", "--resume", "--overwrite"], 2,
     ["--resume", "--overwrite", "give one of them"], []),
    # ... for every option that does nothing in the mode chosen (cli.params.refuse_unused): the random model's
    # mechanism and seed with another model, a head with every head, digits with JSON, sampling's knobs when greedy
    ("explain-seed-with-bert", ["explain", "a b", "--model", "bert", "--seed", "5"], 2,
     ["--seed 5", "--model bert", "random model"], []),
    ("heatmap-mechanism-with-a-trained-model", ["heatmap", "First", "--model", "{dir}/run", "--mechanism", "causal",
                                                "-o", "{dir}/h.png"], 2, ["--mechanism causal", "--model"], ["h.png"]),
    ("view-seed-with-a-trained-model", ["view", "First", "--model", "{dir}/run", "--seed", "3", "-o",
                                        "{dir}/v.html"], 2, ["--seed 3", "--model"], ["v.html"]),
    ("heads-rollout-seed-with-bert", ["heads", "rollout", "a b", "--model", "bert", "--seed", "4", "-o",
                                      "{dir}/r.png"], 2, ["--seed 4", "--model bert"], ["r.png"]),
    ("heatmap-head-with-all-heads", ["heatmap", "a b", "--all-heads", "--head", "1", "-o", "{dir}/h.png"], 2,
     ["--head 1", "--all-heads"], ["h.png"]),
    ("explain-digits-with-json", ["explain", "a b", "--json", "--digits", "3"], 2, ["--digits 3", "--json"], []),
    ("translate-alpha-with-greedy", [*TRANSLATE, "12", "--alpha", "0.3"], 2, ["--alpha 0.3", "--beam 1"], []),
    ("sample-seed-with-greedy", [*SAMPLE, "--temperature", "0", "--seed", "3"], 2, ["--seed 3", "--temperature 0"],
     []),
    ("sample-top-k-with-greedy", [*SAMPLE, "--temperature", "0", "--top-k", "3"], 2, ["--top-k 3", "greedy"], []),
    ("sample-top-p-with-greedy", [*SAMPLE, "--temperature", "0", "--top-p", "0.5"], 2, ["--top-p 0.5", "greedy"],
     []),
    ("train-vocab-size-with-characters", [*TRAIN, "--vocab-size", "300"], 2, ["--vocab-size 300", "char"], ["new"]),
    ("train-num-kv-heads-with-gpt", [*TRAIN, "--num-kv-heads", "2"], 2, ["--num-kv-heads 2", "--arch gpt"], ["new"]),
    ("train-seq2seq-train-pairs-with-data", [*S2S_TRAIN[:1], "--data", "{dir}/pairs.tsv", *S2S_TRAIN[3:],
                                             "--train-pairs", "10"], 2, ["--train-pairs 10", "--data"], ["new"]),
    ("train-seq2seq-val-pairs-with-data", [*S2S_TRAIN[:1], "--data", "{dir}/pairs.tsv", *S2S_TRAIN[3:],
                                           "--val-pairs", "10"], 2, ["--val-pairs 10", "--data"], ["new"]),
    ("train-seq2seq-min-lr-with-inverse-sqrt", [*S2S_TRAIN, "--schedule", "inverse-sqrt", "--min-lr", "0.0005"], 2,
     ["--min-lr 0.0005", "inverse-sqrt"], ["new"]),
    ("heads-roles-sentences-with-text", ["heads", "roles", "--text", "{dir}/short.txt", "--sentences", "5", "--out",
                                         "{dir}/roles"], 2, ["--sentences 5", "--text"], ["roles"]),
    # the one seed check, on the commands that had none
    ("heads-induction-seed-too-big", ["heads", "induction", "--out", "{dir}/ind", "--seed", str(2**64)], 2,
     ["--seed", str(2**64), f"0<=x<={2**64 - 1}"], ["ind"]),
    ("heads-induction-seed-negative", ["heads", "induction", "--out", "{dir}/ind", "--seed", "-1"], 2,
     ["--seed", "-1", "0<=x"], ["ind"]),
    ("heads-prune-seed-too-big", ["heads", "prune", "--checkpoint", "{dir}/run", "--seed", str(2**64), "--out",
                                  "{dir}/prune"], 2, ["--seed", str(2**64)], ["prune"]),
    ("heads-prune-seed-negative", ["heads", "prune", "--checkpoint", "{dir}/run", "--seed", "-1", "--out",
                                   "{dir}/prune"], 2, ["--seed", "-1"], ["prune"]),
    # resuming a run as another one: said by what the run's checkpoint recorded, never by a symptom
    ("train-resume-another-architecture", ["train", "--out", "{dir}/run", "--resume", "--arch", "modern"], 1,
     ["resume:", "--arch gpt", "step 4", "--arch modern"], []),
    ("train-resume-another-corpus", ["train", "--out", "{dir}/run", "--resume", "--data", "{dir}/short.txt",
                                     "--max-iters", "6"], 1, ["resume:", "corpus.txt", "step 4", "short.txt"], []),
    ("train-resume-another-tokenizer", ["train", "--out", "{dir}/run", "--resume", "--tokenizer", "bpe",
                                        "--max-iters", "6"], 1, ["resume:", "--tokenizer char", "--tokenizer bpe"], []),
    ("train-resume-max-iters-below-the-step", ["train", "--out", "{dir}/run", "--resume", "--max-iters", "2"], 1,
     ["resume:", "step 4", "max_iters is 2", "above 4"], []),
    ("train-resume-a-finished-run", ["train", "--out", "{dir}/run", "--resume"], 1,
     ["resume:", "step 4", "max_iters is 4"], []),
    ("train-seq2seq-resume-another-task", ["train-seq2seq", "--out", "{dir}/s2s", "--resume", "--task", "dates",
                                           "--steps", "6"], 1, ["resume:", "--task numbers", "step 2", "--task dates"],
     []),
    ("train-seq2seq-resume-a-file-of-pairs", ["train-seq2seq", "--out", "{dir}/s2s", "--resume", "--data",
                                              "{dir}/pairs.tsv", "--steps", "6"], 1,
     ["resume:", "--task numbers", "pairs.tsv"], []),
    ("train-seq2seq-resume-steps-below-the-step", ["train-seq2seq", "--out", "{dir}/s2s", "--resume", "--steps", "1"],
     1, ["resume:", "step 2", "max_iters is 1"], []),
    # the main command's own options, and a file it could not read back
    ("lang-unknown", ["--lang", "xx", "explain", "a b"], 2, ["--lang", "'xx'", "'en'", "'zh'", "attnlab --help"], []),
    ("main-option-unknown", ["--nope"], 2, ["No such option", "'--nope'", "attnlab --help"], []),
    ("export-out-suffix", ["export", "--checkpoint", "{dir}/run", "--out", "{dir}/x.bin"], 2,
     [".safetensors", "x.bin"], ["x.bin"]),
    ("heads-prune-batches-too-many", ["heads", "prune", "--checkpoint", "{dir}/run", "--batches", str(10**15),
                                      "--out", "{dir}/prune"], 1, ["--batches", "would need at least"], ["prune"]),
    # resuming the other command's run
    ("train-resume-a-translation-run", ["train", "--out", "{dir}/s2s", "--resume"], 1,
     ["resume:", "s2s", "attnlab train-seq2seq --out"], []),
    ("train-seq2seq-resume-a-gpt-run", ["train-seq2seq", "--out", "{dir}/run", "--resume"], 1,
     ["resume:", "run", "attnlab train --out"], []),
    # heads
    ("heads-rollout-empty-text", ["heads", "rollout", "", "-o", "{dir}/r.png"], 2, ["text", "empty"], ["r.png"]),
    ("heads-rollout-layer-out-of-range", ["heads", "rollout", "a b c", "--layer", "5", "-o", "{dir}/r.png"], 2,
     ["--layer", "0..0", "got 5"], ["r.png"]),
    ("heads-rollout-output-suffix", ["heads", "rollout", "a b c", "-o", "{dir}/r.txt"], 2, [".png or .svg", "r.txt"],
     ["r.txt"]),
    ("heads-rollout-translation-checkpoint", ["heads", "rollout", "12", "--model", "{dir}/s2s", "-o", "{dir}/r.png"],
     2, ["encoder-decoder", "attnlab translate"], ["r.png"]),
    ("heads-induction-head-out-of-range", ["heads", "induction", "--out", "{dir}/ind", "--layer", "0", "--head", "7"],
     2, ["--head", "0..3", "got 7"], ["ind"]),
    ("heads-induction-layer-out-of-range", ["heads", "induction", "--out", "{dir}/ind", "--layer", "2", "--head",
                                            "0"], 2, ["--layer", "0..1", "2-layer", "got 2"], ["ind"]),
    ("heads-induction-steps-zero", ["heads", "induction", "--out", "{dir}/ind", "--steps", "0"], 1,
     ["steps", "positive", "got 0"], ["ind"]),
    ("heads-roles-text-empty", ["heads", "roles", "--text", "{dir}/empty.txt", "--out", "{dir}/roles"], 1,
     ["--text", "empty.txt", "no sentences"], ["roles"]),
    ("heads-roles-text-not-utf8", ["heads", "roles", "--text", "{dir}/binary.dat", "--out", "{dir}/roles"], 1,
     ["--text", "binary.dat", "not UTF-8", "offset 3"], ["roles"]),
    ("heads-roles-text-missing", ["heads", "roles", "--text", "{dir}/nope.txt", "--out", "{dir}/roles"], 1,
     ["--text", "nope.txt", "missing"], ["roles"]),
    ("heads-prune-step-zero", ["heads", "prune", "--checkpoint", "{dir}/run", "--step", "0", "--out", "{dir}/prune"],
     1, ["step", "(0, 1)", "got 0"], ["prune"]),
    ("heads-prune-step-one", ["heads", "prune", "--checkpoint", "{dir}/run", "--step", "1", "--out", "{dir}/prune"],
     1, ["step", "(0, 1)", "got 1"], ["prune"]),
    ("heads-prune-translation-checkpoint", ["heads", "prune", "--checkpoint", "{dir}/s2s", "--out", "{dir}/prune"], 1,
     ["encoder-decoder", "attnlab translate"], ["prune"]),
    ("heads-prune-checkpoint-without-attention", ["heads", "prune", "--checkpoint", "{dir}/no_attention", "--out",
                                                  "{dir}/prune"], 1,
     ["no_attention", "does not match the model", "missing", "attn"], ["prune"]),
    ("heads-prune-data-missing", ["heads", "prune", "--checkpoint", "{dir}/run", "--data", "{dir}/nope.txt", "--out",
                                  "{dir}/prune"], 1, ["data:", "nope.txt"], ["prune"]),
    # heads patch
    ("heads-patch-prompt-lengths-differ", [*PATCH[:7], "--corrupt", "Fir", *PATCH[9:]], 1,
     ["--clean", "--corrupt", "5 and 3 tokens"], ["patch"]),
    ("heads-patch-prompt-characters-unknown", [*PATCH[:5], "--clean", "FirsΩ", *PATCH[7:]], 1,
     ["CharTokenizer.encode", "'Ω'"], ["patch"]),
    ("heads-patch-prompt-right-not-one-token", [*PATCH[:9], "--right", "st", *PATCH[11:]], 1,
     ["--right", "'st'", "2 tokens"], ["patch"]),
    ("heads-patch-prompt-encoder", ["heads", "patch", "prompt", "--model", "bert", *PATCH[5:]], 1,
     ["PretrainedBert", "no heads to patch", "encoder"], ["patch"]),
    ("heads-patch-prompt-sender-not-layer-dot-head", [*PATCH, "--sender", "abc"], 2,
     ["--sender", "LAYER.HEAD", "'abc'"], ["patch"]),
    ("heads-patch-prompt-sender-layer-out-of-range", [*PATCH, "--sender", "5.0"], 2,
     ["--sender", "sender layer", "0..1", "got 5"], ["patch"]),
    ("heads-patch-prompt-sender-head-out-of-range", [*PATCH, "--sender", "0.9"], 2,
     ["--sender", "sender head", "0..1", "got 9"], ["patch"]),
    ("heads-patch-prompt-site-unknown", [*PATCH, "--site", "keys"], 2, ["--site", "'keys'", "query"], ["patch"]),
    ("heads-patch-prompt-out-unwritable", [*PATCH[:-2], "--out", "/proc/attnlab-patch"], 1,
     ["--out", "/proc/attnlab-patch"], []),
    ("heads-patch-dates-gpt-checkpoint", ["heads", "patch", "dates", "--checkpoint", "{dir}/run", "--out",
                                          "{dir}/patch"], 1, ["decoder-only", "attnlab train-seq2seq"], ["patch"]),
    ("heads-patch-dates-numbers-model", ["heads", "patch", "dates", "--checkpoint", "{dir}/s2s", "--out",
                                         "{dir}/patch"], 1, ["--checkpoint", "s2s", "not a dates model", "'j'"],
     ["patch"]),
    ("heads-patch-induction-steps-zero", ["heads", "patch", "induction", "--out", "{dir}/patch", "--steps", "0"], 1,
     ["steps", "positive", "got 0"], ["patch"]),
]


def test_at_least_a_hundred_cases_with_distinct_ids():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "argv", "status", "words", "absent"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(bad_dir, one_thread, case_id, argv, status, words, absent):
    run_case(bad_dir, argv, status, words, absent)


@pytest.mark.parametrize(("case_id", "argv", "status"), [c[:3] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_in_chinese(bad_dir, one_thread, case_id, argv, status):
    """A reader of Chinese gets every one of these errors in Chinese: the command line checks what it hands to the
    building blocks, whose errors are English (docs/translations.md)."""
    run_case_in_chinese(bad_dir, argv, status)


def test_the_docs_list_every_case():
    assert not undocumented(CASES), f"add to docs/bad-input.md: {undocumented(CASES)}"


#: the least each command needs to reach its options (nothing runs: the float is refused while parsing)
MINIMAL = {"train": TRAIN, "train-seq2seq": S2S_TRAIN, "sample": SAMPLE, "translate": [*TRANSLATE, "12"],
           "explain": ["explain", "a b"], "heatmap": ["heatmap", "a b"], "view": ["view", "a b"], "bench": ["bench"],
           "demo": ["demo"], "pe-plot": ["pe-plot"], "cache-size": ["cache-size"], "kernels": ["kernels", "--status"],
           "export": ["export", "--checkpoint", "{dir}/run", "--out", "{dir}/x"],
           "explore": ["explore", "--checkpoint", "{dir}/run", "--export", "{dir}/snap"],
           "heads rollout": ["heads", "rollout", "a b"],
           "heads induction": ["heads", "induction", "--out", "{dir}/new"],
           "heads roles": ["heads", "roles", "--out", "{dir}/new"],
           "heads prune": ["heads", "prune", "--checkpoint", "{dir}/run", "--out", "{dir}/new"],
           "heads patch induction": ["heads", "patch", "induction", "--out", "{dir}/new"],
           "heads patch dates": ["heads", "patch", "dates", "--checkpoint", "{dir}/s2s", "--out", "{dir}/new"],
           "heads patch prompt": [*PATCH[:-2], "--out", "{dir}/new"]}


def _commands(group: click.Group = main, prefix: str = "") -> dict[str, click.Command]:
    """Every command a user can run, by what they type (a group's subcommands as ``group sub``)."""
    found = {}
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        found.update(_commands(cmd, f"{prefix}{name} ") if isinstance(cmd, click.Group) else {prefix + name: cmd})
    return found


LEAVES = _commands()
FLOAT_OPTIONS = [(name, param.opts[-1]) for name, cmd in sorted(LEAVES.items()) for param in cmd.params
                 if isinstance(param.type, click.types.FloatParamType)]


SEEDS = [(name, param) for name, cmd in sorted(LEAVES.items()) for param in cmd.params if param.name == "seed"]


def test_every_seed_is_the_one_seed_check():
    """Every ``--seed`` is :data:`attnlab.cli.params.SEED`: 0 to 2**64 - 1, what torch's generators take."""
    assert len(SEEDS) >= 10 and [n for n, p in SEEDS if p.type is not SEED] == []


@pytest.mark.parametrize("value", [str(2**64), "-1"])
@pytest.mark.parametrize("name", [n for n, _ in SEEDS])
def test_every_seed_past_64_bits_or_negative_is_a_usage_error(bad_dir, name, value):
    run_case(bad_dir, [*MINIMAL[name], "--seed", value], 2, ["--seed", value, f"0<=x<={2**64 - 1}"], ["new"])


def test_every_command_is_reachable_with_minimal_arguments():
    assert set(MINIMAL) == set(LEAVES) and {n.split()[0] for n in LEAVES} == set(COMMANDS)
    assert len(FLOAT_OPTIONS) >= 15


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize(("name", "option"), FLOAT_OPTIONS, ids=[f"{n}{o}" for n, o in FLOAT_OPTIONS])
def test_every_float_option_refuses_nan_and_infinity(bad_dir, name, option, value):
    line = run_case(bad_dir, [*MINIMAL[name], option, value], 2, [option, value], ["new"])
    assert "not a finite number" in line or "not in the range" in line, line  # -inf below a range's minimum


#: how the installed ``attnlab`` program starts (``[project.scripts]``): the early Ctrl-C handler, then the rest
RUN = "from attnlab.__main__ import run; run()"


def _attnlab(*args: str, code: str = RUN, paths: tuple[str, ...] = (), env: dict | None = None,
             **kwargs) -> subprocess.Popen:
    """``attnlab ARGS`` as the installed program starts it, in a child process. Python runs without ``site``
    (``-S``, the paths given instead, ``paths`` first) so that the interpreter's own start is short: Ctrl-C during
    it is Python's to answer, before any of attnlab's code exists."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([*paths, src, sysconfig.get_paths()["purelib"]])}
    kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.Popen([sys.executable, "-S", "-c", code, *args], env=env, **kwargs)


#: The child holds still as the import of one module begins (an audit hook on ``import``, added before attnlab's
#: first line): it writes a byte to ``ready`` and waits on ``hold``, a pipe no one writes to, until the signal comes.
#: The signal is sent once the byte has arrived: at that stage of the start, however fast or busy the machine.
HELD_AT = """
import os, sys
def _hold(event, args, held=[]):
    if event == "import" and args[0] == {stage!r} and not held:
        held.append(True)
        os.write({ready}, b"r")
        os.read({hold}, 1)
sys.addaudithook(_hold)
""" + RUN

#: stages of ``attnlab heatmap``'s start, in order: attnlab's first import after its handler, click, torch (under
#: the data package), what the command's module imports (an ``import`` statement: the hook does not see
#: importlib's own imports); matplotlib is imported by the command itself, after it has put Python's own handler
#: back, so Ctrl-C there is a KeyboardInterrupt that the command turns into the same line
STAGES = ["attnlab.cli", "click", "torch", "attnlab.cli.model_options", "matplotlib"]


@pytest.mark.parametrize("stage", STAGES)
def test_ctrl_c_while_starting_exits_130_without_a_traceback(tmp_path, stage):
    """Ctrl-C while the program imports click, torch, the command: one line, exit 130, nothing written."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    code = HELD_AT.format(stage=stage, ready=ready_w, hold=hold_r)
    proc = _attnlab("heatmap", "a b", "-o", str(tmp_path / "h.png"), code=code, cwd=tmp_path,
                    pass_fds=(ready_w, hold_r))
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) != b"r":  # blocks until the child is there, or has ended
            pytest.fail(f"the child ended before importing {stage}: {proc.communicate()[1].decode()[-2000:]}")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
    finally:
        os.close(ready_r)
        os.close(hold_w)
    assert proc.returncode == 130 and err.decode().strip() == "Interrupted.", (proc.returncode, err.decode()[-2000:])
    assert list(tmp_path.iterdir()) == []


#: Loaded by every Python started with ``site`` (the bench's worker; not the command, run with -S): the worker holds
#: still as it starts importing torch, once it has written its pid to the FIFO ``$ATTNLAB_TEST_READY``.
HOLD_THE_WORKER = """
import os, sys
def _hold(event, args, held=[]):
    if event == "import" and args[0] == "torch" and not held:
        held.append(True)
        with open(os.environ["ATTNLAB_TEST_READY"], "w") as ready:
            ready.write(f"{os.getpid()}\\n")
        os.read(os.open(os.environ["ATTNLAB_TEST_HOLD"], os.O_RDWR), 1)  # a FIFO no one writes to
sys.addaudithook(_hold)
"""


def test_ctrl_c_while_bench_starts_its_worker_exits_130_without_a_traceback(tmp_path):
    """Ctrl-C as the terminal sends it, to the whole foreground process group, while ``attnlab bench``'s worker
    imports torch: the command says one line and the worker is gone (it runs in a group of its own, which the
    command ends), with no traceback of the worker's."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(HOLD_THE_WORKER, encoding="utf-8")
    ready, hold = tmp_path / "ready", tmp_path / "hold"
    os.mkfifo(ready)
    os.mkfifo(hold)
    proc = _attnlab("bench", "--quick", "--seq-lens", "16", "--d-model", "32", "--heads", "2", "--no-texts-shape",
                    paths=(str(tmp_path / "site"),), env={"ATTNLAB_TEST_READY": str(ready),
                                                          "ATTNLAB_TEST_HOLD": str(hold)},
                    cwd=tmp_path, start_new_session=True)
    fd, said = os.open(ready, os.O_RDONLY | os.O_NONBLOCK), b""
    try:
        while not said.endswith(b"\n") and proc.poll() is None:
            select.select([fd], [], [], 0.1)  # how often to look: the worker writes when it gets there
            said += os.read(fd, 64)
    finally:
        os.close(fd)
    assert said.endswith(b"\n"), f"the command ended before its worker imported torch: {proc.communicate()}"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: every process of the foreground group
    _, err = proc.communicate()
    assert proc.returncode == 130 and err.decode().strip() == "Interrupted.", (proc.returncode, err.decode()[-2000:])
    with pytest.raises(ProcessLookupError):
        os.kill(int(said), 0)  # the worker is gone


def test_output_piped_into_head_exits_quietly(bad_dir):
    """``attnlab sample ... | head -c 10``: the reader goes away; attnlab stops, says nothing (but the note, before
    the text, that its learned position table will crop), no traceback."""
    proc = _attnlab("sample", "--checkpoint", str(bad_dir / "run"), "--max-new-tokens", "1000000")
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()  # what head does once it has its bytes
    err = proc.stderr.read().decode()
    assert proc.wait() == 1 and [line[:5] for line in err.splitlines()] == ["note:"], err[-2000:]


def _interrupt(args: list[str], ready, workdir: Path) -> tuple[int, str, str]:
    """Run ``attnlab args`` in ``workdir``, send SIGINT once ``ready(stdout so far)`` holds; (status, out, err).

    It waits for that state however long it takes (the suite's timeout is the one net under a hang): a command that
    ends first fails the test on its exit status."""
    stdout = workdir / "stdout.txt"
    with stdout.open("w") as sink:
        proc = _attnlab(*args, cwd=workdir, stdout=sink)
        while not ready(stdout.read_text(encoding="utf-8")) and proc.poll() is None:
            time.sleep(0.05)  # how often to look, not how long to wait
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
    return proc.returncode, stdout.read_text(encoding="utf-8"), err.decode()


def test_sigint_while_sampling_exits_130_without_a_traceback(bad_dir, tmp_path):
    status, out, err = _interrupt(["sample", "--checkpoint", str(bad_dir / "run"), "First", "--max-new-tokens",
                                   "100000000"], ready=lambda out: len(out) > 20, workdir=tmp_path)
    assert out.startswith("First") and status == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "Interrupted."


def test_sigint_during_the_demo_stops_it_before_the_report(tmp_path):
    status, _, err = _interrupt(["demo", "--out", "out"], ready=lambda out: "The toy" in out, workdir=tmp_path)
    assert status == 130 and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "out" / "report.html").exists()
    assert not [p for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]


def test_a_word_that_is_not_utf8_is_named_by_its_byte_or_its_code_point():
    from attnlab.cli.params import not_utf8

    assert not_utf8("a \udcff b") == "byte 0xff at character 2"  # how Python keeps a byte of argv that is not UTF-8
    assert not_utf8("x\ud800") == "a lone surrogate U+D800 at character 1"
    assert not_utf8("我爱学习 AI") is None
