// The API key form, shared by a user's own keys (/api/keys) and the admin's keys of any user
// (/admin/keys): name, spending ceiling, model allowlist, IPs, expiry, rate limits, alert, budget, cache.

import { h, mount } from "./dom.js";
import { usd } from "./format.js";
import { button, errorBox, field, input, panel, select, values } from "./ui.js";

const list = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);
export const KEY_LIMITS = ["rpm", "tpm", "soft_limit_usd"];

/** `models`: the model ids to offer as checkboxes (admin), or null for a comma-separated field. */
function modelsField(k, models) {
  if (!models) {
    return field("Models", input("models", { value: (k.models || []).join(", "), placeholder: "all models" }),
      "Comma-separated model ids; empty: every model you may use.");
  }
  const chosen = new Set(k.models || []);
  return h("fieldset", { class: "field models-field" },
    h("legend", {}, "Models (none ticked: every model)"),
    h("div", { class: "checks" }, models.map((id) => h("label", { class: "check" },
      h("input", { type: "checkbox", name: "model", value: id, checked: chosen.has(id) }), id))));
}

const PERIODS = [["", "no budget"], ["day", "per day"], ["week", "per week"], ["month", "per month"]];

/** The budget fields of a key or a user (CONTRACT 7): an amount per UTC day, week or month. */
export function budgetFields(r) {
  return [
    field("Budget, USD", input("budget_usd", { type: "number", min: 0, step: "any", value: r.budget_usd ?? "", placeholder: "no budget" }),
      "What may be spent per period; a call that would pass it waits for the next period (429)."),
    field("Budget period", select("budget_period", PERIODS, r.budget_period ?? "")),
  ];
}

/** The budget part of a create or PATCH body: sent when set, or cleared when an existing one is emptied. */
export function budgetBody(v, editing) {
  const body = {};
  if (v.budget_usd !== "") {
    body.budget_usd = Number(v.budget_usd);
    body.budget_period = v.budget_period || null;
  } else if (editing && editing.budget_usd !== null && editing.budget_usd !== undefined) {
    body.budget_usd = null;
  }
  return body;
}

/** "$0.50 / day · $0.12 spent", or "—" without a budget. */
export function budgetCell(r) {
  if (r.budget_usd === null || r.budget_usd === undefined) return "—";
  return `${usd(r.budget_usd)} / ${r.budget_period} · ${usd(r.budget_spent_usd ?? 0)} spent`;
}

/** The key's response-cache opt-in (CONTRACT 7, a key's ``cache: true``): identical calls of its
 * user are answered from the cache, charged the configured hit price. */
function cacheField(k) {
  return h("label", { class: "check field" },
    h("input", { type: "checkbox", name: "cache", id: "f-cache", checked: Boolean(k.cache), "data-test": "key-cache" }),
    "Answer identical calls from the response cache");
}

export function keyForm(key, limits, models) {
  const k = key || {};
  const expires = k.expires_at ? new Date(k.expires_at * 1000).toISOString().slice(0, 10) : "";
  return h("form", { class: "grid-form", onsubmit: (e) => e.preventDefault() },
    field("Name", input("name", { value: k.name || "", required: true, maxlength: 200 })),
    field("Spending ceiling, USD", input("quota_usd", { type: "number", min: 0, step: "any", value: k.quota_usd ?? "", placeholder: "none" }),
      "Empty: no ceiling of its own (the user's balance still applies)."),
    modelsField(k, models),
    field("Allowed IPs", input("allow_ips", { value: (k.allow_ips || []).join(", "), placeholder: "any IP" }),
      "Comma-separated IPs or CIDRs."),
    field("Expires (UTC day)", input("expires", { type: "date", value: expires }), "Empty: never."),
    limits.has("rpm") ? field("Requests per minute", input("rpm", { type: "number", min: 1, value: k.rpm ?? "", placeholder: "no limit" })) : null,
    limits.has("tpm") ? field("Tokens per minute", input("tpm", { type: "number", min: 1, value: k.tpm ?? "", placeholder: "no limit" })) : null,
    limits.has("soft_limit_usd") ? field("Alert at, USD spent", input("soft_limit_usd", { type: "number", min: 0, step: "any", value: k.soft_limit_usd ?? "", placeholder: "no alert" }),
      "The soft limit reported by /v1/dashboard/billing/subscription.") : null,
    ...budgetFields(k),
    cacheField(k));
}

export function keyBody(form, editing) {
  const v = values(form);
  const ticked = [...form.querySelectorAll("input[name=model]:checked")].map((el) => el.value);
  const models = form.querySelector("input[name=model]") ? ticked : list(v.models || "");
  const body = {
    name: v.name.trim(),
    quota_usd: v.quota_usd === "" ? null : Number(v.quota_usd),
    models: models.length ? models : null,
    allow_ips: list(v.allow_ips).length ? list(v.allow_ips) : null,
    expires_at: v.expires ? Math.floor(Date.parse(`${v.expires}T23:59:59Z`) / 1000) : 0,
    ...budgetBody(v, editing),
    cache: v.cache === "on",
  };
  // Limits are sent only when set (or when clearing one an existing key has).
  for (const name of KEY_LIMITS) {
    if (v[name] === undefined) continue; // a field this gateway's keys do not have
    if (v[name] !== "") body[name] = Number(v[name]);
    else if (editing && editing[name] !== undefined && editing[name] !== null) body[name] = null;
  }
  if (!editing) {
    for (const name of ["quota_usd", "models", "allow_ips"]) if (body[name] === null) delete body[name];
    if (!body.cache) delete body.cache;
  }
  return body;
}

/** The create / edit dialog. `save(body)` sends it (a create with a fresh Idempotency-Key);
 * `done(saved, created)` follows a success. */
export function editKey(key, { limits, models, save, done, owner }) {
  const form = keyForm(key, limits, models);
  const err = h("div");
  const title = key ? `Edit key “${key.name}”` : owner ? `New API key for ${owner}` : "New API key";
  const p = panel(title, h("div", {}, form, err), [
    button("Cancel", () => p.close()),
    button(key ? "Save" : "Create", async () => {
      try {
        const saved = await save(keyBody(form, key));
        p.close();
        done(saved, !key);
      } catch (e) {
        mount(err, errorBox(e));
      }
    }, { class: "primary", "data-test": "save-key" }),
  ]);
  return p;
}
