// Shared widgets: tables, form fields, a pager, messages, modal dialogs, CSV export.

import { h, mount } from "./dom.js";

/** Text only screen readers read: it names a row's action after its row ("Edit" + " alice"). */
export function hidden(text) {
  return h("span", { class: "sr-only" }, text);
}

/** columns: [{title, cell(row) -> Node|string, class?, csv?(row) -> string}] */
export function table(columns, rows, { empty = "Nothing here yet.", rowClass, caption } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h("div", { class: "table-wrap" },
    h("table", {},
      caption ? h("caption", { class: "sr-only" }, caption) : null,
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

/** Run `action` with `el` disabled (and marked busy) until it settles: a second click while the
 * first is in flight does nothing, so a double click never submits twice. */
let acting = null; // the control whose action is running (disabled, so no longer focused)

export async function busy(el, action) {
  if (el.disabled) return undefined;
  acting = el;
  el.disabled = true;
  el.setAttribute("aria-busy", "true");
  try {
    return await action();
  } finally {
    el.disabled = false;
    el.removeAttribute("aria-busy");
    if (acting === el) acting = null;
  }
}

/** A button whose (async) action runs once at a time, its failure shown as a message. */
export function button(text, onclick, props = {}) {
  const el = h("button", { type: "button", ...props }, text);
  el.addEventListener("click", (event) => busy(el, async () => {
    try {
      await onclick(event);
    } catch (err) {
      toast(err && err.message ? err.message : String(err), "bad");
    }
  }));
  return el;
}

/** Previous / next over `total` rows; `go(page)` loads another page. */
export function pager(page, pageSize, total, go) {
  const pages = Math.max(Math.ceil(total / pageSize), 1);
  return h("nav", { class: "pager", "aria-label": "Pages" },
    button("‹ Previous", () => go(page - 1), { disabled: page <= 1, "data-test": "prev" }),
    h("span", {}, `Page ${page} of ${pages} · ${total} in all`),
    button("Next ›", () => go(page + 1), { disabled: page >= pages, "data-test": "next" }));
}

let toastTimer = 0;

export function toast(text, kind = "ok") {
  const el = document.getElementById("toast");
  mount(el, h("div", { class: `toast ${kind}` }, text));
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => mount(el), 5000);
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

// --- dialogs ------------------------------------------------------------------------------------

const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), "
  + "textarea:not([disabled]), [tabindex]:not([tabindex='-1'])";
let dialogSeq = 0;

/** Focus back on `el` (what opened a dialog) once it can take it: its button may still be
 * disabled for the rest of its action, or gone when the page re-drew; then the content. */
function restoreFocus(el, tries = 40) {
  setTimeout(() => {
    if (document.querySelector("dialog[open]")) return; // another dialog took over
    if (el && el.isConnected && !el.disabled && typeof el.focus === "function") el.focus();
    else if (el && el.isConnected && tries > 0) restoreFocus(el, tries - 1);
    else document.getElementById("app")?.focus();
  }, tries === 40 ? 0 : 50);
}

/** A modal dialog (<dialog> shown modal: the page under it is inert). Tab stays inside it, Escape
 * closes it, and focus goes back to what had it before. Resolves `closed` when it closes. */
export function panel(title, body, actions, { onClose } = {}) {
  const titleId = `dialog-title-${++dialogSeq}`;
  // What opened the dialog gets focus back: a button running its action lost focus when it was
  // disabled, so it is taken from `busy`.
  const before = acting || document.activeElement;
  const box = h("dialog", { class: "panel", "aria-labelledby": titleId },
    h("h2", { id: titleId }, title), body, h("div", { class: "actions" }, actions));
  let open = true;
  const close = () => {
    if (!open) return;
    open = false;
    if (box.open) box.close();
    box.remove();
    if (onClose) onClose();
    restoreFocus(before);
  };
  box.addEventListener("cancel", (event) => { event.preventDefault(); close(); }); // Escape
  box.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    const items = [...box.querySelectorAll(FOCUSABLE)].filter((el) => el.offsetParent !== null);
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
  });
  document.body.append(box);
  box.showModal();
  const target = box.querySelector("input, select, textarea") || box.querySelector(".actions .primary")
    || box.querySelector(FOCUSABLE);
  if (target) target.focus();
  return { close, el: box };
}

/** Ask before something that cannot be undone; resolves true when confirmed. */
export function confirmDialog(title, message, confirmText, { danger = true } = {}) {
  return new Promise((resolve) => {
    let answer = false;
    const p = panel(title, h("p", {}, message), [
      button("Cancel", () => p.close(), { "data-test": "confirm-cancel" }),
      button(confirmText, () => { answer = true; p.close(); },
        { class: danger ? "primary danger-fill" : "primary", "data-test": "confirm" }),
    ], { onClose: () => resolve(answer) });
  });
}

export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast("Copied to the clipboard.");
  } catch {
    toast("Copy failed: select the text and copy it by hand.", "bad");
  }
}

// --- CSV export ---------------------------------------------------------------------------------

function csvCell(value) {
  const text = value === null || value === undefined ? "" : String(value);
  // A leading = + - @ would make a spreadsheet run the cell as a formula.
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\n\r]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** Save `rows` as a CSV file: `fields` is [[header, row -> value]]. */
export function downloadCsv(filename, fields, rows) {
  const lines = [fields.map(([name]) => csvCell(name)).join(",")];
  for (const row of rows) lines.push(fields.map(([, get]) => csvCell(get(row))).join(","));
  const blob = new Blob([`${lines.join("\r\n")}\r\n`], { type: "text/csv;charset=utf-8" });
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: filename, class: "sr-only" }, filename);
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
