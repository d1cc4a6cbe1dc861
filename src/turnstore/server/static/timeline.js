// The turn timeline: journal events folded into turns, model steps and tool calls.

import { openTurnState, STATUS_LABEL } from "./activity.js";
import { absoluteTime, duration, h, num, visibleId, visibleText } from "./dom.js";

const STREAM_PREVIEW = 2000;

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function str(value) {
  return typeof value === "string" ? value : null;
}

function finite(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function newTurn(turnId, key) {
  return {
    key,
    turnId,
    status: turnId === null ? "session" : "partial",
    startedAt: null,
    endedAt: null,
    firstAt: null,
    lastAt: null,
    firstSeq: null,
    seenAt: null,
    entries: [],
    steps: new Map(),
    tools: new Map(),
    totalUsage: null,
    reason: null,
  };
}

/** Fold journal events (oldest first) into turns, oldest first. */
export function buildTurns(events) {
  const turns = [];
  const byId = new Map();
  let current = null;
  let loose = null;
  const turnFor = (turnId) => {
    if (turnId === null) {
      if (current) return current;
      if (!loose || turns[turns.length - 1] !== loose) {
        loose = newTurn(null, `session-${turns.length}`);
        turns.push(loose);
      }
      return loose;
    }
    let turn = byId.get(turnId);
    if (!turn) {
      turn = newTurn(turnId, `turn-${turnId}`);
      byId.set(turnId, turn);
      turns.push(turn);
    }
    return turn;
  };
  for (const journal of events) {
    const msg = isObject(journal.event) && isObject(journal.event.msg) ? journal.event.msg : null;
    if (!msg) continue;
    const turn = turnFor(str(msg.turn_id));
    const at = finite(journal.recorded_at_ms);
    if (at !== null) {
      turn.firstAt = turn.firstAt === null ? at : Math.min(turn.firstAt, at);
      turn.lastAt = turn.lastAt === null ? at : Math.max(turn.lastAt, at);
    }
    if (turn.firstSeq === null) turn.firstSeq = journal.sequence;
    const seen = finite(journal.seenAt);
    if (seen !== null) turn.seenAt = Math.max(turn.seenAt ?? seen, seen);
    apply(turn, msg, at, journal);
    if (msg.type === "task_started") current = turn;
    if ((msg.type === "task_complete" || msg.type === "turn_aborted") && current === turn) current = null;
  }
  markInterrupted(turns);
  return turns;
}

// A turn that never ended while a later turn started: its runtime moved on without it.
function markInterrupted(turns) {
  let later = false;
  for (let index = turns.length - 1; index >= 0; index -= 1) {
    const turn = turns[index];
    if (turn.status === "running" && later) turn.status = "interrupted";
    if (turn.turnId !== null && turn.startedAt !== null) later = true;
  }
}

/** The turn's status now: an unfinished turn without recent activity is "stalled". */
export function turnStatus(turn, now = Date.now()) {
  if (turn.status !== "running") return turn.status;
  const last = Math.max(turn.lastAt ?? -Infinity, turn.seenAt ?? -Infinity);
  return openTurnState(Number.isFinite(last) ? last : null, now);
}

function stepFor(turn, msg) {
  const id = str(msg.model_step_id) ?? "step";
  let step = turn.steps.get(id);
  if (!step) {
    step = { kind: "step", id, index: finite(msg.step_index), startedAt: null, completedAt: null, lastAt: null, outcome: null, metrics: [], streams: [], shown: 0, chunks: 0, firstDeltaAt: null };
    turn.steps.set(id, step);
    turn.entries.push(step);
  }
  if (step.index === null) step.index = finite(msg.step_index);
  return step;
}

function toolFor(turn, callId) {
  let tool = turn.tools.get(callId);
  if (!tool) {
    tool = { kind: "tool", callId, name: null, args: null, beginAt: null, endAt: null, success: null, output: null };
    turn.tools.set(callId, tool);
    turn.entries.push(tool);
  }
  return tool;
}

// Streamed text, one part per run of the same phase, so reasoning never runs into the answer.
function addStreamed(step, phase, text) {
  if (step.shown >= STREAM_PREVIEW) return;
  const last = step.streams[step.streams.length - 1];
  const part = last && last.phase === phase ? last : { phase, text: "" };
  if (part !== last) step.streams.push(part);
  part.text += text;
  step.shown += text.length;
}

function apply(turn, msg, at, journal) {
  switch (msg.type) {
    case "task_started":
      turn.status = "running";
      turn.startedAt = finite(msg.started_at_ms) ?? at;
      break;
    case "task_complete":
      turn.status = "completed";
      turn.endedAt = at;
      break;
    case "turn_aborted":
      turn.status = "aborted";
      turn.endedAt = at;
      turn.reason = str(msg.reason);
      break;
    case "user_message": {
      const message = isObject(msg.message) ? msg.message : {};
      const author = isObject(message.author) ? str(message.author.name) ?? str(message.author.role) : null;
      turn.entries.push({ kind: "user", at, author, text: str(message.text) ?? "" });
      break;
    }
    case "agent_message":
      turn.entries.push({ kind: "agent", at, phase: str(msg.phase), text: str(msg.message) ?? "" });
      break;
    case "model_step_started": {
      const step = stepFor(turn, msg);
      step.startedAt = finite(msg.started_at_ms) ?? at;
      step.lastAt = step.lastAt ?? step.startedAt;
      break;
    }
    case "agent_message_content_delta":
    case "agent_reasoning_content_delta": {
      const step = stepFor(turn, msg);
      step.chunks += 1;
      step.lastAt = at ?? step.lastAt;
      if (step.firstDeltaAt === null) step.firstDeltaAt = at;
      const phase = msg.type === "agent_reasoning_content_delta" ? "reasoning" : str(msg.phase) ?? "text";
      addStreamed(step, phase, str(msg.delta) ?? "");
      break;
    }
    case "model_step_completed": {
      const step = stepFor(turn, msg);
      step.startedAt = step.startedAt ?? finite(msg.started_at_ms);
      step.completedAt = finite(msg.completed_at_ms) ?? at;
      step.outcome = isObject(msg.outcome) ? msg.outcome : { type: "unknown" };
      step.metrics = Array.isArray(journal.stream_metrics) ? journal.stream_metrics.filter(isObject) : [];
      break;
    }
    case "tool_call_begin": {
      const call = isObject(msg.call) ? msg.call : {};
      const tool = toolFor(turn, str(call.call_id) ?? `call-${journal.sequence}`);
      tool.name = str(call.name);
      tool.args = str(call.arguments);
      tool.beginAt = at;
      break;
    }
    case "tool_call_end": {
      const tool = toolFor(turn, str(msg.call_id) ?? `call-${journal.sequence}`);
      tool.endAt = at;
      tool.success = msg.success !== false;
      tool.output = str(msg.output);
      break;
    }
    case "token_count":
      if (isObject(msg.total_usage)) turn.totalUsage = msg.total_usage;
      break;
    case "error":
    case "warning":
      turn.entries.push({ kind: msg.type, at, text: str(msg.message) ?? "" });
      break;
    case "exec_approval_request": {
      const calls = Array.isArray(msg.calls) ? msg.calls.filter(isObject).map((call) => str(call.name) ?? "?") : [];
      turn.entries.push({ kind: "approval", at, text: `Approval requested for ${calls.join(", ") || "tool calls"}: ${str(msg.reason) ?? ""}` });
      break;
    }
    default:
      turn.entries.push({ kind: "other", at, text: str(msg.type) ?? "event" });
  }
}

// --- figures ---------------------------------------------------------------------------------

function stepUsage(step) {
  return step.outcome && step.outcome.type === "completed" && isObject(step.outcome.usage) ? step.outcome.usage : null;
}

function turnUsage(turn) {
  const sum = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
  let any = false;
  for (const step of turn.steps.values()) {
    const usage = stepUsage(step);
    if (!usage) continue;
    any = true;
    for (const key of Object.keys(sum)) sum[key] += finite(usage[key]) ?? 0;
  }
  return any ? sum : null;
}

function firstDelta(step) {
  const firsts = step.metrics.map((metric) => finite(metric.first_delta_at_ms)).filter((value) => value !== null);
  if (firsts.length) return Math.min(...firsts);
  return step.firstDeltaAt;
}

function turnEnd(turn, status, now) {
  if (turn.endedAt !== null) return turn.endedAt;
  return status === "running" ? Math.max(now, turn.lastAt ?? now) : turn.lastAt;
}

// --- rendering -------------------------------------------------------------------------------

/** Renders turns newest first into `container`, rebuilding only the turns that changed. */
export class TimelineView {
  constructor(container) {
    this.container = container;
    this.cache = new Map();
  }

  render(turns, now = Date.now()) {
    const list = h("div", { class: "timeline-list" });
    const fresh = new Map();
    for (const turn of [...turns].reverse()) {
      const status = turnStatus(turn, now);
      const signature = turnSignature(turn, status, now);
      const cached = this.cache.get(turn.key);
      const el = cached && cached.signature === signature ? cached.el : turnElement(turn, status, now);
      fresh.set(turn.key, { signature, el });
      list.append(el);
    }
    this.cache = fresh;
    if (!turns.length) list.append(h("p", { class: "empty" }, "No events journaled yet."));
    this.container.replaceChildren(list);
  }
}

function turnSignature(turn, status, now) {
  const steps = [...turn.steps.values()].map((s) => `${s.completedAt}:${s.chunks}`).join(",");
  const tools = [...turn.tools.values()].map((t) => `${t.endAt}:${t.beginAt}`).join(",");
  const running = status === "running" ? Math.floor(now / 1000) : 0;
  return `${status}|${turn.entries.length}|${turn.lastAt}|${steps}|${tools}|${running}`;
}

function turnNote(turn, status) {
  if (status === "stalled") return `No activity since ${absoluteTime(turn.lastAt)}: the turn has no completion and the timer stops at its last event.`;
  if (status === "interrupted") return "Interrupted: a later turn started before this one finished.";
  return null;
}

function turnElement(turn, status, now) {
  const live = status === "running";
  const start = turn.startedAt ?? turn.firstAt;
  const end = turnEnd(turn, status, now);
  const span = start !== null && end !== null ? Math.max(end - start, 1) : null;
  const usage = turnUsage(turn);
  const tools = [...turn.tools.values()];
  const failed = tools.filter((tool) => tool.success === false).length;
  const title = turn.turnId === null ? "Session events" : `Turn ${visibleId(turn.turnId, 80)}`;
  const chips = [
    chip(`${turn.steps.size} model step${turn.steps.size === 1 ? "" : "s"}`),
    chip(`${tools.length} tool call${tools.length === 1 ? "" : "s"}${failed ? `, ${failed} failed` : ""}`, failed ? "bad" : ""),
    usage ? chip(`${num(usage.input_tokens)} in · ${num(usage.output_tokens)} out tokens`) : null,
    turn.totalUsage ? chip(`session total ${num(finite(turn.totalUsage.total_tokens))} tokens`, "muted") : null,
  ];
  const header = h(
    "header",
    { class: "turn-head" },
    h("div", { class: "turn-title" }, h("span", { class: "turn-name", testid: "turn-id" }, title), badge(status)),
    h("div", { class: "turn-meta" },
      start !== null ? h("span", { title: absoluteTime(start) }, absoluteTime(start)) : null,
      span !== null && turn.turnId !== null ? h("span", { class: "turn-duration", testid: "turn-duration" }, duration(end - start)) : null,
    ),
    h("div", { class: "chips" }, chips),
    turnNote(turn, status) ? h("p", { class: "turn-note", testid: "turn-note" }, turnNote(turn, status)) : null,
  );
  const rows = h("ol", { class: "turn-rows" });
  for (const entry of turn.entries) rows.append(entryElement(entry, start, span, live ? now : null));
  if (turn.reason) rows.append(h("li", { class: "row row-warning" }, h("span", { class: "row-label" }, "aborted"), h("span", { class: "row-main" }, visibleText(turn.reason))));
  return h("section", { class: `turn status-${status}`, testid: "timeline-turn", "data-turn-id": turn.turnId ?? "", "data-status": status }, header, rows);
}

function chip(text, tone = "") {
  return h("span", { class: `chip ${tone}` }, text);
}

function badge(status) {
  return h("span", { class: `badge badge-${status}`, testid: "turn-status" }, STATUS_LABEL[status] ?? status);
}

// A bar placing [from, to] inside the turn's span.
function bar(from, to, start, span, tone) {
  const track = h("span", { class: "bar-track", "aria-hidden": "true" });
  if (from === null || start === null || span === null) return track;
  const left = Math.min(Math.max((from - start) / span, 0), 1);
  const right = Math.min(Math.max(((to ?? from) - start) / span, left), 1);
  const fill = h("span", { class: `bar-fill ${tone}` });
  fill.style.setProperty("left", `${(left * 100).toFixed(2)}%`);
  fill.style.setProperty("width", `${Math.max((right - left) * 100, 0.6).toFixed(2)}%`);
  track.append(fill);
  return track;
}

function row(kind, labelText, main, timing, barEl, testid) {
  return h("li", { class: `row row-${kind}`, testid },
    h("span", { class: "row-label" }, labelText),
    h("div", { class: "row-main" }, main),
    h("span", { class: "row-timing" }, timing),
    barEl,
  );
}

function entryElement(entry, start, span, now) {
  switch (entry.kind) {
    case "step":
      return stepElement(entry, start, span, now);
    case "tool":
      return toolElement(entry, start, span, now);
    case "user":
      return row("user", entry.author ? visibleText(entry.author, 40) : "user", h("div", { class: "row-text" }, visibleText(entry.text)), "", bar(entry.at, entry.at, start, span, "user"), "timeline-user");
    case "agent":
      return row("agent", entry.phase === "commentary" ? "commentary" : "agent", h("div", { class: "row-text" }, visibleText(entry.text)), "", bar(entry.at, entry.at, start, span, "agent"), "timeline-agent");
    default:
      return row(entry.kind, entry.kind, h("div", { class: "row-text" }, visibleText(entry.text)), "", bar(entry.at, entry.at, start, span, entry.kind), `timeline-${entry.kind}`);
  }
}

// `now` is null when the turn is not live: an unfinished step ends at its last event.
function stepElement(step, start, span, now) {
  const done = step.completedAt !== null;
  const end = done ? step.completedAt : now ?? step.lastAt;
  const usage = stepUsage(step);
  const first = firstDelta(step);
  const facts = [];
  if (first !== null && step.startedAt !== null) facts.push(fact("first delta", duration(first - step.startedAt), "ttfd"));
  const chunks = step.metrics.reduce((sum, metric) => sum + (finite(metric.chunk_count) ?? 0), 0) || step.chunks;
  if (chunks) facts.push(fact("chunks", num(chunks)));
  const gaps = step.metrics.map((metric) => finite(metric.longest_gap_ms)).filter((value) => value !== null);
  if (gaps.length) facts.push(fact("longest gap", duration(Math.max(...gaps))));
  if (usage) facts.push(fact("tokens", `${num(finite(usage.input_tokens))} in · ${num(finite(usage.output_tokens))} out`, "tokens"));
  const outcome = step.outcome ? step.outcome.type : now === null ? "unfinished" : "streaming";
  if (step.outcome && step.outcome.type === "completed") facts.push(fact("ends", step.outcome.end_turn ? "turn" : "with tool calls"));
  if (step.outcome && step.outcome.type === "failed" && step.outcome.message) facts.push(fact("error", visibleText(step.outcome.message, 300)));
  if (outcome === "unfinished") facts.push(fact("ends", "never completed"));
  const main = h("div", {},
    h("div", { class: "facts" }, facts),
    phaseTexts(step),
  );
  const name = `model step ${step.index ?? ""}`.trim();
  const timing = h("span", { testid: "step-duration" }, step.startedAt !== null && end !== null ? duration(end - step.startedAt) : "");
  const tone = { completed: "step", streaming: "live", unfinished: "unfinished" }[outcome] ?? "bad";
  const el = row("step", name, main, timing, bar(step.startedAt, end, start, span, tone), "timeline-step");
  el.dataset.outcome = outcome;
  return el;
}

function fact(name, value, testid) {
  return h("span", { class: "fact", testid: testid ? `fact-${testid}` : undefined }, h("span", { class: "fact-name" }, name), " ", h("span", { class: "fact-value" }, value));
}

function phaseTexts(step) {
  if (step.outcome && step.outcome.type === "completed" && Array.isArray(step.outcome.content)) {
    const parts = step.outcome.content.filter(isObject).slice(0, 20);
    return parts.map((part) =>
      h("div", { class: `phase phase-${str(part.phase) ?? "text"}` },
        h("span", { class: "phase-name" }, visibleText(str(part.phase) ?? "text", 30)),
        h("span", { class: "row-text" }, visibleText(str(part.text) ?? "", 600)),
      ),
    );
  }
  return step.streams.map((part) =>
    h("div", { class: `phase phase-${part.phase} streamed`, testid: "streamed-phase", "data-phase": part.phase },
      h("span", { class: "phase-name" }, visibleText(part.phase, 30)),
      h("span", { class: "row-text" }, visibleText(part.text, 600)),
    ),
  );
}

function toolElement(tool, start, span, now) {
  const end = tool.endAt ?? now ?? tool.beginAt;
  const unended = now === null ? "unfinished" : "running";
  const state = tool.endAt === null ? unended : tool.success ? "ok" : "failed";
  const main = h("div", {},
    h("div", { class: "tool-call" }, h("span", { class: "tool-name" }, visibleText(tool.name ?? "tool", 120)), h("span", { class: "tool-args" }, visibleText(tool.args ?? "", 300))),
    tool.output !== null ? h("div", { class: "tool-output" }, h("span", { class: "phase-name" }, state === "failed" ? "failed" : "output"), h("span", { class: "row-text" }, visibleText(tool.output, 600))) : null,
  );
  const timing = h("span", { testid: "tool-duration" }, tool.beginAt !== null ? duration(end - tool.beginAt) : "");
  const el = row("tool", "tool call", main, timing, bar(tool.beginAt ?? tool.endAt, end, start, span, state === "failed" ? "bad" : "tool"), "timeline-tool");
  el.dataset.state = state;
  return el;
}
