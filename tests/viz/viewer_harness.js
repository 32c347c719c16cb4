// A stub DOM, just enough to run the viewer's script in node, switch its modes and read its state (tests/viz).
const fs = require("fs");
const page = fs.readFileSync(process.argv[2], "utf8");
const data = page.match(/<script type="application\/json" id="attnlab-data">([\s\S]*?)<\/script>/)[1];
const script = page.match(/<script>\n([\s\S]*?)<\/script>/)[1];
function el(id) {
  const e = { id, textContent: id === "attnlab-data" ? data : "", children: [], dataset: {}, style: {}, value: "",
    hidden: false, width: 0, height: 0, listeners: {},
    classList: { add() {}, remove() {}, toggle() {} },
    appendChild(c) { this.children.push(c); c.parentElement = this; return c; }, append(...cs) { cs.forEach((c) => this.appendChild(c)); },
    addEventListener(type, fn) { this.listeners[type] = fn; }, setAttribute() {}, remove() {}, click() {},
    querySelectorAll() { return []; }, getBoundingClientRect() { return { top: 0, left: 0 }; },
    getContext() { return new Proxy({ canvas: e }, { get: (t, k) => (k in t ? t[k] : () => {}), set: () => true }); },
    toBlob() {} };
  Object.defineProperty(e, "textContent", { get() { return this._t; }, set(v) { this._t = v; if (v === "") this.children = []; } });
  e.textContent = id === "attnlab-data" ? data : "";
  e.parentElement = { hidden: false };
  return e;
}
const byId = {};
global.document = { getElementById: (id) => (byId[id] = byId[id] || el(id)), createElement: () => el("new"),
  createElementNS: () => el("ns"), querySelectorAll: () => [], body: el("body"), fonts: { add() {} } };
global.window = {};
global.ImageData = class { constructor(w, h) { this.width = w; this.height = h; this.data = new Uint8ClampedArray(w * h * 4); } };
global.requestAnimationFrame = (f) => setTimeout(f, 0);
eval(script);
(async () => {
  const api = window.attnlab;
  while (document.body.dataset.ready !== "1") await new Promise((r) => setTimeout(r, 5));
  const out = [];
  const grab = () => {
    const mode = api.state.mode, rows = api.tokens.length, cols = api.keyTokens.length;
    const w = [];
    for (let i = 0; i < rows; i++) w.push(Array.from(api.row(api.state.layer, api.state.head, i)));
    out.push({ mode, rows: api.tokens, cols: api.keyTokens, title: document.getElementById("title").textContent,
      left: document.getElementById("left").children.map((c) => c.textContent),
      right: document.getElementById("right").children.map((c) => c.textContent), layer: api.state.layer, head: api.state.head, w });
  };
  grab();
  for (const k of JSON.parse(process.argv[3] || "[]")) {
    await document.getElementById("mode").listeners.change({ target: { value: String(k) } });
    api.select(document.getElementById("layer").children.length - 1, 1);  // the last layer, head 1
    api.setView("matrix"); api.setView("head");
    grab();
  }
  console.log(JSON.stringify(out));
})();
