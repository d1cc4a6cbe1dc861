// Transcript items of any framework, shown as role + text where the shape is recognisable.

import { h, jsonBlock, lazyDetails, visibleText } from "./dom.js";

const TEXT_PART_KEYS = ["text", "content", "output", "value"];
const MAX_PARTS = 50;

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// Text of one content part: a string, or an object carrying text under a usual key.
function partText(part) {
  if (typeof part === "string") return part;
  if (!isObject(part)) return null;
  for (const key of TEXT_PART_KEYS) if (typeof part[key] === "string") return part[key];
  return null;
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    const texts = content.slice(0, MAX_PARTS).map(partText).filter((text) => text !== null);
    return texts.length ? texts.join("\n") : null;
  }
  return partText(content);
}

function label(value) {
  return typeof value === "string" && value ? value : null;
}

/** `{role, kind, text}` for a recognisable item, else null (the item is shown as JSON). */
export function describeItem(item) {
  if (typeof item === "string") return { role: "text", kind: "text", text: item };
  if (!isObject(item)) return null;
  const type = label(item.type);
  if (type === "function_call" || type === "tool_call") {
    const name = label(item.name) ?? "tool";
    const args = typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments ?? {});
    return { role: "tool call", kind: "tool", text: `${name}(${args ?? ""})` };
  }
  if (type === "function_call_output" || type === "tool_result") {
    const text = contentText(item.output ?? item.content);
    if (text !== null) return { role: "tool output", kind: "tool", text };
  }
  if (type === "reasoning") {
    const text = contentText(item.summary ?? item.content);
    if (text !== null) return { role: "reasoning", kind: "reasoning", text };
  }
  const role = label(item.role) ?? label(item.author) ?? label(item.type);
  for (const key of ["content", "parts", "text", "message"]) {
    if (!(key in item)) continue;
    const text = contentText(item[key]);
    if (text !== null && role !== null) return { role, kind: kindOf(role), text };
  }
  return null;
}

function kindOf(role) {
  const lower = role.toLowerCase();
  if (lower === "user" || lower === "human") return "user";
  if (["assistant", "model", "agent", "ai"].includes(lower)) return "assistant";
  if (lower === "system" || lower === "developer") return "system";
  return "other";
}

/** One transcript item as an element: recognised text with the raw JSON behind a toggle. */
export function itemElement(item) {
  const described = describeItem(item);
  const el = h("article", { class: `item kind-${described ? described.kind : "json"}`, testid: "transcript-item" });
  if (!described) {
    el.append(h("div", { class: "item-role" }, "item"), jsonBlock(item, "item-json"));
    return el;
  }
  el.append(
    h("div", { class: "item-role", testid: "item-role" }, visibleText(described.role, 60)),
    h("div", { class: "item-text", testid: "item-text" }, visibleText(described.text)),
  );
  if (typeof item === "object" && item !== null) el.append(rawToggle(item));
  return el;
}

/** The item's JSON, built only when someone opens it. */
export function rawToggle(item) {
  return lazyDetails({ class: "raw", testid: "raw-toggle" }, "JSON", () => jsonBlock(item, "item-json"));
}
