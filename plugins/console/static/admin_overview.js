// The admin overview: spend, tokens and calls over time (hour, day or month), the same by user,
// model, key or group, top spenders, error rate and upstream latency over time, all from
// GET /admin/usage (the request log's roll-ups, so it stays quick on a large log); each table
// and series exports as CSV.

import { api, query } from "./api.js";
import { barChart, hbarChart } from "./chart.js";
import { h, mount } from "./dom.js";
import { dayToUnix, usd } from "./format.js";
import { button, card, downloadCsv, errorBox, field, input, select, stat, table, values } from "./ui.js";

const HOUR = 3600;
const DAY = 86400;
const count = (n) => Number(n || 0).toLocaleString("en-US");
const pct = (part, whole) => (whole ? `${((100 * part) / whole).toFixed(1)}%` : "—");

/** Every bucket start of [since, until), so that a quiet bucket shows as zero, not as a gap. */
function bucketStarts(bucket, since, until) {
  const out = [];
  if (bucket === "month") {
    const d = new Date(since * 1000);
    for (let y = d.getUTCFullYear(), m = d.getUTCMonth(); ; m++) {
      const t = Date.UTC(y, m, 1) / 1000;
      if (t >= until || out.length > 2000) break;
      out.push(t);
    }
    return out;
  }
  const step = bucket === "hour" ? HOUR : DAY;
  for (let t = since; t < until && out.length <= 2000; t += step) out.push(t);
  return out;
}

function label(bucket, t) {
  const iso = new Date(t * 1000).toISOString();
  if (bucket === "hour") return `${iso.slice(5, 10)} ${iso.slice(11, 13)}h`;
  return bucket === "month" ? iso.slice(0, 7) : iso.slice(5, 10);
}

function filled(answer, points) {
  const at = new Map(points.map((p) => [p.start, p]));
  return bucketStarts(answer.bucket, answer.since, answer.until).map((t) => ({ start: t, ...(at.get(t) || {}) }));
}

const SERIES_CSV = [["bucket_start_utc", (p) => new Date(p.start * 1000).toISOString()], ["calls", (p) => p.calls || 0],
  ["errors", (p) => p.errors || 0], ["input_tokens", (p) => p.input_tokens || 0], ["output_tokens", (p) => p.output_tokens || 0],
  ["cache_read_tokens", (p) => p.cache_read_tokens || 0], ["cache_write_tokens", (p) => p.cache_write_tokens || 0],
  ["cost_usd", (p) => p.cost_usd || 0]];

function overTime(answer) {
  const points = filled(answer, answer.series.length ? answer.series[0].points : []);
  const chart = (title, get, format) => barChart(points.map((p) => ({ label: label(answer.bucket, p.start), value: get(p) })), { title, format });
  return card("Over time",
    h("div", { class: "title-row" }, h("p", { class: "muted" }, `${points.length} ${answer.bucket} buckets, UTC`),
      button("Export CSV", () => downloadCsv(`usage-by-${answer.bucket}.csv`, SERIES_CSV, points), { "data-test": "export-series" })),
    h("div", { class: "charts" },
      chart(`Spend per ${answer.bucket} (USD)`, (p) => p.cost_usd || 0, usd),
      chart(`Calls per ${answer.bucket}`, (p) => p.calls || 0, count),
      chart(`Tokens per ${answer.bucket} (input + output)`, (p) => (p.input_tokens || 0) + (p.output_tokens || 0), count),
      chart(`Error rate per ${answer.bucket} (%)`, (p) => (p.calls ? (100 * (p.errors || 0)) / p.calls : 0), (v) => `${v.toFixed(1)}%`)));
}

function byDimension(answer, dimension, names) {
  const name = (key) => (key === null ? "—" : names[key] ? `${names[key]} (#${key})` : String(key));
  // By user or key the answer holds the top spenders (its default top) and the rest summed in
  // `others`: one last row, so the table still adds up to the totals.
  const rest = answer.series_count - answer.series.length;
  const rows = answer.others ? [...answer.series, { ...answer.others, others: `${count(rest)} others` }] : answer.series;
  const cols = [
    { title: dimension[0].toUpperCase() + dimension.slice(1), cell: (s) => s.others || name(s.key) },
    { title: "Spend", cell: (s) => usd(s.totals.cost_usd), class: "num" },
    { title: "Calls", cell: (s) => count(s.totals.calls), class: "num" },
    { title: "Errors", cell: (s) => `${count(s.totals.errors)} (${pct(s.totals.errors, s.totals.calls)})`, class: "num" },
    { title: "Tokens in / out", cell: (s) => `${count(s.totals.input_tokens)} / ${count(s.totals.output_tokens)}`, class: "num" },
    { title: "Cache read / write", cell: (s) => `${count(s.totals.cache_read_tokens)} / ${count(s.totals.cache_write_tokens)}`, class: "num" },
  ];
  const csv = [[dimension, (s) => (s.others ? "others" : s.key)], [`${dimension}_name`, (s) => s.others || names[s.key] || ""], ["cost_usd", (s) => s.totals.cost_usd],
    ["calls", (s) => s.totals.calls], ["errors", (s) => s.totals.errors], ["input_tokens", (s) => s.totals.input_tokens],
    ["output_tokens", (s) => s.totals.output_tokens], ["cache_read_tokens", (s) => s.totals.cache_read_tokens],
    ["cache_write_tokens", (s) => s.totals.cache_write_tokens]];
  return card(`By ${dimension}`,
    h("div", { class: "title-row" }, h("p", { class: "muted" }, "Biggest spenders first."),
      button("Export CSV", () => downloadCsv(`usage-by-${dimension}.csv`, csv, rows), { "data-test": "export-dimension" })),
    hbarChart(answer.series.slice(0, 10).map((s) => ({ label: name(s.key), value: s.totals.cost_usd })),
      { title: `Top ${Math.min(answer.series.length, 10)} by spend, per ${dimension} (USD)`, format: usd }),
    table(cols, rows, { empty: "No calls in this range.", caption: `Usage by ${dimension}` }));
}

function latency(answer) {
  const series = answer.series.slice(0, 6);
  return card("Upstream latency over time",
    series.length ? h("div", { class: "charts" }, series.map((s) => barChart(filled(answer, s.points).map((p) => ({
      label: label(answer.bucket, p.start),
      value: p.first_byte_calls ? p.first_byte_ms_sum / p.first_byte_calls : 0,
    })), { title: `${s.key}: mean time to first byte per ${answer.bucket} (ms), ${pct(s.totals.errors, s.totals.calls)} errors`,
      format: (v) => `${v < 10 ? v.toFixed(1) : Math.round(v)} ms` })))
      : h("p", { class: "muted empty" }, "No upstream calls in this range."));
}

export async function overview(root, params) {
  const [people, keyList] = await Promise.all([api("GET", "/admin/users"), api("GET", "/admin/keys")]);
  const names = {
    user: Object.fromEntries(people.data.map((u) => [u.id, u.name])),
    key: Object.fromEntries(keyList.data.map((k) => [k.id, k.name])),
    model: {}, group: {},
  };
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); load(); } },
    field("Per", select("bucket", [["hour", "hour"], ["day", "day"], ["month", "month"]], params.get("bucket") || "day")),
    field("By", select("group_by", [["user", "user"], ["model", "model"], ["key", "key"], ["group", "group"]], params.get("by") || "user")),
    field("From", input("since", { type: "date" })),
    field("To", input("until", { type: "date" })),
    field("User", select("user_id", [["", "anyone"], ...people.data.map((u) => [u.id, `${u.name} (#${u.id})`])], "")),
    field("Model", input("model", { placeholder: "any" })),
    h("div", { class: "filter-actions" }, h("button", { type: "submit", class: "primary" }, "Show")));
  const results = h("div", { "aria-live": "polite" });

  async function load() {
    const v = values(form);
    const range = { bucket: v.bucket, since: dayToUnix(v.since), until: dayToUnix(v.until, true) };
    const only = { user_id: v.user_id, model: v.model.trim() };
    mount(results, h("p", { class: "muted" }, "Loading…"));
    try {
      const [total, by, upstreams] = await Promise.all([
        api("GET", `/admin/usage${query({ ...range, ...only })}`),
        api("GET", `/admin/usage${query({ ...range, ...only, group_by: v.group_by })}`),
        api("GET", `/admin/usage${query({ ...range, group_by: "upstream" })}`),
      ]);
      const t = total.totals;
      mount(results,
        h("div", { class: "stats" },
          stat("Spend", usd(t.cost_usd), "spend"),
          stat("Calls", count(t.calls), "calls", `${count(t.stream_calls)} streamed`),
          stat("Error rate", pct(t.errors, t.calls), "error-rate", `${count(t.errors)} errors`),
          stat("Tokens in / out", `${count(t.input_tokens)} / ${count(t.output_tokens)}`, "tokens",
            `cache read ${count(t.cache_read_tokens)} · write ${count(t.cache_write_tokens)}`)),
        overTime(total), byDimension(by, v.group_by, names[v.group_by]), latency(upstreams));
    } catch (err) {
      mount(results, errorBox(err));
    }
  }

  mount(root, h("h1", {}, "Overview"), form, results);
  await load();
}
