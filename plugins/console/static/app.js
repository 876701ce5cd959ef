// The console's shell: sign-in, navigation and a hash router (#/keys, #/admin/users, ...).
// Nothing secret ever goes into the URL: the credential is in sessionStorage (api.js).

import * as admin from "./admin.js";
import { overview } from "./admin_overview.js";
import * as people from "./admin_users.js";
import { api, session } from "./api.js";
import { h, mount } from "./dom.js";
import { playground } from "./playground.js";
import { tasks } from "./tasks.js";
import { errorBox } from "./ui.js";
import * as user from "./user.js";

const USER_PAGES = {
  "/dashboard": ["Dashboard", user.dashboard],
  "/keys": ["API keys", user.keys],
  "/logs": ["Call log", user.logs],
  "/tasks": ["Media tasks", tasks],
  "/playground": ["Playground", playground],
};
const ADMIN_PAGES = {
  "/admin/overview": ["Overview", overview],
  "/admin/users": ["Users", people.users],
  "/admin/keys": ["Keys", people.keys],
  "/admin/logs": ["Request log", admin.logs],
  "/admin/upstreams": ["Upstreams", admin.upstreams],
  "/admin/models": ["Models", admin.models],
  "/admin/groups": ["Groups", admin.groups],
};

const app = () => document.getElementById("app");
let renderSeq = 0;

function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, search] = raw.split("?");
  return { path, params: new URLSearchParams(search || "") };
}

function signIn(message) {
  mount(document.getElementById("nav"));
  mount(document.getElementById("who"));
  const secret = h("input", { name: "secret", type: "password", autocomplete: "off", required: true,
    placeholder: "ut-… or the admin key", "data-test": "secret" });
  const role = h("select", { name: "role", "data-test": "role" },
    h("option", { value: "user" }, "User (user token)"), h("option", { value: "admin" }, "Admin (admin key)"));
  const err = h("div");
  secret.addEventListener("input", () => {
    if (secret.value.startsWith("ut-")) role.value = "user";
  });
  const form = h("form", { class: "signin card", onsubmit: async (e) => {
    e.preventDefault();
    const value = secret.value.trim();
    try {
      // Prove the credential before keeping it.
      await api("GET", role.value === "admin" ? "/admin/users" : "/api/user/self", undefined, value);
      session.set(role.value, value);
      location.hash = role.value === "admin" ? "#/admin/overview" : "#/dashboard";
      render();
    } catch (error) {
      mount(err, errorBox(error.status === 401 ? new Error("That credential was refused.") : error));
    }
  } },
  h("h1", {}, "Sign in"),
  h("p", { class: "muted" }, "Users sign in with their user token, admins with the admin key. It is kept in this tab only."),
  h("label", { class: "field" }, h("span", {}, "Who"), role),
  h("label", { class: "field" }, h("span", {}, "Credential"), secret),
  h("button", { type: "submit", class: "primary", "data-test": "signin" }, "Sign in"),
  message ? h("p", { class: "muted" }, message) : null,
  err);
  mount(app(), form);
  secret.focus();
}

function nav(pages, current, role) {
  mount(document.getElementById("nav"), Object.entries(pages).map(([path, [title]]) =>
    h("a", { href: `#${path}`, class: path === current ? "active" : null,
      "aria-current": path === current ? "page" : null }, title)));
  mount(document.getElementById("who"), h("span", { class: "role" }, role),
    h("button", { type: "button", "data-test": "signout", onclick: () => {
      session.clear();
      location.hash = "#/";
      signIn("Signed out.");
    } }, "Sign out"));
}

let lastPath = "";

async function render() {
  const current = session.get();
  if (!current) {
    signIn();
    return;
  }
  const pages = current.role === "admin" ? ADMIN_PAGES : USER_PAGES;
  let { path, params } = route();
  if (!pages[path]) {
    path = Object.keys(pages)[0];
    history.replaceState(null, "", `#${path}`);
  }
  nav(pages, path, current.role === "admin" ? "admin" : "user");
  const navigated = path !== lastPath;
  lastPath = path;
  // The page is built off-screen and shown only if no other page was asked for meanwhile, so a
  // slow answer for a page the user already left never covers the page they are on.
  const seq = ++renderSeq;
  const root = h("div", { class: "page" });
  mount(app(), h("p", { class: "muted" }, "Loading…"));
  try {
    await pages[path][1](root, params);
    if (seq !== renderSeq) return;
    mount(app(), root);
    document.title = `${pages[path][0]} · Model gateway console`;
    // A new page: focus moves to its content (a screen reader starts there, Tab goes on from
    // there), unless a dialog opened meanwhile or the same page only re-drew itself.
    if (navigated && !document.querySelector("dialog[open]")) app().focus();
  } catch (error) {
    if (seq !== renderSeq) return;
    if (error.status === 401) {
      session.clear();
      signIn("Your credential is no longer accepted; sign in again.");
      return;
    }
    mount(app(), errorBox(error));
  }
}

window.addEventListener("hashchange", render);
// The skip link focuses the content without touching the hash (the hash is the route).
document.getElementById("skip").addEventListener("click", (event) => { event.preventDefault(); app().focus(); });
render();
