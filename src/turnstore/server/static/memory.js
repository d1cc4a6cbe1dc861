// The memory page: namespaces holding long-term memory items (per owner), and one namespace's
// items with their values; a search hit links to its item (?ns=<namespace>&key=<key>).

import { getJson } from "./api.js";
import { h, jsonBlock, num, replace, timeEl, visibleId, visibleText } from "./dom.js";

const PAGE_SIZE = 50;
const FILTER_DELAY_MS = 250;

/** The viewer's address of a namespace's items, and of one item in it. */
export function memoryHref(namespace, key) {
  const params = new URLSearchParams({ ns: namespace.join(".") });
  if (key !== undefined && key !== null) params.set("key", String(key));
  return `#/memory?${params}`;
}

/** A namespace's labels as the viewer shows them: joined by dots. */
export function dotted(namespace) {
  return visibleId(Array.isArray(namespace) ? namespace.map(String).join(".") : "", 200);
}

export function memoryPage(root, params) {
  document.title = "Memory · turnstore";
  const namespace = params.get("ns") ?? "";
  const ownerInput = h("input", { type: "search", testid: "memory-owner", placeholder: "Owner id", autocomplete: "off", spellcheck: "false", "aria-label": "Owner id" });
  ownerInput.value = params.get("owner") ?? "";
  const stops = [];
  const head = h("div", { class: "page-head" },
    h("h1", {}, "Memory"),
    namespace ? h("a", { href: "#/memory", testid: "memory-back" }, "All namespaces") : h("div", { class: "filters" }, ownerInput),
  );
  const page = h("section", { class: "page memory-page", testid: "memory-page" }, head);
  root.replaceChildren(page);
  if (namespace) {
    stops.push(itemsCard(page, namespace, params.get("key") === null ? null : { namespace, key: params.get("key") }));
  } else {
    stops.push(namespacesCard(page, ownerInput));
  }
  return () => stops.forEach((stop) => stop());
}

function namespacesCard(page, ownerInput) {
  const state = { owner: ownerInput.value, after: null, done: false, loading: false, generation: 0 };
  const body = h("tbody", { testid: "memory-namespaces" });
  const status = h("p", { class: "status", testid: "memory-status", role: "status" });
  const more = h("button", { type: "button", class: "button", testid: "memory-more", hidden: true }, "Load more");
  page.append(
    h("div", { class: "card table-card" }, h("table", { class: "catalog", testid: "memory-catalog" },
      h("thead", {}, h("tr", {}, ["Namespace", "Items", "Updated"].map((name) => h("th", { scope: "col" }, name)))),
      body)),
    status, more,
  );
  let timer = 0;
  async function load() {
    if (state.loading || state.done) return;
    state.loading = true;
    const generation = state.generation;
    status.textContent = "Loading…";
    try {
      const found = await getJson("/api/memory/namespaces", { owner: state.owner, after: state.after, limit: PAGE_SIZE });
      if (generation !== state.generation) return;
      for (const entry of Array.isArray(found.namespaces) ? found.namespaces : []) body.append(namespaceRow(entry));
      state.after = typeof found.next_after === "string" && found.next_after ? found.next_after : null;
      state.done = state.after === null;
      const count = body.childElementCount;
      status.textContent = count === 0 ? (state.owner ? "This owner has no memory items." : "No memory items.") : `${num(count)} namespace${count === 1 ? "" : "s"}${state.done ? "" : " so far"}`;
    } catch (error) {
      if (generation !== state.generation) return;
      status.textContent = `Could not load memory: ${visibleText(error.message, 300)}`;
    } finally {
      if (generation === state.generation) {
        state.loading = false;
        more.hidden = state.done;
      }
    }
  }
  ownerInput.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      Object.assign(state, { owner: ownerInput.value.trim(), after: null, done: false, loading: false, generation: state.generation + 1 });
      body.replaceChildren();
      history.replaceState(null, "", state.owner ? `#/memory?${new URLSearchParams({ owner: state.owner })}` : "#/memory");
      load();
    }, FILTER_DELAY_MS);
  });
  more.addEventListener("click", load);
  load();
  return () => {
    clearTimeout(timer);
    state.generation += 1;
  };
}

function namespaceRow(entry) {
  const labels = Array.isArray(entry.namespace) ? entry.namespace.map(String) : [];
  return h("tr", { testid: "memory-namespace-row", "data-namespace": labels.join(".").slice(0, 1024) },
    h("td", {}, h("a", { href: memoryHref(labels), class: "mono", testid: "memory-namespace-link" }, dotted(labels))),
    h("td", { class: "num" }, num(entry.items)),
    h("td", {}, timeEl(entry.updated_at_ms)),
  );
}

function itemsCard(page, namespace, target) {
  const state = { offset: 0, done: false, loading: false, stopped: false };
  const list = h("ol", { class: "memory-items", testid: "memory-items" });
  const status = h("p", { class: "status", testid: "memory-status", role: "status" });
  const more = h("button", { type: "button", class: "button", testid: "memory-more", hidden: true }, "More items");
  page.append(
    h("section", { class: "card section" },
      h("header", { class: "section-head" }, h("h2", { class: "mono", testid: "memory-namespace" }, visibleId(namespace, 400))),
      h("div", { class: "section-body" }, list, status, more)),
  );
  async function load() {
    if (state.loading || state.done) return;
    state.loading = true;
    status.textContent = "Loading…";
    try {
      const found = await getJson("/api/memory/items", { namespace, offset: state.offset, limit: PAGE_SIZE });
      if (state.stopped) return;
      for (const item of Array.isArray(found.items) ? found.items : []) list.append(itemElement(item, target));
      state.offset = Number.isInteger(found.next_offset) ? found.next_offset : null;
      state.done = state.offset === null;
      const count = list.childElementCount;
      status.textContent = count === 0 ? "No memory items in this namespace." : `${num(count)} item${count === 1 ? "" : "s"}${state.done ? "" : " so far"}`;
      const wanted = list.querySelector(".memory-item.target");
      if (wanted) wanted.scrollIntoView({ block: "center" });
      else if (target !== null && !state.done) queueMicrotask(load);
    } catch (error) {
      if (state.stopped) return;
      status.textContent = `Could not load memory: ${visibleText(error.message, 300)}`;
    } finally {
      state.loading = false;
      more.hidden = state.done;
    }
  }
  more.addEventListener("click", load);
  load();
  return () => {
    state.stopped = true;
  };
}

// `target` is the item a search hit named: its key in the page's own namespace (a key of the
// same name below it is another item).
function itemElement(item, target) {
  const key = String(item.key ?? "");
  const labels = Array.isArray(item.namespace) ? item.namespace : [];
  const chosen = target !== null && key === target.key && labels.join(".") === target.namespace;
  return h("li", { class: `memory-item${chosen ? " target" : ""}`, testid: "memory-item", "data-key": key.slice(0, 1024) },
    h("div", { class: "hit-head" },
      h("span", { class: "mono hit-session", testid: "memory-key" }, visibleId(key, 200)),
      labels.length ? h("span", { class: "muted mono" }, dotted(labels)) : null,
      item.owner_id ? h("span", { class: "muted", testid: "memory-item-owner" }, visibleId(item.owner_id, 60)) : null,
      h("span", { class: "muted" }, "updated ", timeEl(item.updated_at_ms)),
      Number.isFinite(item.expires_at_ms) ? h("span", { class: "badge", testid: "memory-expires" }, "expires ", timeEl(item.expires_at_ms)) : null,
    ),
    jsonBlock(item.value, "memory-value"),
  );
}
