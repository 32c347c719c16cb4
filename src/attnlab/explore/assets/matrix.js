// One head: where each token looks and what looks at it. Two rows of tokens (queries above, keys below: hover one
// to tint the other by its weights) and the matrix itself, one cell a weight (data-weight: the model's float32),
// at most PAGE × PAGE cells at a time; a longer text pages.

const PAGE = 64;
const SHADES = Array.from({length: 256}, (_, k) => css(shade(k, 255)));

function buildMatrix(app) {
  const view = app.parts.views.head;
  const p = app.parts;
  p.headTitle = el("h2", {class: "ax-title"});
  p.info = el("p", {class: "ax-info", dataset: {testid: "head-info"}, "aria-live": "polite"});
  p.queriesRow = el("div", {class: "ax-strip", dataset: {testid: "query-strip"}});
  p.keysRow = el("div", {class: "ax-strip", dataset: {testid: "key-strip"}});
  p.pager = el("div", {class: "ax-pager"});
  p.matrix = el("div", {class: "ax-matrix", tabindex: 0, dataset: {testid: "head-matrix"},
                        on: {keydown: (e) => matrixKeys(app, e), mouseleave: () => hover(app, null),
                             mouseover: (e) => {  // one listener for every cell
                               const c = e.target.dataset;
                               if (c.testid === "head-cell") hover(app, {q: Number(c.query), k: Number(c.key)});
                             }}});
  view.append(p.headTitle,
              el("div", {class: "ax-strips"}, el("span", {class: "ax-label", dataset: {i18n: "queries"}}), p.queriesRow,
                 el("span", {class: "ax-label", dataset: {i18n: "keys"}}), p.keysRow),
              p.info, p.pager, p.matrix);
}

function pageOf(app) {
  const d = app.state.detail;
  if (!d) return null;
  const [rows, cols] = d.weights.shape;
  const pr = Math.min(app.state.page.rows, Math.max(0, rows - 1));
  const pc = Math.min(app.state.page.cols, Math.max(0, cols - 1));
  return {rows, cols, r0: pr - (pr % PAGE), c0: pc - (pc % PAGE)};
}

function drawMatrix(app) {
  const s = app.state, p = app.parts, d = s.detail;
  p.headTitle.textContent = t("layer_head", {layer: s.layer, head: s.head});
  if (!d || d.mode !== s.mode) return;
  const w = matrixOf(d.weights, []);
  const qt = app.queryTokens(), kt = app.keyTokens();
  const win = pageOf(app);
  const r1 = Math.min(win.rows, win.r0 + PAGE), c1 = Math.min(win.cols, win.c0 + PAGE);
  // the same window: the grid stays, its labels and cells change (a keystroke redraws 4,096 cells, not the grid)
  const layout = [win.r0, r1, win.c0, c1].join();
  if (layout !== p.matrixLayout) {
    p.matrixLayout = layout;
    const grid = clear(p.matrix);
    grid.style.setProperty("--ax-cols", c1 - win.c0);
    grid.append(el("span", {class: "ax-corner"}));
    p.colLabels = [];
    p.rowLabels = [];
    p.cells = [];  // [element, query, key]
    p.cellsHead = null;
    for (let j = win.c0; j < c1; j++) grid.append(pushed(p.colLabels, modelText("span", "", {class: "ax-col"})));
    for (let i = win.r0; i < r1; i++) {
      grid.append(pushed(p.rowLabels, modelText("span", "", {class: "ax-row"})));
      for (let j = win.c0; j < c1; j++) {
        const cell = el("span", {class: "ax-hc", dataset: {testid: "head-cell", query: i, key: j}});
        p.cells.push([cell, i, j]);
        grid.append(cell);
      }
    }
  }
  p.colLabels.forEach((node, j) => { node.textContent = shownToken(kt[win.c0 + j] || ""); });
  p.rowLabels.forEach((node, i) => { node.textContent = shownToken(qt[win.r0 + i] || ""); });
  drawStrips(app, qt, kt);
  let top = 0;
  for (let i = win.r0; i < r1; i++) for (let j = win.c0; j < c1; j++) top = Math.max(top, w.at(i, j));
  const head = `${d.layer},${d.head}`, newHead = head !== p.cellsHead;
  p.cellsHead = head;
  // two DOM writes a cell, its colour one of 256 strings made once: a keystroke redraws 4,096 cells
  for (const [cell, i, j] of p.cells) {
    const weight = w.at(i, j);
    if (newHead) Object.assign(cell.dataset, {layer: d.layer, head: d.head});
    cell.dataset.weight = String(weight);
    cell.style.background = SHADES[top > 0 ? Math.min(255, Math.round(255 * weight / top)) : 0];
  }
  drawPager(app, win);
  hover(app, s.hover);
}

function pushed(list, node) { list.push(node); return node; }

function drawStrips(app, qt, kt) {
  const p = app.parts;
  for (const [row, tokens, side] of [[p.queriesRow, qt, "q"], [p.keysRow, kt, "k"]]) {
    if (row.children.length !== tokens.length) {
      clear(row);
      tokens.forEach((tok, i) => row.append(stripToken(app, tok, side, i)));
    } else {
      tokens.forEach((tok, i) => { row.children[i].textContent = shownToken(tok); });  // same count: new words
    }
  }
}

function stripToken(app, token, side, index) {
  const node = modelText("span", shownToken(token), {class: "ax-tok", dataset: {side, index}});
  node.addEventListener("mouseenter", () => hover(app, side === "q" ? {q: index} : {k: index}));
  node.addEventListener("mouseleave", () => hover(app, null));
  node.addEventListener("click", () => { if (side === "q") app.setQuery(index); });
  return node;
}

function drawPager(app, win) {
  const p = clear(app.parts.pager);
  if (win.rows <= PAGE && win.cols <= PAGE) return;
  const move = (dr, dc) => {
    const s = app.state;
    s.page = {rows: Math.max(0, Math.min(win.rows - 1, win.r0 + dr)), cols: Math.max(0, Math.min(win.cols - 1, win.c0 + dc))};
    drawMatrix(app);
  };
  p.append(el("span", {}, t("page_rows", {from: win.r0, to: Math.min(win.rows, win.r0 + PAGE) - 1, of: win.rows})),
           el("button", {dataset: {testid: "page-up"}, on: {click: () => move(-PAGE, 0)}}, "↑"),
           el("button", {dataset: {testid: "page-down"}, on: {click: () => move(PAGE, 0)}}, "↓"),
           el("span", {}, t("page_cols", {from: win.c0, to: Math.min(win.cols, win.c0 + PAGE) - 1, of: win.cols})),
           el("button", {dataset: {testid: "page-left"}, on: {click: () => move(0, -PAGE)}}, "←"),
           el("button", {dataset: {testid: "page-right"}, on: {click: () => move(0, PAGE)}}, "→"));
}

// What the pointer (or the keyboard's cursor) is on: a cell {q, k}, a query {q}, a key {k}, or nothing.
function hover(app, at) {
  const s = app.state, p = app.parts, d = s.detail;
  s.hover = at;
  if (!d) return;
  const w = matrixOf(d.weights, []);
  const qt = app.queryTokens(), kt = app.keyTokens();
  const shadeRow = (row, values) => {
    let top = 0;
    if (values) values.forEach((v) => { top = Math.max(top, v); });
    Array.from(row.children).forEach((node, i) => {
      node.style.background = values ? css(shade(values[i] || 0, top)) : "";
      node.dataset.weight = values ? String(values[i] || 0) : "";
    });
  };
  const range = (n, f) => Array.from({length: n}, (_, i) => f(i));
  const info = p.info;
  if (at && at.q !== undefined && at.k !== undefined) {
    info.textContent = t("cell_info", {query: shownToken(qt[at.q] || ""), key: shownToken(kt[at.k] || ""),
                                       weight: fmt(w.at(at.q, at.k))});
  } else if (at && at.q !== undefined) {
    info.textContent = t("looks_at", {token: shownToken(qt[at.q] || "")});
  } else if (at && at.k !== undefined) {
    info.textContent = t("looked_at", {token: shownToken(kt[at.k] || "")});
  } else {
    info.textContent = t("hover_help");
  }
  if (at && at.q !== undefined) shadeRow(p.keysRow, range(w.cols, (j) => w.at(at.q, j)));
  else shadeRow(p.keysRow, null);
  if (at && at.k !== undefined && at.q === undefined) shadeRow(p.queriesRow, range(w.rows, (i) => w.at(i, at.k)));
  else shadeRow(p.queriesRow, null);
  for (const cell of p.matrix.querySelectorAll(".ax-cursor")) cell.classList.remove("ax-cursor");
  if (at && at.q !== undefined && at.k !== undefined) {
    const cell = p.matrix.querySelector(`[data-query="${at.q}"][data-key="${at.k}"]`);
    if (cell) cell.classList.add("ax-cursor");
  }
  ensureGlyphs(info.textContent);
}

function matrixKeys(app, e) {
  const d = app.state.detail;
  if (!d) return;
  const [rows, cols] = d.weights.shape;
  const at = app.state.hover && app.state.hover.q !== undefined && app.state.hover.k !== undefined
    ? app.state.hover : {q: 0, k: 0};
  const moves = {ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0]};
  if (e.key === "Escape") { hover(app, null); return; }
  if (e.key === "Enter") { app.setQuery(at.q); app.showTab("steps"); return; }
  const move = moves[e.key];
  if (!move) return;
  e.preventDefault();
  const next = {q: Math.max(0, Math.min(rows - 1, at.q + move[0])), k: Math.max(0, Math.min(cols - 1, at.k + move[1]))};
  const win = pageOf(app);
  if (next.q < win.r0 || next.q >= win.r0 + PAGE || next.k < win.c0 || next.k >= win.c0 + PAGE) {
    app.state.page = {rows: next.q, cols: next.k};
    app.state.hover = next;
    drawMatrix(app);
  } else {
    hover(app, next);
  }
}
