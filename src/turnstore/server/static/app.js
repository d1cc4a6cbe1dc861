// The viewer's entry point: hash routes (#/ the catalog and search, #/s/<id> a session, with
// ?item=<index>&sequence=<batch> a message of it, #/memory long-term memory, with ?ns=<namespace>
// one namespace's items) and the live badge.

import { catalogPage } from "./catalog.js";
import { h } from "./dom.js";
import { memoryPage } from "./memory.js";
import { sessionPage } from "./session.js";

const root = document.getElementById("app");
const liveIndicator = document.querySelector("[data-testid='live-indicator']");
const LIVE_TEXT = { on: "live", connecting: "connecting…", waiting: "waiting for the session", off: "not live" };

const LIVE_TITLE = {
  on: "Following the session's event stream",
  waiting: "Waiting for the session's first save",
  off: "Not following any event stream",
};

const live = {
  set(state) {
    liveIndicator.dataset.state = state;
    liveIndicator.title = LIVE_TITLE[state] ?? LIVE_TITLE.off;
    liveIndicator.lastChild.textContent = LIVE_TEXT[state] ?? state;
  },
};

let leave = () => {};

function route() {
  leave();
  leave = () => {};
  live.set("off");
  window.scrollTo(0, 0);
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = splitOnce(hash, "?");
  const prefix = ["/s/", "/session/"].find((start) => path.startsWith(start));
  if (prefix) {
    let sessionId;
    try {
      sessionId = decodeURIComponent(path.slice(prefix.length));
    } catch {
      return notFound("This link does not name a session.");
    }
    leave = sessionPage(root, sessionId, live, messageTarget(new URLSearchParams(query)));
    return;
  }
  if (path === "/memory") {
    leave = memoryPage(root, new URLSearchParams(query));
    return;
  }
  document.title = "Sessions · turnstore";
  if (path === "/" || path === "") {
    leave = catalogPage(root, new URLSearchParams(query));
    return;
  }
  notFound("There is no such page.");
}

// `?item=<index>[&sequence=<batch>]`: the message a search hit links to, or null.
function messageTarget(params) {
  const whole = (name) => (/^\d{1,15}$/.test(params.get(name) ?? "") ? Number(params.get(name)) : null);
  const item = whole("item");
  return item === null ? null : { item, sequence: whole("sequence") };
}

function splitOnce(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? [text] : [text.slice(0, at), text.slice(at + 1)];
}

function notFound(message) {
  root.replaceChildren(h("section", { class: "page" }, h("div", { class: "card notice" }, h("h1", {}, "Not found"), h("p", {}, message), h("p", {}, h("a", { href: "#/" }, "Back to the sessions")))));
}

window.addEventListener("hashchange", route);
route();
