// DOM helpers: every stored value reaches the page as text, cut to a bounded size first.

export const MAX_TEXT = 2000;
const MAX_JSON_ITEMS = 200;
const MAX_JSON_DEPTH = 12;
const PRETTY_LIMIT = 20000;

/** Create an element; `attrs` takes class, testid, title, href, data-* and plain attributes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key === "text") el.textContent = value;
    else if (key === "on") for (const [name, fn] of Object.entries(value)) el.addEventListener(name, fn);
    else if (key === "href") el.setAttribute("href", safeHref(value));
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as a text node. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Remove every child of `el`, then append `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// Only our own routes are ever put in an href.
function safeHref(value) {
  const href = String(value);
  return href.startsWith("#/") ? href : "#/";
}

/** The link target of a session page: the id is always percent-encoded. */
export function sessionHref(sessionId) {
  return "#/s/" + encodeURIComponent(String(sessionId));
}

/** `text` cut to `max` characters, saying how much was left out. */
export function cut(text, max = MAX_TEXT) {
  const value = String(text);
  if (value.length <= max) return value;
  return value.slice(0, max) + `… (${(value.length - max).toLocaleString("en")} more characters)`;
}

// Control, bidi and invisible formatting characters become escapes (\x1B, \u202E), so an id
// never hides or reorders what surrounds it, in any font.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;

function escapeOf(ch) {
  const code = ch.charCodeAt(0);
  const hex = code.toString(16).toUpperCase();
  return code < 0x100 ? "\\x" + hex.padStart(2, "0") : "\\u" + hex.padStart(4, "0");
}

/** An identifier as shown: cut, with control and formatting characters made visible. */
export function visibleId(text, max = 200) {
  return cut(String(text), max).replace(CONTROL, escapeOf);
}

/** Display text for prose: cut; line breaks and tabs kept, other controls made visible. */
export function visibleText(text, max = MAX_TEXT) {
  return cut(String(text), max).replace(CONTROL, (ch) => (ch === "\n" || ch === "\t" ? ch : escapeOf(ch)));
}

/** A bounded copy of a JSON value: long strings cut, long arrays and objects shortened. */
export function shrink(value, depth = 0) {
  if (typeof value === "string") return cut(value);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_JSON_DEPTH) return "… (nested too deep to show)";
  if (Array.isArray(value)) {
    const out = value.slice(0, MAX_JSON_ITEMS).map((item) => shrink(item, depth + 1));
    if (value.length > MAX_JSON_ITEMS) out.push(`… (${value.length - MAX_JSON_ITEMS} more items)`);
    return out;
  }
  const out = {};
  const keys = Object.keys(value);
  for (const key of keys.slice(0, MAX_JSON_ITEMS)) out[cut(key, 200)] = shrink(value[key], depth + 1);
  if (keys.length > MAX_JSON_ITEMS) out["…"] = `${keys.length - MAX_JSON_ITEMS} more keys`;
  return out;
}

/** A JSON value as bounded text: pretty-printed when small, compact and cut otherwise. */
export function jsonText(value) {
  const compact = JSON.stringify(shrink(value));
  if (compact === undefined) return String(value);
  if (compact.length > PRETTY_LIMIT) return cut(compact, PRETTY_LIMIT);
  return JSON.stringify(JSON.parse(compact), null, 2);
}

/** A `<details>` whose body `build()` makes the first time it is opened (big values cost nothing until then). */
export function lazyDetails(attrs, summary, build) {
  const details = h("details", attrs, h("summary", {}, summary));
  details.addEventListener("toggle", () => {
    if (details.open && details.childElementCount === 1) append(details, [build()]);
  });
  return details;
}

/** A `<pre>` holding a JSON value as text. */
export function jsonBlock(value, testid = "json") {
  return h("pre", { class: "json", testid }, visibleText(jsonText(value), PRETTY_LIMIT + 200));
}

// --- numbers and times ---------------------------------------------------------------------

const NUMBER = new Intl.NumberFormat("en");

export function num(value) {
  return typeof value === "number" && Number.isFinite(value) ? NUMBER.format(value) : "—";
}

/**
 * Whether a session records a figure (`runs`, `model_calls`, `tool_calls`, `elapsed`, `tokens`,
 * …): its summary's `measured` names them; a server that sends none records every figure.
 */
export function recorded(summary, figure) {
  return !Array.isArray(summary.measured) || summary.measured.includes(figure);
}

/** Milliseconds as "850 ms", "2.4 s", "3 min 5 s". */
export function duration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** A stored timestamp in milliseconds: catalog times are seconds, journal times milliseconds. */
export function toMs(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return null;
  return Math.abs(value) < 1e11 ? value * 1000 : value;
}

export function absoluteTime(value) {
  const ms = toMs(value);
  if (ms === null) return "—";
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? "—" : date.toLocaleString("en-GB", { hour12: false });
}

export function relativeTime(value, now = Date.now()) {
  const ms = toMs(value);
  if (ms === null) return "—";
  const seconds = Math.round((now - ms) / 1000);
  if (seconds < 0) return "in the future";
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  if (days < 45) return `${days} d ago`;
  return absoluteTime(value);
}

/** A `<time>` showing relative time, with the absolute time as its title. */
export function timeEl(value) {
  const ms = toMs(value);
  const date = ms === null ? null : new Date(ms);
  const iso = date && !Number.isNaN(date.getTime()) ? date.toISOString() : undefined;
  return h("time", { title: absoluteTime(value), datetime: iso }, relativeTime(value));
}
