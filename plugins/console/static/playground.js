// The chat playground: only models that chat (of those the chosen key may use), a system
// prompt, temperature and max tokens; each reply with its usage, cost and request id; Enter sends
// (Shift+Enter for a new line); a failure is shown in the transcript where the reply would be.

import { api, streamChat, tabKeys, query } from "./api.js";
import { h, mount } from "./dom.js";
import { usd } from "./format.js";
import { chosenKey, keyPicker } from "./tasks.js";
import { busy, button, field, input } from "./ui.js";

async function chargedCost(requestId) {
  // The log row is written a moment after the reply (settlements are batched): ask a few times.
  for (let i = 0; i < 10 && requestId; i++) {
    const found = await api("GET", `/api/console/logs${query({ request_id: requestId, page_size: 1 })}`);
    if (found.data.length) return found.data[0].cost_usd;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return null;
}

export async function playground(root, params) {
  const form = h("form", { class: "playground", onsubmit: (e) => { e.preventDefault(); send(); } });
  const picker = keyPicker("key");
  const modelSelect = h("select", { name: "model", "data-test": "model-select" }, h("option", { value: "" }, "choose a key first"));
  const output = h("div", { class: "transcript", "aria-live": "polite", "data-test": "transcript" });
  const status = h("p", { class: "muted", role: "status" });
  const system = h("textarea", { name: "system", rows: 2, placeholder: "optional: how the model should behave" });
  const temperature = input("temperature", { type: "number", min: 0, max: 2, step: 0.1, placeholder: "model default" });
  const maxTokens = input("max_tokens", { type: "number", min: 1, step: 1, placeholder: "model default" });
  const prompt = h("textarea", { name: "prompt", rows: 3, placeholder: "Say something… (Enter sends, Shift+Enter a new line)" });
  const sendButton = h("button", { type: "submit", class: "primary", "data-test": "send" }, "Send");
  const messages = [];
  let controller = null;
  let chatModels = null;

  const preselect = params.get("key");
  if (preselect && tabKeys.all()[preselect]) {
    picker.querySelector("select").value = tabKeys.all()[preselect].secret;
  }

  async function loadModels() {
    const secret = chosenKey(form, "key");
    if (!secret) return;
    try {
      chatModels = chatModels || new Set((await api("GET", "/api/console/models")).data.filter((m) => m.chat).map((m) => m.id));
      const body = await api("GET", "/v1/models", undefined, secret);
      const usable = body.data.filter((m) => chatModels.has(m.id));
      const previous = modelSelect.value;
      mount(modelSelect, usable.length ? usable.map((m) => h("option", { value: m.id }, m.id))
        : h("option", { value: "" }, "no chat model for this key"));
      if (usable.some((m) => m.id === previous)) modelSelect.value = previous; // keep the choice
      mount(status, `${usable.length} chat model(s) this key may use.`);
    } catch (e) {
      mount(modelSelect, h("option", { value: "" }, "—"));
      mount(status, h("span", { class: "error-text" }, e.message));
    }
  }

  function request(model) {
    const body = { model, messages: [...(system.value.trim() ? [{ role: "system", content: system.value.trim() }] : []), ...messages] };
    if (temperature.value !== "") body.temperature = Number(temperature.value);
    if (maxTokens.value !== "") body.max_tokens = Number(maxTokens.value);
    return body;
  }

  async function exchange() {
    const secret = chosenKey(form, "key");
    const text = prompt.value.trim();
    const model = modelSelect.value;
    if (!secret) { mount(status, "Choose or paste an API key first."); return; }
    if (!model || !text) return;
    messages.push({ role: "user", content: text });
    output.append(h("div", { class: "msg user" }, h("b", {}, "You"), h("p", {}, text)));
    const answer = h("p", { "data-test": "answer" });
    const meta = h("p", { class: "msg-meta" });
    const bubble = h("div", { class: "msg assistant" }, h("b", {}, model), answer, meta);
    output.append(bubble);
    prompt.value = "";
    controller = new AbortController();
    mount(status, "Streaming…");
    let full = "";
    try {
      const { requestId, usage } = await streamChat(secret, request(model), (piece) => { full += piece; answer.textContent = full; }, controller.signal);
      messages.push({ role: "assistant", content: full });
      const cost = await chargedCost(requestId).catch(() => null);
      mount(meta, usage ? `${usage.prompt_tokens} in / ${usage.completion_tokens} out tokens` : "usage not reported",
        cost === null ? "" : ` · ${usd(cost)}`, " · ", h("code", { "data-test": "reply-request-id" }, requestId));
      mount(status, h("span", { "data-test": "done" }, "Done."));
    } catch (e) {
      messages.pop();
      bubble.classList.add("failed");
      const reason = e.name === "AbortError" ? "Stopped." : e.message;
      if (!full) answer.remove();
      bubble.append(h("p", { class: "error", role: "alert", "data-test": "reply-error" }, reason,
        e.requestId ? ` (request ${e.requestId})` : ""));
      mount(status, "The last message failed; it is not kept in the conversation.");
    } finally {
      controller = null;
    }
  }

  const send = () => busy(sendButton, exchange);
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  picker.addEventListener("change", loadModels);
  mount(form, picker, field("Model", modelSelect),
    h("div", { class: "grid-form" }, field("System prompt", system), field("Temperature", temperature), field("Max tokens", maxTokens)),
    output, field("Message", prompt),
    h("div", { class: "actions" }, sendButton,
      h("button", { type: "button", onclick: () => controller && controller.abort() }, "Stop"),
      button("Clear", () => { messages.length = 0; mount(output); mount(status); })),
    status);
  mount(root, h("h1", {}, "Playground"), form);
  loadModels();
}
