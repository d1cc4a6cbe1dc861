// One conversation message as an element: its role and name, text, tool calls and results,
// state delta, and the stored item behind a toggle. Long values fold and build on demand.

import { h, jsonBlock, lazyDetails, num, shrink, timeEl, visibleId, visibleText } from "./dom.js";
import { rawToggle } from "./items.js";

const FOLD_CHARS = 600;
const FOLD_LINES = 12;
const PREVIEW_CHARS = 240;
const PREVIEW_LINES = 3;
/** The most characters of one value an opened fold shows (the stored item holds the rest). */
export const MAX_FOLDED = 20_000;
const INLINE_JSON = 160;
const PARSE_LIMIT = 1_000_000;
const MAX_CALLS = 100;
const ROLE_CLASS = new Set(["user", "assistant", "system", "tool", "reasoning", "text", "item"]);

function lineCount(text, stop) {
  let count = 1;
  let at = text.indexOf("\n");
  while (at >= 0 && count <= stop) {
    count += 1;
    at = text.indexOf("\n", at + 1);
  }
  return count;
}

function isLong(text) {
  return text.length > FOLD_CHARS || lineCount(text, FOLD_LINES) > FOLD_LINES;
}

function preview(text) {
  const start = text.slice(0, PREVIEW_CHARS + 1).split("\n").slice(0, PREVIEW_LINES).join("\n");
  return (start.length > PREVIEW_CHARS ? start.slice(0, PREVIEW_CHARS) : start) + " …";
}

function sizeOf(text) {
  const lines = text.length <= PARSE_LIMIT ? lineCount(text, Infinity) : 1;
  return `${num(text.length)} characters${lines > 1 ? `, ${num(lines)} lines` : ""}`;
}

// A `<details>` showing the start of a long value; the whole value is built when opened.
function fold(start, size, build, previewClass = "") {
  return lazyDetails(
    { class: "fold", testid: "message-fold" },
    [
      h("span", { class: `fold-preview ${previewClass}` }, visibleText(start, PREVIEW_CHARS + 120)),
      h("span", { class: "fold-note" }, h("span", { class: "when-closed" }, `show all · ${size}`), h("span", { class: "when-open" }, "fold")),
    ],
    build,
  );
}

// JSON text as a pretty block, or null when it is not JSON (or too big to parse here).
function prettyJson(text, testid = "message-json") {
  const trimmed = text.trimStart();
  if (text.length > PARSE_LIMIT || !(trimmed.startsWith("{") || trimmed.startsWith("["))) return null;
  try {
    return jsonBlock(JSON.parse(text), testid);
  } catch {
    return null;
  }
}

/** Text as it is when short; else a fold showing its start (JSON text opens pretty-printed). */
export function textBlock(text, cls = "msg-text", { pretty = false } = {}) {
  const value = String(text);
  if (!isLong(value)) return h("div", { class: cls, testid: "message-text" }, visibleText(value));
  const whole = () => (pretty && prettyJson(value)) || h("div", { class: cls, testid: "message-text" }, visibleText(value, MAX_FOLDED));
  return fold(preview(value), sizeOf(value), whole, cls);
}

/** A JSON value: inline (or a block) when its compact form is short, else folded. */
export function jsonValue(value, { block = false } = {}) {
  const compact = JSON.stringify(shrink(value)) ?? String(value);
  if (compact.length <= (block ? FOLD_CHARS : INLINE_JSON)) {
    return block ? jsonBlock(value, "item-json") : h("code", { class: "json-inline" }, visibleText(compact));
  }
  return fold(preview(compact), sizeOf(compact), () => jsonBlock(value, "item-json"), "mono");
}

function toolCall(call) {
  const name = visibleId(typeof call.name === "string" && call.name ? call.name : "tool", 120);
  const args = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? "") ?? "";
  const callId = typeof call.call_id === "string" && call.call_id ? call.call_id : null;
  const idNote = callId ? h("span", { class: "call-id", title: "call id" }, visibleId(callId, 80)) : null;
  const attrs = { class: "msg-call", testid: "tool-call", "data-call-id": callId ?? undefined };
  if (!isLong(args)) {
    return h("div", attrs, h("code", { class: "call-text" }, h("span", { class: "tool-name" }, name), "(", h("span", { class: "tool-args" }, visibleText(args)), ")"), idNote);
  }
  const whole = () => prettyJson(args) ?? h("div", { class: "tool-args" }, visibleText(args, MAX_FOLDED));
  return h("div", attrs, fold(`${name}(${preview(args)})`, sizeOf(args), whole, "mono"), idNote);
}

// "↩ result of get_weather call_1": the name is filled in once the call's message is loaded.
function resultOf(callId, onJump) {
  const name = h("span", { class: "result-name" });
  const button = h("button", { type: "button", class: "link-button", testid: "tool-result-of", "data-call-id": callId, title: "Show the call" },
    "↩ result of ", name, h("span", { class: "call-id" }, visibleId(callId, 80)));
  button.addEventListener("click", () => onJump(callId));
  return { button, name, callId };
}

function position(message) {
  if (typeof message.sequence === "number") {
    const saved = typeof message.created_at === "number" ? [" · ", timeEl(message.created_at)] : [];
    return h("span", { class: "msg-pos", title: `transcript batch ${message.sequence}, item ${message.index}` }, `batch ${message.sequence} · #${message.index}`, ...saved);
  }
  return h("span", { class: "msg-pos", title: `item ${message.index}` }, `#${message.index}`);
}

/**
 * One message as an element; `onJump(callId)` shows a tool call when its result is clicked.
 * Returns `{el, calls, result}`: the calls it makes (`{id, name}`), and its "result of"
 * part (`{button, name, callId}`, or null).
 */
export function messageElement(message, onJump) {
  const role = typeof message.role === "string" && message.role ? message.role : "item";
  const name = typeof message.name === "string" && message.name && message.name !== role ? message.name : null;
  const text = typeof message.text === "string" ? message.text : "";
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter((call) => call && typeof call === "object") : [];
  const resultId = typeof message.tool_call_id === "string" && message.tool_call_id ? message.tool_call_id : null;
  const delta = message.state_delta && typeof message.state_delta === "object" ? message.state_delta : null;
  const el = h("article", {
    class: `msg role-${ROLE_CLASS.has(role) ? role : "other"}`,
    testid: "conversation-message",
    "data-role": role.slice(0, 200),
    "data-index": message.index,
    "data-sequence": typeof message.sequence === "number" ? message.sequence : undefined,
  });
  const head = h("div", { class: "msg-head" },
    h("span", { class: "msg-role", testid: "message-role" }, visibleId(role, 60)),
    name ? h("span", { class: "msg-name", testid: "message-name" }, visibleId(name, 80)) : null,
    position(message),
  );
  const body = h("div", { class: "msg-body" });
  const result = resultId ? resultOf(resultId, onJump) : null;
  if (result) body.append(result.button);
  const bare = !text && !calls.length && !delta && !resultId;
  if (role === "item" || bare) body.append(jsonValue(message.item, { block: true }));
  else if (text) body.append(textBlock(text, role === "tool" ? "msg-text mono" : "msg-text", { pretty: role === "tool" }));
  for (const call of calls.slice(0, MAX_CALLS)) body.append(toolCall(call));
  if (calls.length > MAX_CALLS) body.append(h("p", { class: "muted" }, `… ${num(calls.length - MAX_CALLS)} more tool calls (see the JSON)`));
  if (delta) body.append(h("div", { class: "msg-state", testid: "state-delta" }, h("span", { class: "msg-state-name" }, "state Δ"), jsonValue(delta)));
  if (role !== "item" && !bare && message.item !== null && typeof message.item === "object") body.append(rawToggle(message.item));
  el.append(head, body);
  const made = calls
    .filter((call) => typeof call.call_id === "string" && call.call_id)
    .map((call) => ({ id: call.call_id, name: typeof call.name === "string" ? call.name : "tool" }));
  return { el, calls: made, result };
}
