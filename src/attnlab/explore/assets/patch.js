// Activation patching: one head of the clean run (the text) put into the corrupted run (a text of as many tokens,
// edited here), and what the model then predicts. Every number comes from POST /api/patch, which runs
// attnlab.heads (run_patched for a head, patch_heads for the whole map); the page asks only on a click.

function buildPatch(app) {
  const p = app.parts;
  p.corrupt = el("textarea", {id: "ax-corrupt", rows: 2, spellcheck: false, dataset: {testid: "corrupt-input"},
                              on: {input: () => { app.state.corrupt = p.corrupt.value; drawPatch(app); }}});
  p.patchRight = el("select", {id: "ax-right", dataset: {testid: "patch-right"},
                               on: {change: () => choosePatchTokens(app)}});
  p.patchWrong = el("select", {id: "ax-wrong", dataset: {testid: "patch-wrong"},
                               on: {change: () => choosePatchTokens(app)}});
  p.patchHelp = el("p", {class: "ax-help"});
  p.patchMetric = el("p", {class: "ax-dim", dataset: {testid: "patch-baselines"}});
  p.patchError = el("p", {class: "ax-error", dataset: {testid: "patch-error"}, role: "status"});
  p.patchGrid = el("div", {class: "ax-grid", dataset: {testid: "patch-grid"}});
  p.patchResult = el("div", {class: "ax-patched", dataset: {testid: "patch-result"}});
  p.patchButtons = [
    el("button", {dataset: {testid: "corrupt-default", i18n: "patch_redraw"}, on: {click: () => askPatch(app, {}, true)}}),
    el("button", {dataset: {testid: "patch-all", i18n: "patch_all"}, on: {click: () => askPatch(app, {all: true})}})];
  p.views.patch.append(
    p.patchHelp,
    el("div", {class: "ax-corrupt"}, el("label", {for: "ax-corrupt", dataset: {i18n: "patch_corrupt"}}), p.corrupt,
       p.patchButtons[0]),
    el("p", {class: "ax-controls"}, el("span", {dataset: {i18n: "patch_metric"}}), " ",
       el("span", {class: "ax-f"}, "logit("), p.patchRight, el("span", {class: "ax-f"}, ") − logit("), p.patchWrong,
       el("span", {class: "ax-f"}, ")"), " ", el("span", {dataset: {i18n: "patch_position"}})),
    p.patchMetric, el("div", {class: "ax-controls"}, p.patchButtons[1]), p.patchError, p.patchGrid, p.patchResult);
}

// A new model: its own corrupted text (proposed when the view opens) and tokens; the grid of its patched heads.
function resetPatch(app) {
  const s = app.state, p = app.parts, info = app.info;
  s.corrupt = p.corrupt.value = "";
  s.patch = null;
  s.patchTokens = {right: null, wrong: null};
  const grid = clear(p.patchGrid);
  p.patchCells = [];
  if (!info.patch) return;
  grid.style.setProperty("--ax-heads", info.heads);
  grid.append(el("span"));
  for (let h = 0; h < info.heads; h++) grid.append(el("span", {class: "ax-axis", dataset: {head: h}}));
  for (let l = 0; l < info.layers; l++) {
    grid.append(el("span", {class: "ax-axis", dataset: {layer: l}}));
    for (let h = 0; h < info.heads; h++) {
      const canvas = el("canvas", {width: 1, height: 1});
      const button = el("button", {class: "ax-thumb", dataset: {testid: "patch-cell", layer: l, head: h},
                                   on: {click: () => askPatch(app, {head: {layer: l, head: h}})}}, canvas);
      const value = el("span", {class: "ax-pval", dataset: {testid: "patch-value", layer: l, head: h}});
      grid.append(el("div", {class: "ax-cell"}, button, value));
      p.patchCells.push({layer: l, head: h, button, canvas, value});
    }
  }
}

// The view opened: a translation model shows its cross-attention (the heads patched), and a corrupted text is
// proposed if there is none yet.
function enterPatch(app) {
  const s = app.state, info = app.info;
  if (!info.patch || !app.transport.live) return;
  if (s.mode !== info.patch) app.setMode(info.patch);
  if (!s.corrupt && !s.patchAsking) askPatch(app, {}, true);
}

// Other tokens for the metric: what was shown (a head, the map) is asked again with them.
function choosePatchTokens(app) {
  const s = app.state, p = app.parts, shown = s.patch || {};
  s.patchTokens = {right: Number(p.patchRight.value), wrong: Number(p.patchWrong.value)};
  askPatch(app, Object.assign(shown.patched ? {head: {layer: shown.patched.layer, head: shown.patched.head}} : {},
                              shown.heads ? {all: true} : {}));
}

// Ask /api/patch: the two texts, the metric's tokens once chosen, and a head (`head`) or the map (`all`); with
// `propose` (or with no corrupted text yet), the server's corrupted text in place of the page's. An answer for the
// same texts and tokens keeps what the last one showed (the map stays while heads are clicked).
async function askPatch(app, what, propose) {
  const s = app.state, p = app.parts;
  propose = propose || !s.corrupt.trim();
  const body = Object.assign({model: s.info.name, text: s.text, temperature: s.sampling.temperature,
                              top_k: s.sampling.top_k, top_p: s.sampling.top_p}, what);
  if (s.info.kind === "seq2seq") body.target = s.target;
  if (propose) s.patchTokens = {right: null, wrong: null};
  else body.corrupt = s.corrupt;
  if (s.patchTokens.right !== null) Object.assign(body, s.patchTokens);
  const asked = JSON.stringify(body);
  s.patchAsking = asked;
  app.root.dataset.patchState = "busy";
  app.busy(1);
  try {
    const answer = await app.transport.call("patch", body);
    if (s.patchAsking !== asked) return;  // a newer click is out
    if (propose) s.corrupt = p.corrupt.value = answer.corrupt;
    const texts = patchKey(app), tokens = `${answer.right.id},${answer.wrong.id}`;
    const same = s.patch && s.patch.texts === texts && s.patch.tokens === tokens ? s.patch : {};
    s.patch = {texts, tokens, answer, patched: answer.patched || (what.head ? null : same.patched) || null,
               heads: answer.heads || (what.all ? null : same.heads) || null};
    if (answer.patched) app.root.dataset.patched = `${answer.patched.layer},${answer.patched.head}`;
    if (answer.heads) app.root.dataset.patchMap = String(Number(app.root.dataset.patchMap || 0) + 1);
    app.root.dataset.patchState = "ready";
  } catch (err) {
    if (s.patchAsking !== asked) return;
    s.patch = {texts: patchKey(app), error: err.message};
    app.root.dataset.patchState = "error";
  } finally {
    if (s.patchAsking === asked) s.patchAsking = null;
    app.busy(-1);
  }
  drawPatch(app);
}

// The texts and tokens an answer was for: one for other texts is old news, and the view says so.
function patchKey(app) {
  const s = app.state;
  return JSON.stringify([s.info.name, s.text, s.corrupt, s.info.kind === "seq2seq" ? s.target : null]);
}

function drawPatch(app) {
  const s = app.state, p = app.parts, info = app.info;
  if (!info || s.tab !== "patch") return;  // drawn when shown: typing elsewhere costs nothing here
  p.patchHelp.textContent = !info.patch ? t("patch_none") : !app.transport.live ? t("snapshot_missing")
    : info.patch === "cross" ? `${t("patch_help")} ${t("patch_cross")}` : t("patch_help");
  for (const node of [p.corrupt, ...p.patchButtons, p.patchRight, p.patchWrong]) {
    node.disabled = !info.patch || !app.transport.live;
  }
  for (const c of p.patchCells) c.button.setAttribute("aria-label", t("patch_head", {layer: c.layer, head: c.head}));
  for (const node of p.patchGrid.querySelectorAll(".ax-axis")) {
    node.textContent = node.dataset.head !== undefined ? t("head_n", {n: node.dataset.head})
                                                       : t("layer_n", {n: node.dataset.layer});
  }
  paintPatchThumbs(app);
  const fresh = s.patch && s.patch.texts === patchKey(app) ? s.patch : null;
  p.patchError.textContent = fresh && fresh.error ? fresh.error : "";
  const a = fresh && fresh.answer;
  fillTokenChoice(p.patchRight, a ? a.clean.next_tokens : [], a && a.right);
  fillTokenChoice(p.patchWrong, a ? a.corrupted.next_tokens : [], a && a.wrong);
  p.patchMetric.textContent = !a ? (s.patch && !fresh ? t("patch_stale") : "")
    : t("patch_baselines", {clean: fmt(a.clean.metric), corrupted: fmt(a.corrupted.metric)});
  drawPatchMap(app, fresh && fresh.heads);
  drawPatched(app, fresh);
}

// The selects of the metric's tokens: the run's most likely next tokens, and the one in use.
function fillTokenChoice(select, items, chosen) {
  clear(select);
  const listed = items.some((item) => chosen && item.id === chosen.id) || !chosen ? items : [chosen, ...items];
  for (const item of listed) select.append(modelText("option", shownToken(item.token), {value: item.id}));
  if (chosen) select.value = String(chosen.id);
}

// Each head's thumbnail: the overview the page already holds, when it is of the attention patched.
function paintPatchThumbs(app) {
  const o = app.state.overview;
  if (!o || o.mode !== app.info.patch) return;
  const [layers, , rows, cols] = o.weights.shape;
  for (const c of app.parts.patchCells) {
    if (c.layer < layers) paintMatrix(c.canvas, matrixOf(o.weights, [c.layer, c.head]), rows, cols);
  }
}

// patch_heads' layer × head map: each head's share of the way back from the corrupted metric to the clean one.
function drawPatchMap(app, heads) {
  for (const c of app.parts.patchCells) {
    const metric = heads ? heads.metric[c.layer][c.head] : null;
    const share = heads && heads.recovered ? heads.recovered[c.layer][c.head] : null;
    c.value.dataset.metric = metric === null ? "" : String(metric);
    c.value.dataset.recovered = share === null ? "" : String(share);
    c.value.textContent = metric === null ? "" : share === null ? fmt(metric, 3) : fmt(share, 2);
    c.value.style.background = share === null ? "" : diverging(share);
    c.button.classList.toggle("ax-selected", Boolean(app.state.patch && app.state.patch.patched &&
      app.state.patch.patched.layer === c.layer && app.state.patch.patched.head === c.head));
  }
}

// White at 0, blue towards +1 (the clean run's behaviour restored), red towards −1 (pushed further away).
function diverging(x) {
  const v = Math.max(-1, Math.min(1, x)), k = Math.abs(v);
  return v >= 0 ? css(shade(k, 1)) : `rgb(255,${Math.round(255 - 150 * k)},${Math.round(255 - 150 * k)})`;
}

function drawPatched(app, fresh) {
  const box = clear(app.parts.patchResult), r = fresh && fresh.patched, a = fresh && fresh.answer;
  box.dataset.layer = r ? String(r.layer) : "";
  box.dataset.head = r ? String(r.head) : "";
  box.dataset.metric = r ? String(r.metric) : "";
  box.dataset.recovered = r && r.recovered !== null ? String(r.recovered) : "";
  if (!a) return;
  if (r) {
    box.append(el("p", {class: "ax-title"}, t("patch_result", {layer: r.layer, head: r.head, metric: fmt(r.metric)}),
                  r.recovered === null ? "" : " " + t("patch_recovered", {share: fmt(100 * r.recovered, 1) + "%"})));
  } else {
    box.append(el("p", {class: "ax-help"}, t("patch_click")));
  }
  const column = (title, items, testid) => {
    const bars = el("div", {class: "ax-bars"});
    drawBars(bars, items, testid);
    return el("div", {}, el("h3", {class: "ax-dim"}, title), bars);
  };
  box.append(el("div", {class: "ax-patchbars"},
                column(t("patch_clean_run"), a.clean.next_tokens, "patch-clean-token"),
                column(t("patch_corrupt_run"), a.corrupted.next_tokens, "patch-corrupt-token"),
                r ? column(t("patch_patched_run", {layer: r.layer, head: r.head}), r.next_tokens, "patch-next-token")
                  : null));
  ensureGlyphs(box.textContent);
}
