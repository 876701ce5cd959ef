// The admin's users and any user's keys: create, edit (group, soft limit), disable and delete
// with confirmation, adjust a balance with a reason; keys with allowlist, IPs, limits, expiry.

import { api } from "./api.js";
import { h, mount } from "./dom.js";
import { dateTime, rmb, usd } from "./format.js";
import { KEY_LIMITS, budgetBody, budgetCell, budgetFields, editKey } from "./keyform.js";
import {
  button, confirmDialog, downloadCsv, errorBox, field, hidden, input, panel, select, table, toast, values,
} from "./ui.js";

// A key's or a user's budget (CONTRACT 7): amount, period and what the current period spent.
const BUDGET_CSV = [["budget_usd", (r) => r.budget_usd], ["budget_period", (r) => r.budget_period],
  ["budget_spent_usd", (r) => r.budget_spent_usd]];
const USER_CSV = [["id", (u) => u.id], ["name", (u) => u.name], ["group", (u) => u.group], ["enabled", (u) => u.enabled],
  ["balance_usd", (u) => u.quota_usd], ["used_usd", (u) => u.used_usd], ["soft_limit_usd", (u) => u.soft_limit_usd],
  ["billed_calls", (u) => u.request_count], ["created_at", (u) => new Date(u.created_at * 1000).toISOString()],
  ...BUDGET_CSV];
const KEY_CSV = [["id", (k) => k.id], ["name", (k) => k.name], ["masked", (k) => k.masked], ["enabled", (k) => k.enabled],
  ["quota_usd", (k) => k.quota_usd], ["spent_usd", (k) => k.spent_usd], ["models", (k) => (k.models || []).join(" ")],
  ["allow_ips", (k) => (k.allow_ips || []).join(" ")], ["rpm", (k) => k.rpm], ["tpm", (k) => k.tpm],
  ["expires_at", (k) => k.expires_at], ...BUDGET_CSV, ["cache", (k) => k.cache]];

let rate = 7.2;

export async function loadRate() {
  try {
    rate = (await api("GET", "/admin/models")).rmb_per_usd;
  } catch {
    // keep the default
  }
  return rate;
}

async function groupNames() {
  try {
    return (await api("GET", "/admin/groups")).data.map((g) => g.name);
  } catch {
    return ["default"];
  }
}

function userPanel(title, form, action, done) {
  const err = h("div");
  const p = panel(title, h("div", {}, form, err), [
    button("Cancel", () => p.close()),
    button("Save", async () => {
      if (!form.reportValidity()) return;
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

const optionalUsd = (text) => (text === "" ? null : Number(text));

function createUser(groups, reload) {
  const form = h("form", { class: "grid-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { required: true, maxlength: 200 })),
    field("Group", select("group", groups.map((g) => [g, g]), "default")),
    field("Opening balance, USD", input("quota_usd", { type: "number", min: 0, step: "any", value: 0 })),
    ...budgetFields({}));
  userPanel("New user", form, (v) => api("POST", "/admin/users", {
    name: v.name.trim(), group: v.group, quota_usd: Number(v.quota_usd) || 0, ...budgetBody(v, null),
  }, undefined, { idempotent: true }), (user) => {
    const p = panel("User created", h("div", {},
      h("p", {}, "Give this user token to the user: it is shown only this once."),
      h("code", { class: "secret", "data-test": "new-user-token" }, user.user_token)), [
      button("Done", () => p.close(), { class: "primary" }),
    ]);
    reload();
  });
}

function editUser(user, groups, reload) {
  const form = h("form", { class: "grid-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { value: user.name, required: true, maxlength: 200 })),
    field("Group", select("group", groups.map((g) => [g, g]), user.group)),
    field("Alert at, USD used", input("soft_limit_usd", { type: "number", min: 0, step: "any", value: user.soft_limit_usd ?? "", placeholder: "no alert" }),
      "The user's soft limit: an alert when their spending reaches it. Empty: none."),
    ...budgetFields(user));
  userPanel(`Edit ${user.name}`, form, (v) => api("PATCH", `/admin/users/${user.id}`, {
    name: v.name.trim(), group: v.group, soft_limit_usd: optionalUsd(v.soft_limit_usd), ...budgetBody(v, user),
  }), () => { toast("Saved."); reload(); });
}

function adjustUser(user, reload) {
  const form = h("form", { class: "grid-form", onsubmit: (e) => e.preventDefault() },
    field("Amount, USD", input("amount_usd", { type: "number", step: "any", required: true, "data-test": "amount" }),
      "Positive adds, negative takes away (never below zero)."),
    field("Reason", input("reason", { required: true, maxlength: 500, "data-test": "reason" })));
  userPanel(`Adjust the balance of ${user.name} (now ${usd(user.quota_usd)})`, form,
    (v) => api("POST", `/admin/users/${user.id}/adjust`, { amount_usd: Number(v.amount_usd), reason: v.reason },
      undefined, { idempotent: true }),
    (u) => { toast(`Balance now ${usd(u.quota_usd)}.`); reload(); });
}

async function setEnabled(user, reload) {
  if (user.enabled && !await confirmDialog(`Disable ${user.name}?`,
    "Their API keys and user token are refused at once, until you enable them again.", "Disable user")) return;
  await api("PATCH", `/admin/users/${user.id}`, { enabled: !user.enabled });
  toast(user.enabled ? `${user.name} disabled: their keys stop at once.` : `${user.name} enabled.`);
  reload();
}

async function deleteUser(user, reload) {
  if (!await confirmDialog(`Delete ${user.name}?`, "Their keys and token stop at once and the name becomes "
    + "free again. Their ledger and request log are kept. This cannot be undone.", "Delete user")) return;
  await api("DELETE", `/admin/users/${user.id}`);
  toast(`${user.name} deleted.`);
  reload();
}

export async function users(root) {
  await loadRate();
  const [body, groups] = await Promise.all([api("GET", "/admin/users"), groupNames()]);
  const reload = () => users(root);
  const cols = [
    { title: "Id", cell: (u) => String(u.id), class: "num" },
    { title: "Name", cell: (u) => u.name },
    { title: "Group", cell: (u) => u.group },
    { title: "State", cell: (u) => h("span", { class: `badge ${u.enabled ? "ok" : "bad"}` }, u.enabled ? "enabled" : "disabled") },
    { title: "Balance", cell: (u) => h("span", { "data-balance": u.quota_usd }, `${usd(u.quota_usd)} · ${rmb(u.quota_usd, rate)}`), class: "num" },
    { title: "Used", cell: (u) => `${usd(u.used_usd)} · ${rmb(u.used_usd, rate)}`, class: "num" },
    { title: "Alert at", cell: (u) => (u.soft_limit_usd === null ? "—" : usd(u.soft_limit_usd)), class: "num" },
    { title: "Budget", cell: (u) => budgetCell(u), class: "num" },
    { title: "Billed calls", cell: (u) => String(u.request_count), class: "num" },
    { title: "Created", cell: (u) => dateTime(u.created_at) },
    {
      title: "Actions",
      cell: (u) => h("div", { class: "row-actions", "data-user": u.name },
        button(["Edit", hidden(` ${u.name}`)], () => editUser(u, groups, reload)),
        button(["Adjust balance", hidden(` of ${u.name}`)], () => adjustUser(u, reload), { "data-test": "adjust" }),
        h("a", { href: `#/admin/keys?user=${u.id}`, class: "button" }, "Keys", hidden(` of ${u.name}`)),
        button([u.enabled ? "Disable" : "Enable", hidden(` ${u.name}`)], () => setEnabled(u, reload),
          { "data-test": "toggle-user" }),
        button(["Delete", hidden(` ${u.name}`)], () => deleteUser(u, reload), { class: "danger", "data-test": "delete-user" })),
    },
  ];
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Users"),
      h("div", { class: "row-actions" },
        button("Export CSV", () => downloadCsv("users.csv", USER_CSV, body.data)),
        button("New user", () => createUser(groups, reload), { class: "primary", "data-test": "new-user" }))),
    table(cols, body.data, { empty: "No users yet.", caption: "Users" }));
}

// --- any user's keys ------------------------------------------------------------------------------

export async function keys(root, params) {
  const [people, catalog] = await Promise.all([api("GET", "/admin/users"), api("GET", "/admin/models")]);
  const chosen = Number(params.get("user")) || (people.data[0] && people.data[0].id);
  const owner = people.data.find((u) => u.id === chosen);
  const picker = select("user", people.data.map((u) => [u.id, `${u.name} (#${u.id})`]), chosen);
  picker.addEventListener("change", () => { location.hash = `#/admin/keys?user=${picker.value}`; });
  const head = h("div", { class: "title-row" }, h("h1", {}, owner ? `API keys of ${owner.name}` : "API keys"),
    h("div", { class: "inline-form" }, field("User", picker)));
  if (!owner) {
    mount(root, head, h("p", { class: "muted empty" }, "No users yet."));
    return;
  }
  const body = await api("GET", `/admin/keys?user_id=${owner.id}`);
  const reload = () => keys(root, params);
  const limits = new Set(KEY_LIMITS);
  const models = catalog.data.map((m) => m.id);
  const options = {
    limits, models, owner: owner.name,
    save: (fields) => api("POST", "/admin/keys", { ...fields, user_id: owner.id }, undefined, { idempotent: true }),
    done: (key) => {
      const p = panel("New API key", h("div", {},
        h("p", {}, `Give this key to ${owner.name}: it is shown only this once.`),
        h("code", { class: "secret", "data-test": "new-key" }, key.key)),
      [button("Done", () => p.close(), { class: "primary", "data-test": "close-key" })]);
      reload();
    },
  };
  const editOptions = (k) => ({ ...options, save: (fields) => api("PATCH", `/admin/keys/${k.id}`, fields),
    done: () => { toast("Saved."); reload(); } });
  const cols = [
    { title: "Id", cell: (k) => String(k.id), class: "num" },
    { title: "Name", cell: (k) => k.name },
    { title: "Key", cell: (k) => h("code", {}, k.masked) },
    { title: "State", cell: (k) => h("span", { class: `badge ${k.enabled ? "ok" : "bad"}` }, k.enabled ? "enabled" : "disabled") },
    { title: "Ceiling / spent", cell: (k) => `${k.quota_usd === null ? "none" : usd(k.quota_usd)} / ${usd(k.spent_usd)}`, class: "num" },
    { title: "Models", cell: (k) => (k.models ? k.models.join(", ") : "all") },
    { title: "IPs", cell: (k) => (k.allow_ips ? k.allow_ips.join(", ") : "any") },
    { title: "Limits", cell: (k) => `${k.rpm ? `${k.rpm} rpm` : "—"} · ${k.tpm ? `${k.tpm} tpm` : "—"}` },
    { title: "Budget", cell: (k) => budgetCell(k), class: "num" },
    { title: "Expires", cell: (k) => (k.expires_at ? dateTime(k.expires_at) : "never") },
    {
      title: "Actions",
      cell: (k) => h("div", { class: "row-actions", "data-key": k.name },
        button(["Edit", hidden(` key ${k.name}`)], () => editKey(k, editOptions(k))),
        button([k.enabled ? "Disable" : "Enable", hidden(` key ${k.name}`)], async () => {
          await api("PATCH", `/admin/keys/${k.id}`, { enabled: !k.enabled });
          toast(k.enabled ? "Key disabled." : "Key enabled.");
          reload();
        }, { "data-test": `toggle-${k.id}` }),
        button(["Revoke", hidden(` key ${k.name}`)], async () => {
          if (!await confirmDialog(`Revoke the key “${k.name}”?`,
            `Programs using it stop at once. ${owner.name}'s other keys are not affected.`, "Revoke key")) return;
          await api("DELETE", `/admin/keys/${k.id}`);
          toast("Key revoked.");
          reload();
        }, { class: "danger", "data-test": `revoke-${k.id}` })),
    },
  ];
  mount(root, head,
    h("div", { class: "title-row" }, h("p", { class: "muted" },
      `${owner.group} group · balance ${usd(owner.quota_usd)} · ${body.data.length} key(s)`),
    h("div", { class: "row-actions" },
      button("Export CSV", () => downloadCsv(`keys-of-${owner.name}.csv`, KEY_CSV, body.data)),
      button("New key", () => editKey(null, options), { class: "primary", "data-test": "new-key-button" }))),
    table(cols, body.data, { empty: `${owner.name} has no keys.`, caption: `API keys of ${owner.name}` }));
}
