// One head, step by step, for one query token: x, q = x·W_q, RoPE's turn, k_j and v_j, the scores, ÷√d_k, the
// mask, the softmax, the weighted sum, the head's share of out_proj; every number from POST /api/head.

const SHOWN = 8;  // a vector shows its first 8 numbers until it is opened

function buildSteps(app) {
  const p = app.parts;
  p.stepQuery = el("select", {id: "ax-step-query", dataset: {testid: "step-query"},
                              on: {change: () => app.setQuery(Number(p.stepQuery.value))}});
  p.stepsBody = el("div", {class: "ax-steps", dataset: {testid: "steps"}});
  p.views.steps.append(el("label", {for: "ax-step-query", class: "ax-query"},
                          el("span", {dataset: {i18n: "query_token"}}), " ", p.stepQuery), p.stepsBody);
}

// "q = x · W_q + b": letters in italics, _x a subscript, ^x a superscript (formulas without a math library)
function formula(text) {
  const node = el("span", {class: "ax-f"});
  const letter = "A-Za-z\u03b1-\u03c9";
  const symbol = new RegExp(`((?<![${letter}0-9])[${letter}](?:_[A-Za-z0-9]+)?(?:\\^[A-Za-z0-9]+)?(?![${letter}0-9]))`);
  for (const part of text.split(symbol)) {
    const m = new RegExp(`^([${letter}])(?:_([A-Za-z0-9]+))?(?:\\^([A-Za-z0-9]+))?$`).exec(part);
    if (!m) { node.append(part); continue; }
    node.append(el("var", {}, m[1]));
    if (m[2]) node.append(el("sub", {}, m[2]));
    if (m[3]) node.append(el("sup", {}, m[3]));
  }
  return node;
}

function vector(values, testid) {
  const text = (all) => "[" + (all ? values : values.slice(0, SHOWN)).map((x) => fmt(x)).join(", ") +
    (all || values.length <= SHOWN ? "" : ", …") + "]";
  const body = el("code", {class: "ax-vec", dataset: {testid: testid || "", values: JSON.stringify(values)}},
                  text(false));
  const wrap = el("span", {class: "ax-vecwrap"}, body, " ", el("span", {class: "ax-dim"}, t("numbers", {n: values.length})));
  if (values.length > SHOWN) {
    const button = el("button", {class: "ax-more", "aria-expanded": "false"}, t("show_all"));
    button.addEventListener("click", () => {
      const open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", String(open));
      body.textContent = text(open);
      button.textContent = open ? t("show_fewer") : t("show_all");
    });
    wrap.append(" ", button);
  }
  return wrap;
}

function stepCard(number, title, ...body) {
  return el("li", {class: "ax-step"}, el("h3", {}, el("span", {class: "ax-num"}, String(number)), " ", title), ...body);
}

function drawSteps(app) {
  const s = app.state, p = app.parts, body = clear(p.stepsBody);
  const rows = app.queryTokens();
  clear(p.stepQuery);
  rows.forEach((tok, i) => p.stepQuery.append(modelText("option", `${i}: ${shownToken(tok)}`, {value: i})));
  if (s.query !== null) p.stepQuery.value = String(s.query);
  const st = s.steps;
  if (!st) { body.append(el("p", {class: "ax-help"}, t("steps_wait"))); return; }
  if (st.unavailable) { body.append(el("p", {class: "ax-help"}, t("steps_cross_only"))); return; }
  if (st.error) { body.append(el("p", {class: "ax-error"}, st.error)); return; }
  const tok = shownToken(st.query_token), d = st.d_k;
  body.append(el("h2", {class: "ax-title"}, t("steps_title", {layer: st.layer, head: st.head}), " ",
                 modelText("q", tok)));
  const list = el("ol", {class: "ax-steplist"});
  let n = 1;
  list.append(stepCard(n++, t("step_x"), el("p", {}, t("step_x_help")), vector(st.x, "step-x")));
  list.append(stepCard(n++, formula("q = x · W_q + b_q"), el("p", {}, t("step_q_help", {d})),
                       vector(st.rope ? st.xw : st.q, "step-q")));
  if (st.rope) list.append(ropeCard(n++, st));
  list.append(kvCard(n++, st));
  list.append(scoresCard(n++, st));
  list.append(stepCard(n++, formula("z = Σ a_j v_j"), el("p", {}, t("step_z_help")), vector(st.context, "step-z"),
                       el("p", {class: "ax-check"}, t("check_context", {diff: st.check.context.toExponential(1)}))));
  list.append(stepCard(n++, formula("W_o[:, h] · z"), el("p", {}, t("step_share_help", {head: st.head})),
                       vector(st.share, "step-share"),
                       el("p", {class: "ax-check"}, t("check_out", {diff: st.check.out_proj.toExponential(1)}))));
  body.append(list);
  ensureGlyphs(body.textContent);
}

function ropeCard(n, st) {
  const r = st.rope, half = r.angles.length;
  const table = el("table", {class: "ax-table"},
    el("tr", {}, el("th", {}, "j"), el("th", {}, formula("θ_j = p · ω_j")), el("th", {}, t("rope_before")),
       el("th", {}, t("rope_after"))));
  for (let j = 0; j < half; j++) {
    table.append(el("tr", {}, el("td", {}, `${j}, ${j + half}`), el("td", {}, fmt(r.angles[j])),
                    el("td", {}, `(${fmt(r.before[j])}, ${fmt(r.before[j + half])})`),
                    el("td", {}, `(${fmt(st.q[j])}, ${fmt(st.q[j + half])})`)));
  }
  const checked = r.check === null ? t("rope_norm") : t("check_rope", {diff: r.check.toExponential(1)});
  return stepCard(n, t("step_rope"), el("p", {}, t("step_rope_help", {position: r.position})), table,
                  el("p", {class: "ax-check"}, checked));
}

function kvCard(n, st) {
  const table = el("table", {class: "ax-table"},
    el("tr", {}, el("th", {}, "j"), el("th", {}, t("token")), el("th", {}, formula("k_j")), el("th", {}, formula("v_j"))));
  st.tokens.forEach((tok, j) => {
    const short = (v) => "[" + v.slice(0, 4).map((x) => fmt(x, 3)).join(", ") + (v.length > 4 ? ", …" : "") + "]";
    table.append(el("tr", {}, el("td", {}, String(j)), el("td", {}, modelText("span", shownToken(tok))),
                    el("td", {}, el("code", {}, short(st.keys[j]))), el("td", {}, el("code", {}, short(st.values[j])))));
  });
  const gqa = st.kv_head !== st.head ? el("p", {}, t("step_gqa", {kv: st.kv_head})) : null;
  return stepCard(n, formula("k_j = x_j · W_k,  v_j = x_j · W_v"), el("p", {}, t("step_kv_help")), gqa,
                  el("div", {class: "ax-scroll"}, table));
}

function scoresCard(n, st) {
  const scaleText = st.softcap ? t("step_softcap", {cap: fmt(st.softcap, 1)}) : `× ${fmt(st.scale)}`;
  const table = el("table", {class: "ax-table", dataset: {testid: "step-table"}},
    el("tr", {}, el("th", {}, t("token")), el("th", {}, formula("s_j = q · k_j")),
       el("th", {}, formula("÷ √d_k"), " ", el("span", {class: "ax-dim"}, scaleText)),
       el("th", {}, t("mask")), el("th", {}, formula("a = softmax(s)"))));
  let top = 0;
  st.weights.forEach((w) => { top = Math.max(top, w); });
  st.tokens.forEach((tok, j) => {
    const allowed = st.allowed[j];
    const bar = el("span", {class: "ax-wbar"});
    bar.style.width = `${Math.round(60 * (top > 0 ? st.weights[j] / top : 0))}px`;
    table.append(el("tr", {class: allowed ? "" : "ax-masked"},
      el("td", {}, modelText("span", shownToken(tok))), el("td", {}, fmt(st.scores[j])),
      el("td", {}, allowed ? fmt(st.scaled[j]) : "−∞"), el("td", {}, allowed ? "" : t("masked")),
      el("td", {dataset: {testid: "step-weight", key: j, weight: String(st.weights[j])}}, fmt(st.weights[j]), " ", bar)));
  });
  const sink = st.sink !== null ? el("p", {}, t("step_sink", {sink: fmt(st.sink)})) : null;
  return stepCard(n, t("step_scores"), el("p", {}, t("step_scores_help", {d: st.d_k})), sink,
                  el("div", {class: "ax-scroll"}, table),
                  el("p", {class: "ax-check"}, t("check_weights", {diff: st.check.weights.toExponential(1)})));
}

// Ask for the selected head's steps at the selected query (once per question: a newer one wins).
async function askSteps(app) {
  const s = app.state;
  if (!s.forward || s.error) return;
  if (s.info.kind === "seq2seq" && s.mode !== "cross") { s.steps = {unavailable: true}; drawSteps(app); return; }
  const body = {model: s.info.name, text: s.text, layer: s.layer, head: s.head, query: s.query};
  if (s.info.kind === "seq2seq") Object.assign(body, {target: s.target, mode: "cross"});
  const key = JSON.stringify(body);
  if (s.steps && s.steps.key === key) return;
  s.stepsKey = key;
  app.busy(1);
  try {
    const answer = await app.transport.call("head", body);
    if (s.stepsKey !== key) return;  // a newer question is out
    s.steps = Object.assign(answer, {key});
    drawSteps(app);
    app.root.dataset.steps = `${answer.layer},${answer.head},${answer.query}`;
  } catch (err) {
    if (s.stepsKey === key) { s.steps = {error: err.message, key}; drawSteps(app); }
  } finally {
    app.busy(-1);
  }
}
