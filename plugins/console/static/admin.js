// The admin's pages: users (create, edit, disable, adjust, keys), everyone's log, upstream
// health, models and prices.

import { api } from "./api.js";
import { h, mount } from "./dom.js";
import { dateTime, orDash, rmb, usd } from "./format.js";
import { logView } from "./logtable.js";
import { button, card, errorBox, field, input, panel, table, toast, values } from "./ui.js";

let rate = 7.2;

async function loadRate() {
  try {
    rate = (await api("GET", "/admin/models")).rmb_per_usd;
  } catch {
    // keep the default
  }
}

function userPanel(title, form, action, done) {
  const err = h("div");
  const p = panel(title, h("div", {}, form, err), [
    button("Cancel", () => p.close()),
    button("Save", async () => {
      try {
        const result = await action(values(form));
        p.close();
        done(result);
      } catch (e) {
        mount(err, errorBox(e));
      }
    }, { class: "primary", "data-test": "save-user" }),
  ]);
}

function createUser(reload) {
  const form = h("form", { class: "grid-form" },
    field("Name", input("name", { required: true, maxlength: 200 })),
    field("Group", input("group", { value: "default" })),
    field("Opening balance, USD", input("quota_usd", { type: "number", min: 0, step: "any", value: 0 })));
  userPanel("New user", form, (v) => api("POST", "/admin/users", {
    name: v.name.trim(), group: v.group.trim() || "default", quota_usd: Number(v.quota_usd) || 0,
  }), (user) => {
    const p = panel("User created", h("div", {},
      h("p", {}, "Give this user token to the user: it is shown only this once."),
      h("code", { class: "secret", "data-test": "new-user-token" }, user.user_token)), [
      button("Done", () => p.close(), { class: "primary" }),
    ]);
    reload();
  });
}

function editUser(user, reload) {
  const form = h("form", { class: "grid-form" },
    field("Name", input("name", { value: user.name, required: true, maxlength: 200 })),
    field("Group", input("group", { value: user.group })));
  userPanel(`Edit ${user.name}`, form, (v) => api("PATCH", `/admin/users/${user.id}`, {
    name: v.name.trim(), group: v.group.trim(),
  }), () => { toast("Saved."); reload(); });
}

function adjustUser(user, reload) {
  const form = h("form", { class: "grid-form" },
    field("Amount, USD", input("amount_usd", { type: "number", step: "any", required: true, "data-test": "amount" }),
      "Positive adds, negative takes away (never below zero)."),
    field("Reason", input("reason", { required: true, maxlength: 500, "data-test": "reason" })));
  userPanel(`Adjust the balance of ${user.name} (now ${usd(user.quota_usd)})`, form,
    (v) => api("POST", `/admin/users/${user.id}/adjust`, { amount_usd: Number(v.amount_usd), reason: v.reason }),
    (u) => { toast(`Balance now ${usd(u.quota_usd)}.`); reload(); });
}

async function showKeys(user) {
  const body = await api("GET", `/admin/keys?user_id=${user.id}`);
  const p = panel(`Keys of ${user.name}`, table([
    { title: "Id", cell: (k) => String(k.id) },
    { title: "Name", cell: (k) => k.name },
    { title: "Key", cell: (k) => h("code", {}, k.masked) },
    { title: "State", cell: (k) => (k.enabled ? "enabled" : "disabled") },
    { title: "Ceiling / spent", cell: (k) => `${k.quota_usd === null ? "none" : usd(k.quota_usd)} / ${usd(k.spent_usd)}` },
    { title: "Models", cell: (k) => (k.models ? k.models.join(", ") : "all") },
  ], body.data, { empty: "No keys." }), [button("Close", () => p.close(), { class: "primary" })]);
}

export async function users(root) {
  await loadRate();
  const body = await api("GET", "/admin/users");
  const reload = () => users(root);
  const cols = [
    { title: "Id", cell: (u) => String(u.id) },
    { title: "Name", cell: (u) => u.name },
    { title: "Group", cell: (u) => u.group },
    { title: "State", cell: (u) => h("span", { class: `badge ${u.enabled ? "ok" : "bad"}` }, u.enabled ? "enabled" : "disabled") },
    { title: "Balance", cell: (u) => h("span", { "data-balance": u.quota_usd }, `${usd(u.quota_usd)} · ${rmb(u.quota_usd, rate)}`), class: "num" },
    { title: "Used", cell: (u) => `${usd(u.used_usd)} · ${rmb(u.used_usd, rate)}`, class: "num" },
    { title: "Requests", cell: (u) => String(u.request_count), class: "num" },
    { title: "Created", cell: (u) => dateTime(u.created_at) },
    {
      title: "Actions",
      cell: (u) => h("div", { class: "row-actions", "data-user": u.name },
        button("Edit", () => editUser(u, reload)),
        button("Adjust balance", () => adjustUser(u, reload), { "data-test": "adjust" }),
        button(u.enabled ? "Disable" : "Enable", async () => {
          await api("PATCH", `/admin/users/${u.id}`, { enabled: !u.enabled });
          toast(u.enabled ? "User disabled: their keys stop at once." : "User enabled.");
          reload();
        }),
        button("Keys", () => showKeys(u))),
    },
  ];
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Users"),
      button("New user", () => createUser(reload), { class: "primary" })),
    table(cols, body.data, { empty: "No users yet." }));
}

export async function logs(root) {
  await loadRate();
  mount(root, h("h1", {}, "Request log (everyone)"));
  const box = h("div");
  root.append(box);
  logView(box, { admin: true, rate });
}

export async function upstreams(root) {
  const body = await api("GET", "/admin/upstreams");
  const cols = [
    { title: "Name", cell: (u) => u.name },
    { title: "Protocol", cell: (u) => u.protocol },
    { title: "State", cell: (u) => h("span", { class: `badge ${u.state === "healthy" ? "ok" : "bad"}`, "data-state": u.state }, u.state === "healthy" ? "healthy" : "cooling down") },
    { title: "Cool-down until", cell: (u) => (u.cooling_until ? dateTime(u.cooling_until) : "—") },
    { title: "Error rate", cell: (u) => (u.attempts ? `${(u.error_rate * 100).toFixed(1)}% of ${u.attempts} attempts` : "no calls"), class: "num" },
    { title: "Latency (first byte)", cell: (u) => (u.latency_ms === null ? "—" : `${u.latency_ms} ms`), class: "num" },
    { title: "Priority / weight", cell: (u) => `${u.priority} / ${u.weight}`, class: "num" },
    { title: "Models", cell: (u) => u.models.join(", ") },
  ];
  const windowMin = body.data.length ? Math.round(body.data[0].window_s / 60) : 5;
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Upstream health"), button("Refresh", () => upstreams(root))),
    table(cols, body.data, { empty: "No upstreams configured." }),
    h("p", { class: "muted" }, `Error rate and latency cover the last ${windowMin} minutes of this gateway process.`));
}

const PRICE_NAMES = {
  input_per_mtok: "input / M tokens", output_per_mtok: "output / M tokens",
  cache_write_per_mtok: "cache write / M", cache_read_per_mtok: "cache read / M",
  reasoning_per_mtok: "reasoning / M", per_second: "per second", per_minute: "per minute",
  per_task: "per task", per_mchar: "per M characters",
};

export async function models(root) {
  const body = await api("GET", "/admin/models");
  const cols = [
    { title: "Model", cell: (m) => m.id },
    { title: "Owned by", cell: (m) => m.owned_by },
    {
      title: "Prices (USD · RMB)",
      cell: (m) => h("ul", { class: "plain" }, Object.entries(m.price).map(([k, v]) => h("li", {},
        `${PRICE_NAMES[k] || k}: ${usd(v)} · ${rmb(v, body.rmb_per_usd)}`))),
    },
    { title: "Output ceiling", cell: (m) => String(m.max_output_tokens), class: "num" },
    { title: "Upstreams", cell: (m) => (m.upstreams.length ? m.upstreams.join(", ") : orDash("")) },
  ];
  mount(root, h("h1", {}, "Models and prices"), card(null, table(cols, body.data)),
    h("p", { class: "muted" }, `1 USD = ¥${body.rmb_per_usd}`));
}
