// attnlab attention viewer. Reads the JSON block #attnlab-data; writes tokens with textContent only
// (never innerHTML), so a token is always shown as text. Weights arrive quantised: one uint8 per
// weight, relative to the maximum of its row (stored as float32), deflate-compressed, base64-encoded.
// A page may hold several modes (an encoder-decoder's encoder, decoder and cross-attention): each has
// its own query tokens (rows, Tq) and key tokens (columns, Tk), which differ for cross-attention.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const data = JSON.parse($("attnlab-data").textContent);
  const modes = data.modes || [{ title: data.title, qtokens: data.tokens, ktokens: data.tokens, layers: data.layers,
    heads: data.heads, layer_heads: data.layer_heads, weights: data.weights, rowmax: data.rowmax,
    compressed: data.compressed }];
  let Tq = 0, Tk = 0, L = 0, H = 0, qtok = [], ktok = [], title = data.title;
  let layerHeads = null;                // each layer's own heads where layers differ (the rest of its row is empty)
  const state = { layer: data.layer || 0, head: data.head || 0, view: "head", locked: null, hover: null, mode: 0 };
  let q = null, rowmax = null;          // Uint8Array (L*H*Tq*Tk), Float32Array (L*H*Tq)
  const ROW = 20;                       // px per token row in the head view
  const FONTS = data.fonts || "system-ui, sans-serif";  // the page's font stack: the embedded face after the Latin ones
  // what the page says, in the reader's language (attnlab.viz.viewer.UI): a template, its {fields} filled here
  const say = (key, fields = {}) => data.ui[key].replace(/\{(\w+)\}/g, (m, k) => String(fields[k]));

  function bytes(b64) {
    const s = atob(b64), out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  async function inflate(buf) {
    if (typeof DecompressionStream === "undefined") throw new Error(say("no_decompression"));
    const stream = new Blob([buf]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  // weight of query i on key j, dequantised: q / 255 * rowmax
  function weight(l, h, i, j) {
    const r = (l * H + h) * Tq + i;
    return q[r * Tk + j] / 255 * rowmax[r];
  }
  function row(l, h, i) { const w = new Float32Array(Tk); for (let j = 0; j < Tk; j++) w[j] = weight(l, h, i, j); return w; }
  function column(l, h, j) { const w = new Float32Array(Tq); for (let i = 0; i < Tq; i++) w[i] = weight(l, h, i, j); return w; }
  const longest = () => Math.max(Tq, Tk);

  // viridis-like ramp, 256 entries, for the matrix and thumbnails
  const RAMP = (() => {
    const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    const out = new Uint8ClampedArray(256 * 3);
    for (let k = 0; k < 256; k++) {
      const x = k / 255 * (stops.length - 1), a = Math.min(Math.floor(x), stops.length - 2), f = x - a;
      for (let c = 0; c < 3; c++) out[k * 3 + c] = stops[a][c] + f * (stops[a + 1][c] - stops[a][c]);
    }
    return out;
  })();
  function headImage(l, h) {             // (Tk wide x Tq high) ImageData of one head, absolute weights
    const img = new ImageData(Tk, Tq), px = img.data;
    for (let i = 0; i < Tq; i++) {
      const r = (l * H + h) * Tq + i, scale = rowmax[r], base = r * Tk;
      for (let j = 0; j < Tk; j++) {
        const k = Math.min(255, Math.round(q[base + j] * scale)) * 3, p = (i * Tk + j) * 4;
        px[p] = RAMP[k]; px[p + 1] = RAMP[k + 1]; px[p + 2] = RAMP[k + 2]; px[p + 3] = 255;
      }
    }
    return img;
  }

  // ---- head view: tokens as DOM text, lines on one canvas -------------------------------------
  function buildTokens() {
    for (const side of ["left", "right"]) {
      const col = $(side);
      col.textContent = "";
      (side === "left" ? qtok : ktok).forEach((t, i) => {
        const d = document.createElement("div");
        d.className = "tok"; d.textContent = t; d.dataset.i = String(i); d.title = t;
        d.addEventListener("mouseenter", () => { state.hover = { side, i }; drawHead(); });
        d.addEventListener("mouseleave", () => { state.hover = null; drawHead(); });
        d.addEventListener("click", () => {
          const same = state.locked && state.locked.side === side && state.locked.i === i;
          state.locked = same ? null : { side, i }; drawHead();
        });
        col.appendChild(d);
      });
    }
    const c = $("lines"); c.height = longest() * ROW; c.width = 300;
  }
  function focus() { return state.hover || state.locked; }
  function drawHead() {
    const c = $("lines"), ctx = c.getContext("2d"), f = focus(), l = state.layer, h = state.head;
    ctx.clearRect(0, 0, c.width, c.height);
    const lefts = $("left").children, rights = $("right").children;
    for (const el of [...lefts, ...rights]) { el.style.background = ""; el.classList.remove("selected"); delete el.dataset.weight; }
    const buckets = Array.from({ length: 16 }, () => []);   // one path per opacity level: fast for 512 tokens
    const add = (i, j, w) => { if (w > 0.004) buckets[Math.min(15, Math.floor(w * 16))].push(i, j); };
    let shown = null;
    if (f && f.side === "left") {
      shown = row(l, h, f.i); lefts[f.i].classList.add("selected");
      shown.forEach((w, j) => { add(f.i, j, w); paint(rights[j], w); });
    } else if (f && f.side === "right") {
      shown = column(l, h, f.i); rights[f.i].classList.add("selected");
      shown.forEach((w, i) => { add(i, f.i, w); paint(lefts[i], w); });
    } else {
      for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) add(i, j, weight(l, h, i, j));
    }
    ctx.lineWidth = longest() > 64 ? 1 : 2;
    buckets.forEach((pairs, b) => {
      if (!pairs.length) return;
      ctx.strokeStyle = `rgba(37, 99, 235, ${(b + 0.5) / 16})`;
      ctx.beginPath();
      for (let k = 0; k < pairs.length; k += 2) {
        ctx.moveTo(0, pairs[k] * ROW + ROW / 2); ctx.lineTo(c.width, pairs[k + 1] * ROW + ROW / 2);
      }
      ctx.stroke();
    });
    showWeights(f, shown);
  }
  function paint(el, w) {
    el.style.background = `rgba(37, 99, 235, ${Math.min(1, w) * 0.8})`;
    el.dataset.weight = w.toFixed(6);
  }
  function showWeights(f, shown) {
    const box = $("weights"); box.textContent = "";
    if (!f) { $("info").textContent = say("hover"); return; }
    const who = (f.side === "left" ? qtok : ktok)[f.i], other = f.side === "left" ? ktok : qtok;
    $("info").textContent = say(f.side === "left" ? "query_attends" : "key_attended",
      { i: f.i, token: who, layer: state.layer, head: state.head });
    const order = Array.from(shown.keys()).sort((a, b) => shown[b] - shown[a]).slice(0, 20);
    for (const k of order) {
      const r = document.createElement("div"); r.className = "row";
      r.textContent = `${shown[k].toFixed(4)}  ${other[k]}`; box.appendChild(r);
    }
  }

  // ---- matrix view -------------------------------------------------------------------------------
  function matrixGeometry() {
    const cell = Math.max(1, Math.min(36, Math.floor(900 / longest()))), label = longest() <= 64 ? 110 : 0;
    return { cell, label };
  }
  function drawMatrix(ctx, withLabels) {
    const { cell, label } = matrixGeometry(), off = document.createElement("canvas");
    off.width = Tk; off.height = Tq; off.getContext("2d").putImageData(headImage(state.layer, state.head), 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, ctx.canvas.width, ctx.canvas.height);
    ctx.drawImage(off, label, label, Tk * cell, Tq * cell);
    if (withLabels && label) {
      ctx.fillStyle = "#1d2330"; ctx.font = `12px ${FONTS}`; ctx.textBaseline = "middle";
      qtok.forEach((t, i) => { ctx.textAlign = "right"; ctx.fillText(t, label - 4, label + i * cell + cell / 2, label - 6); });
      ktok.forEach((t, j) => {
        ctx.save(); ctx.translate(label + j * cell + cell / 2, label - 4); ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left"; ctx.fillText(t, 0, 0, label - 6); ctx.restore();
      });
    }
  }
  function renderMatrix() {
    const c = $("matrix"), { cell, label } = matrixGeometry();
    c.width = label + Tk * cell + 4; c.height = label + Tq * cell + 4;
    drawMatrix(c.getContext("2d"), true);
  }
  $("matrix").addEventListener("mousemove", (ev) => {
    const { cell, label } = matrixGeometry(), r = $("matrix").getBoundingClientRect();
    const i = Math.floor((ev.clientY - r.top - label) / cell), j = Math.floor((ev.clientX - r.left - label) / cell);
    if (i < 0 || j < 0 || i >= Tq || j >= Tk) return;
    $("info").textContent = say("cell", { i, query: qtok[i], j, key: ktok[j],
      weight: weight(state.layer, state.head, i, j).toFixed(4) });
  });

  // ---- all heads: L x H thumbnails, drawn a few per frame so the page never freezes --------------
  const THUMB = 72;
  let gridJob = 0;
  function renderGrid() {
    const grid = $("grid"); grid.textContent = "";
    grid.style.gridTemplateColumns = `repeat(${H}, ${THUMB + 8}px)`;
    const todo = [];
    for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) {
      if (layerHeads && h >= layerHeads[l]) {   // a layer with fewer heads: an empty cell keeps the grid's columns
        const gap = document.createElement("figure"); gap.className = "absent"; grid.appendChild(gap); continue;
      }
      const fig = document.createElement("figure"), c = document.createElement("canvas"), cap = document.createElement("figcaption");
      c.width = THUMB; c.height = THUMB; cap.textContent = say("thumb", { layer: l, head: h });
      fig.dataset.layer = String(l); fig.dataset.head = String(h);
      if (l === state.layer && h === state.head) fig.classList.add("current");
      fig.append(c, cap); grid.appendChild(fig);
      fig.addEventListener("click", () => { select(l, h); setView("head"); });
      todo.push([c, l, h]);
    }
    const job = ++gridJob;
    const step = () => {
      if (job !== gridJob) return;
      const t0 = performance.now();
      while (todo.length && performance.now() - t0 < 30) {
        const [c, l, h] = todo.shift(), off = document.createElement("canvas");
        off.width = Tk; off.height = Tq; off.getContext("2d").putImageData(headImage(l, h), 0, 0);
        const ctx = c.getContext("2d"); ctx.imageSmoothingEnabled = longest() > THUMB; ctx.drawImage(off, 0, 0, THUMB, THUMB);
      }
      if (todo.length) requestAnimationFrame(step); else grid.dataset.done = "1";
    };
    requestAnimationFrame(step);
  }

  // ---- export: the current view as PNG (canvas) or SVG (elements, text via textContent) ----------
  function headCanvas() {
    const c = document.createElement("canvas"), w = 180, lines = $("lines");
    c.width = 2 * w + lines.width; c.height = longest() * ROW + 30;
    const ctx = c.getContext("2d");
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
    ctx.font = `14px ${FONTS}`; ctx.textBaseline = "middle"; ctx.fillStyle = "#1d2330";
    ctx.fillText(say("export_title", { title, layer: state.layer, head: state.head }), 4, 12);
    ctx.drawImage(lines, w, 24);
    qtok.forEach((t, i) => { ctx.textAlign = "right"; ctx.fillText(t, w - 6, 24 + i * ROW + ROW / 2, w - 10); });
    ktok.forEach((t, j) => { ctx.textAlign = "left"; ctx.fillText(t, w + lines.width + 6, 24 + j * ROW + ROW / 2, w - 10); });
    return c;
  }
  function viewCanvas() {
    if (state.view === "matrix") return $("matrix");
    if (state.view === "head") return headCanvas();
    const c = document.createElement("canvas"), figs = [...$("grid").querySelectorAll("canvas")];
    c.width = H * (THUMB + 8); c.height = L * (THUMB + 8);
    const ctx = c.getContext("2d"); ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
    figs.forEach((f, k) => ctx.drawImage(f, (k % H) * (THUMB + 8) + 4, Math.floor(k / H) * (THUMB + 8) + 4));
    return c;
  }
  function viewSvg() {
    const NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg");
    const el = (name, attrs, text) => {
      const e = document.createElementNS(NS, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e); return e;
    };
    svg.setAttribute("xmlns", NS);
    svg.setAttribute("font-family", FONTS);
    const l = state.layer, h = state.head;
    if (state.view === "head") {
      const w = 180, mid = 300, f = focus();
      svg.setAttribute("width", 2 * w + mid); svg.setAttribute("height", longest() * ROW + 30);
      el("text", { x: 4, y: 16, "font-size": 14 }, say("export_title", { title, layer: l, head: h }));
      for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
        if (f && ((f.side === "left" && f.i !== i) || (f.side === "right" && f.i !== j))) continue;
        const x = weight(l, h, i, j);
        if (x > 0.004) el("line", { x1: w, y1: 24 + i * ROW + ROW / 2, x2: w + mid, y2: 24 + j * ROW + ROW / 2,
          stroke: "#2563eb", "stroke-opacity": x.toFixed(3), "stroke-width": 2 });
      }
      qtok.forEach((t, i) => el("text", { x: w - 6, y: 24 + i * ROW + 15, "text-anchor": "end", "font-size": 14 }, t));
      ktok.forEach((t, j) => el("text", { x: w + mid + 6, y: 24 + j * ROW + 15, "font-size": 14 }, t));
    } else {
      const { cell, label } = matrixGeometry(), ls = state.view === "grid" ? [] : [[l, h]];
      if (state.view === "grid") for (let a = 0; a < L; a++) for (let b = 0; b < H; b++) ls.push([a, b]);
      const width = label + Tk * cell, height = label + Tq * cell, cols = state.view === "grid" ? H : 1;
      svg.setAttribute("width", cols * (width + 10)); svg.setAttribute("height", Math.ceil(ls.length / cols) * (height + 10));
      ls.forEach(([a, b], k) => {
        const ox = (k % cols) * (width + 10), oy = Math.floor(k / cols) * (height + 10);
        for (let i = 0; i < Tq; i++) for (let j = 0; j < Tk; j++) {
          const v = Math.min(255, Math.round(weight(a, b, i, j) * 255)) * 3;
          el("rect", { x: ox + label + j * cell, y: oy + label + i * cell, width: cell, height: cell,
            fill: `rgb(${RAMP[v]},${RAMP[v + 1]},${RAMP[v + 2]})` });
        }
        if (label) {
          qtok.forEach((t, i) => el("text", { x: ox + label - 4, y: oy + label + i * cell + cell / 2 + 4,
            "text-anchor": "end", "font-size": 12 }, t));
          ktok.forEach((t, j) => el("text", { x: 0, y: 0, "font-size": 12,
            transform: `translate(${ox + label + j * cell + cell / 2 + 4},${oy + label - 4}) rotate(-90)` }, t));
        }
      });
    }
    return new XMLSerializer().serializeToString(svg);
  }
  function download(blob, ext) {
    const a = document.createElement("a");
    const mode = modes.length > 1 ? `${modes[state.mode].name}-` : "";
    a.href = URL.createObjectURL(blob); a.download = `attention-${mode}${state.view}-L${state.layer}-H${state.head}.${ext}`;
    document.body.appendChild(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }
  $("export-png").addEventListener("click", () => viewCanvas().toBlob((b) => download(b, "png"), "image/png"));
  $("export-svg").addEventListener("click", () => download(new Blob([viewSvg()], { type: "image/svg+xml" }), "svg"));

  // ---- controls ------------------------------------------------------------------------------------
  function options(sel, n, key) {
    sel.textContent = "";
    for (let k = 0; k < n; k++) { const o = document.createElement("option"); o.value = String(k); o.textContent = say(key, { n: k }); sel.appendChild(o); }
  }
  function select(l, h) {
    state.layer = l; state.head = h; $("layer").value = String(l); $("head").value = String(h);
    render();
  }
  function setView(v) {
    state.view = v;
    for (const b of document.querySelectorAll("[data-view]")) b.classList.toggle("active", b.dataset.view === v);
    for (const s of document.querySelectorAll(".view")) s.classList.toggle("shown", s.id === `view-${v}`);
    render();
  }
  function render() {
    if (state.view === "head") drawHead();
    else if (state.view === "matrix") renderMatrix();
    else renderGrid();
    document.body.dataset.layer = String(state.layer); document.body.dataset.head = String(state.head);
    document.body.dataset.mode = String(state.mode);
  }
  $("layer").addEventListener("change", (e) => select(Number(e.target.value), state.head));
  $("head").addEventListener("change", (e) => select(state.layer, Number(e.target.value)));
  for (const b of document.querySelectorAll("[data-view]")) b.addEventListener("click", () => setView(b.dataset.view));

  // ---- modes: an encoder-decoder's three attentions, each with its own tokens and weights -----------
  async function loadMode(k) {
    const m = modes[k];
    let raw = bytes(m.weights);
    if (m.compressed) raw = await inflate(raw);
    q = raw; rowmax = new Float32Array(bytes(m.rowmax).buffer);
    qtok = m.qtokens; ktok = m.ktokens; Tq = qtok.length; Tk = ktok.length; L = m.layers; H = m.heads;
    layerHeads = m.layer_heads || null;
    title = m.title || data.title; state.mode = k; state.locked = null; state.hover = null;
    $("title").textContent = title;
    options($("layer"), L, "layer_option"); options($("head"), H, "head_option");
    buildTokens();
  }
  const modeSelect = $("mode");
  if (modes.length > 1) {
    modes.forEach((m, k) => { const o = document.createElement("option"); o.value = String(k); o.textContent = m.label; modeSelect.appendChild(o); });
    modeSelect.addEventListener("change", async (e) => {
      await loadMode(Number(e.target.value));
      select(Math.min(state.layer, L - 1), Math.min(state.head, H - 1));
    });
  } else {
    modeSelect.parentElement.hidden = true;
  }

  async function start() {
    await loadMode(data.mode || 0);
    if (data.font_family && document.fonts && document.fonts.load) {
      // the page's @font-face (attnlab.viz.webfont): loaded before the canvases draw, which do not wait for it
      try { await document.fonts.load(`14px "${data.font_family}"`, title + qtok.join("") + ktok.join("")); }
      catch (e) { /* the browser's own fonts will do */ }
    }
    modeSelect.value = String(state.mode);
    select(state.layer, state.head);
    document.body.dataset.ready = "1";
  }
  window.attnlab = { weight, row, state, select, setView, loadMode, data, get tokens() { return qtok; },
    get keyTokens() { return ktok; } };
  start().catch((e) => { $("status").textContent = say("cannot_load", { error: e.message }); });
})();
