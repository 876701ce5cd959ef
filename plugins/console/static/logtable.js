// The request log, with filters and paging: the user's own (/api/console/logs) and everyone's
// (/admin/logs, with a user filter).

import { api, query } from "./api.js";
import { h, mount } from "./dom.js";
import { dateTime, dayToUnix, orDash, rmb, usd } from "./format.js";
import { button, errorBox, field, input, pager, select, table, values } from "./ui.js";

const PAGE_SIZE = 20;

function outcome(row) {
  const ok = row.status >= 200 && row.status < 300;
  return h("span", { class: `badge ${ok ? "ok" : "bad"}`, title: orDash(row.error_code) },
    `${row.status} ${row.outcome}`);
}

function columns(rate, admin) {
  const cols = [
    { title: "Time (UTC)", cell: (r) => dateTime(r.created_at) },
    { title: "Request id", cell: (r) => h("code", { class: "rid" }, r.request_id) },
  ];
  if (admin) cols.push({ title: "User", cell: (r) => String(r.user_id) });
  cols.push(
    { title: "Key", cell: (r) => `${orDash(r.token_name)} (#${r.key_id})` },
    { title: "Model", cell: (r) => orDash(r.model) },
    { title: "Outcome", cell: outcome },
    { title: "Tokens in / out", cell: (r) => `${r.prompt_tokens} / ${r.completion_tokens}`, class: "num" },
    { title: "Cost", cell: (r) => h("span", { "data-cost": r.cost_usd }, `${usd(r.cost_usd)} · ${rmb(r.cost_usd, rate)}`), class: "num" },
    { title: "Latency", cell: (r) => `${r.use_time_ms} ms${r.first_byte_ms !== null && r.first_byte_ms !== undefined ? ` (first byte ${r.first_byte_ms} ms)` : ""}`, class: "num" },
    { title: "Upstream", cell: (r) => `${orDash(r.upstream)}${r.attempts > 1 ? ` · ${r.attempts} tries` : ""}` },
  );
  return cols;
}

/** A log view in `root`. `keys`: [{id, name}] for the key filter (user view). */
export function logView(root, { admin, keys = [], rate = 7.2 }) {
  let page = 1;
  const results = h("div", { class: "results" });
  const keyInput = admin
    ? input("key_id", { type: "number", min: 1, placeholder: "any" })
    : select("key_id", [["", "any key"], ...keys.map((k) => [k.id, `${k.name} (#${k.id})`])], "");
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); page = 1; load(); } },
    admin ? field("User id", input("user_id", { type: "number", min: 1, placeholder: "any" })) : null,
    field("Key", keyInput),
    field("Model", input("model", { placeholder: "any" })),
    field("Status", input("status", { type: "number", min: 100, max: 599, placeholder: "any" })),
    field("From", input("since", { type: "date" })),
    field("To", input("until", { type: "date" })),
    field("Request id", input("request_id", { placeholder: "req_…" })),
    h("div", { class: "filter-actions" },
      h("button", { type: "submit", class: "primary" }, "Filter"),
      button("Reset", () => { form.reset(); page = 1; load(); })));

  async function load() {
    const v = values(form);
    const params = {
      user_id: v.user_id, key_id: v.key_id, model: v.model.trim(), status: v.status,
      request_id: v.request_id.trim(), since: dayToUnix(v.since), until: dayToUnix(v.until, true),
      page, page_size: PAGE_SIZE,
    };
    mount(results, h("p", { class: "muted" }, "Loading…"));
    try {
      const body = await api("GET", `${admin ? "/admin/logs" : "/api/console/logs"}${query(params)}`);
      const useRate = body.rmb_per_usd || rate;
      mount(results, table(columns(useRate, admin), body.data, { empty: "No calls match." }),
        pager(page, PAGE_SIZE, body.total, (p) => { page = p; load(); }));
    } catch (err) {
      mount(results, errorBox(err));
    }
  }

  mount(root, form, results);
  load();
  return { reload: load };
}
