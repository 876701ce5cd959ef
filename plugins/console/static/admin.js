// The admin's read-mostly pages: everyone's request log, upstream health (with a cool-down
// reset), models and prices, groups. Users and keys are in admin_users.js.

import { api } from "./api.js";
import { loadRate } from "./admin_users.js";
import { h, mount } from "./dom.js";
import { dateTime, orDash, rmb, usd } from "./format.js";
import { logView } from "./logtable.js";
import { button, card, downloadCsv, hidden, panel, table, toast } from "./ui.js";

/** Re-read the config file (POST /admin/reload): new calls get its models, prices, groups and
 * upstreams; an invalid file changes nothing and its problems are shown. */
function reloadButton(after) {
  return button("Reload the config file", async () => {
    try {
      const r = await api("POST", "/admin/reload");
      const restart = r.restart_needed && r.restart_needed.length ? ` Needs a restart: ${r.restart_needed.join(", ")}.` : "";
      toast(r.unchanged ? `The config file has not changed.${restart}` : `Config reloaded.${restart}`);
      await after();
    } catch (err) {
      if (err.code !== "invalid_config") throw err;
      const p = panel("The config file is invalid: nothing changed", h("pre", { class: "problems" }, err.message),
        [button("Close", () => p.close(), { class: "primary" })]);
    }
  }, { "data-test": "reload-config" });
}

export async function logs(root) {
  const [rate, people] = await Promise.all([loadRate(), api("GET", "/admin/users")]);
  const names = Object.fromEntries(people.data.map((u) => [u.id, u.name]));
  mount(root, h("h1", {}, "Request log (everyone)"));
  const box = h("div");
  root.append(box);
  logView(box, { admin: true, rate, userNames: names, users: people.data });
}

export async function upstreams(root) {
  const body = await api("GET", "/admin/upstreams");
  const reload = () => upstreams(root);
  const cols = [
    { title: "Name", cell: (u) => u.name },
    { title: "Protocol", cell: (u) => u.protocol },
    { title: "State", cell: (u) => h("span", { class: `badge ${u.state === "healthy" ? "ok" : "bad"}`, "data-state": u.state }, u.state === "healthy" ? "healthy" : "cooling down") },
    { title: "Cool-down until", cell: (u) => (u.cooling_until ? dateTime(u.cooling_until) : "—") },
    { title: "Error rate", cell: (u) => (u.attempts ? `${(u.error_rate * 100).toFixed(1)}% of ${u.attempts} attempts` : "no calls"), class: "num" },
    { title: "Latency (first byte)", cell: (u) => (u.latency_ms === null ? "—" : `${u.latency_ms} ms`), class: "num" },
    { title: "Priority / weight", cell: (u) => `${u.priority} / ${u.weight}`, class: "num" },
    { title: "Models", cell: (u) => u.models.join(", ") },
    {
      title: "Actions",
      cell: (u) => (u.state === "cooling_down"
        ? button(["End cool-down", hidden(` of ${u.name}`)], async () => {
          await api("POST", `/admin/upstreams/${encodeURIComponent(u.name)}/reset`);
          toast(`${u.name} is tried again in its normal order.`);
          reload();
        }, { "data-test": `reset-${u.name}` })
        : "—"),
    },
  ];
  const windowMin = body.data.length ? Math.round(body.data[0].window_s / 60) : 5;
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Upstream health"),
      h("div", { class: "row-actions" },
        button("Export CSV", () => downloadCsv("upstreams.csv", [["name", (u) => u.name], ["protocol", (u) => u.protocol],
          ["state", (u) => u.state], ["error_rate", (u) => u.error_rate], ["attempts", (u) => u.attempts],
          ["latency_ms", (u) => u.latency_ms]], body.data)),
        button("Refresh", reload))),
    table(cols, body.data, { empty: "No upstreams configured.", caption: "Upstreams" }),
    h("p", { class: "muted" }, `Error rate and latency cover the last ${windowMin} minutes of the gateway process that answered; a cool-down ended here ends in that process.`));
}

const PRICE_NAMES = {
  input_per_mtok: "input / M tokens", output_per_mtok: "output / M tokens",
  cache_write_per_mtok: "cache write / M", cache_read_per_mtok: "cache read / M",
  reasoning_per_mtok: "reasoning / M", per_second: "per second", per_minute: "per minute",
  per_task: "per task", per_mchar: "per M characters", per_image: "per image",
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
  const priceFields = [...new Set(body.data.flatMap((m) => Object.keys(m.price)))];
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Models and prices"),
      h("div", { class: "row-actions" }, reloadButton(() => models(root)), button("Export CSV", () => downloadCsv("models.csv", [["model", (m) => m.id], ["owned_by", (m) => m.owned_by],
        ...priceFields.map((f) => [`${f}_usd`, (m) => m.price[f] ?? ""]),
        ["max_output_tokens", (m) => m.max_output_tokens], ["upstreams", (m) => m.upstreams.join(" ")]], body.data)))),
    card(null, table(cols, body.data, { caption: "Models and prices" })),
    h("p", { class: "muted" }, `From the config file. 1 USD = ¥${body.rmb_per_usd}`));
}

export async function groups(root) {
  const body = await api("GET", "/admin/groups");
  const cols = [
    { title: "Group", cell: (g) => g.name },
    { title: "Price ratio", cell: (g) => `× ${g.ratio}`, class: "num" },
    { title: "Models", cell: (g) => (g.models ? g.models.join(", ") : "all") },
    { title: "Default limits per key", cell: (g) => `${g.rpm ? `${g.rpm} rpm` : "—"} · ${g.tpm ? `${g.tpm} tpm` : "—"}` },
    { title: "Users", cell: (g) => String(g.users), class: "num" },
  ];
  mount(root, h("div", { class: "title-row" }, h("h1", {}, "Groups"), reloadButton(() => groups(root))), table(cols, body.data, { empty: "No groups configured.", caption: "Groups" }),
    h("p", { class: "muted" }, "From the config file: a user's group sets the models they may call and multiplies their prices."));
}
