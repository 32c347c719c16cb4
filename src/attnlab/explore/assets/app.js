// The explorer: its state, its layout, and the requests that bring its numbers. Each view draws from the state
// (overview.js, matrix.js, steps.js, next.js, generate.js); nothing here computes attention.

const OVERVIEW = 32;   // the overview's thumbnails: at most 32 × 32 block means of a head's weights (drawn 60 px wide)
const TABS = ["overview", "head", "steps", "generate", "patch"];

function newState(boot) {
  return {
    boot, models: boot.models, info: null, text: "", target: "", mode: "self", layer: 0, head: 0, query: null,
    off: new Set(), sampling: {temperature: 1, top_k: null, top_p: null}, tab: "overview",
    forward: null, detail: null, overview: null, next: null, steps: null, generation: null, appended: [],
    error: null, note: null, hover: null, page: {rows: 0, cols: 0}, asked: new Map(), busy: 0,
    corrupt: "", patch: null, patchTokens: {right: null, wrong: null}, patchAsking: null,
  };
}

class Explorer {
  constructor(root, boot, transport) {
    this.root = root;
    this.transport = transport;
    this.state = newState(boot);
    this.parts = {};
    this.queue = {forward: null, running: false};
    root.classList.add("ax");
    root.dataset.testid = "explorer";
    I18N.strings = boot.strings;
    I18N.lang = boot.lang in boot.strings ? boot.lang : "en";
    GLYPHS.transport = transport;
    GLYPHS.root = root;
    if (boot.font) coverFont(boot.font);
    this.layout();
    if (!transport.live) {  // a snapshot: one reading, fixed
      this.parts.text.readOnly = this.parts.target.readOnly = true;
      this.parts.targetRow.querySelector("button").hidden = true;
      this.root.dataset.snapshot = "true";
    }
    this.chooseModel(boot.model || boot.models[0].name, boot.text);
  }

  get info() { return this.state.info; }

  // ---- layout: built once; the words are set by relabel(), the numbers by the views --------------------------

  layout() {
    const p = this.parts;
    p.title = el("h1", {dataset: {i18n: "title"}});
    p.model = el("select", {id: "ax-model", dataset: {testid: "model-select"},
                            on: {change: () => this.chooseModel(p.model.value)}});
    for (const m of this.state.models) p.model.append(modelText("option", m.name, {value: m.name}));
    p.langs = el("span", {class: "ax-langs", role: "group"},
      el("button", {lang: "en", dataset: {testid: "lang-en", lang: "en"}, on: {click: () => this.setLang("en")}},
         "English"),
      el("button", {lang: "zh-Hans", dataset: {testid: "lang-zh", lang: "zh"}, on: {click: () => this.setLang("zh")}},
         "中文"));
    p.langLabel = el("span", {class: "ax-sr", dataset: {i18n: "language"}});
    const top = el("header", {class: "ax-top"}, p.title,
                   el("label", {for: "ax-model"}, el("span", {dataset: {i18n: "model"}}), " ", p.model),
                   p.langLabel, p.langs);
    p.text = el("textarea", {id: "ax-text", rows: 2, spellcheck: false, dataset: {testid: "text-input"},
                             on: {input: (e) => this.typed(e)}});
    p.target = el("input", {id: "ax-target", type: "text", spellcheck: false, dataset: {testid: "target-input"},
                            on: {input: (e) => this.typed(e)}});
    p.targetRow = el("div", {class: "ax-target"},
                     el("label", {for: "ax-target", dataset: {i18n: "target"}}), p.target,
                     el("button", {dataset: {testid: "translate", i18n: "translate"},
                                   on: {click: () => this.translate()}}));
    p.tokens = el("div", {class: "ax-tokens", dataset: {testid: "tokens"}, role: "listbox", tabindex: 0,
                          on: {keydown: (e) => this.tokenKeys(e)}});
    p.message = el("p", {class: "ax-message", dataset: {testid: "message"}, role: "status"});
    const input = el("section", {class: "ax-input"},
                     el("label", {for: "ax-text", dataset: {i18n: "text"}}), p.text, p.targetRow, p.tokens,
                     p.message);
    p.tabs = el("div", {class: "ax-tabs", role: "tablist", on: {keydown: (e) => this.tabKeys(e)}});
    p.views = {};
    for (const name of TABS) {
      const tab = el("button", {role: "tab", id: `ax-tab-${name}`, dataset: {testid: `tab-${name}`, tab: name,
                                i18n: `tab_${name}`}, on: {click: () => this.showTab(name)}});
      p.tabs.append(tab);
      p.views[name] = el("section", {class: "ax-view", role: "tabpanel", dataset: {view: name},
                                     "aria-labelledby": `ax-tab-${name}`});
    }
    p.mode = el("select", {dataset: {testid: "mode-select"}, on: {change: () => this.setMode(p.mode.value)}});
    p.modeRow = el("label", {class: "ax-mode"}, el("span", {dataset: {i18n: "attention"}}), " ", p.mode);
    p.exports = el("span", {class: "ax-exports"},
      el("button", {dataset: {testid: "export-png", i18n: "export_png"}, on: {click: () => exportView(this, "png")}}),
      el("button", {dataset: {testid: "export-svg", i18n: "export_svg"}, on: {click: () => exportView(this, "svg")}}));
    const bar = el("div", {class: "ax-bar-row"}, p.tabs, p.modeRow, p.exports);
    const main = el("div", {class: "ax-main"}, bar, ...TABS.map((n) => p.views[n]));
    p.side = el("aside", {class: "ax-side", dataset: {view: "next"}});
    this.root.append(top, input, el("div", {class: "ax-body"}, main, p.side));
    buildOverview(this);
    buildMatrix(this);
    buildSteps(this);
    buildNext(this);
    buildGenerate(this);
    buildPatch(this);
    this.showTab(this.state.tab);
    this.relabel();
  }

  relabel() {
    this.root.setAttribute("lang", I18N.lang === "zh" ? "zh-Hans" : "en");
    for (const node of this.root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
    for (const button of this.parts.langs.children)
      button.setAttribute("aria-pressed", String(button.dataset.lang === I18N.lang));
    this.parts.langLabel.textContent = t("language");
    this.fillModes();
    this.drawAll();
  }

  setLang(lang) {
    I18N.lang = lang;
    this.relabel();
    if (this.state.error) this.refresh();  // the message again, in the new language
  }

  drawAll() {
    drawTokens(this);
    drawOverview(this);
    drawMatrix(this);
    drawSteps(this);
    drawNext(this);
    drawGenerate(this);
    drawPatch(this);
    this.drawMessage();
  }

  // ---- choices ----------------------------------------------------------------------------------------------

  chooseModel(name, text) {
    const s = this.state;
    s.info = s.models.find((m) => m.name === name) || s.models[0];
    this.parts.model.value = s.info.name;
    this.root.dataset.kind = s.info.kind;
    s.layer = 0; s.head = 0; s.query = null; s.off = new Set(); s.steps = null; s.generation = null;
    s.mode = s.info.kind === "seq2seq" ? "cross" : "self";
    s.forward = s.detail = s.overview = s.next = null;
    this.parts.targetRow.hidden = s.info.kind !== "seq2seq";
    this.parts.text.value = s.text = text !== undefined ? text : s.info.text;
    this.parts.target.value = s.target = s.info.target || "";
    s.appended = [];
    this.fillModes();
    buildOverviewGrid(this);
    layoutGenerate(this);
    resetPatch(this);
    ensureGlyphs(s.text);
    this.refresh();
  }

  fillModes() {
    const s = this.state, select = this.parts.mode;
    const modes = s.info && s.info.kind === "seq2seq" ? ["encoder", "decoder", "cross"] : ["self"];
    clear(select);
    for (const m of modes) select.append(el("option", {value: m}, t(`mode_${m}`)));
    select.value = s.mode;
    this.parts.modeRow.hidden = modes.length === 1;
  }

  setMode(mode) {
    const s = this.state;
    s.mode = mode;
    s.layer = Math.min(s.layer, this.layers() - 1);
    s.steps = null;
    buildOverviewGrid(this);
    this.refresh();
  }

  layers() {
    const info = this.state.info;
    return this.state.mode === "encoder" ? info.encoder_layers : info.layers;
  }

  select(layer, head) {
    const s = this.state;
    s.layer = layer; s.head = head;
    markSelected(this);
    this.refresh({overview: 0});
    if (s.tab === "steps") this.askSteps();
  }

  toggleHead(layer, head) {
    const s = this.state, key = headKey(s.mode, layer, head);
    if (s.off.has(key)) s.off.delete(key); else s.off.add(key);
    this.refresh();
  }

  showTab(name) {
    const s = this.state;
    s.tab = name;
    for (const tab of this.parts.tabs.children) {
      const on = tab.dataset.tab === name;
      tab.setAttribute("aria-selected", String(on));
      tab.tabIndex = on ? 0 : -1;
    }
    for (const [view, node] of Object.entries(this.parts.views)) node.hidden = view !== name;
    if (name === "steps") this.askSteps();
    if (name === "patch") { enterPatch(this); drawPatch(this); }
  }

  tabKeys(e) {
    const i = TABS.indexOf(this.state.tab);
    const step = {ArrowRight: 1, ArrowLeft: -1}[e.key];
    if (step === undefined) return;
    e.preventDefault();
    const next = TABS[(i + step + TABS.length) % TABS.length];
    this.showTab(next);
    this.parts.tabs.querySelector(`[data-tab=${next}]`).focus();
  }

  tokenKeys(e) {
    const s = this.state, rows = this.queryTokens();
    if (!rows.length) return;
    const step = {ArrowRight: 1, ArrowLeft: -1, Home: -rows.length, End: rows.length}[e.key];
    if (step === undefined) return;
    e.preventDefault();
    const q = s.query === null ? rows.length - 1 : s.query;
    this.setQuery(Math.max(0, Math.min(rows.length - 1, q + step)));
  }

  queryTokens() {
    const f = this.state.forward;
    if (!f) return [];
    return this.state.mode === "encoder" || this.state.mode === "self" ? f.tokens : f.target_tokens;
  }

  keyTokens() {
    const f = this.state.forward;
    if (!f) return [];
    return this.state.mode === "decoder" ? f.target_tokens : f.tokens;
  }

  setQuery(q) {
    this.state.query = q;
    drawTokens(this);
    drawMatrix(this);
    if (this.state.tab === "steps") this.askSteps();
  }

  // ---- typing ------------------------------------------------------------------------------------------------

  typed(e) {
    const s = this.state;
    s.text = this.parts.text.value;
    s.target = this.parts.target.value;
    s.asked.set(this.key(), e && e.timeStamp !== undefined ? e.timeStamp : performance.now());
    ensureGlyphs(s.text + s.target);
    this.refresh();
  }

  key() { return `${this.state.text}\u0000${this.state.target}`; }

  // The current settings, as the API reads them (docs/explore.md).
  request(extra) {
    const s = this.state;
    const body = {model: s.info.name, text: s.text, temperature: s.sampling.temperature, top_k: s.sampling.top_k,
                  top_p: s.sampling.top_p, head_mask: maskRequest(this), encoding: "base64", mode: s.mode, top: 10};
    if (s.info.kind === "seq2seq") body.target = s.target;
    return Object.assign(body, extra || {});
  }

  // Ask for what changed; the latest request wins: while one is out, only the newest waiting one is kept.
  refresh(what) {
    const w = Object.assign({overview: OVERVIEW, detail: true}, what || {});
    const s = this.state;
    const wanted = {detail: w.detail ? {layer: s.layer, head: s.head} : null, overview: w.overview};
    if (this.queue.forward) {  // merge with what is waiting
      const old = this.queue.forward;
      wanted.overview = Math.max(wanted.overview, old.overview || 0);
      wanted.detail = wanted.detail || old.detail;
    }
    this.queue.forward = wanted;
    this.pump();
  }

  async pump() {
    if (this.queue.running || !this.queue.forward) return;
    const wanted = this.queue.forward;
    this.queue.forward = null;
    this.queue.running = true;
    const key = this.key(), body = this.request(wanted);
    this.busy(1);
    try {
      const answer = await this.transport.call("forward", body);
      this.accept(answer, body, key, performance.now());
    } catch (err) {
      this.refused(err);
    } finally {
      this.busy(-1);
      this.queue.running = false;
      if (this.queue.forward) this.pump();
    }
  }

  accept(answer, body, key, arrived) {
    const s = this.state;
    s.error = null;
    s.forward = answer;
    s.next = answer;
    if (answer.detail) s.detail = {layer: answer.detail.layer, head: answer.detail.head, mode: answer.detail.mode,
                                   weights: decodeArray(answer.detail.weights)};
    if (answer.overview) s.overview = {mode: answer.overview.mode, weights: decodeArray(answer.overview.weights)};
    const rows = this.queryTokens();
    if (s.query === null || s.query >= rows.length) s.query = rows.length - 1;
    s.note = answer.cropped ? t(answer.cropped.side === "start" ? "cropped_start" : "cropped_end",
                                {kept: answer.cropped.kept, of: answer.cropped.of}) : null;
    ensureGlyphs(answer.tokens.join("") + (answer.target_tokens || []).join("") +
                 answer.next_tokens.map((n) => n.token).join(""));
    this.drawAll();
    this.root.dataset.settings = JSON.stringify(answer.settings);  // what the page shows now, for tests to wait on
    this.root.dataset.headMask = JSON.stringify(answer.head_mask || []);
    this.root.dataset.text = body.text;
    this.root.dataset.target = body.target || "";
    this.root.dataset.state = "ready";
    const started = s.asked.get(key);
    if (started !== undefined && answer.detail) {
      s.asked.delete(key);
      requestAnimationFrame(() => {
        const timings = (window.attnlabTimings = window.attnlabTimings || []);
        // from the keystroke to the frame after the view is drawn, and of it the wait for the answer
        timings.push({tokens: answer.tokens.length, ms: performance.now() - started, answer: arrived - started});
      });
    }
    if (s.tab === "steps") this.askSteps();
  }

  refused(err) {
    const s = this.state;
    s.error = err && err.message ? err.message : String(err);
    this.root.dataset.state = "error";
    this.drawMessage();
  }

  busy(step) {
    this.state.busy += step;
    this.root.dataset.busy = String(this.state.busy > 0);
    if (step > 0 && this.root.dataset.state !== "error") this.root.dataset.state = "busy";
  }

  drawMessage() {
    const s = this.state, m = this.parts.message;
    m.classList.toggle("ax-error", Boolean(s.error));
    m.textContent = s.error || s.note || "";
    ensureGlyphs(m.textContent);
  }

  askSteps() { return askSteps(this); }

  // ---- the translation model writes its target ---------------------------------------------------------------

  async translate() {
    const s = this.state;
    this.busy(1);
    try {
      const answer = await this.transport.call("translate", {model: s.info.name, text: s.text});
      this.parts.target.value = answer.target;
      this.typed();
    } catch (err) {
      this.refused(err);
    } finally {
      this.busy(-1);
    }
  }
}

// The page (server or snapshot): read the boot data, mount the explorer on #explore.
function bootPage() {
  const boot = JSON.parse(document.getElementById("attnlab-boot").textContent);
  const transport = boot.snapshot ? staticTransport(boot.snapshot) : serverTransport(boot.token);
  const mount = () => { window.attnlabExplorer = new Explorer(document.getElementById("explore"), boot, transport); };
  // the CJK face loaded before any text is laid out: Chromium left 中文 laid out while the face was still loading as
  // boxes until something else changed (seen in this page's screenshots)
  loadFaces(boot.font ? [boot.font] : []).then(mount, mount);
}

function loadFaces(faces) {
  return Promise.all(faces.map((f) => document.fonts.load(`16px "${f.family}"`, f.chars.slice(0, 64) || "a")));
}

// The text's tokens under the box (a translation model's source, then its target so far); the query is marked.
function drawTokens(app) {
  const s = app.state, strip = clear(app.parts.tokens), f = s.forward;
  if (!f) return;
  const line = (tokens, queries) => {
    const row = el("div", {class: "ax-tokline"});
    tokens.forEach((tok, i) => {
      const chosen = queries && i === s.query;
      row.append(modelText("span", shownToken(tok), {
        class: `ax-tok${chosen ? " ax-q" : ""}`, role: "option", "aria-selected": String(Boolean(chosen)),
        dataset: {testid: "token", index: i}, on: {click: () => { if (queries) app.setQuery(i); }}}));
    });
    return row;
  };
  const own = s.mode === "self" || s.mode === "encoder";
  strip.append(el("span", {class: "ax-label"}, t("tokens_n", {n: f.tokens.length})), line(f.tokens, own));
  if (f.target_tokens) strip.append(el("span", {class: "ax-label"}, t("target_tokens_n", {n: f.target_tokens.length})),
                                    line(f.target_tokens, !own));
}
