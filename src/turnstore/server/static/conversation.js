// A session of any kind read as a conversation: pages of messages, earlier and later, the
// LangGraph checkpoint it was read at, and the message a link points at, in view.

import { getJson, sessionPath } from "./api.js";
import { h, num, replace, sessionHref, visibleId, visibleText } from "./dom.js";
import { messageElement } from "./message.js";

const ITEM_PAGE = 50;
const BATCH_PAGE = 20;
/** Items shown after the one a link points at, so it is read in its context. */
const AFTER_TARGET = 20;
const FLASH_MS = 2000;

/** Whether a session of `kind` is read by transcript batch (cursor: a sequence). */
export function readsTranscript(kind) {
  return kind === null || kind === undefined || kind === "turnstore";
}

/** The viewer's route to one message of a session (`sequence` for a transcript's item). */
export function messageHref(sessionId, item, sequence) {
  const query = new URLSearchParams({ item: String(item) });
  if (typeof sequence === "number") query.set("sequence", String(sequence));
  return `${sessionHref(sessionId)}?${query}`;
}

function keyOf(message) {
  return typeof message.sequence === "number" ? `${message.sequence}:${message.index}` : String(message.index);
}

function compare(a, b) {
  return (a.sequence ?? -1) - (b.sequence ?? -1) || a.index - b.index;
}

// What tells a message apart from the one stored at its place before (a list rewritten).
function fingerprint(message) {
  const text = typeof message.text === "string" ? message.text : "";
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.length : 0;
  return `${message.role}|${text.length}|${text.slice(0, 200)}|${calls}`;
}

function fact(name, value) {
  return h("span", { class: "fact" }, h("span", { class: "fact-name" }, name), " ", h("span", { class: "fact-value" }, value));
}

function langGraphPoint(point) {
  const next = Array.isArray(point.next) ? point.next.filter((node) => typeof node === "string") : [];
  return h("div", { class: "facts lg-point", testid: "langgraph-point" },
    h("span", { class: "tag" }, "LangGraph thread"),
    fact("checkpoint", h("span", { class: "mono", testid: "langgraph-checkpoint" }, visibleId(point.checkpoint_id ?? "", 80))),
    fact("step", h("span", { testid: "langgraph-step" }, typeof point.step === "number" ? String(point.step) : "—")),
    fact("source", h("span", { testid: "langgraph-source" }, visibleId(point.source ?? "—", 40))),
    fact("next", h("span", { class: "lg-next", testid: "langgraph-next" },
      next.length ? next.slice(0, 20).map((node) => h("span", { class: "tag mono" }, visibleId(node, 60))) : "nothing: the run is done")),
    point.channel && point.channel !== "messages" ? fact("channel", visibleId(point.channel, 60)) : null,
  );
}

export class ConversationView {
  /** `part` is the section ({el, body}); `target` is `{item, sequence}` or null. */
  constructor(sessionId, part, target, isStopped) {
    this.id = sessionId;
    this.body = part.body;
    this.target = target;
    this.isStopped = isStopped;
    this.kind = null;
    this.latestSequence = 0;
    this.entries = new Map();
    this.calls = new Map();
    this.older = null;
    // The exclusive upper bound of what is loaded when it is not the newest (a link's page).
    this.reached = null;
    this.total = null;
    this.point = null;
    this.busy = false;
    this.built = false;
    this.meta = h("div", { class: "conversation-meta", testid: "conversation-meta" });
    this.notice = h("p", { class: "conversation-notice", testid: "conversation-notice", role: "status", hidden: true });
    this.list = h("div", { class: "conversation-list", testid: "conversation-list" });
    this.empty = h("p", { class: "empty", testid: "conversation-empty", hidden: true }, "No messages.");
    this.olderButton = h("button", { type: "button", class: "button small", testid: "older-messages", hidden: true }, "Earlier messages");
    this.newerButton = h("button", { type: "button", class: "button small", testid: "newer-messages", hidden: true }, "Later messages");
    this.newestLink = h("a", { href: sessionHref(sessionId), class: "newest-link", testid: "newest-messages", hidden: true }, "Jump to the newest");
    part.el.querySelector(".section-head").append(this.olderButton);
    this.olderButton.addEventListener("click", () => this.loadOlder());
    this.newerButton.addEventListener("click", () => this.loadNewer());
  }

  setSummary(summary) {
    this.kind = typeof summary.kind === "string" ? summary.kind : null;
    if (typeof summary.sequence === "number") this.latestSequence = summary.sequence;
  }

  get limit() {
    return readsTranscript(this.kind) ? BATCH_PAGE : ITEM_PAGE;
  }

  fetch(before) {
    return getJson(sessionPath(this.id, "/conversation"), { before, limit: this.limit });
  }

  /** The first page: the newest, or the one holding the target, shown once `settled` (the
   * page above it laid out) resolves. */
  async load(settled) {
    const before = this.firstBefore();
    try {
      const page = await this.fetch(before);
      if (this.isStopped()) return;
      this.reached = before ?? null;
      this.take(page, true);
      this.render();
    } catch (error) {
      if (!this.isStopped()) replace(this.body, h("p", { class: "error", testid: "section-error" }, visibleText(error.message ?? String(error), 300)));
      return;
    }
    if (!this.target) return;
    await settled;
    if (!this.isStopped()) this.showTarget();
  }

  // A transcript's page ends at the target's batch; a list's holds items after it too.
  firstBefore() {
    const target = this.target;
    if (!target) return undefined;
    if (readsTranscript(this.kind)) return typeof target.sequence === "number" ? target.sequence + 1 : undefined;
    return target.item + 1 + AFTER_TARGET;
  }

  hasNewer() {
    if (this.reached === null) return false;
    if (readsTranscript(this.kind)) return this.reached <= this.latestSequence;
    return this.total !== null && this.reached < this.total;
  }

  async loadOlder() {
    if (this.older !== null) await this.step(this.older, true);
  }

  async loadNewer() {
    if (this.hasNewer()) await this.step(this.reached + this.limit, false);
  }

  // Cursor arithmetic: a page ending at `reached + limit` holds every batch (or item) from
  // `reached` on, since at most `limit` sequences (or indexes) lie in between.
  async step(before, older) {
    if (this.busy) return;
    this.busy = true;
    this.olderButton.disabled = this.newerButton.disabled = true;
    try {
      const page = await this.fetch(before);
      if (this.isStopped()) return;
      this.take(page, older);
      if (!older) this.reached = before;
      this.say(null);
      this.render();
    } catch (error) {
      if (!this.isStopped()) this.say(`Could not load messages: ${error.message ?? error}`);
    } finally {
      this.busy = false;
      this.olderButton.disabled = this.newerButton.disabled = false;
    }
  }

  /** After a turn finished: the newest page, when that is what the page shows. */
  async refresh() {
    if (!this.built || this.reached !== null || this.busy) return;
    this.busy = true;
    try {
      const page = await this.fetch(undefined);
      if (this.isStopped()) return;
      const joins = this.joins(page);
      if (!joins) this.clear();
      this.take(page, !joins);
      this.render();
    } catch {
      // The next finished turn refreshes again; the messages shown stay as they were.
    } finally {
      this.busy = false;
    }
  }

  // Whether the newest page joins what is loaded, leaving no gap in between.
  joins(page) {
    if (!this.entries.size) return false;
    if (typeof page.next_before !== "number") return true;
    const newest = [...this.entries.values()].sort(compare).pop();
    return page.next_before <= (readsTranscript(this.kind) ? newest.sequence : newest.index) + 1;
  }

  clear() {
    for (const entry of this.entries.values()) entry.el.remove();
    this.entries.clear();
    this.calls.clear();
  }

  take(page, older) {
    if (typeof page.kind === "string" || page.kind === null) this.kind = page.kind;
    if (typeof page.total === "number") this.total = page.total;
    this.point = page.langgraph && typeof page.langgraph === "object" ? page.langgraph : null;
    if (older) this.older = typeof page.next_before === "number" ? page.next_before : null;
    for (const message of Array.isArray(page.messages) ? page.messages : []) {
      if (message && typeof message.index === "number") this.put(message);
    }
    if (this.total !== null && !readsTranscript(this.kind)) {
      // Items popped from a context (or a list rewritten shorter) leave the page too.
      for (const [key, entry] of this.entries) {
        if (entry.index >= this.total) {
          entry.el.remove();
          this.entries.delete(key);
        }
      }
    }
  }

  put(message) {
    const key = keyOf(message);
    const print = fingerprint(message);
    const known = this.entries.get(key);
    if (known && known.print === print) return;
    if (known) known.el.remove();
    const built = messageElement(message, (callId) => this.jump(callId));
    const entry = { key, print, sequence: typeof message.sequence === "number" ? message.sequence : null, index: message.index, ...built };
    this.entries.set(key, entry);
    for (const call of built.calls) this.calls.set(call.id, { entry, name: call.name });
  }

  render() {
    if (!this.hasNewer()) this.reached = null;
    if (!this.built) {
      this.built = true;
      replace(this.body, this.meta, this.notice, this.list, this.empty, h("div", { class: "conversation-foot" }, this.newerButton, this.newestLink));
    }
    const entries = [...this.entries.values()].sort(compare);
    // Only new or moved elements are inserted: opened folds stay open, the scroll stays put.
    let previous = null;
    for (const entry of entries) {
      const wanted = previous ? previous.nextSibling : this.list.firstChild;
      if (wanted !== entry.el) this.list.insertBefore(entry.el, wanted);
      previous = entry.el;
      if (entry.result) {
        const call = this.calls.get(entry.result.callId);
        entry.result.name.textContent = call ? `${visibleId(call.name, 80)} ` : "call ";
      }
    }
    this.empty.hidden = entries.length > 0;
    this.olderButton.hidden = this.older === null;
    this.newerButton.hidden = this.newestLink.hidden = !this.hasNewer();
    const count = this.total === null ? null : h("span", { class: "muted" }, `${num(this.total)} item${this.total === 1 ? "" : "s"}`);
    const kind = this.kind ? h("span", { class: "badge kind-badge", testid: "conversation-kind" }, visibleId(this.kind, 40)) : null;
    replace(this.meta, kind, count, this.point ? langGraphPoint(this.point) : null);
  }

  say(text) {
    this.notice.hidden = text === null;
    this.notice.textContent = text === null ? "" : visibleText(text, 400);
  }

  showTarget() {
    const { item, sequence } = this.target;
    const transcript = readsTranscript(this.kind);
    const entry = [...this.entries.values()].find((e) => e.index === item && (!transcript || e.sequence === sequence));
    if (!entry) {
      this.say(`The message the link points at (item ${item}${typeof sequence === "number" ? ` of batch ${sequence}` : ""}) is not in this conversation any more.`);
      return;
    }
    entry.el.classList.add("highlight");
    entry.el.scrollIntoView({ block: "center" });
  }

  // A tool result's "result of" link: show the call, if its page is loaded.
  jump(callId) {
    const call = this.calls.get(callId);
    if (!call || !call.entry.el.isConnected) {
      this.say(`The call ${visibleId(callId, 80)} is not on the pages loaded: load earlier messages.`);
      return;
    }
    this.say(null);
    const el = call.entry.el;
    el.scrollIntoView({ block: "center" });
    el.classList.add("flash");
    setTimeout(() => el.classList.remove("flash"), FLASH_MS);
  }
}
