// Every layer × head at once (small multiples): each thumbnail the block means of one head's weights, scaled to its
// own largest; click or Enter to look at one, its switch to turn the head off (the model's head_mask).

function buildOverview(app) {
  const view = app.parts.views.overview;
  app.parts.overviewHelp = el("p", {class: "ax-help", dataset: {i18n: "overview_help"}});
  app.parts.grid = el("div", {class: "ax-grid", dataset: {testid: "overview"}});
  view.append(app.parts.overviewHelp, app.parts.grid);
}

function buildOverviewGrid(app) {
  const grid = clear(app.parts.grid), info = app.info, layers = app.layers();
  const switches = info.head_mask;
  grid.style.setProperty("--ax-heads", info.heads);
  app.parts.thumbs = [];
  grid.append(el("span"));
  for (let h = 0; h < info.heads; h++) grid.append(el("span", {class: "ax-axis", dataset: {head: h}}));
  for (let l = 0; l < layers; l++) {
    grid.append(el("span", {class: "ax-axis", dataset: {layer: l}}));
    for (let h = 0; h < info.heads; h++) {
      const canvas = el("canvas", {width: 1, height: 1});
      const button = el("button", {class: "ax-thumb", dataset: {testid: "overview-cell", layer: l, head: h},
                                   on: {click: () => app.select(l, h), dblclick: () => app.showTab("head"),
                                        keydown: (e) => thumbKeys(app, e, l, h)}}, canvas);
      const box = el("div", {class: "ax-cell"}, button);
      if (switches) {
        const toggle = el("input", {type: "checkbox", checked: true, disabled: !app.transport.live,
                                    dataset: {testid: "head-switch", layer: l, head: h},
                                    on: {change: () => app.toggleHead(l, h)}});
        box.append(el("label", {class: "ax-switch"}, toggle, el("span", {dataset: {i18n: "head_on"}})));
      }
      grid.append(box);
      app.parts.thumbs.push({layer: l, head: h, button, canvas, box});
    }
  }
  relabelAxes(app);
  markSelected(app);
}

function relabelAxes(app) {
  for (const node of app.parts.grid.querySelectorAll(".ax-axis")) {
    node.textContent = node.dataset.head !== undefined ? t("head_n", {n: node.dataset.head})
                                                       : t("layer_n", {n: node.dataset.layer});
  }
  for (const th of app.parts.thumbs || []) {
    th.button.setAttribute("aria-label", t("layer_head", {layer: th.layer, head: th.head}));
    const toggle = th.box.querySelector("input");
    if (toggle) toggle.setAttribute("aria-label", t("switch_label", {layer: th.layer, head: th.head}));
  }
}

function thumbKeys(app, e, l, h) {
  const info = app.info;
  const moves = {ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0]};
  if (e.key === "Enter") { e.preventDefault(); app.select(l, h); app.showTab("head"); return; }
  if (e.key === "o" && info.head_mask) { e.preventDefault(); app.toggleHead(l, h); return; }
  const move = moves[e.key];
  if (!move) return;
  e.preventDefault();
  const nl = Math.max(0, Math.min(app.layers() - 1, l + move[0]));
  const nh = Math.max(0, Math.min(info.heads - 1, h + move[1]));
  app.select(nl, nh);
  const next = app.parts.thumbs.find((th) => th.layer === nl && th.head === nh);
  if (next) next.button.focus();
}

// A head switched off, in the page's set of them: its attention (a translation model has three), layer and head.
function headKey(mode, layer, head) { return `${mode},${layer},${head}`; }

// The heads switched off, as /api/forward reads them: [[layer, head], ...], or a translation model's by attention.
function maskRequest(app) {
  const off = Array.from(app.state.off, (key) => key.split(","));
  const pairs = (mode) => off.filter(([m]) => m === mode).map(([, l, h]) => [Number(l), Number(h)]);
  return app.info.kind === "seq2seq" ? {encoder: pairs("encoder"), decoder: pairs("decoder"), cross: pairs("cross")}
                                     : pairs("self");
}

function markSelected(app) {
  const s = app.state;
  for (const th of app.parts.thumbs || []) {
    const on = th.layer === s.layer && th.head === s.head;
    th.button.classList.toggle("ax-selected", on);
    th.button.setAttribute("aria-pressed", String(on));
    th.button.tabIndex = on ? 0 : -1;
    const off = s.off.has(headKey(s.mode, th.layer, th.head));
    th.box.classList.toggle("ax-off", off);
    const toggle = th.box.querySelector("input");
    if (toggle) toggle.checked = !off;
  }
}

function drawOverview(app) {
  relabelAxes(app);
  markSelected(app);
  const o = app.state.overview;
  if (!o || o.mode !== app.state.mode) return;
  const [, heads, rows, cols] = o.weights.shape;
  for (const th of app.parts.thumbs) {
    if (th.layer >= o.weights.shape[0]) continue;
    const m = matrixOf(o.weights, [th.layer, th.head]);
    paintMatrix(th.canvas, m, rows, cols);
  }
  app.parts.grid.dataset.heads = heads;
}

// One matrix as pixels on a canvas (one pixel a cell; CSS scales it up, unsmoothed).
function paintMatrix(canvas, m, rows, cols) {
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(cols, rows);
  let top = 0;
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) top = Math.max(top, m.at(i, j));
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const [r, g, b] = shade(m.at(i, j), top), k = 4 * (i * cols + j);
      image.data[k] = r; image.data[k + 1] = g; image.data[k + 2] = b; image.data[k + 3] = 255;
    }
  }
  ctx.putImageData(image, 0, 0);
}
