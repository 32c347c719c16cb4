// How the page asks: the server's API (fetch, the launch token in the URL), the notebook widget's messages (the
// same requests, answered by the same Python functions), or a snapshot written with --export (no server: the
// answers it holds).

class ApiRefusal extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function serverTransport(token) {
  const query = (lang) => `?token=${encodeURIComponent(token)}&lang=${encodeURIComponent(lang)}`;
  return {
    fonts: true, live: true,
    async call(endpoint, body) {
      const get = endpoint === "models";
      const response = await fetch(`/api/${endpoint}${query(I18N.lang)}`, get ? {} : {
        method: "POST", headers: {"content-type": "application/json"},
        body: JSON.stringify(Object.assign({lang: I18N.lang}, body)),
      });
      let data = null;
      try { data = await response.json(); } catch (e) { data = {error: response.statusText}; }
      if (!response.ok) throw new ApiRefusal(response.status, data.error || response.statusText);
      return data;
    },
  };
}

// anywidget's model: requests go out as custom messages {id, endpoint, body}; answers come back with that id
function widgetTransport(model) {
  const pending = new Map();
  let next = 1;
  model.on("msg:custom", (msg) => {
    const waiting = pending.get(msg.id);
    if (!waiting) return;
    pending.delete(msg.id);
    if (msg.error) waiting.reject(new ApiRefusal(msg.status, msg.error));
    else waiting.resolve(msg.body);
  });
  return {
    fonts: true, live: true,
    call(endpoint, body) {
      const id = next++;
      return new Promise((resolve, reject) => {
        pending.set(id, {resolve, reject});
        model.send({id, endpoint, body: Object.assign({lang: I18N.lang}, body)});
      });
    },
  };
}

// A snapshot holds, per model, the full attention of one text and what the page asked of it when it was written.
function staticTransport(snapshot) {
  const byName = new Map(snapshot.models.map((m) => [m.name, m]));
  return {
    fonts: false, live: false,
    async call(endpoint, body) {
      const held = byName.get(body.model);
      if (endpoint === "models") return snapshot.models.map((m) => m.describe);
      if (!held) throw new ApiRefusal(404, t("snapshot_missing"));
      if (endpoint === "forward") return snapshotForward(held, body);
      if (endpoint === "head") {
        const key = `${body.mode || "self"},${body.layer},${body.head},${body.query}`;
        if (!(key in held.steps)) throw new ApiRefusal(404, t("snapshot_missing"));
        return held.steps[key];
      }
      throw new ApiRefusal(404, t("snapshot_missing"));
    },
  };
}

function snapshotForward(held, body) {
  const mode = body.mode || held.forward.modes[0];
  const answer = Object.assign({}, held.forward.base);
  const full = held.forward.full[mode];
  if (body.detail) {
    const array = decodeArray(full);
    const [, heads, rows, cols] = array.shape;
    const offset = ((body.detail.layer * heads) + body.detail.head) * rows * cols;
    const slice = array.data.slice(offset, offset + rows * cols);
    answer.detail = {mode, layer: body.detail.layer, head: body.detail.head,
                     weights: {dtype: "float32", shape: [rows, cols], data: base64Of(slice)}};
  }
  if (body.overview) answer.overview = held.forward.overview[mode];
  return answer;
}

function base64Of(floats) {
  const bytes = new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(text);
}
