// Generating with a cache: generate()'s tokens, and for each one (a row) its attention over every position so far
// (the columns) in the chosen layer and head: shaded where the cache kept the key, struck through where it dropped
// it (a sink cache keeps the first positions and a window; a learned position table crops to its last positions).

function buildGenerate(app) {
  const p = app.parts;
  p.genSteps = el("input", {type: "number", id: "ax-gen-steps", min: 1, max: 64, value: "8",
                            dataset: {testid: "generate-steps"}});
  p.cacheKind = el("select", {id: "ax-cache-kind", dataset: {testid: "cache-kind"},
                              on: {change: () => layoutGenerate(app)}});
  p.sinkTokens = el("input", {type: "number", id: "ax-sink", min: 0, max: 64, value: "4",
                              dataset: {testid: "sink-tokens"}});
  p.cacheWindow = el("input", {type: "number", id: "ax-window", min: 1, max: 512, value: "8",
                               dataset: {testid: "cache-window"}});
  p.sinkRow = el("span", {class: "ax-sinkrow"},
                 el("label", {for: "ax-sink"}, el("span", {dataset: {i18n: "sink_tokens"}}), " ", p.sinkTokens),
                 el("label", {for: "ax-window"}, el("span", {dataset: {i18n: "cache_window"}}), " ", p.cacheWindow));
  p.genRun = el("button", {dataset: {testid: "generate-run", i18n: "generate"}, on: {click: () => runGenerate(app)}});
  p.genHelp = el("p", {class: "ax-help"});
  p.genOut = el("div", {class: "ax-gen", dataset: {testid: "generation"}});
  p.views.generate.append(
    el("div", {class: "ax-controls"},
       el("label", {for: "ax-gen-steps"}, el("span", {dataset: {i18n: "new_tokens"}}), " ", p.genSteps),
       el("label", {for: "ax-cache-kind"}, el("span", {dataset: {i18n: "cache"}}), " ", p.cacheKind),
       p.sinkRow, p.genRun),
    p.genHelp, p.genOut);
}

function layoutGenerate(app) {
  const p = app.parts, info = app.info;
  const chosen = p.cacheKind.value;
  clear(p.cacheKind);
  for (const kind of info.caches) p.cacheKind.append(el("option", {value: kind}, t(`cache_${kind}`)));
  if (info.caches.includes(chosen)) p.cacheKind.value = chosen;
  p.sinkRow.hidden = p.cacheKind.value !== "sink";
  p.genRun.disabled = info.kind !== "decoder" || !app.transport.live;
  drawGenerate(app);
}

async function runGenerate(app) {
  const s = app.state, p = app.parts;
  const cache = p.cacheKind.value === "sink"
    ? {kind: "sink", sink_tokens: Number(p.sinkTokens.value), sliding_window: Number(p.cacheWindow.value)}
    : {kind: "full"};
  const seed = Math.max(0, Math.floor(Number(p.seed.value) || 0));
  const body = {model: s.info.name, text: s.text, max_new_tokens: Number(p.genSteps.value),
                temperature: s.sampling.temperature, top_k: s.sampling.top_k, top_p: s.sampling.top_p,
                seed: s.sampling.temperature === 0 ? null : seed, cache};
  app.busy(1);
  try {
    s.generation = await app.transport.call("generate", body);
    s.generationError = null;
    app.root.dataset.generated = String(Number(app.root.dataset.generated || 0) + 1);
  } catch (err) {
    s.generation = null;
    s.generationError = err.message;
  } finally {
    app.busy(-1);
  }
  drawGenerate(app);
}

function drawGenerate(app) {
  const s = app.state, p = app.parts, g = s.generation, out = clear(p.genOut);
  const info = app.info;
  if (!info) return;
  p.genHelp.textContent = info.kind !== "decoder" ? t("generate_none")
    : p.cacheKind.value === "sink" ? t("cache_sink_help") : info.sliding_window
      ? t("cache_rolling_help", {window: info.sliding_window}) : info.rotary ? t("cache_full_help")
        : t("cache_table_help", {window: info.window});
  if (s.generationError) { out.append(el("p", {class: "ax-error"}, s.generationError)); return; }
  if (!g) return;
  const layer = Math.min(s.layer, info.layers - 1), head = s.head;
  const tokens = [...g.prompt, ...g.tokens];
  out.append(el("p", {}, t("generated", {layer, head}), " ", modelText("q", g.appended, {dataset: {testid: "generated-text"}})));
  const grid = el("div", {class: "ax-cachegrid", dataset: {testid: "cache-grid"}});
  grid.style.setProperty("--ax-cols", tokens.length);
  grid.append(el("span", {class: "ax-corner"}));
  tokens.forEach((tok) => grid.append(modelText("span", shownToken(tok), {class: "ax-col"})));
  for (const [k, step] of g.steps.entries()) {
    const {kept, weights} = step.layers[layer];
    const row = weights[head];
    const weightAt = new Map(kept.map((pos, i) => [pos, row[i]]));
    let top = 0;
    row.forEach((w) => { top = Math.max(top, w); });
    grid.append(modelText("span", shownToken(step.token), {class: "ax-row"}));
    for (let pos = 0; pos < tokens.length; pos++) {
      const future = pos > step.position;
      const isKept = weightAt.has(pos);
      const cell = el("span", {class: `ax-cc${future ? " ax-future" : isKept ? "" : " ax-dropped"}`,
                               dataset: {testid: "cache-cell", step: k, position: pos, kept: String(isKept),
                                         weight: isKept ? String(weightAt.get(pos)) : ""},
                               title: future ? "" : isKept ? `${t("kept_key")} ${fmt(weightAt.get(pos))}` : t("dropped_key")});
      if (isKept) cell.style.background = css(shade(weightAt.get(pos), top));
      grid.append(cell);
    }
  }
  out.append(el("div", {class: "ax-scroll"}, grid),
             el("p", {class: "ax-legend"}, el("span", {class: "ax-cc ax-key"}), " ", t("kept_key"), "  ",
                el("span", {class: "ax-cc ax-dropped ax-key"}), " ", t("dropped_key")));
  ensureGlyphs(out.textContent);
}
