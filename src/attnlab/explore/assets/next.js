// The next token: the probabilities generate() samples from, after temperature, top-k and top-p (computed by the
// server with attnlab.generation.sampling); buttons that append generate()'s greedy or seeded token; the loss on the
// text, and what it was with every head on.

const SLIDERS = [
  {key: "temperature", testid: "temperature", min: 0, max: 2, step: 0.05, initial: 1,
   read: (v) => Number(v), shown: (v) => (v === 0 ? t("greedy") : v.toFixed(2))},
  {key: "top_k", testid: "top-k", min: 0, max: 50, step: 1, initial: 0,
   read: (v) => (Number(v) === 0 ? null : Number(v)), shown: (v) => (v === null ? t("off") : String(v))},
  {key: "top_p", testid: "top-p", min: 0.05, max: 1, step: 0.05, initial: 1,
   read: (v) => (Number(v) >= 1 ? null : Math.round(Number(v) * 100) / 100), shown: (v) => (v === null ? t("off") : v.toFixed(2))},
];

function buildNext(app) {
  const p = app.parts, side = p.side;
  p.sliders = {};
  const controls = el("div", {class: "ax-sliders"});
  for (const s of SLIDERS) {
    const input = el("input", {type: "range", id: `ax-${s.testid}`, min: s.min, max: s.max, step: s.step,
                               value: String(s.initial), dataset: {testid: s.testid}});
    const value = el("output", {for: `ax-${s.testid}`, class: "ax-value"});
    input.addEventListener("input", () => {
      app.state.sampling[s.key] = s.read(input.value);
      value.textContent = s.shown(app.state.sampling[s.key]);
      app.refresh({overview: 0, detail: false});
    });
    p.sliders[s.key] = {input, value, spec: s};
    controls.append(el("label", {for: `ax-${s.testid}`, class: "ax-slider"},
                       el("span", {dataset: {i18n: s.key}}), input, value));
  }
  p.bars = el("div", {class: "ax-bars", dataset: {testid: "next-tokens"}});
  p.kept = el("p", {class: "ax-dim"});
  p.loss = el("p", {class: "ax-loss", dataset: {testid: "loss"}});
  p.baseline = el("p", {class: "ax-loss", dataset: {testid: "baseline-loss"}});
  p.seed = el("input", {type: "number", id: "ax-seed", min: 0, step: 1, value: "0", dataset: {testid: "seed"}});
  p.appendNote = el("p", {class: "ax-dim", dataset: {testid: "append-note"}});
  p.appendRow = el("div", {class: "ax-append"},
    el("button", {dataset: {testid: "append-greedy", i18n: "append_greedy"}, on: {click: () => appendToken(app, false)}}),
    el("button", {dataset: {testid: "append-sample", i18n: "append_sample"}, on: {click: () => appendToken(app, true)}}),
    el("label", {for: "ax-seed"}, el("span", {dataset: {i18n: "seed"}}), " ", p.seed));
  p.nextNone = el("p", {class: "ax-help", dataset: {i18n: "no_next"}});
  side.append(el("h2", {class: "ax-title", dataset: {i18n: "next_title"}}), controls, p.nextNone, p.bars, p.kept,
              p.appendRow, p.appendNote, p.loss, p.baseline,
              el("span", {class: "ax-exports"},
                 el("button", {dataset: {testid: "export-next-png", i18n: "export_png"},
                               on: {click: () => exportView(app, "png", "next")}}),
                 el("button", {dataset: {testid: "export-next-svg", i18n: "export_svg"},
                               on: {click: () => exportView(app, "svg", "next")}})));
}

function drawNext(app) {
  const s = app.state, p = app.parts, n = s.next;
  for (const {value, spec} of Object.values(p.sliders)) value.textContent = spec.shown(s.sampling[spec.key]);
  const encoder = s.info && s.info.kind === "encoder";
  p.nextNone.hidden = !encoder;
  p.appendRow.hidden = !s.info || s.info.kind !== "decoder" || !app.transport.live;
  for (const {input} of Object.values(p.sliders)) input.disabled = encoder || !app.transport.live;
  const last = s.appended[s.appended.length - 1];
  p.appendNote.dataset.token = last ? last.token : "";
  p.appendNote.dataset.id = last ? String(last.id) : "";
  p.appendNote.dataset.seed = last && last.seed !== null ? String(last.seed) : "";
  p.appendNote.textContent = !last ? "" : last.seed !== null
    ? t("appended_sample", {token: shownToken(last.token), seed: last.seed})
    : t("appended_greedy", {token: shownToken(last.token)});
  const bars = clear(p.bars);
  if (!n) return;
  drawBars(bars, n.next_tokens, "next-token");
  p.kept.textContent = encoder ? "" : t("kept", {n: n.kept});
  const loss = n.loss;
  p.loss.dataset.loss = loss === null || loss === undefined ? "" : String(loss);
  p.loss.textContent = encoder ? "" : loss === null ? t("loss_none") : t("loss", {loss: fmt(loss)});
  const b = n.baseline;
  p.baseline.hidden = !b;
  if (b) {
    p.baseline.dataset.loss = b.loss === null ? "" : String(b.loss);
    p.baseline.textContent = encoder ? t("similarity", {value: fmt(b.embedding_similarity)})
                                     : b.loss === null ? "" : t("loss_all_heads", {loss: fmt(b.loss)});
  }
}

// One bar a token, scaled to the most likely one: {token, prob} items (a data-testid each, with data-token, data-prob).
function drawBars(box, items, testid) {
  const top = items.length ? items[0].prob : 1;
  for (const item of items) {
    const fill = el("span", {class: "ax-fill"});
    fill.style.width = `${(100 * item.prob / top).toFixed(1)}%`;
    box.append(el("div", {class: "ax-nt", dataset: {testid, token: item.token, prob: String(item.prob)}},
                  modelText("span", shownToken(item.token), {class: "ax-ntok"}),
                  el("span", {class: "ax-track"}, fill), el("span", {class: "ax-prob"}, fmt(item.prob * 100, 2) + "%")));
  }
}

async function appendToken(app, sampled) {
  const s = app.state, p = app.parts;
  const seed = Math.max(0, Math.floor(Number(p.seed.value) || 0));
  const body = {model: s.info.name, text: s.text, max_new_tokens: 1,
                temperature: sampled ? s.sampling.temperature : 0,
                top_k: sampled ? s.sampling.top_k : null, top_p: sampled ? s.sampling.top_p : null,
                seed: sampled ? seed : null};
  app.busy(1);
  try {
    const answer = await app.transport.call("generate", body);
    s.appended.push({token: answer.tokens[0], id: answer.ids[0], seed: sampled ? seed : null});
    if (sampled) p.seed.value = String(seed + 1);  // the next draw differs; the page shows which seed drew which
    app.parts.text.value = s.text + answer.appended;
    app.typed();
  } catch (err) {
    app.refused(err);
  } finally {
    app.busy(-1);
  }
}
