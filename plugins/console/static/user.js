// The user's pages: dashboard, API keys, call log, media tasks, playground.

import { api, query, streamChat, tabKeys } from "./api.js";
import { barChart, hbarChart } from "./chart.js";
import { h, mount } from "./dom.js";
import { dateTime, orDash, rmb, usd } from "./format.js";
import { logView } from "./logtable.js";
import { button, card, copy, errorBox, field, input, panel, stat, table, toast, values } from "./ui.js";

// --- dashboard -------------------------------------------------------------------------------

export async function dashboard(root) {
  const s = await api("GET", "/api/console/summary");
  const rate = s.rmb_per_usd;
  const u = s.user;
  mount(root,
    h("h1", {}, `Hello, ${u.name}`),
    h("div", { class: "stats" },
      stat("Balance", rmb(u.balance_usd, rate), "balance", usd(u.balance_usd)),
      stat("Used", rmb(u.used_usd, rate), "used", usd(u.used_usd)),
      stat("Requests today", String(s.requests_today), "requests-today"),
      stat("Spent today", rmb(s.spend_today_usd, rate), "spent-today", usd(s.spend_today_usd)),
      stat("Requests in all", String(u.request_count), "requests")),
    card("Spending per day, last 30 days (USD)",
      barChart(s.days.map((d) => ({ label: d.day.slice(5), value: d.cost_usd })), { format: usd })),
    card("Spending per model, last 30 days (USD)",
      hbarChart(s.models.map((m) => ({ label: m.model, value: m.cost_usd })), { format: usd })),
    h("p", { class: "muted" }, `Group ${u.group} · 1 USD = ¥${rate}`));
}

// --- keys ------------------------------------------------------------------------------------

const list = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);

function keyForm(key, limits) {
  const k = key || {};
  const expires = k.expires_at ? new Date(k.expires_at * 1000).toISOString().slice(0, 10) : "";
  return h("form", { class: "grid-form" },
    h("label", { class: "field" }, h("span", {}, "Name"), input("name", { value: k.name || "", required: true, maxlength: 200 })),
    field("Spending ceiling, USD", input("quota_usd", { type: "number", min: 0, step: "any", value: k.quota_usd ?? "", placeholder: "none" }),
      "Empty: no ceiling of its own (your balance still applies)."),
    field("Models", input("models", { value: (k.models || []).join(", "), placeholder: "all models" }),
      "Comma-separated model ids; empty: every model you may use."),
    field("Allowed IPs", input("allow_ips", { value: (k.allow_ips || []).join(", "), placeholder: "any IP" }),
      "Comma-separated IPs or CIDRs."),
    field("Expires (UTC day)", input("expires", { type: "date", value: expires }), "Empty: never."),
    limits.has("rpm") ? field("Requests per minute", input("rpm", { type: "number", min: 1, value: k.rpm ?? "", placeholder: "no limit" })) : null,
    limits.has("tpm") ? field("Tokens per minute", input("tpm", { type: "number", min: 1, value: k.tpm ?? "", placeholder: "no limit" })) : null,
    limits.has("soft_limit_usd") ? field("Alert at, USD spent", input("soft_limit_usd", { type: "number", min: 0, step: "any", value: k.soft_limit_usd ?? "", placeholder: "no alert" }),
      "The soft limit reported by /v1/dashboard/billing/subscription.") : null);
}

function keyBody(form, editing) {
  const v = values(form);
  const body = {
    name: v.name.trim(),
    quota_usd: v.quota_usd === "" ? null : Number(v.quota_usd),
    models: list(v.models).length ? list(v.models) : null,
    allow_ips: list(v.allow_ips).length ? list(v.allow_ips) : null,
    expires_at: v.expires ? Math.floor(Date.parse(`${v.expires}T23:59:59Z`) / 1000) : 0,
  };
  // Rate limits are sent only when set (or when clearing one an existing key has).
  for (const name of ["rpm", "tpm", "soft_limit_usd"]) {
    if (v[name] === undefined) continue; // a field this gateway's keys do not have
    if (v[name] !== "") body[name] = Number(v[name]);
    else if (editing && editing[name] !== undefined && editing[name] !== null) body[name] = null;
  }
  if (!editing) {
    if (body.quota_usd === null) delete body.quota_usd;
    if (body.models === null) delete body.models;
    if (body.allow_ips === null) delete body.allow_ips;
  }
  return body;
}

function editKey(key, limits, done) {
  const form = keyForm(key, limits);
  const err = h("div");
  const p = panel(key ? `Edit key “${key.name}”` : "New API key", h("div", {}, form, err), [
    button("Cancel", () => p.close()),
    button(key ? "Save" : "Create", async () => {
      try {
        const body = keyBody(form, key);
        const saved = key ? await api("PATCH", `/api/keys/${key.id}`, body) : await api("POST", "/api/keys", body);
        p.close();
        done(saved, !key);
      } catch (e) {
        mount(err, errorBox(e));
      }
    }, { class: "primary", "data-test": "save-key" }),
  ]);
}

function showNewKey(key) {
  tabKeys.put(key.id, key.key, key.name);
  const p = panel("Your new API key", h("div", {},
    h("p", {}, "Copy it now: it is shown only this once. (This tab keeps it for the playground until you sign out.)"),
    h("code", { class: "secret", "data-test": "new-key" }, key.key)), [
    button("Copy", () => copy(key.key), { "data-test": "copy-key" }),
    button("Done", () => p.close(), { class: "primary", "data-test": "close-key" }),
  ]);
}

export async function keys(root) {
  const body = await api("GET", "/api/keys");
  const reload = () => keys(root);
  const known = tabKeys.all();
  // Optional key fields (rate limits, alert threshold) are offered when this gateway's keys carry them.
  const limits = new Set(["rpm", "tpm", "soft_limit_usd"].filter((f) => body.data.some((k) => f in k)));
  const cols = [
    { title: "Name", cell: (k) => k.name },
    { title: "Key", cell: (k) => h("code", {}, k.masked) },
    { title: "State", cell: (k) => h("span", { class: `badge ${k.enabled ? "ok" : "bad"}` }, k.enabled ? "enabled" : "disabled") },
    { title: "Ceiling / spent", cell: (k) => `${k.quota_usd === null ? "none" : usd(k.quota_usd)} / ${usd(k.spent_usd)}`, class: "num" },
    { title: "Models", cell: (k) => (k.models ? k.models.join(", ") : "all") },
    { title: "IPs", cell: (k) => (k.allow_ips ? k.allow_ips.join(", ") : "any") },
    { title: "Expires", cell: (k) => (k.expires_at ? dateTime(k.expires_at) : "never") },
    limits.has("rpm") ? { title: "Limits", cell: (k) => `${k.rpm ? `${k.rpm} rpm` : "—"} · ${k.tpm ? `${k.tpm} tpm` : "—"}` } : null,
    {
      title: "Actions",
      cell: (k) => h("div", { class: "row-actions" },
        button("Edit", () => editKey(k, limits, () => { toast("Saved."); reload(); })),
        button(k.enabled ? "Disable" : "Enable", async () => {
          await api("PATCH", `/api/keys/${k.id}`, { enabled: !k.enabled });
          toast(k.enabled ? "Key disabled." : "Key enabled.");
          reload();
        }, { "data-test": `toggle-${k.id}` }),
        button("Delete", async () => {
          if (!window.confirm(`Delete the key “${k.name}”? Programs using it stop at once.`)) return;
          await api("DELETE", `/api/keys/${k.id}`);
          tabKeys.drop(k.id);
          toast("Key deleted.");
          reload();
        }, { class: "danger", "data-test": `delete-${k.id}` }),
        known[k.id] ? h("a", { href: `#/playground?key=${k.id}`, class: "button" }, "Playground") : null),
    },
  ];
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "API keys"),
      button("New key", () => editKey(null, limits, (key) => { showNewKey(key); reload(); }), { class: "primary", "data-test": "new-key-button" })),
    table(cols.filter(Boolean), body.data, { empty: "No keys yet: make one to call the API." }));
}

// --- log -------------------------------------------------------------------------------------

export async function logs(root) {
  const [owned, summary] = await Promise.all([api("GET", "/api/keys"), api("GET", "/api/console/summary")]);
  mount(root, h("h1", {}, "Call log"));
  const box = h("div");
  root.append(box);
  logView(box, { admin: false, keys: owned.data, rate: summary.rmb_per_usd });
}

// --- media tasks -----------------------------------------------------------------------------

const FOLLOW_UPS = new Set(["IMAGINE", "VARIATION", "REROLL", "BLEND"]);

function keyPicker(name) {
  const known = Object.entries(tabKeys.all());
  return h("div", { class: "key-picker" },
    field("API key", h("select", { name, "data-test": "key-select" },
      known.map(([id, k]) => h("option", { value: k.secret }, `${k.name} (#${id})`)),
      h("option", { value: "" }, "paste a key…"))),
    field("…or paste one", input(`${name}-pasted`, { type: "password", placeholder: "sk-…", autocomplete: "off" })));
}

function chosenKey(form, name) {
  const v = values(form);
  return (v[`${name}-pasted`] || "").trim() || v[name] || "";
}

function preview(result) {
  if (!result || typeof result !== "object") return null;
  const url = result.imageUrl || result.image_url || result.video_url || result.videoUrl || result.audio_url || result.audioUrl || result.url;
  if (typeof url !== "string" || !/^https?:\/\//.test(url)) return null;
  if (/video|\.mp4/.test(url) || result.video_url || result.videoUrl) return h("video", { src: url, controls: true, class: "media" });
  if (/audio|\.mp3|\.wav/.test(url) || result.audio_url || result.audioUrl) return h("audio", { src: url, controls: true, class: "media" });
  const img = h("img", { src: url, alt: "task result", class: "media", loading: "lazy" });
  // An upstream link that does not load becomes a plain link (no broken-image box).
  img.addEventListener("error", () => img.replaceWith(h("a", { href: url, target: "_blank", rel: "noopener noreferrer" },
    "Open the result")));
  return img;
}

const FINISHED = new Set(["SUCCESS", "FAILURE", "succeeded", "failed", "completed", "cancelled"]);
let taskTimer = 0;

export async function tasks(root) {
  const body = await api("GET", "/api/console/tasks?page_size=50");
  const keyForm = h("form", { class: "inline-form", onsubmit: (e) => e.preventDefault() }, keyPicker("key"));
  const reload = () => tasks(root);
  async function submit(path, payload) {
    const secret = chosenKey(keyForm, "key");
    if (!secret) { toast("Choose or paste an API key first.", "bad"); return; }
    try {
      const answer = await api("POST", path, payload, secret);
      toast(`Submitted: task ${orDash(answer.result)}`);
      reload();
    } catch (e) {
      toast(e.message, "bad");
    }
  }
  const imagine = h("form", { class: "inline-form", onsubmit: (e) => {
    e.preventDefault();
    const prompt = values(imagine).prompt.trim();
    if (prompt) submit("/imagetask/submit/imagine", { prompt });
  } }, field("Prompt", input("prompt", { placeholder: "a lighthouse at dawn" })),
  h("button", { type: "submit", class: "primary" }, "Imagine"));

  const cards = body.data.map((t) => {
    const done = t.status === "SUCCESS" || t.status === "succeeded" || t.status === "completed";
    const buttons = t.family === "imagetask" && done && FOLLOW_UPS.has(t.action)
      ? h("div", { class: "row-actions" },
        [1, 2, 3, 4].map((i) => button(`U${i}`, () => submit("/imagetask/submit/change", { taskId: t.task_id, action: "UPSCALE", index: i }), { "data-test": `U${i}` })),
        [1, 2, 3, 4].map((i) => button(`V${i}`, () => submit("/imagetask/submit/change", { taskId: t.task_id, action: "VARIATION", index: i }), { "data-test": `V${i}` })),
        button("Reroll", () => submit("/imagetask/submit/change", { taskId: t.task_id, action: "REROLL" }), { "data-test": "reroll" }))
      : null;
    return h("article", { class: "task", "data-task": t.task_id },
      h("header", {}, h("strong", {}, `${t.family} · ${orDash(t.action)}`),
        h("span", { class: `badge ${done ? "ok" : t.status === "FAILURE" || t.status === "failed" ? "bad" : ""}` },
          `${orDash(t.status)} ${orDash(t.progress)}`)),
      h("p", { class: "muted" }, `${t.task_id} · ${dateTime(t.created_at)} · ${usd(t.cost_usd)}`),
      t.fail_reason ? h("p", { class: "error" }, t.fail_reason) : null,
      preview(t.result),
      buttons);
  });
  // Tasks still running: look again in a few seconds while this page is shown.
  clearTimeout(taskTimer);
  if (body.data.some((t) => !FINISHED.has(t.status))) {
    taskTimer = setTimeout(() => { if (location.hash.startsWith("#/tasks") && root.isConnected) reload(); }, 3000);
  }
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Media tasks"), button("Refresh", reload)),
    card("Submit with", keyForm, imagine),
    cards.length ? h("div", { class: "tasks" }, cards) : h("p", { class: "muted empty" }, "No media tasks yet."));
}

// --- playground ------------------------------------------------------------------------------

export async function playground(root, params) {
  const form = h("form", { class: "playground", onsubmit: (e) => { e.preventDefault(); send(); } });
  const picker = keyPicker("key");
  const modelSelect = h("select", { name: "model", "data-test": "model-select" }, h("option", { value: "" }, "choose a key first"));
  const output = h("div", { class: "transcript", "aria-live": "polite" });
  const status = h("p", { class: "muted" });
  const prompt = h("textarea", { name: "prompt", rows: 3, placeholder: "Say something…", required: true });
  const messages = [];
  let controller = null;

  const preselect = params.get("key");
  if (preselect && tabKeys.all()[preselect]) {
    picker.querySelector("select").value = tabKeys.all()[preselect].secret;
  }

  async function loadModels() {
    const secret = chosenKey(form, "key");
    if (!secret) return;
    try {
      const body = await api("GET", "/v1/models", undefined, secret);
      mount(modelSelect, body.data.map((m) => h("option", { value: m.id }, m.id)));
      mount(status, `${body.data.length} model(s) this key may use.`);
    } catch (e) {
      mount(modelSelect, h("option", { value: "" }, "—"));
      mount(status, errorBox(e));
    }
  }

  async function send() {
    const secret = chosenKey(form, "key");
    const text = prompt.value.trim();
    if (!secret || !modelSelect.value || !text) return;
    messages.push({ role: "user", content: text });
    output.append(h("div", { class: "msg user" }, h("b", {}, "You"), h("p", {}, text)));
    const answer = h("p", { "data-test": "answer" });
    output.append(h("div", { class: "msg assistant" }, h("b", {}, modelSelect.value), answer));
    prompt.value = "";
    controller = new AbortController();
    mount(status, "Streaming…");
    let full = "";
    try {
      await streamChat(secret, modelSelect.value, messages, (piece) => { full += piece; answer.textContent = full; }, controller.signal);
      messages.push({ role: "assistant", content: full });
      mount(status, h("span", { "data-test": "done" }, "Done."));
    } catch (e) {
      messages.pop();
      mount(status, errorBox(e));
    } finally {
      controller = null;
    }
  }

  picker.addEventListener("change", loadModels);
  mount(form, picker, field("Model", modelSelect), output, field("Message", prompt),
    h("div", { class: "actions" },
      h("button", { type: "submit", class: "primary", "data-test": "send" }, "Send"),
      button("Stop", () => controller && controller.abort()),
      button("Clear", () => { messages.length = 0; mount(output); mount(status); })),
    status);
  mount(root, h("h1", {}, "Playground"), form);
  loadModels();
}
