// Talking to the gateway. The credential lives in this tab's sessionStorage only: it is sent in
// the Authorization header, never put in a URL, and gone when the tab closes.

const SESSION = "gateway.console.session";
const KEYS = "gateway.console.keys";

export class ApiError extends Error {
  constructor(status, message, code, param) {
    super(message);
    this.status = status;
    this.code = code || "";
    this.param = param || "";
  }
}

export const session = {
  get() {
    try {
      return JSON.parse(sessionStorage.getItem(SESSION) || "null");
    } catch {
      return null;
    }
  },
  set(role, secret) {
    sessionStorage.setItem(SESSION, JSON.stringify({ role, secret }));
  },
  clear() {
    sessionStorage.removeItem(SESSION);
    sessionStorage.removeItem(KEYS);
  },
};

/** Full API keys created in this tab (shown once by the server), for the playground. */
export const tabKeys = {
  all() {
    try {
      return JSON.parse(sessionStorage.getItem(KEYS) || "{}");
    } catch {
      return {};
    }
  },
  put(id, secret, name) {
    const keys = tabKeys.all();
    keys[id] = { secret, name };
    sessionStorage.setItem(KEYS, JSON.stringify(keys));
  },
  drop(id) {
    const keys = tabKeys.all();
    delete keys[id];
    sessionStorage.setItem(KEYS, JSON.stringify(keys));
  },
};

async function errorOf(response) {
  let message = `HTTP ${response.status}`;
  let code = "";
  let param = "";
  try {
    const body = await response.json();
    const err = body && body.error ? body.error : body;
    if (err && typeof err.message === "string") message = err.message;
    if (err && typeof err.code === "string") code = err.code;
    if (err && typeof err.param === "string") param = err.param;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message, code, param);
}

/** A JSON call with the signed-in credential (or `secret`); resolves to the parsed body. */
export async function api(method, path, body, secret) {
  const credential = secret || (session.get() || {}).secret || "";
  const headers = { Authorization: `Bearer ${credential}` };
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return null;
  return response.json();
}

/** Query string of the non-empty values of `params`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== "" && value !== null && value !== undefined) q.set(name, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** Stream a chat completion; `onText` gets each piece of text as it arrives. */
export async function streamChat(secret, model, messages, onText, signal) {
  const response = await fetch("/v1/chat/completions", {
    method: "POST",
    headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model, messages, stream: true }),
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError(500, chunk.error.message || "stream error", chunk.error.code);
      const piece = chunk.choices && chunk.choices[0] && chunk.choices[0].delta
        ? chunk.choices[0].delta.content : "";
      if (piece) onText(piece);
    }
  }
}
