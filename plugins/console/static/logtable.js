// The request log, with filters, paging, a detail view per row and CSV export: the user's own
// (/api/console/logs) and everyone's (/admin/logs, with a user filter and user names).

import { api, query } from "./api.js";
import { h, mount } from "./dom.js";
import { dateTime, dayToUnix, orDash, rmb, usd } from "./format.js";
import { button, downloadCsv, errorBox, field, hidden, input, pager, panel, select, table, values } from "./ui.js";

const PAGE_SIZE = 20;
const EXPORT_PAGE = 200;
const EXPORT_MAX_ROWS = 10000;

// What each outcome means, and how it is shown: by the outcome, never by the HTTP status (a media
// task that failed upstream is an error even when its submission was a 200).
const OUTCOMES = {
  success: ["ok", "served"],
  usage_estimated: ["ok", "served, usage estimated"],
  client_disconnect: ["warn", "client went away"],
  upstream_cut: ["warn", "upstream cut the stream"],
  upstream_error: ["bad", "upstream failed"],
  client_error: ["bad", "refused"],
  gateway_error: ["bad", "gateway error"],
  crash_released: ["warn", "gateway restarted"],
  shutdown: ["warn", "gateway shut down mid-stream"],
  cache_hit: ["cache", "served from cache"],
};

export function outcomeBadge(row) {
  const [kind, text] = OUTCOMES[row.outcome] || ["bad", row.outcome];
  return h("span", { class: `badge ${kind}`, "data-outcome": row.outcome },
    `${text} · ${row.status}${row.error_code ? ` ${row.error_code}` : ""}`);
}

function keyName(r) {
  return `${orDash(r.token_name)} (#${r.key_id})`;
}

/** The attempts that failed before the answer (the row's ``attempt_log``, JSON). */
function failedAttempts(r) {
  try {
    const list = JSON.parse(r.attempt_log || "[]");
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

/** The error a failed call's client read (``error_message``); rows logged before it was kept name
 * the last failed attempt's error instead. */
function errorText(r, failed, ok) {
  const message = r.error_message || (failed.length && !ok ? failed[failed.length - 1].error : "");
  return message ? h("span", { "data-test": "error-message" }, `${r.error_code}: ${message}`) : r.error_code;
}

function detail(r, rate, userNames) {
  const failed = failedAttempts(r);
  const ok = (OUTCOMES[r.outcome] || ["bad"])[0] !== "bad";
  const items = [
    ["Request id", h("code", {}, r.request_id)],
    ["Time (UTC)", dateTime(r.created_at)],
    ["User", userNames ? `${userNames[r.user_id] || "deleted user"} (#${r.user_id})` : null],
    ["Key", keyName(r)],
    ["Route", `${r.route} (${r.family})`],
    ["Model", orDash(r.model)],
    ["Outcome", outcomeBadge(r)],
    ["Error", r.error_code ? errorText(r, failed, ok) : "—"],
    ["Upstream", `${orDash(r.upstream)} · ${r.attempts} attempt(s)`],
    ["Failed attempts", failed.length
      ? h("ol", { class: "attempts", "data-test": "failed-attempts" }, failed.map((a) => h("li", {},
        `${a.upstream}: ${a.status === null ? "no answer" : `HTTP ${a.status}`}, ${a.error} (${a.ms} ms)`)))
      : "none"],
    ["Streamed", r.is_stream ? "yes" : "no"],
    ["Tokens in / out", `${r.prompt_tokens} / ${r.completion_tokens}${r.usage_estimated ? " (estimated)" : ""}`],
    ["Cache tokens (write / read)", `${r.cache_write_tokens} / ${r.cache_read_tokens}`],
    ["Reasoning tokens", String(r.reasoning_tokens)],
    ["Cost", `${usd(r.cost_usd)} · ${rmb(r.cost_usd, rate)}`],
    ["Not charged", r.uncharged_nano ? usd(r.uncharged_nano / 1e9) : null],
    ["Total time", `${r.use_time_ms} ms`],
    ["Time to first byte", r.first_byte_ms === null || r.first_byte_ms === undefined ? "—" : `${r.first_byte_ms} ms`],
    ["Client IP", orDash(r.ip)],
  ].filter(([, v]) => v !== null);
  const p = panel(`Call ${r.request_id}`, h("dl", { class: "detail", "data-test": "log-detail" },
    items.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
  [button("Close", () => p.close(), { class: "primary" })]);
}

function columns(rate, admin, userNames) {
  const cols = [
    { title: "Time (UTC)", cell: (r) => dateTime(r.created_at) },
    { title: "Request id", cell: (r) => h("code", { class: "rid" }, r.request_id) },
  ];
  if (admin) cols.push({ title: "User", cell: (r) => `${userNames[r.user_id] || "deleted"} (#${r.user_id})` });
  cols.push(
    { title: "Key", cell: keyName },
    { title: "Model", cell: (r) => orDash(r.model) },
    { title: "Outcome", cell: outcomeBadge },
    { title: "Tokens in / out", cell: (r) => `${r.prompt_tokens} / ${r.completion_tokens}`, class: "num" },
    { title: "Cost", cell: (r) => h("span", { "data-cost": r.cost_usd }, `${usd(r.cost_usd)} · ${rmb(r.cost_usd, rate)}`), class: "num" },
    { title: "Latency", cell: (r) => `${r.use_time_ms} ms`, class: "num" },
    { title: "Upstream", cell: (r) => `${orDash(r.upstream)}${r.attempts > 1 ? ` · ${r.attempts} tries` : ""}` },
    { title: "Details", cell: (r) => button(["Details", hidden(` of call ${r.request_id}`)], () => detail(r, rate, admin ? userNames : null), { "data-test": "log-details" }) },
  );
  return cols;
}

const CSV_FIELDS = [
  "created_at", "request_id", "user_id", "key_id", "token_name", "route", "family", "model", "status",
  "outcome", "error_code", "is_stream", "upstream", "attempts", "prompt_tokens", "completion_tokens",
  "cache_write_tokens", "cache_read_tokens", "reasoning_tokens", "usage_estimated", "cost_usd",
  "use_time_ms", "first_byte_ms", "ip",
];

/** A log view in `root`. `keys`: [{id, name}] for the key filter (user view); `users` and
 * `userNames` (admin view) for the user filter and the names shown. */
export function logView(root, { admin, keys = [], users = [], userNames = {}, rate = 7.2 }) {
  let page = 1;
  const results = h("div", { class: "results", "aria-live": "polite" });
  const keyInput = admin
    ? input("key_id", { type: "number", min: 1, placeholder: "any" })
    : select("key_id", [["", "any key"], ...keys.map((k) => [k.id, `${k.name} (#${k.id})`])], "");
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); page = 1; load(); } },
    admin ? field("User", select("user_id", [["", "anyone"], ...users.map((u) => [u.id, `${u.name} (#${u.id})`])], "")) : null,
    field(admin ? "Key id" : "Key", keyInput),
    field("Model", input("model", { placeholder: "any" })),
    field("Status", input("status", { type: "number", min: 100, max: 599, placeholder: "any" })),
    field("From", input("since", { type: "date" })),
    field("To", input("until", { type: "date" })),
    field("Request id", input("request_id", { placeholder: "req_…" })),
    h("div", { class: "filter-actions" },
      h("button", { type: "submit", class: "primary" }, "Filter"),
      button("Reset", () => { form.reset(); page = 1; load(); }),
      button("Export CSV", () => exportCsv(), { "data-test": "export-csv" })));

  function params() {
    const v = values(form);
    return {
      user_id: v.user_id, key_id: v.key_id, model: v.model.trim(), status: v.status,
      request_id: v.request_id.trim(), since: dayToUnix(v.since), until: dayToUnix(v.until, true),
    };
  }
  const path = admin ? "/admin/logs" : "/api/console/logs";

  async function load() {
    mount(results, h("p", { class: "muted" }, "Loading…"));
    try {
      const body = await api("GET", `${path}${query({ ...params(), page, page_size: PAGE_SIZE })}`);
      const useRate = body.rmb_per_usd || rate;
      mount(results, table(columns(useRate, admin, userNames), body.data, { empty: "No calls match.", caption: "Calls" }),
        pager(page, PAGE_SIZE, body.total, (p) => { page = p; load(); }));
    } catch (err) {
      mount(results, errorBox(err));
    }
  }

  // Every row the filters match (up to EXPORT_MAX_ROWS), newest first, as a CSV file.
  async function exportCsv() {
    const rows = [];
    for (let p = 1; rows.length < EXPORT_MAX_ROWS; p++) {
      const body = await api("GET", `${path}${query({ ...params(), page: p, page_size: EXPORT_PAGE })}`);
      rows.push(...body.data);
      if (body.data.length < EXPORT_PAGE || rows.length >= body.total) break;
    }
    const fields = CSV_FIELDS.map((name) => [name, (r) => r[name]]);
    if (admin) fields.splice(3, 0, ["user_name", (r) => userNames[r.user_id] || ""]);
    downloadCsv(admin ? "request-log.csv" : "call-log.csv", fields, rows);
  }

  mount(root, form, results);
  load();
  return { reload: load };
}
