"""Every word the explorer's page shows, in one catalog: attnlab's gettext catalog, like every message of the CLI.

The page's scripts name each string by its key (``t("temperature")``); :data:`STRINGS` maps the keys to English
messages marked with ``N_``, so ``make messages`` extracts them and ``tests/test_i18n.py`` fails while one lacks its
Chinese translation. :func:`tables` gives the page both languages at once, so its switch is instant. A ``{field}``
is filled in by the page; model text (tokens, the text typed, model names) is never translated.
"""

from __future__ import annotations

from attnlab.i18n import LANGUAGES, N_, translations

STRINGS: dict[str, str] = {
    "title": N_("attnlab: attention, explored"),
    "language": N_("Language"),
    "model": N_("Model"),
    "text": N_("Text"),
    "target": N_("Target so far"),
    "translate": N_("Translate (greedy)"),
    "tokens_n": N_("{n} tokens:"),
    "target_tokens_n": N_("target, {n} tokens:"),
    "cropped_start": N_("The model reads the last {kept} of the {of} tokens (the first ones are left out)."),
    "cropped_end": N_("The model reads the first {kept} of the {of} tokens (the last ones are left out)."),
    "tab_overview": N_("All heads"),
    "tab_head": N_("One head"),
    "tab_steps": N_("Step by step"),
    "tab_generate": N_("Generate"),
    "attention": N_("Attention"),
    "mode_self": N_("self-attention"),
    "mode_encoder": N_("encoder self-attention"),
    "mode_decoder": N_("decoder self-attention (masked)"),
    "mode_cross": N_("cross-attention (decoder → source)"),
    "export_png": N_("Save PNG"),
    "export_svg": N_("Save SVG"),
    "overview_help": N_("Every layer (rows) and head (columns): each small picture is one head's weights, darker "
                        "where a query (row) looks harder at a key (column), scaled to its own largest weight. Click "
                        "one to look at it; arrow keys move, Enter opens it; its switch (or the key O) turns the "
                        "head off."),
    "head_on": N_("on"),
    "layer_n": N_("layer {n}"),
    "head_n": N_("head {n}"),
    "layer_head": N_("Layer {layer}, head {head}"),
    "switch_label": N_("layer {layer}, head {head}: switched on"),
    "queries": N_("queries"),
    "keys": N_("keys"),
    "page_rows": N_("queries {from}–{to} of {of}"),
    "page_cols": N_("keys {from}–{to} of {of}"),
    "cell_info": N_("“{query}” looks at “{key}” with weight {weight}"),
    "looks_at": N_("Where “{token}” looks: the keys, shaded by its weights"),
    "looked_at": N_("What looks at “{token}”: the queries, shaded by their weights on it"),
    "hover_help": N_("Point at a token or a cell; arrow keys move over the matrix, Enter works the cell's query out "
                     "step by step."),
    "query_token": N_("Query token"),
    "numbers": N_("({n} numbers)"),
    "show_all": N_("show all"),
    "show_fewer": N_("show fewer"),
    "steps_wait": N_("Working it out…"),
    "steps_cross_only": N_("Step by step, the translation model shows its cross-attention: choose it above."),
    "steps_title": N_("Layer {layer}, head {head}: the new vector of"),
    "step_x": N_("x: what the layer reads"),
    "step_x_help": N_("The query token's vector as the attention layer reads it (after the block's norm)."),
    "step_q_help": N_("The query: x times this head's {d} columns of W_q, plus its bias."),
    "step_rope": N_("The rotation of the rotary positions"),
    "step_rope_help": N_("At position {position}, each pair of numbers (j, j + d/2) is turned by the angle θ_j; the "
                         "keys are turned by their own positions, so the score depends on how far apart they are."),
    "rope_before": N_("before"),
    "rope_after": N_("after"),
    "check_rope": N_("The query before the turn equals x·W_q + b: max |Δ| = {diff}."),
    "rope_norm": N_("A norm of the queries sits between x·W_q and the turn."),
    "step_kv_help": N_("Every token's key and value, from its own x (the first 4 numbers of each)."),
    "step_gqa": N_("This head shares key/value head {kv} with the other heads of its group (grouped-query "
                   "attention)."),
    "token": N_("token"),
    "step_scores": N_("Scores, scaled, masked, softmax"),
    "step_scores_help": N_("Each key's score is q·k_j; divided by √d_k (d_k = {d}) so that the softmax does not "
                           "saturate; keys the query may not see are masked to −∞; the softmax turns the scores into "
                           "weights that add up to 1."),
    "step_softcap": N_("then capped: {cap} · tanh(s / {cap})"),
    "step_sink": N_("A learned sink logit {sink} joins the softmax: its share of the weight goes to no value."),
    "mask": N_("mask"),
    "masked": N_("masked"),
    "check_weights": N_("These weights equal the ones the model computed: max |Δ| = {diff}."),
    "step_z_help": N_("The new vector: the values, each weighted by its softmax weight, added up."),
    "check_context": N_("Equal to the model's own: max |Δ| = {diff}."),
    "step_share_help": N_("What head {head} adds to out_proj's output: its columns of W_o times z. The heads' shares "
                          "and the bias add up to out_proj's output."),
    "check_out": N_("Every head's share plus the bias equals out_proj's output: max |Δ| = {diff}."),
    "next_title": N_("The next token"),
    "temperature": N_("Temperature"),
    "top_k": N_("Top-k"),
    "top_p": N_("Top-p"),
    "greedy": N_("greedy"),
    "off": N_("off"),
    "no_next": N_("An encoder predicts no next token: it reads the whole text both ways. Switching heads off changes "
                  "its sentence vector instead."),
    "kept": N_("{n} tokens can be drawn."),
    "loss": N_("Loss on the text: {loss} per token"),
    "loss_none": N_("Loss on the text: none yet (no token after the first to score)"),
    "loss_all_heads": N_("with every head on: {loss}"),
    "similarity": N_("Sentence vector against every head on: cosine {value}"),
    "append_greedy": N_("Append greedy"),
    "append_sample": N_("Append sampled"),
    "seed": N_("seed"),
    "appended_greedy": N_("Appended “{token}” (greedy)."),
    "appended_sample": N_("Appended “{token}” (sampled, seed {seed})."),
    "new_tokens": N_("New tokens"),
    "cache": N_("Cache"),
    "cache_full": N_("the model's own"),
    "cache_sink": N_("attention sinks + window"),
    "sink_tokens": N_("sinks"),
    "cache_window": N_("window"),
    "generate": N_("Generate"),
    "generate_none": N_("Only a decoder continues a text."),
    "cache_full_help": N_("The cache keeps every position: each new token's query sees all of them."),
    "cache_table_help": N_("The cache keeps every position until the learned position table ({window}) is full; "
                           "then each token is computed again from the last {window} tokens alone."),
    "cache_rolling_help": N_("A sliding-window layer's cache keeps its last {window} positions and drops the older "
                             "ones."),
    "cache_sink_help": N_("StreamingLLM's cache keeps the first positions (the sinks, where attention rests) for "
                          "ever, and a window of the latest; everything between is dropped."),
    "generated": N_("Generated (layer {layer}, head {head}, each row a new token):"),
    "kept_key": N_("kept in the cache"),
    "dropped_key": N_("dropped from the cache"),
    "tab_patch": N_("Patch"),
    "patch_help": N_("Activation patching: the model reads the text (the clean run) and a corrupted text of as many "
                     "tokens; then it reads the corrupted text again with one head's output, at every position, taken "
                     "from the clean run. Click a head to patch it: the metric says how much of the clean run's answer "
                     "that head brings back. The button patches every head, one at a time."),
    "patch_cross": N_("A translation model's heads patched here are its cross-attention's: the corrupted text is its "
                      "source, and the target so far stays the same."),
    "patch_none": N_("An encoder predicts no next token: there is no logit difference to patch."),
    "patch_corrupt": N_("Corrupted text"),
    "patch_redraw": N_("Redraw its first half"),
    "patch_metric": N_("Metric:"),
    "patch_position": N_("at the last position (the next token)"),
    "patch_baselines": N_("Clean run: {clean}; corrupted run: {corrupted}."),
    "patch_all": N_("Patch every head"),
    "patch_head": N_("Patch layer {layer}, head {head}"),
    "patch_stale": N_("The texts changed since the last patch: click a head to patch again."),
    "patch_click": N_("Click a head to put its output from the clean run into the corrupted run."),
    "patch_result": N_("Layer {layer}, head {head} from the clean run: metric {metric}"),
    "patch_recovered": N_("({share} of the way from the corrupted run back to the clean run)"),
    "patch_clean_run": N_("Clean run"),
    "patch_corrupt_run": N_("Corrupted run"),
    "patch_patched_run": N_("Corrupted run, layer {layer}, head {head} patched"),
    "snapshot_missing": N_("This snapshot does not hold it: it was written for one text; run attnlab explore to ask "
                           "anything."),
}


def tables() -> dict[str, dict[str, str]]:
    """``{language: {key: string}}`` for every language of attnlab."""
    return {lang: {key: translations(lang).gettext(message) for key, message in STRINGS.items()}
            for lang in LANGUAGES}


def all_text() -> str:
    """Every character the page's words use, in both languages (what the launch font is cut for)."""
    return "".join(text for table in tables().values() for text in table.values())
