// The catalog's search of what was said: hits with the matched words marked, paged by
// cursor, each linking to its message in the session's conversation; above them the long-term
// memory items that match, each marked as a memory and linking to its item.

import { getJson } from "./api.js";
import { messageHref } from "./conversation.js";
import { h, num, replace, timeEl, visibleId, visibleText } from "./dom.js";
import { dotted, memoryHref } from "./memory.js";

const PAGE_SIZE = 20;
const TYPE_DELAY_MS = 300;
const MAX_SNIPPET = 2000;
const MEMORY_HITS = 5;

/** A kind of session as a badge (`—` for a session written before kinds were recorded). */
export function kindBadge(kind, testid) {
  if (typeof kind !== "string" || !kind) return h("span", { class: "muted", testid }, "—");
  return h("span", { class: "badge kind-badge", testid, "data-kind": kind.slice(0, 64) }, visibleId(kind, 30));
}

/** `snippet` as text nodes, its `marks` ([start, end) code point offsets) as `<mark>`s. */
export function markedSnippet(snippet, marks) {
  const chars = Array.from(String(snippet)).slice(0, MAX_SNIPPET);
  const spans = (Array.isArray(marks) ? marks : [])
    .filter((mark) => Array.isArray(mark) && Number.isInteger(mark[0]) && Number.isInteger(mark[1]))
    .map(([start, end]) => [Math.max(0, start), Math.min(chars.length, end)])
    .sort((a, b) => a[0] - b[0]);
  const out = [];
  let at = 0;
  for (const [start, end] of spans) {
    const from = Math.max(start, at);
    if (from >= end) continue;
    if (from > at) out.push(visibleText(chars.slice(at, from).join("")));
    out.push(h("mark", {}, visibleText(chars.slice(from, end).join(""))));
    at = end;
  }
  if (at < chars.length) out.push(visibleText(chars.slice(at).join("")));
  return out;
}

function hitElement(hit) {
  const id = String(hit.session_id ?? "");
  const item = Number.isInteger(hit.item) ? hit.item : 0;
  const sequence = Number.isInteger(hit.sequence) ? hit.sequence : null;
  return h("li", { class: "hit", testid: "search-hit", "data-session-id": id, "data-item": item, "data-sequence": sequence ?? undefined },
    h("a", { href: messageHref(id, item, sequence), class: "hit-link", testid: "search-hit-link" },
      h("div", { class: "hit-head" },
        h("span", { class: "mono hit-session", testid: "hit-session" }, visibleId(id, 80)),
        kindBadge(hit.kind, "hit-kind"),
        hit.owner_id ? h("span", { class: "muted" }, visibleId(hit.owner_id, 40)) : null,
        h("span", { class: "muted hit-where" }, sequence === null ? `item ${item}` : `batch ${sequence}, item ${item}`),
        timeEl(hit.written_at_ms),
      ),
      h("div", { class: "hit-snippet", testid: "search-snippet" }, markedSnippet(hit.snippet ?? "", hit.marks)),
    ),
  );
}

function memoryHitElement(hit) {
  const labels = Array.isArray(hit.namespace) ? hit.namespace.map(String) : [];
  const key = String(hit.key ?? "");
  return h("li", { class: "hit memory-hit", testid: "memory-hit", "data-namespace": labels.join(".").slice(0, 1024), "data-key": key.slice(0, 1024) },
    h("a", { href: memoryHref(labels, key), class: "hit-link", testid: "memory-hit-link" },
      h("div", { class: "hit-head" },
        h("span", { class: "badge memory-badge", testid: "hit-memory-badge" }, "memory"),
        h("span", { class: "mono hit-session" }, dotted(labels)),
        h("span", { class: "mono muted" }, visibleId(key, 80)),
        timeEl(hit.updated_at_ms),
      ),
      h("div", { class: "hit-snippet", testid: "search-snippet" }, markedSnippet(hit.snippet ?? "", hit.marks)),
    ),
  );
}

function errorText(error) {
  const message = error.message ?? String(error);
  if (error.status === 400) return `The query was refused: ${message}`;
  if (error.status === 409) return `Search is not available on this store yet: ${message}`;
  return `Could not search: ${message}`;
}

/** The search box (`form`) and its results (`el`); `owner()` is the catalog's owner filter. */
export class SearchPanel {
  constructor(params, { owner, onChange }) {
    this.owner = owner;
    this.onChange = onChange;
    this.state = { q: "", order: "newest", owner: "", cursor: null, done: true, loading: false };
    this.timer = 0;
    this.input = h("input", { type: "search", id: "search-text", testid: "search-text", placeholder: "Search what was said… (words, \"a phrase\", prefix*)", autocomplete: "off", spellcheck: "false", "aria-label": "Search the conversations" });
    this.input.value = params.get("q") ?? "";
    this.order = h("select", { class: "select", testid: "search-order", "aria-label": "Order of the hits" },
      h("option", { value: "newest" }, "Newest first"), h("option", { value: "best" }, "Best match first"));
    this.order.value = params.get("order") === "best" ? "best" : "newest";
    this.form = h("form", { class: "search-form", role: "search", testid: "search-form" }, this.input, this.order);
    this.title = h("h2", { testid: "search-title" });
    this.memories = h("ol", { class: "hits memory-hits", testid: "memory-hits" });
    this.list = h("ol", { class: "hits", testid: "search-hits" });
    this.status = h("p", { class: "status", testid: "search-status", role: "status" });
    this.error = h("p", { class: "error search-error", testid: "search-error", hidden: true });
    this.more = h("button", { type: "button", class: "button", testid: "search-more", hidden: true }, "More results");
    const clear = h("button", { type: "button", class: "button small", testid: "search-clear" }, "Clear");
    this.el = h("section", { class: "card section search-card", testid: "search-results", hidden: true },
      h("header", { class: "section-head" }, this.title, clear),
      h("div", { class: "section-body" }, this.memories, this.list, this.error, this.status, this.more),
    );
    this.input.addEventListener("input", () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.run(), TYPE_DELAY_MS);
    });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run();
    });
    this.order.addEventListener("change", () => this.run());
    this.more.addEventListener("click", () => this.loadPage());
    clear.addEventListener("click", () => {
      this.input.value = "";
      this.run();
      this.input.focus();
    });
  }

  /** The query's part of the page's address. */
  params() {
    return { q: this.state.q, order: this.state.order === "newest" ? "" : this.state.order };
  }

  /** Search again from the first page when the query, order or owner changed. */
  run() {
    clearTimeout(this.timer);
    const q = this.input.value;
    const order = this.order.value === "best" ? "best" : "newest";
    const owner = this.owner();
    const last = this.state;
    if (q === last.q && order === last.order && owner === last.owner) return;
    this.state = { q, order, owner, cursor: null, done: !q.trim(), loading: false };
    this.list.replaceChildren();
    this.memories.replaceChildren();
    this.status.textContent = "";
    this.error.hidden = true;
    this.more.hidden = true;
    this.el.hidden = !q.trim();
    replace(this.title, "Results for ", h("q", { class: "search-query" }, visibleText(q.trim(), 200)));
    this.onChange();
    this.loadPage();
  }

  async loadPage() {
    const state = this.state;
    if (state.loading || state.done) return;
    state.loading = true;
    this.more.disabled = true;
    this.status.textContent = "Searching…";
    try {
      // The first page brings the best few memories too; a refused query is said once, by
      // the conversations' search, which refuses what this one does.
      const first = state.cursor === null;
      const memories = first ? getJson("/api/memory/search", { q: state.q, owner: state.owner, limit: MEMORY_HITS }).catch(() => null) : null;
      const page = await getJson("/api/search", { q: state.q, owner: state.owner, order: state.order, limit: PAGE_SIZE, cursor: state.cursor });
      const remembered = await memories;
      if (state !== this.state) return;
      if (remembered && Array.isArray(remembered.hits)) {
        for (const hit of remembered.hits) if (hit && typeof hit === "object") this.memories.append(memoryHitElement(hit));
        state.moreMemories = Number.isInteger(remembered.next_offset);
      }
      for (const hit of Array.isArray(page.hits) ? page.hits : []) if (hit && typeof hit === "object") this.list.append(hitElement(hit));
      state.cursor = typeof page.next_cursor === "string" && page.next_cursor ? page.next_cursor : null;
      state.done = state.cursor === null;
      this.status.textContent = this.counted(state);
    } catch (error) {
      if (state !== this.state) return;
      state.done = true;
      this.status.textContent = "";
      this.error.textContent = visibleText(errorText(error), 600);
      this.error.hidden = false;
    } finally {
      if (state === this.state) {
        state.loading = false;
        this.more.disabled = false;
        this.more.hidden = state.done;
      }
    }
  }

  /** What the status line says: the memories shown, then the items found so far. */
  counted(state) {
    const count = this.list.childElementCount;
    const remembered = this.memories.childElementCount;
    const items = count === 0 ? "nothing said matches" : `${num(count)} matching item${count === 1 ? "" : "s"}${state.done ? "" : " so far"}`;
    if (remembered === 0) return items.charAt(0).toUpperCase() + items.slice(1) + (count === 0 ? "." : "");
    const memories = `${num(remembered)} memor${remembered === 1 ? "y" : "ies"}${state.moreMemories ? " (the best; more on the memory page)" : ""}`;
    return `${memories} · ${items}`;
  }

  stop() {
    clearTimeout(this.timer);
    this.state = { ...this.state, done: true };
  }
}
