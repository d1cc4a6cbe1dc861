// The catalog page: sessions newest first, filtered by id prefix and owner, paged by cursor;
// above it the search of what was said (search.js).

import { openTurnState, STATUS_LABEL } from "./activity.js";
import { getJson, sessionPath } from "./api.js";
import { absoluteTime, h, num, recorded, replace, sessionHref, timeEl, visibleId, visibleText } from "./dom.js";
import { kindBadge, SearchPanel } from "./search.js";

const PAGE_SIZE = 50;
const FILTER_DELAY_MS = 250;
const STATUS_READS = 4;
const RECHECK_MS = 5000;

export function catalogPage(root, params) {
  const state = { prefix: params.get("prefix") ?? "", owner: params.get("owner") ?? "", cursor: null, done: false, loading: false, generation: 0 };
  const search = new SearchPanel(params, { owner: () => state.owner, onChange: () => writeHash() });
  const prefixInput = h("input", { type: "search", id: "prefix", testid: "search-prefix", placeholder: "Session id starts with…", autocomplete: "off", spellcheck: "false", "aria-label": "Session id prefix" });
  const ownerInput = h("input", { type: "search", id: "owner", testid: "filter-owner", placeholder: "Owner id", autocomplete: "off", spellcheck: "false", "aria-label": "Owner id" });
  prefixInput.value = state.prefix;
  ownerInput.value = state.owner;
  const body = h("tbody", { testid: "session-rows" });
  const status = h("p", { class: "status", testid: "catalog-status", role: "status" });
  const more = h("button", { type: "button", class: "button", testid: "load-more", hidden: true }, "Load more");
  const sentinel = h("div", { class: "sentinel", testid: "catalog-sentinel", "aria-hidden": "true" });
  const table = h("table", { class: "catalog", testid: "catalog" },
    h("thead", {}, h("tr", {},
      ["Session", "Owner", "Kind", "First message", "Status", "Turns", "Tokens", "Updated"].map((name) => h("th", { scope: "col" }, name)),
    )),
    body,
  );
  root.replaceChildren(
    h("section", { class: "page catalog-page" },
      h("div", { class: "page-head" },
        h("h1", {}, "Sessions"),
        h("div", { class: "filters" }, prefixInput, ownerInput),
      ),
      search.form,
      search.el,
      h("div", { class: "card table-card" }, table),
      status, more, sentinel,
    ),
  );

  async function loadPage() {
    if (state.loading || state.done) return;
    state.loading = true;
    const generation = state.generation;
    more.disabled = true;
    status.textContent = "Loading…";
    try {
      const page = await getJson("/api/sessions", { limit: PAGE_SIZE, cursor: state.cursor, owner: state.owner, prefix: state.prefix });
      if (generation !== state.generation) return;
      const sessions = Array.isArray(page.sessions) ? page.sessions : [];
      for (const summary of sessions) body.append(sessionRow(summary, statuses));
      state.cursor = typeof page.next_cursor === "string" && page.next_cursor ? page.next_cursor : null;
      state.done = state.cursor === null;
      const count = body.childElementCount;
      status.textContent = count === 0 ? "No sessions match." : `${num(count)} session${count === 1 ? "" : "s"}${state.done ? "" : " so far"}`;
    } catch (error) {
      if (generation !== state.generation) return;
      status.textContent = `Could not load sessions: ${visibleText(error.message, 300)}`;
      status.classList.add("error");
    } finally {
      if (generation === state.generation) {
        state.loading = false;
        more.disabled = false;
        more.hidden = state.done;
        // A short first page may leave the sentinel in view: keep loading while it is.
        if (!state.done && isInView(sentinel)) queueMicrotask(loadPage);
      }
    }
  }

  function restart() {
    state.generation += 1;
    state.cursor = null;
    state.done = false;
    state.loading = false;
    status.classList.remove("error");
    body.replaceChildren();
    writeHash();
    loadPage();
  }

  // The filters and the query in the address, so a reload or a link shows the same page.
  function writeHash() {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries({ prefix: state.prefix, owner: state.owner, ...search.params() })) {
      if (value) query.set(key, value);
    }
    const hash = query.size ? `#/?${query}` : "#/";
    if (location.hash !== hash && !(hash === "#/" && location.hash === "")) history.replaceState(null, "", hash);
  }

  const statuses = new StatusCells();
  let timer = 0;
  const onFilter = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (prefixInput.value === state.prefix && ownerInput.value === state.owner) return;
      state.prefix = prefixInput.value;
      state.owner = ownerInput.value;
      restart();
      search.run();
    }, FILTER_DELAY_MS);
  };
  prefixInput.addEventListener("input", onFilter);
  ownerInput.addEventListener("input", onFilter);
  more.addEventListener("click", loadPage);
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting)) loadPage();
  }, { rootMargin: "200px" });
  observer.observe(sentinel);
  loadPage();
  search.run();
  (search.input.value ? search.input : prefixInput).focus();
  return () => {
    search.stop();
    statuses.stop();
    clearTimeout(timer);
    observer.disconnect();
    state.generation += 1;
  };
}

function isInView(el) {
  const rect = el.getBoundingClientRect();
  return rect.top < window.innerHeight + 200;
}

function sessionRow(summary, statuses) {
  const id = String(summary.session_id ?? "");
  const context = summary.session_context ?? {};
  const stats = summary.execution_stats ?? {};
  const usage = stats.usage ?? {};
  const idCell = h("td", { class: "cell-id" },
    h("a", { href: sessionHref(id), class: "mono", testid: "session-link", title: visibleId(id, 1100) }, visibleId(id, 80)),
  );
  if (summary.parent_session_id) {
    idCell.append(h("div", { class: "forked-from", testid: "forked-from" },
      "↳ fork of ",
      h("a", { href: sessionHref(summary.parent_session_id), class: "mono" }, visibleId(summary.parent_session_id, 60)),
      typeof summary.parent_sequence === "number" ? ` @ ${summary.parent_sequence}` : "",
    ));
  }
  // A figure the session's framework does not record is a dash, never a zero.
  const unrecorded = () => h("span", { class: "muted", title: "not recorded for this kind of session" }, "—");
  const runs = recorded(summary, "runs") ? num(stats.run_count) : unrecorded();
  const problems = (stats.failed_run_count ?? 0) + (stats.aborted_run_count ?? 0);
  const waiting = Array.isArray(summary.waiting) && summary.waiting.length
    ? h("span", { class: "badge badge-interrupted", testid: "session-waiting", title: "the graph runs these nodes next" }, `waiting: ${visibleId(summary.waiting.join(", "), 60)}`)
    : null;
  return h("tr", { testid: "session-row", "data-session-id": id },
    idCell,
    h("td", { class: "cell-owner" }, context.owner_id ? visibleId(context.owner_id, 60) : h("span", { class: "muted" }, "—")),
    h("td", { class: "cell-kind" }, kindBadge(summary.kind, "session-kind"), waiting ? " " : null, waiting),
    h("td", {}, h("div", { class: "cell-message", testid: "first-message" }, summary.first_user_message ? visibleText(summary.first_user_message, 200) : h("span", { class: "muted" }, "—"))),
    statuses.cell(id),
    h("td", { class: "cell-num", testid: "session-turns", title: `sequence ${summary.sequence ?? "?"}` }, runs, problems ? h("span", { class: "bad-count", title: "failed or aborted" }, ` (${num(problems)}!)`) : null),
    h("td", { class: "cell-num", testid: "session-tokens" }, recorded(summary, "tokens") ? num(usage.total_tokens) : unrecorded()),
    h("td", { class: "cell-time" }, timeEl(summary.updated_at)),
  );
}

// --- the status column ---------------------------------------------------------------------

// Each row's status comes from its session's newest journal event, a few reads at a time; a
// "running" cell turns "no activity" by the timeline's rule (activity.js) without a reload.
class StatusCells {
  constructor() {
    this.queue = [];
    this.reading = 0;
    this.open = new Set();
    this.timer = setInterval(() => this.recheck(), RECHECK_MS);
  }

  cell(sessionId) {
    const td = h("td", { class: "cell-status", testid: "session-status", "data-status": "loading" }, h("span", { class: "muted" }, "…"));
    this.queue.push({ td, sessionId });
    this.pump();
    return td;
  }

  pump() {
    while (this.reading < STATUS_READS && this.queue.length) {
      const { td, sessionId } = this.queue.shift();
      this.reading += 1;
      getJson(sessionPath(sessionId, "/events"), { limit: 1 })
        .then((page) => this.first(td, newestStatus(Array.isArray(page.events) ? page.events[0] : null)))
        .catch((error) => this.show(td, { status: "unknown", title: `Could not read: ${error.message}` }))
        .finally(() => {
          this.reading -= 1;
          this.pump();
        });
    }
  }

  first(td, found) {
    if (found.status === "running") this.open.add({ td, found });
    this.show(td, found);
  }

  show(td, found) {
    const status = found.status === "running" ? openTurnState(found.at) : found.status;
    td.dataset.status = status;
    td.title = status === "stalled" ? `no activity since ${absoluteTime(found.at)}` : found.title ?? "";
    replace(td, status === "none" || status === "unknown" ? h("span", { class: "muted" }, "—") : h("span", { class: `badge badge-${status}` }, STATUS_LABEL[status] ?? status));
  }

  recheck() {
    for (const entry of this.open) {
      if (!entry.td.isConnected) this.open.delete(entry);
      else if (openTurnState(entry.found.at) !== entry.td.dataset.status) this.show(entry.td, entry.found);
    }
  }

  stop() {
    clearInterval(this.timer);
    this.queue = [];
  }
}

// A session's status from its newest event: a turn's end, or an unfinished turn, or no turn.
function newestStatus(journal) {
  const msg = journal && journal.event && typeof journal.event.msg === "object" ? journal.event.msg : null;
  if (!msg) return { status: "none", title: "No journal events" };
  const at = typeof journal.recorded_at_ms === "number" ? journal.recorded_at_ms : null;
  if (msg.type === "task_complete") return { status: "completed", title: "Its last turn completed" };
  if (msg.type === "turn_aborted") return { status: "aborted", title: "Its last turn was aborted" };
  const inTurn = typeof msg.turn_id === "string" || typeof journal.event.submission_id === "string";
  if (inTurn) return { status: "running", at };
  return { status: "none", title: "No turn running" };
}
