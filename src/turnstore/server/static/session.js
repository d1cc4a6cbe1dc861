// The session page: summary, live turn timeline, conversation, executions, forks, graph, queue.

import { ApiError, getJson, sessionPath } from "./api.js";
import { ConversationView } from "./conversation.js";
import { absoluteTime, duration, h, jsonBlock, num, recorded, replace, sessionHref, timeEl, visibleId, visibleText } from "./dom.js";
import { describeItem, itemElement } from "./items.js";
import { buildTurns, TimelineView } from "./timeline.js";

const EVENT_PAGE = 200;
const EXECUTION_PAGE = 20;
const REFRESH_DELAY_MS = 400;
const MAX_LIVE_EVENTS = 20000;

function section(title, testid, ...extra) {
  const body = h("div", { class: "section-body", testid });
  const el = h("section", { class: "card section" }, h("header", { class: "section-head" }, h("h2", {}, title), ...extra), body);
  return { el, body };
}

function loading() {
  return h("p", { class: "muted" }, "Loading…");
}

function failure(error) {
  return h("p", { class: "error", testid: "section-error" }, visibleText(error.message ?? String(error), 300));
}

/** The page of one session; `target` ({item, sequence} or null) is a message to show. */
export function sessionPage(root, sessionId, live, target = null) {
  let page;
  // A page that waited for its session starts over, as a fresh page, once the session appears.
  const open = () => {
    page = new SessionPage(root, sessionId, live, open, target);
    page.start();
  };
  open();
  return () => page.stop();
}

class SessionPage {
  constructor(root, sessionId, live, reopen, target) {
    this.root = root;
    this.id = sessionId;
    this.live = live;
    this.reopen = reopen;
    this.target = target;
    this.events = new Map();
    this.olderBefore = null;
    this.latest = 0;
    this.stream = null;
    this.stopped = false;
    this.refreshTimer = 0;
    this.renderQueued = false;
    this.tick = 0;
  }

  start() {
    this.header = h("div", { class: "session-head", testid: "session-header" }, loading());
    this.timeline = section("Timeline", "timeline");
    this.olderEvents = h("button", { type: "button", class: "button small", testid: "older-events", hidden: true }, "Earlier events");
    this.timeline.el.querySelector(".section-head").append(this.olderEvents);
    this.timelineView = new TimelineView(this.timeline.body);
    this.conversation = section("Conversation", "conversation");
    this.conversationView = new ConversationView(this.id, this.conversation, this.target, () => this.stopped);
    this.executions = section("Executions", "executions");
    this.forks = section("Forks", "forks");
    this.graph = section("Runtime graph", "graph");
    this.queue = section("Queue", "queue");
    for (const part of [this.timeline, this.conversation, this.executions, this.forks, this.graph, this.queue]) part.body.append(loading());
    this.root.replaceChildren(
      h("div", { class: "page session-page" },
        h("nav", { class: "crumbs" }, h("a", { href: "#/" }, "Sessions"), " / ", h("span", { class: "mono" }, visibleId(this.id, 120))),
        this.header,
        h("div", { class: "session-grid" },
          h("div", { class: "main-col" }, this.timeline.el, this.conversation.el),
          h("aside", { class: "side-col" }, this.forks.el, this.executions.el, this.graph.el, this.queue.el),
        ),
      ),
    );
    this.olderEvents.addEventListener("click", () => this.loadOlderEvents());
    this.loadSummary().then((found) => {
      if (found === "absent" && !this.stopped) this.waitForSession();
      if (found !== true || this.stopped) return;
      // A message a link points at is scrolled to once the timeline above it is laid out.
      this.conversationView.load(this.loadEvents());
      this.loadExecutions();
      this.loadForks();
      this.loadGraph();
      this.loadQueue();
    });
    // Running turns show a growing duration.
    this.tick = setInterval(() => this.queueRender(), 1000);
  }

  stop() {
    this.stopped = true;
    clearInterval(this.tick);
    clearTimeout(this.refreshTimer);
    if (this.stream) this.stream.close();
    this.stream = null;
    this.live.set("off");
  }

  // --- summary -------------------------------------------------------------------------------

  async loadSummary() {
    try {
      const summary = await getJson(sessionPath(this.id));
      if (this.stopped) return false;
      replace(this.header, summaryElement(summary));
      this.conversationView.setSummary(summary);
      document.title = `${visibleId(this.id, 60)} · turnstore`;
      return true;
    } catch (error) {
      if (this.stopped) return false;
      this.root.querySelector(".session-grid")?.remove();
      if (error instanceof ApiError && error.status === 404) {
        this.meant = error.didYouMean;
        return "absent";
      }
      replace(this.header, h("div", { class: "card notice error", testid: "session-error" },
        h("h1", {}, "Could not load the session"),
        h("p", {}, visibleText(error.message, 300)),
        h("p", {}, h("a", { href: "#/" }, "Back to the sessions")),
      ));
      return false;
    }
  }

  // --- a session not saved yet -------------------------------------------------------------------

  // An agent may not have saved its session yet: follow the tail with ?wait=1 until it exists.
  waitForSession() {
    replace(this.header, h("div", { class: "card notice waiting", testid: "session-waiting" },
      h("h1", {}, "Waiting for the first save"),
      h("p", {}, "No session ", h("span", { class: "mono" }, visibleId(this.id, 120)), " is stored yet (or the server's owner scope does not show it). This page follows the store and shows the session as soon as it is saved."),
      ...(this.meant?.length ? [h("p", { testid: "did-you-mean" }, "Did you mean ",
        ...this.meant.flatMap((id, index) => [
          index ? " or " : "",
          h("a", { href: sessionHref(id), class: "mono" }, visibleId(id, 120)),
        ]),
        "? Frameworks' sessions are stored under their kind's prefix.")] : []),
      h("p", {}, h("a", { href: "#/" }, "Back to the sessions")),
    ));
    document.title = `waiting for ${visibleId(this.id, 60)} · turnstore`;
    const stream = new EventSource(`${sessionPath(this.id, "/events/stream")}?wait=1`);
    this.stream = stream;
    this.live.set("waiting");
    stream.addEventListener("error", () => this.live.set(stream.readyState === EventSource.CLOSED ? "off" : "waiting"));
    stream.addEventListener("session", () => {
      if (this.stopped) return;
      this.stop();
      this.reopen();
    });
  }

  // --- events and the live stream --------------------------------------------------------------

  async loadEvents() {
    try {
      const page = await getJson(sessionPath(this.id, "/events"), { limit: EVENT_PAGE });
      if (this.stopped) return;
      this.mergeEvents(page.events);
      this.latest = Math.max(this.latest, numberOr(page.latest_sequence, 0));
      this.setOlder(page.next_before_sequence);
      this.renderTimeline();
    } catch (error) {
      if (!this.stopped) replace(this.timeline.body, failure(error));
    }
    if (!this.stopped) this.openStream();
  }

  async loadOlderEvents() {
    if (this.olderBefore === null) return;
    this.olderEvents.disabled = true;
    try {
      const page = await getJson(sessionPath(this.id, "/events"), { limit: EVENT_PAGE, before: this.olderBefore });
      if (this.stopped) return;
      this.mergeEvents(page.events);
      this.setOlder(page.next_before_sequence);
      this.renderTimeline();
    } finally {
      this.olderEvents.disabled = false;
    }
  }

  setOlder(before) {
    this.olderBefore = typeof before === "number" ? before : null;
    this.olderEvents.hidden = this.olderBefore === null;
  }

  mergeEvents(events) {
    if (!Array.isArray(events)) return;
    for (const event of events) {
      if (event && typeof event.sequence === "number") this.events.set(event.sequence, event);
    }
  }

  openStream() {
    const url = `${sessionPath(this.id, "/events/stream")}?after=${encodeURIComponent(this.latest)}`;
    const stream = new EventSource(url);
    this.stream = stream;
    this.live.set("connecting");
    stream.addEventListener("open", () => this.live.set("on"));
    stream.addEventListener("error", () => this.live.set(stream.readyState === EventSource.CLOSED ? "off" : "connecting"));
    stream.addEventListener("event", (message) => this.onStreamEvent(message));
  }

  onStreamEvent(message) {
    if (this.stopped) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (!event || typeof event.sequence !== "number") return;
    this.live.set("on");
    // When this page received it: a writer whose clock runs behind still reads as live.
    event.seenAt = Date.now();
    this.events.set(event.sequence, event);
    this.latest = Math.max(this.latest, event.sequence);
    // A completed model step replaces its streamed deltas in the journal: drop them here too.
    const msg = event.event && event.event.msg;
    if (msg && msg.type === "model_step_completed") this.dropDeltas(msg.model_step_id);
    if (this.events.size > MAX_LIVE_EVENTS) this.trimOldest();
    this.queueRender();
    if (msg && ["task_complete", "turn_aborted", "task_started", "token_count", "model_step_completed"].includes(msg.type)) this.scheduleRefresh();
  }

  dropDeltas(stepId) {
    for (const [sequence, journal] of this.events) {
      const msg = journal.event && journal.event.msg;
      if (msg && msg.model_step_id === stepId && typeof msg.type === "string" && msg.type.endsWith("_content_delta")) this.events.delete(sequence);
    }
  }

  trimOldest() {
    const sequences = [...this.events.keys()].sort((a, b) => a - b);
    for (const sequence of sequences.slice(0, sequences.length - MAX_LIVE_EVENTS)) this.events.delete(sequence);
    this.setOlder(sequences[sequences.length - MAX_LIVE_EVENTS]);
  }

  queueRender() {
    if (this.renderQueued || this.stopped) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      if (!this.stopped && this.events.size) this.renderTimeline();
    });
  }

  renderTimeline() {
    const ordered = [...this.events.values()].sort((a, b) => a.sequence - b.sequence);
    this.timelineView.render(buildTurns(ordered));
  }

  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => {
      if (this.stopped) return;
      this.loadSummary();
      this.conversationView.refresh();
      this.loadExecutions();
      this.loadForks();
      this.loadGraph();
      this.loadQueue();
    }, REFRESH_DELAY_MS);
  }

  // --- executions, forks, graph, queue -----------------------------------------------------------

  async loadExecutions(before) {
    try {
      const page = await getJson(sessionPath(this.id, "/executions"), { limit: EXECUTION_PAGE, before });
      if (this.stopped) return;
      const executions = Array.isArray(page.executions) ? page.executions : [];
      const list = h("ol", { class: "executions" }, executions.map(executionElement));
      replace(this.executions.body, executions.length ? list : h("p", { class: "empty" }, "No finished turns."));
    } catch (error) {
      if (!this.stopped) replace(this.executions.body, failure(error));
    }
  }

  async loadForks() {
    try {
      const tree = await getJson(sessionPath(this.id, "/forks"));
      if (this.stopped) return;
      replace(this.forks.body, forkTree(tree, this.id));
    } catch (error) {
      if (!this.stopped) replace(this.forks.body, failure(error));
    }
  }

  async loadGraph() {
    try {
      const graph = await getJson(sessionPath(this.id, "/graph"));
      if (this.stopped) return;
      // A session written through the checkpoint face only has no head and no nodes.
      const none = graph.head_revision === null;
      replace(this.graph.body, none ? h("p", { class: "empty", testid: "graph-empty" }, "No runtime graph.") : graphElement(graph));
    } catch (error) {
      if (this.stopped) return;
      replace(this.graph.body, failure(error));
    }
  }

  async loadQueue() {
    try {
      const queue = await getJson(sessionPath(this.id, "/queue"));
      if (this.stopped) return;
      const batches = Array.isArray(queue.batches) ? queue.batches : [];
      replace(this.queue.body, batches.length ? h("ol", { class: "queue" }, batches.map(queueElement)) : h("p", { class: "empty" }, "Nothing queued."));
    } catch (error) {
      if (!this.stopped) replace(this.queue.body, failure(error));
    }
  }
}

function numberOr(value, fallback) {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

// --- pieces --------------------------------------------------------------------------------------

function stat(name, value, testid) {
  return h("div", { class: "stat", testid: testid ? `stat-${testid}` : undefined }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-name" }, name));
}

function summaryElement(summary) {
  const context = summary.session_context ?? {};
  const stats = summary.execution_stats ?? {};
  const usage = stats.usage ?? {};
  const tags = [
    context.owner_id ? tag("owner", context.owner_id) : null,
    context.workspace_label || context.workspace_id ? tag("workspace", context.workspace_label || context.workspace_id) : null,
    context.origin_label ? tag("origin", context.origin_label) : null,
    summary.kind ? tag("kind", summary.kind) : null,
    tag("sequence", String(summary.sequence ?? "?")),
    summary.catalog_visible === false ? tag("hidden", "not in catalog") : null,
  ];
  const forkedFrom = summary.parent_session_id
    ? h("p", { class: "forked-from", testid: "session-parent" }, "↳ forked from ",
        h("a", { href: sessionHref(summary.parent_session_id), class: "mono", testid: "parent-link" }, visibleId(summary.parent_session_id, 120)),
        typeof summary.parent_sequence === "number" ? ` at sequence ${summary.parent_sequence}` : "")
    : null;
  return [
    h("div", { class: "title-row" },
      h("h1", { class: "mono session-title", testid: "session-id" }, visibleId(summary.session_id ?? "", 300)),
      h("div", { class: "times" }, "created ", timeEl(summary.created_at), " · updated ", timeEl(summary.updated_at)),
    ),
    h("div", { class: "tags" }, tags),
    forkedFrom,
    summary.first_user_message ? h("p", { class: "first-message", testid: "session-first-message" }, visibleText(summary.first_user_message, 500)) : null,
    statsElement(summary, stats, usage),
  ];
}

// Only the figures the session records: a framework that keeps no token counts gets no
// token panels, and a line says what is not recorded rather than showing zeros.
function statsElement(summary, stats, usage) {
  const failedTools = recorded(summary, "failed_tool_calls") && stats.failed_tool_calls ? ` (${num(stats.failed_tool_calls)} failed)` : "";
  const panels = [
    ["runs", () => stat("turns", num(stats.run_count), "runs")],
    ["failed_runs", () => stat("failed / aborted", `${num(stats.failed_run_count)} / ${num(stats.aborted_run_count)}`, "failed")],
    ["model_calls", () => stat("model calls", num(stats.model_calls), "model-calls")],
    ["tool_calls", () => stat("tool calls", `${num(stats.tool_calls)}${failedTools}`, "tool-calls")],
    ["elapsed", () => stat("time in turns", duration(stats.elapsed_ms), "elapsed")],
    ["tokens", () => [
      stat("input tokens", num(usage.input_tokens), "input-tokens"),
      stat("cached input", num(usage.cached_input_tokens), "cached-tokens"),
      stat("output tokens", num(usage.output_tokens), "output-tokens"),
      stat("total tokens", num(usage.total_tokens), "total-tokens"),
    ]],
  ];
  const names = { runs: "turns", failed_runs: "failed turns", model_calls: "model calls", tool_calls: "tool calls", elapsed: "time", tokens: "tokens" };
  const shown = panels.filter(([figure]) => recorded(summary, figure));
  const missing = panels.filter(([figure]) => !recorded(summary, figure)).map(([figure]) => names[figure]);
  const kind = summary.kind ? `${summary.kind} sessions` : "this session";
  const waiting = Array.isArray(summary.waiting) && summary.waiting.length
    ? h("p", { class: "waiting", testid: "session-waiting" }, h("span", { class: "badge badge-interrupted" }, "waiting"), ` the graph runs ${visibleId(summary.waiting.join(", "), 120)} next`)
    : null;
  return [
    waiting,
    shown.length ? h("div", { class: "stats", testid: "session-stats" }, shown.map(([, build]) => build())) : null,
    missing.length
      ? h("p", { class: "muted stats-unrecorded", testid: "stats-unrecorded" }, `Not recorded for ${kind}: ${missing.join(", ")}.`)
      : null,
  ];
}

function tag(name, value) {
  return h("span", { class: "tag" }, h("span", { class: "tag-name" }, name), " ", h("span", { class: "tag-value" }, visibleId(value, 80)));
}

function executionElement(execution) {
  const usage = execution.usage ?? {};
  const outcome = typeof execution.outcome === "string" ? execution.outcome : "unknown";
  return h("li", { class: "execution", testid: "execution" },
    h("div", { class: "execution-head" },
      h("span", { class: "mono" }, visibleId(execution.turn_id ?? "", 60)),
      h("span", { class: `badge badge-${outcome}` }, visibleId(outcome, 20)),
    ),
    h("div", { class: "execution-facts" },
      h("span", { title: absoluteTime(execution.started_at_ms) }, duration(execution.elapsed_ms)),
      h("span", {}, `${num(execution.model_calls)} model`),
      h("span", {}, `${num(execution.tool_calls)} tools${execution.failed_tool_calls ? ` (${num(execution.failed_tool_calls)} failed)` : ""}`),
      h("span", {}, `${num(usage.total_tokens)} tokens`),
    ),
  );
}

function forkTree(tree, currentId) {
  const sessions = Array.isArray(tree.sessions) ? tree.sessions : [];
  const children = new Map();
  const ids = new Set(sessions.map((s) => s.session_id));
  const roots = [];
  for (const summary of sessions) {
    const parent = summary.parent_session_id;
    if (parent && ids.has(parent) && summary.session_id !== tree.root_session_id) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(summary);
    } else roots.push(summary);
  }
  const seen = new Set();
  const node = (summary) => {
    if (seen.has(summary.session_id)) return null;
    seen.add(summary.session_id);
    const current = summary.session_id === currentId;
    const link = h("a", { href: sessionHref(summary.session_id), class: `mono fork-link${current ? " current" : ""}`, testid: "fork-link", "aria-current": current ? "page" : undefined }, visibleId(summary.session_id, 80));
    const detail = typeof summary.parent_sequence === "number" ? h("span", { class: "muted" }, ` @ ${summary.parent_sequence}`) : null;
    const kids = (children.get(summary.session_id) ?? []).map(node).filter(Boolean);
    return h("li", {}, link, detail, kids.length ? h("ul", {}, kids) : null);
  };
  const list = h("ul", { class: "fork-tree", testid: "fork-tree" }, roots.map(node).filter(Boolean));
  if (sessions.length <= 1) return [list, h("p", { class: "empty" }, "No forks.")];
  return [list, tree.truncated ? h("p", { class: "muted" }, "… more forks not shown") : null];
}

function graphElement(graph) {
  const nodes = Array.isArray(graph.nodes) ? graph.nodes : [];
  const list = h("ol", { class: "graph-path" }, nodes.slice(-200).map((node) => {
    const described = describeItem(node.payload);
    return h("li", { class: "graph-node", testid: "graph-node" },
      h("div", { class: "graph-node-head" },
        h("span", { class: "tag" }, visibleId(node.kind ?? "node", 30)),
        h("span", { class: "mono muted" }, visibleId(node.node_id ?? "", 60)),
      ),
      described ? h("div", { class: "row-text" }, h("b", {}, visibleText(described.role, 30)), " ", visibleText(described.text, 400)) : jsonBlock(node.payload, "graph-json"),
    );
  }));
  return [
    h("p", { class: "muted" }, `head revision ${num(graph.head_revision)} · ${num(nodes.length)} node${nodes.length === 1 ? "" : "s"} on the active path`),
    nodes.length > 200 ? h("p", { class: "muted" }, `… ${nodes.length - 200} earlier nodes not shown`) : null,
    list,
  ];
}

function queueElement(batch) {
  const items = Array.isArray(batch.items) ? batch.items : [];
  return h("li", { class: "queue-batch", testid: "queue-batch" },
    h("div", { class: "graph-node-head" },
      h("span", { class: "tag" }, visibleId(batch.boundary ?? "", 20)),
      h("span", { class: "mono muted" }, visibleId(batch.batch_id ?? "", 60)),
      batch.claim_owner_id ? h("span", { class: "badge badge-running" }, `claimed by ${visibleId(batch.claim_owner_id, 40)}`) : h("span", { class: "badge" }, "ready"),
    ),
    items.slice(0, 20).map(itemElement),
  );
}
