// PNG and SVG of any view. Each view is drawn again as SVG from the numbers it shows (text as text, escaped by the
// DOM's serializer), with the page's CJK faces inside it; the PNG is that SVG drawn on a canvas at twice its size.

const SVG_NS = "http://www.w3.org/2000/svg";

function svgNode(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A figure being drawn: nodes in order, its size growing with them.
class Figure {
  constructor(title) {
    this.svg = svgNode("svg", {xmlns: SVG_NS});
    const style = svgNode("style");
    style.textContent = Array.from(document.querySelectorAll("style"), (s) => s.textContent)
      .filter((text) => text.includes("@font-face")).join("\n") +
      `\ntext{font-family:${getComputedStyle(document.querySelector(".ax")).fontFamily};font-size:12px;fill:#1d2330}`;
    this.svg.append(style);
    this.width = 10;
    this.height = 10;
    this.text(10, 22, title, {"font-size": 15, "font-weight": 600});
    this.height = 34;
  }
  grow(x, y) { this.width = Math.max(this.width, x + 10); this.height = Math.max(this.height, y + 10); }
  text(x, y, content, attrs) {
    this.svg.append(svgNode("text", Object.assign({x, y}, attrs || {}), content));
    this.grow(x + 8 * String(content).length, y);
  }
  rect(x, y, w, h, fill, attrs) {
    this.svg.append(svgNode("rect", Object.assign({x, y, width: w, height: h, fill}, attrs || {})));
    this.grow(x + w, y + h);
  }
  image(x, y, w, h, href) {
    this.svg.append(svgNode("image", {x, y, width: w, height: h, href, style: "image-rendering:pixelated"}));
    this.grow(x + w, y + h);
  }
  done() {
    this.svg.setAttribute("width", this.width);
    this.svg.setAttribute("height", this.height);
    this.svg.setAttribute("viewBox", `0 0 ${this.width} ${this.height}`);
    this.svg.insertBefore(svgNode("rect", {width: "100%", height: "100%", fill: "#fff"}), this.svg.children[1]);
    return new XMLSerializer().serializeToString(this.svg);
  }
}

// cells: {rows: [label], cols: [label], at(i, j) -> weight or null, top}
function matrixFigure(fig, cells, y0) {
  const size = Math.max(6, Math.min(18, Math.floor(720 / Math.max(cells.cols.length, 1)))), left = 120;
  cells.cols.forEach((label, j) => fig.text(left + j * size + size / 2, y0 + 60, shownToken(label),
                                            {transform: `rotate(-60 ${left + j * size + size / 2} ${y0 + 60})`}));
  cells.rows.forEach((label, i) => {
    const y = y0 + 70 + i * size;
    fig.text(10, y + size - 3, shownToken(label));
    cells.cols.forEach((_, j) => {
      const w = cells.at(i, j);
      if (w === null) fig.rect(left + j * size, y, size - 1, size - 1, "#eee", {"stroke": "#bbb"});
      else fig.rect(left + j * size, y, size - 1, size - 1, css(shade(w, cells.top)));
    });
  });
}

const FIGURES = {
  overview(app) {
    const s = app.state, fig = new Figure(t("tab_overview") + " · " + s.info.name);
    for (const th of app.parts.thumbs) {
      const x = 70 + th.head * 70, y = 50 + th.layer * 70;
      if (th.head === 0) fig.text(10, y + 34, t("layer_n", {n: th.layer}));
      if (th.layer === 0) fig.text(x, 46, t("head_n", {n: th.head}));
      fig.image(x, y, 60, 60, th.canvas.toDataURL("image/png"));
      if (s.off.has(headKey(s.mode, th.layer, th.head))) fig.text(x + 20, y + 36, "✕", {"font-size": 22, fill: "#c00"});
    }
    return fig;
  },
  head(app) {
    const s = app.state, d = s.detail, fig = new Figure(t("layer_head", {layer: s.layer, head: s.head}));
    if (!d) return fig;
    const w = matrixOf(d.weights, []), win = pageOf(app);
    const rows = app.queryTokens().slice(win.r0, win.r0 + PAGE), cols = app.keyTokens().slice(win.c0, win.c0 + PAGE);
    let top = 0;
    rows.forEach((_, i) => cols.forEach((__, j) => { top = Math.max(top, w.at(win.r0 + i, win.c0 + j)); }));
    matrixFigure(fig, {rows, cols, top, at: (i, j) => w.at(win.r0 + i, win.c0 + j)}, 10);
    return fig;
  },
  steps(app) {
    const st = app.state.steps, fig = new Figure(st && st.tokens
      ? `${t("steps_title", {layer: st.layer, head: st.head})} ${shownToken(st.query_token)}` : t("tab_steps"));
    if (!st || !st.tokens) return fig;
    let y = 60;
    const line = (text) => { fig.text(10, y, text); y += 18; };
    const vec = (v) => "[" + v.slice(0, 8).map((x) => fmt(x)).join(", ") + (v.length > 8 ? ", …" : "") + "]";
    line(`x = ${vec(st.x)}`);
    line(`q = x·W_q + b = ${vec(st.rope ? st.xw : st.q)}`);
    if (st.rope) line(`RoPE (p = ${st.rope.position}): q = ${vec(st.q)}`);
    line(`${t("token")} | q·k_j | ÷√d_k | softmax`);
    st.tokens.forEach((tok, j) => line(`${shownToken(tok)} | ${fmt(st.scores[j])} | ` +
      `${st.allowed[j] ? fmt(st.scaled[j]) : "−∞"} | ${fmt(st.weights[j])}`));
    line(`z = Σ a_j v_j = ${vec(st.context)}`);
    line(`W_o[:, ${st.head}] · z = ${vec(st.share)}`);
    return fig;
  },
  generate(app) {
    const s = app.state, g = s.generation, fig = new Figure(t("tab_generate"));
    if (!g) return fig;
    const layer = Math.min(s.layer, app.info.layers - 1), tokens = [...g.prompt, ...g.tokens];
    const rows = g.steps.map((st) => {
      const {kept, weights} = st.layers[layer];
      return {token: st.token, at: new Map(kept.map((pos, i) => [pos, weights[s.head][i]])), position: st.position};
    });
    let top = 0;
    rows.forEach((r) => r.at.forEach((w) => { top = Math.max(top, w); }));
    matrixFigure(fig, {rows: rows.map((r) => r.token), cols: tokens, top,
                       at: (i, j) => (j > rows[i].position ? 0 : rows[i].at.has(j) ? rows[i].at.get(j) : null)}, 10);
    return fig;
  },
  patch(app) {
    const s = app.state, fig = new Figure(t("tab_patch") + " · " + s.info.name), a = s.patch && s.patch.answer;
    if (!a) return fig;
    fig.text(10, 52, `logit(${shownToken(a.right.token)}) − logit(${shownToken(a.wrong.token)}): ` +
             t("patch_baselines", {clean: fmt(a.clean.metric), corrupted: fmt(a.corrupted.metric)}));
    const heads = s.patch.heads;
    for (const c of app.parts.patchCells) {
      const x = 70 + c.head * 70, y = 70 + c.layer * 40;
      if (c.head === 0) fig.text(10, y + 22, t("layer_n", {n: c.layer}));
      if (c.layer === 0) fig.text(x, 66, t("head_n", {n: c.head}));
      const share = heads && heads.recovered ? heads.recovered[c.layer][c.head] : null;
      fig.rect(x, y, 60, 32, share === null ? "#f6f8fb" : diverging(share), {stroke: "#d9dee7"});
      if (heads) fig.text(x + 8, y + 21, share === null ? fmt(heads.metric[c.layer][c.head], 3) : fmt(share, 2));
    }
    return fig;
  },
  next(app) {
    const n = app.state.next, fig = new Figure(t("next_title"));
    if (!n) return fig;
    const top = n.next_tokens.length ? n.next_tokens[0].prob : 1;
    n.next_tokens.forEach((item, i) => {
      const y = 50 + i * 22;
      fig.text(10, y + 14, shownToken(item.token));
      fig.rect(90, y, Math.max(1, 300 * item.prob / top), 16, "#4c6ef5");
      fig.text(400, y + 14, fmt(item.prob * 100, 2) + "%");
    });
    return fig;
  },
};

async function exportView(app, format, view) {
  const name = view || app.state.tab;
  const svg = FIGURES[name](app).done();
  const file = `attnlab-${name}.${format}`;
  if (format === "svg") { download(new Blob([svg], {type: "image/svg+xml"}), file); return; }
  const url = URL.createObjectURL(new Blob([svg], {type: "image/svg+xml"}));
  try {
    const image = new Image();
    await new Promise((resolve, reject) => { image.onload = resolve; image.onerror = reject; image.src = url; });
    const canvas = el("canvas", {width: image.width * 2, height: image.height * 2});
    const ctx = canvas.getContext("2d");
    ctx.scale(2, 2);
    ctx.drawImage(image, 0, 0);
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
    download(blob, file);
  } finally {
    URL.revokeObjectURL(url);
  }
}
