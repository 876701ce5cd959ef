// Shared widgets: tables, form fields, a pager, messages.

import { h, mount } from "./dom.js";

/** columns: [{title, cell(row) -> Node|string, class?}] */
export function table(columns, rows, { empty = "Nothing here yet.", rowClass } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h("div", { class: "table-wrap" },
    h("table", {},
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.class }, c.title)))),
      h("tbody", {}, rows.map((row) => h("tr", { class: rowClass ? rowClass(row) : null },
        columns.map((c) => h("td", { class: c.class, "data-label": c.title }, c.cell(row))))))));
}

export function field(label, input, hint) {
  return h("label", { class: "field" }, h("span", {}, label), input, hint ? h("small", {}, hint) : null);
}

export function input(name, props = {}) {
  return h("input", { name, id: `f-${name}`, ...props });
}

export function select(name, options, value) {
  return h("select", { name, id: `f-${name}` },
    options.map(([v, text]) => h("option", { value: v, selected: String(v) === String(value) }, text)));
}

/** A button whose (async) action's failure is shown as a message, never left unhandled. */
export function button(text, onclick, props = {}) {
  const run = async (event) => {
    try {
      await onclick(event);
    } catch (err) {
      toast(err && err.message ? err.message : String(err), "bad");
    }
  };
  return h("button", { type: "button", onclick: run, ...props }, text);
}

/** Previous / next over `total` rows; `go(page)` loads another page. */
export function pager(page, pageSize, total, go) {
  const pages = Math.max(Math.ceil(total / pageSize), 1);
  return h("div", { class: "pager" },
    button("‹ Previous", () => go(page - 1), { disabled: page <= 1, "data-test": "prev" }),
    h("span", {}, `Page ${page} of ${pages} · ${total} in all`),
    button("Next ›", () => go(page + 1), { disabled: page >= pages, "data-test": "next" }));
}

let toastTimer = 0;

export function toast(text, kind = "ok") {
  const el = document.getElementById("toast");
  mount(el, h("div", { class: `toast ${kind}` }, text));
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => mount(el), 4000);
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, err && err.message ? err.message : String(err));
}

/** A form's named values as an object of strings. */
export function values(form) {
  return Object.fromEntries(new FormData(form).entries());
}

export function card(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...children);
}

export function stat(label, value, id, sub) {
  return h("div", { class: "stat", "data-stat": id }, h("span", { class: "stat-label" }, label),
    h("strong", {}, value), sub ? h("small", {}, sub) : null);
}

/** A <dialog>-like panel over the page; resolves when closed. */
export function panel(title, body, actions) {
  const box = h("div", { class: "overlay", role: "dialog", "aria-modal": "true", "aria-label": title },
    h("div", { class: "panel" }, h("h2", {}, title), body, h("div", { class: "actions" }, actions)));
  document.body.append(box);
  return { close: () => box.remove(), el: box };
}

export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast("Copied to the clipboard.");
  } catch {
    toast("Copy failed: select the key and copy it by hand.", "bad");
  }
}
