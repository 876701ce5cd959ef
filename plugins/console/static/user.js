// The user's pages: dashboard, API keys, call log. Media tasks are in tasks.js, the playground in
// playground.js.

import { api, tabKeys } from "./api.js";
import { barChart, hbarChart } from "./chart.js";
import { h, mount } from "./dom.js";
import { dateTime, rmb, usd } from "./format.js";
import { KEY_LIMITS, budgetCell, editKey } from "./keyform.js";
import { logView } from "./logtable.js";
import { button, confirmDialog, copy, hidden, panel, stat, table, toast } from "./ui.js";

// --- dashboard -------------------------------------------------------------------------------

export async function dashboard(root) {
  const s = await api("GET", "/api/console/summary");
  const rate = s.rmb_per_usd;
  const u = s.user;
  const total = s.requests_total ?? u.request_count;
  mount(root,
    h("h1", {}, `Hello, ${u.name}`),
    h("div", { class: "stats" },
      stat("Balance", rmb(u.balance_usd, rate), "balance", usd(u.balance_usd)),
      stat("Used", rmb(u.used_usd, rate), "used", usd(u.used_usd)),
      stat("Calls today", String(s.requests_today), "requests-today", "every outcome, UTC day"),
      stat("Spent today", rmb(s.spend_today_usd, rate), "spent-today", usd(s.spend_today_usd)),
      stat("Calls in all", String(total), "requests", "every outcome, since the start")),
    h("section", { class: "card" },
      barChart(s.days.map((d) => ({ label: d.day.slice(5), value: d.cost_usd })),
        { title: "Spending per day, last 30 days (USD)", format: usd })),
    h("section", { class: "card" },
      hbarChart(s.models.map((m) => ({ label: m.model, value: m.cost_usd })),
        { title: "Spending per model, last 30 days (USD)", format: usd })),
    h("p", { class: "muted" }, `Group ${u.group} · 1 USD = ¥${rate}`));
}

// --- keys ------------------------------------------------------------------------------------

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
  const [body, offered] = await Promise.all([api("GET", "/api/keys"), api("GET", "/api/console/models")]);
  const models = offered.data.map((m) => m.id); // the group's models, as the allowlist's choices
  const reload = () => keys(root);
  const known = tabKeys.all();
  // Optional key fields (rate limits, alert threshold) are offered when this gateway's keys carry them.
  const limits = new Set(KEY_LIMITS.filter((f) => body.data.some((k) => f in k)));
  const createOptions = {
    limits, models,
    save: (fields) => api("POST", "/api/keys", fields, undefined, { idempotent: true }),
    done: (key) => { showNewKey(key); reload(); },
  };
  const editOptions = (k) => ({ limits, models, save: (fields) => api("PATCH", `/api/keys/${k.id}`, fields),
    done: () => { toast("Saved."); reload(); } });
  const cols = [
    { title: "Name", cell: (k) => k.name },
    { title: "Key", cell: (k) => h("code", {}, k.masked) },
    { title: "State", cell: (k) => h("span", { class: `badge ${k.enabled ? "ok" : "bad"}` }, k.enabled ? "enabled" : "disabled") },
    { title: "Ceiling / spent", cell: (k) => `${k.quota_usd === null ? "none" : usd(k.quota_usd)} / ${usd(k.spent_usd)}`, class: "num" },
    { title: "Models", cell: (k) => (k.models ? k.models.join(", ") : "all") },
    { title: "IPs", cell: (k) => (k.allow_ips ? k.allow_ips.join(", ") : "any") },
    { title: "Budget", cell: (k) => budgetCell(k), class: "num" },
    { title: "Expires", cell: (k) => (k.expires_at ? dateTime(k.expires_at) : "never") },
    limits.has("rpm") ? { title: "Limits", cell: (k) => `${k.rpm ? `${k.rpm} rpm` : "—"} · ${k.tpm ? `${k.tpm} tpm` : "—"}` } : null,
    {
      title: "Actions",
      cell: (k) => h("div", { class: "row-actions" },
        button(["Edit", hidden(` key ${k.name}`)], () => editKey(k, editOptions(k))),
        button([k.enabled ? "Disable" : "Enable", hidden(` key ${k.name}`)], async () => {
          await api("PATCH", `/api/keys/${k.id}`, { enabled: !k.enabled });
          toast(k.enabled ? "Key disabled." : "Key enabled.");
          reload();
        }, { "data-test": `toggle-${k.id}` }),
        button(["Delete", hidden(` key ${k.name}`)], async () => {
          if (!await confirmDialog(`Delete the key “${k.name}”?`, "Programs using it stop at once.", "Delete key")) return;
          await api("DELETE", `/api/keys/${k.id}`);
          tabKeys.drop(k.id);
          toast("Key deleted.");
          reload();
        }, { class: "danger", "data-test": `delete-${k.id}` }),
        known[k.id] ? h("a", { href: `#/playground?key=${k.id}`, class: "button" }, "Playground", hidden(` with key ${k.name}`)) : null),
    },
  ];
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "API keys"),
      button("New key", () => editKey(null, createOptions), { class: "primary", "data-test": "new-key-button" })),
    table(cols.filter(Boolean), body.data, { empty: "No keys yet: make one to call the API.", caption: "Your API keys" }));
}

// --- log -------------------------------------------------------------------------------------

export async function logs(root) {
  const [owned, summary] = await Promise.all([api("GET", "/api/keys"), api("GET", "/api/console/summary")]);
  mount(root, h("h1", {}, "Call log"));
  const box = h("div");
  root.append(box);
  logView(box, { admin: false, keys: owned.data, rate: summary.rmb_per_usd });
}
