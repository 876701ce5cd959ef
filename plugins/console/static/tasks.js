// The user's media tasks: status styled by outcome, the result (image, video, every music clip
// as a player), and the follow-up buttons each finished result offers (U/V/reroll on a grid,
// zoom and pan on an upscale). Also the API-key picker the playground shares.

import { api, tabKeys } from "./api.js";
import { h, mount } from "./dom.js";
import { dateTime, orDash, usd } from "./format.js";
import { busy, button, card, field, hidden, input, toast, values } from "./ui.js";

export function keyPicker(name) {
  const known = Object.entries(tabKeys.all());
  return h("div", { class: "key-picker" },
    field("API key", h("select", { name, "data-test": "key-select" },
      known.map(([id, k]) => h("option", { value: k.secret }, `${k.name} (#${id})`)),
      h("option", { value: "" }, "paste a key…"))),
    field("…or paste one", input(`${name}-pasted`, { type: "password", placeholder: "sk-…", autocomplete: "off" })));
}

export function chosenKey(form, name) {
  const v = values(form);
  return (v[`${name}-pasted`] || "").trim() || v[name] || "";
}

const web = (url) => typeof url === "string" && /^https?:\/\//.test(url);

function image(url, label) {
  const img = h("img", { src: url, alt: label, class: "media", loading: "lazy" });
  // An upstream link that does not load becomes a plain link (no broken-image box).
  img.addEventListener("error", () => img.replaceWith(h("a", { href: url, target: "_blank", rel: "noopener noreferrer" },
    `Open ${label}`)));
  return img;
}

/** Everything playable or viewable in a task's result. */
function preview(t) {
  const result = t.result;
  if (!result || typeof result !== "object") return null;
  if (Array.isArray(result.clips)) { // music: every clip, with a player
    return h("ul", { class: "plain clips" }, result.clips.filter((c) => web(c.audio_url)).map((c, i) => {
      const title = c.title || `Clip ${i + 1}`;
      return h("li", { class: "clip" }, h("strong", {}, title),
        h("audio", { src: c.audio_url, controls: true, preload: "none", class: "media", "aria-label": `Play ${title}` }),
        web(c.image_url) ? image(c.image_url, `cover of ${title}`) : null);
    }));
  }
  const video = result.video_url || result.videoUrl;
  if (web(video)) return h("video", { src: video, controls: true, preload: "none", class: "media", "aria-label": "Video result" });
  const audio = result.audio_url || result.audioUrl;
  if (web(audio)) return h("audio", { src: audio, controls: true, preload: "none", class: "media", "aria-label": "Audio result" });
  const picture = result.imageUrl || result.image_url || result.url;
  return web(picture) ? image(picture, `result of ${t.action || "the task"}`) : null;
}

const GRID = new Set(["IMAGINE", "VARIATION", "REROLL", "BLEND", "ZOOM", "PAN"]);
const OK = new Set(["SUCCESS", "succeeded", "completed"]);
const FAILED = new Set(["FAILURE", "failed", "cancelled"]);
const FINISHED = new Set([...OK, ...FAILED]);

/** The follow-ups of a finished image task, as the family's own buttons (customId) name them. */
function followUps(t, submit) {
  if (t.family !== "imagetask" || !OK.has(t.status)) return null;
  const change = (kind, n, text, label) => button([text, hidden(` ${label}`)], () => submit("/imagetask/submit/change",
    { taskId: t.task_id, customId: `imagetask::${kind}::${n}::${t.task_id}` }), { "data-test": text });
  if (GRID.has(t.action)) {
    return h("div", { class: "row-actions" },
      [1, 2, 3, 4].map((i) => change("upsample", i, `U${i}`, `upscale image ${i}`)),
      [1, 2, 3, 4].map((i) => change("variation", i, `V${i}`, `vary image ${i}`)),
      change("reroll", 0, "Reroll", "the grid"));
  }
  if (t.action === "UPSCALE") {
    return h("div", { class: "row-actions" },
      change("zoom", 50, "Zoom out 2x", "this image"), change("zoom", 75, "Zoom out 1.5x", "this image"),
      ["left", "right", "up", "down"].map((d) => change(`pan_${d}`, 1, `Pan ${d}`, "this image")));
  }
  return null;
}

function statusBadge(t) {
  const kind = OK.has(t.status) ? "ok" : FAILED.has(t.status) ? "bad" : "warn";
  return h("span", { class: `badge ${kind}`, "data-status": t.status }, `${orDash(t.status)} ${orDash(t.progress)}`);
}

let taskTimer = 0;

export async function tasks(root) {
  const body = await api("GET", "/api/console/tasks?page_size=50");
  const keyForm = h("form", { class: "inline-form", onsubmit: (e) => e.preventDefault() }, keyPicker("key"));
  const reload = () => tasks(root);
  async function submit(path, payload) {
    const secret = chosenKey(keyForm, "key");
    if (!secret) { toast("Choose or paste an API key first.", "bad"); return; }
    try {
      const answer = await api("POST", path, payload, secret);
      if (answer.code !== undefined && answer.code !== 1 && answer.code !== 22) throw new Error(answer.description || "Refused.");
      toast(`Submitted: task ${orDash(answer.result)}`);
      reload();
    } catch (e) {
      toast(e.message, "bad");
    }
  }
  const go = h("button", { type: "submit", class: "primary" }, "Imagine");
  const imagine = h("form", { class: "inline-form", onsubmit: (e) => {
    e.preventDefault();
    const prompt = values(imagine).prompt.trim();
    if (prompt) busy(go, () => submit("/imagetask/submit/imagine", { prompt }));
  } }, field("Prompt", input("prompt", { placeholder: "a lighthouse at dawn" })), go);

  const cards = body.data.map((t) => h("article", { class: "task", "data-task": t.task_id },
    h("header", {}, h("h2", { class: "task-title" }, `${t.family} · ${orDash(t.action)}`), statusBadge(t)),
    h("p", { class: "muted" }, `${t.task_id} · ${dateTime(t.created_at)} · ${usd(t.cost_usd)}`),
    t.fail_reason ? h("p", { class: "error" }, t.fail_reason) : null,
    preview(t),
    followUps(t, submit)));
  // Tasks still running: look again in a few seconds while this page is shown.
  clearTimeout(taskTimer);
  if (body.data.some((t) => !FINISHED.has(t.status))) {
    taskTimer = setTimeout(() => { if (location.hash.startsWith("#/tasks") && root.isConnected) reload(); }, 3000);
  }
  mount(root,
    h("div", { class: "title-row" }, h("h1", {}, "Media tasks"), button("Refresh", reload)),
    card("Submit with", keyForm, imagine),
    cards.length ? h("div", { class: "tasks" }, cards) : h("p", { class: "muted empty" }, "No media tasks yet."));
}
