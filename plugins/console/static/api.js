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

/** A fresh Idempotency-Key (CONTRACT 4c). getRandomValues works on plain http too. */
export function idempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

const NETWORK_MESSAGE = "The gateway could not be reached (network error): check the connection and try again.";

/** fetch, with a network failure ("Failed to fetch") turned into a message a person can act on. */
async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (err) {
    if (err && err.name === "AbortError") throw err;
    throw new ApiError(0, NETWORK_MESSAGE, "network_error");
  }
}

/** A JSON call with the signed-in credential (or `secret`); resolves to the parsed body. With
 * `idempotent`, the call carries a fresh Idempotency-Key, and a network failure is retried with
 * that same key: the gateway applies it once whether or not the first try arrived. */
export async function api(method, path, body, secret, { idempotent = false } = {}) {
  const credential = secret || (session.get() || {}).secret || "";
  const headers = { Authorization: `Bearer ${credential}` };
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (idempotent) headers["Idempotency-Key"] = idempotencyKey();
  let response;
  for (let attempt = 0; ; attempt++) {
    try {
      response = await send(path, init);
      break;
    } catch (err) {
      if (!idempotent || attempt >= 2 || err.code !== "network_error") throw err;
      await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
    }
  }
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

/** Stream a chat completion. `request`: the body's fields besides `stream` (model, messages,
 * temperature...); `onText` gets each piece of text as it arrives. Resolves to the reply's request
 * id and usage (the last chunk's, asked for with stream_options.include_usage). */
export async function streamChat(secret, request, onText, signal) {
  const response = await send("/v1/chat/completions", {
    method: "POST",
    headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
    body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  const requestId = response.headers.get("x-service-request-id") || "";
  if (!response.ok) {
    const err = await errorOf(response);
    err.requestId = requestId;
    throw err;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let usage = null;
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
      if (data === "[DONE]") return { requestId, usage };
      const chunk = JSON.parse(data);
      if (chunk.error) {
        const err = new ApiError(502, chunk.error.message || "The stream failed.", chunk.error.code);
        err.requestId = requestId;
        throw err;
      }
      if (chunk.usage) usage = chunk.usage;
      const piece = chunk.choices && chunk.choices[0] && chunk.choices[0].delta
        ? chunk.choices[0].delta.content : "";
      if (piece) onText(piece);
    }
  }
  return { requestId, usage };
}
