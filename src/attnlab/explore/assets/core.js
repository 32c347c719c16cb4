// attnlab explore: what every view shares. The page's scripts are plain functions in one scope (page.py
// concatenates the files: a script for the page, an ES module for the notebook widget); no library, no request
// but to the server that served the page.

"use strict";

// ---- elements -----------------------------------------------------------------------------------------------

// el("div", {class: "x", dataset: {testid: "y"}, on: {click: f}}, child, "text", ...): text is always text
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
    else if (key === "text") node.textContent = value;
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  if (node.dataset.i18n && children.length === 0) node.textContent = t(node.dataset.i18n);  // relabel() redoes it
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

// A token as the page shows it: a space, a line break, a tab visible; an empty one as ∅.
function shownToken(token) {
  if (token === "") return "∅";
  return token.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥");
}

// Model text (tokens, typed text, model names) is marked: it is never translated.
function modelText(tag, text, attrs) {
  return el(tag, Object.assign({class: "mt"}, attrs || {}), text);
}

function fmt(x, digits) {
  if (x === null || x === undefined) return "−∞";
  if (!Number.isFinite(x)) return x > 0 ? "∞" : "−∞";
  const d = digits === undefined ? 4 : digits;
  return (x < 0 ? "−" : "") + Math.abs(x).toFixed(d);
}

// ---- the catalog: every word of the page, in the page's language -------------------------------------------

const I18N = {strings: {en: {}, zh: {}}, lang: "en"};

// t("key", {n: 3}): the string in the page's language, its {fields} filled in
function t(key, fields) {
  const table = I18N.strings[I18N.lang] || {};
  let text = table[key] !== undefined ? table[key] : (I18N.strings.en[key] !== undefined ? I18N.strings.en[key] : key);
  if (fields) text = text.replace(/\{(\w+)(?:[^}]*)\}/g, (m, name) => (name in fields ? String(fields[name]) : m));
  return text;
}

// ---- arrays: nested lists or the API's base64 float32 ---------------------------------------------------------

function decodeArray(value) {
  if (value && value.dtype === "float32") {
    const raw = atob(value.data);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return {shape: value.shape, data: new Float32Array(bytes.buffer)};
  }
  const shape = [];
  for (let v = value; Array.isArray(v); v = v[0]) shape.push(v.length);
  return {shape, data: Float32Array.from(value.flat(Infinity))};
}

// one (rows, cols) matrix of an array: index [i0, i1, ...] of the leading dimensions
function matrixOf(array, lead) {
  const [rows, cols] = array.shape.slice(-2);
  let offset = 0;
  lead.forEach((index, k) => { offset = offset * array.shape[k] + index; });
  offset *= rows * cols;
  return {rows, cols, at: (i, j) => array.data[offset + i * cols + j]};
}

// ---- colour: white to deep blue by weight -------------------------------------------------------------------

function shade(w, top) {
  const x = top > 0 ? Math.max(0, Math.min(1, w / top)) : 0;
  const r = Math.round(255 - 222 * x), g = Math.round(255 - 160 * x), b = Math.round(255 - 75 * x);
  return [r, g, b];
}
function css([r, g, b]) { return `rgb(${r},${g},${b})`; }

// ---- glyphs: characters the page's fonts lack are cut on the server, once ---------------------------------------

const GLYPHS = {covered: new Set(), families: [], asked: new Set(), queue: new Set(), busy: false, transport: null,
                root: null};

// A face the page may use: its @font-face rule added (unless the page already holds it), its family appended.
function coverFont(face) {
  if (!face || !face.family) return;
  if (face.css) {
    const style = document.createElement("style");
    style.textContent = face.css;
    document.head.appendChild(style);
  }
  for (const ch of face.chars) GLYPHS.covered.add(ch);
  GLYPHS.families.push(face.family);
  const root = GLYPHS.root;
  if (!root) return;
  const families = GLYPHS.families.map((f) => `"${f}"`).join(", ");
  // the family joins the list once it is loaded: the text that needs it is laid out anew, with it
  loadFaces([face]).finally(() => {
    root.style.setProperty("--ax-cjk", families);
    root.dataset.faces = String(GLYPHS.families.length);
  });
}

// Ask the server for the glyphs of every character of `text` that no face covers yet (CJK and the like).
function ensureGlyphs(text) {
  if (!GLYPHS.transport || !GLYPHS.transport.fonts) return;
  for (const ch of text || "") {
    if (ch.codePointAt(0) < 0x2000 || /\s/.test(ch) || GLYPHS.covered.has(ch) || GLYPHS.asked.has(ch)) continue;
    GLYPHS.queue.add(ch);
  }
  pumpGlyphs();
}

function pumpGlyphs() {
  if (GLYPHS.busy || GLYPHS.queue.size === 0) return;
  const chars = Array.from(GLYPHS.queue).slice(0, 4000);
  for (const ch of chars) { GLYPHS.queue.delete(ch); GLYPHS.asked.add(ch); }
  GLYPHS.busy = true;
  GLYPHS.transport.call("font", {chars: chars.join("")})
    .then(coverFont, () => null)
    .finally(() => { GLYPHS.busy = false; pumpGlyphs(); });
}

// ---- downloads ----------------------------------------------------------------------------------------------

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = el("a", {href: url, download: name});
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
