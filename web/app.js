// The engine's web page: sessions, one session's transcript and history, the
// approvals inbox; a fork's source and forks, an eval run's cases, "Fork from
// here". Plain JavaScript, no build step, no third-party code.
//
// Everything the page shows comes from the HTTP API and may be written by a
// hostile model: it reaches the DOM only as text (textContent, text nodes),
// never as markup, and links are built from ids the page encodes itself.
// Event streams are read with fetch() (EventSource cannot send the token),
// resumed with Last-Event-ID after a drop.

const TOKEN_KEY = "engine.token";
const PAGE_SIZE = 50;
const TRANSCRIPT_WINDOW = 400; // events rendered at once; older ones on demand
const FOLD_CHARS = 800; // a tool result longer than this starts folded
const ROW_HEIGHT = 24; // the history's rows (style.css .history .row)

const state = { me: null, view: null, kinds: {} };

// ------------------------------------------------------------ helpers ---

// h("td", {className: "num"}, "12", child): an element; strings become text.
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "className" || k === "textContent" || k === "value" || k === "type" || k === "disabled" ||
        k === "hidden" || k === "id" || k === "tabIndex" || k === "checked") el[k] = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// An element id made from data: only safe characters, and distinct for
// distinct inputs (each other character becomes its code).
function domId(s) { return String(s).replace(/[^A-Za-z0-9_-]/g, (c) => "_" + c.charCodeAt(0).toString(16)); }

function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

function fmtTime(ms) {
  if (ms === undefined || ms === null || ms < 0) return "";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}
function fmtClock(ms) { return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }); }
function fmtSpan(s) {
  s = Math.max(0, Math.round(s));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " days";
}
function fmtBytes(n) {
  if (typeof n !== "number") return "";
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}
function pretty(v) {
  if (typeof v === "string") return v;
  try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
}
function num(v) { return typeof v === "number" ? v.toLocaleString() : "—"; }
function can(scope) { return !!(state.me && (state.me.scopes.includes(scope) || state.me.scopes.includes("admin"))); }
function sessionHref(id, tab) { return "#/s/" + encodeURIComponent(id) + (tab ? "/" + tab : ""); }
function statusBadge(s) { return h("span", { className: "status " + String(s).replace(/[^a-z]/g, "") }, s); }

// ---------------------------------------------------------------- API ---

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function authHeaders(extra) {
  const hdrs = Object.assign({}, extra || {});
  const t = sessionStorage.getItem(TOKEN_KEY);
  if (t) hdrs["Authorization"] = "Bearer " + t;
  return hdrs;
}

async function api(path, opts) {
  opts = opts || {};
  const res = await fetch(path, {
    method: opts.method || "GET",
    headers: authHeaders(opts.body !== undefined ? { "Content-Type": "application/json" } : {}),
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
    signal: opts.signal,
    cache: "no-store",
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    const msg = data && data.error && data.error.message ? data.error.message : res.status + " " + res.statusText;
    if (res.status === 401) needToken(msg);
    throw new ApiError(res.status, msg);
  }
  return data;
}

// An event stream read with fetch: onFrame({id, event, data}) per frame. It
// reconnects after a drop with the last id seen, until stop() is called or
// the stream ends with an `end` frame.
function stream(path, onFrame, opts) {
  opts = opts || {};
  const ctl = new AbortController();
  let lastId = opts.after !== undefined ? String(opts.after) : null;
  let stopped = false, ended = false, delay = 500;
  async function once() {
    const hdrs = authHeaders({ Accept: "text/event-stream" });
    if (lastId !== null) hdrs["Last-Event-ID"] = lastId;
    const res = await fetch(path, { headers: hdrs, signal: ctl.signal, cache: "no-store" });
    if (res.status === 401) { needToken("the token is not valid"); stopped = true; return; }
    if (res.status >= 400 && res.status < 500) { stopped = true; return; } // asking again would not help
    if (!res.ok || !res.body) throw new Error("stream " + res.status);
    delay = 500;
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + (buf[cut] === "\r" ? 4 : 2));
        const f = { id: null, event: "message", data: "" };
        let any = false;
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(":")) continue; // a heartbeat
          const i = line.indexOf(":");
          const k = i < 0 ? line : line.slice(0, i);
          const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
          if (k === "id") f.id = v;
          else if (k === "event") f.event = v;
          else if (k === "data") { f.data += (f.data ? "\n" : "") + v; any = true; }
        }
        if (!any) continue;
        if (f.id !== null) lastId = f.id;
        let parsed = null;
        try { parsed = JSON.parse(f.data); } catch (e) { continue; }
        if (f.event === "end") ended = true;
        onFrame({ id: f.id, event: f.event, data: parsed });
      }
    }
  }
  (async () => {
    while (!stopped && !ended) {
      try { await once(); } catch (e) { if (stopped) return; }
      if (stopped || ended) return;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  })();
  return { stop() { stopped = true; ctl.abort(); } };
}

// The all-sessions feed from now on (not its past): onFrame per new event.
function feedFromNow(onFrame) {
  let sub = null, stopped = false;
  api("/v1/events?limit=1").then((p) => {
    if (!stopped) sub = stream("/v1/events", onFrame, { after: p.end_id });
  }).catch(() => {});
  return { stop() { stopped = true; if (sub) sub.stop(); } };
}

// ------------------------------------------------------------ the token ---

function needToken(why) {
  if (state.view && state.view.stop) state.view.stop();
  state.view = null;
  const main = clear(document.getElementById("main"));
  const input = h("input", { type: "password", id: "token", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "token-help" });
  const form = h("form", { className: "token-form card", onsubmit: (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    boot();
  } },
  h("h1", {}, "A token, please"),
  h("p", { className: "error", role: "alert" }, why || ""),
  h("p", { id: "token-help" }, "Paste an API token (engine token create NAME --scopes read,approve,…). It is kept in this tab only (sessionStorage) and sent as Authorization: Bearer."),
  h("label", { for: "token" }, "Token", input),
  h("p", {}, h("button", { type: "submit" }, "Use this token")));
  main.append(form);
  input.focus();
}

async function boot() {
  // how each kind of event is shown: the description the terminal reads too
  try { state.kinds = await (await fetch("/web/event_kinds.json")).json(); } catch (e) { state.kinds = {}; }
  try {
    state.me = await api("/v1/whoami");
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showFatal(e);
    return;
  }
  if (state.me.identity === null) { // tokens exist and this tab has none yet
    state.me = null;
    needToken(sessionStorage.getItem(TOKEN_KEY) ? "the token is not valid" : "");
    return;
  }
  document.getElementById("who").textContent = state.me.identity + " · " + state.me.scopes.join(", ");
  document.getElementById("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
  document.getElementById("nav-start").hidden = !can("start");
  watchApprovalCount();
  route();
}

function showFatal(e) {
  const main = clear(document.getElementById("main"));
  main.append(h("p", { className: "error", role: "alert" }, String(e.message || e)));
}

// ------------------------------------------------------------- router ---

function route() {
  if (!state.me) return;
  if (state.view && state.view.stop) state.view.stop();
  const hash = location.hash || "#/";
  const main = clear(document.getElementById("main"));
  let m;
  for (const a of document.querySelectorAll(".top nav a")) a.removeAttribute("aria-current");
  if (hash.startsWith("#/memory")) {
    document.getElementById("nav-memory").setAttribute("aria-current", "page");
    state.view = memoryView(main);
  } else if (hash.startsWith("#/approvals")) {
    document.getElementById("nav-approvals").setAttribute("aria-current", "page");
    state.view = approvalsView(main);
  } else if ((m = /^#\/start(?:\/([^/]*))?$/.exec(hash))) {
    document.getElementById("nav-start").setAttribute("aria-current", "page");
    state.view = startView(main, decodeURIComponent(m[1] || ""));
  } else if ((m = /^#\/s\/([^/]+)(?:\/(history))?$/.exec(hash))) {
    state.view = sessionView(main, decodeURIComponent(m[1]), m[2] || "transcript");
  } else {
    document.getElementById("nav-sessions").setAttribute("aria-current", "page");
    state.view = listView(main, new URLSearchParams(hash.replace(/^#\/\??/, "")));
  }
  main.focus({ preventScroll: true });
}

// Debounced: fn runs once, ms after the last call.
function debounce(fn, ms) {
  let t = null;
  return () => { clearTimeout(t); t = setTimeout(fn, ms); };
}

// -------------------------------------------------------- sessions list ---

const STATUSES = ["", "running", "waiting", "queued", "completed", "failed", "cancelled", "stuck"];

function listView(main, params) {
  let cursors = [null]; // cursors[i]: where page i starts
  let page = 0;
  const status = h("select", { id: "f-status" }, STATUSES.map((s) => h("option", { value: s }, s || "any")));
  status.value = params.get("status") || "";
  const text = h("input", { type: "search", id: "f-text", value: params.get("q") || "", placeholder: "id, objective, who" });
  const body = h("tbody");
  const info = h("span", { className: "muted", "aria-live": "polite" });
  const prev = h("button", { type: "button", disabled: true, onclick: () => { page--; load(); } }, "← Newer");
  const next = h("button", { type: "button", disabled: true, onclick: () => { page++; load(); } }, "Older →");
  const onFilter = debounce(() => { cursors = [null]; page = 0; load(); }, 250);
  status.addEventListener("change", onFilter);
  text.addEventListener("input", onFilter);
  main.append(
    h("h1", {}, "Sessions"),
    h("form", { className: "filters", role: "search", onsubmit: (e) => { e.preventDefault(); onFilter(); } },
      h("label", { for: "f-status" }, "Status", status),
      h("label", { for: "f-text" }, "Text", text)),
    h("div", { className: "scroll" },
      h("table", { className: "sessions" },
        h("caption", { className: "muted" }, "Newest first. Times in your time zone."),
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Session"), h("th", { scope: "col" }, "Status"),
          h("th", { scope: "col" }, "Objective"), h("th", { scope: "col", className: "hide-narrow" }, "Started by"),
          h("th", { scope: "col", className: "hide-narrow" }, "Started"), h("th", { scope: "col" }, "Updated"),
          h("th", { scope: "col", className: "num hide-narrow" }, "Turns"),
          h("th", { scope: "col", className: "num hide-narrow" }, "Tool calls"),
          h("th", { scope: "col", className: "num hide-narrow" }, "Tokens"),
          h("th", { scope: "col", className: "num hide-narrow" }, "Cost"))),
        body)),
    h("div", { className: "pager" }, prev, next, info));
  let ctl = null;
  async function load() {
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const q = new URLSearchParams({ limit: String(PAGE_SIZE), order: "newest", fields: "session" });
    if (status.value) q.set("status", status.value);
    if (text.value.trim()) q.set("q", text.value.trim());
    if (cursors[page]) q.set("cursor", cursors[page]);
    const shown = new URLSearchParams();
    if (status.value) shown.set("status", status.value);
    if (text.value.trim()) shown.set("q", text.value.trim());
    history.replaceState(null, "", "#/" + (shown.toString() ? "?" + shown : ""));
    let data;
    try { data = await api("/v1/workflows?" + q, { signal: ctl.signal }); } catch (e) {
      if (e.name !== "AbortError") info.textContent = String(e.message);
      return;
    }
    cursors[page + 1] = data.next_cursor;
    prev.disabled = page === 0;
    next.disabled = !data.next_cursor;
    clear(body);
    for (const { w, depth, parentShown } of treeOrder(data.workflows)) body.append(listRow(w, depth, parentShown));
    if (!data.workflows.length) body.append(h("tr", {}, h("td", { colspan: 10, className: "muted" }, "No sessions.")));
    info.textContent = "Page " + (page + 1) + " · " + data.workflows.length + " shown";
  }
  load();
  // live: any event of any session may change the first page
  const reload = debounce(() => { if (page === 0) load(); }, 400);
  const feed = feedFromNow(() => reload());
  return { stop() { feed.stop(); if (ctl) ctl.abort(); } };
}

// The page's rows with each child right under its parent when both are on
// the page (oldest child first, indented by its depth); a child whose parent
// is on another page stays in its place, marked with its parent.
function treeOrder(ws) {
  const byId = new Map(ws.map((w) => [w.id, w]));
  const kids = new Map();
  for (const w of ws) {
    if (!w.parent || !byId.has(w.parent) || w.parent === w.id) continue;
    if (!kids.has(w.parent)) kids.set(w.parent, []);
    kids.get(w.parent).push(w);
  }
  for (const list of kids.values())
    list.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const out = [], seen = new Set();
  const visit = (w, depth) => {
    if (seen.has(w.id)) return;
    seen.add(w.id);
    out.push({ w, depth, parentShown: depth > 0 });
    for (const k of kids.get(w.id) || []) visit(k, depth + 1);
  };
  for (const w of ws) if (!w.parent || !byId.has(w.parent)) visit(w, 0);
  for (const w of ws) visit(w, 0); // a loop of parents (never written by the engine): each row once
  return out;
}

// A fork's source (engine fork: forked_from's id), or null.
function forkSource(w) { return w && w.forked_from && typeof w.forked_from.id === "string" ? w.forked_from.id : null; }

function listRow(w, depth, parentShown) {
  const sub = !!w.parent;
  return h("tr", { "data-id": w.id, "data-parent": w.parent, className: sub ? "child depth-" + Math.min(depth || 0, 4) : undefined },
    h("td", { className: "sid-cell" }, sub ? h("span", { className: "sub-mark", "aria-hidden": "true" }, "↳ ") : null,
      h("a", { href: sessionHref(w.id) }, w.id),
      sub && !parentShown ? h("span", { className: "muted parent-note" }, " sub-session of ",
        h("a", { href: sessionHref(w.parent) }, w.parent)) : null,
      sub && parentShown ? h("span", { className: "visually-hidden" }, " (sub-session of " + w.parent + ")") : null,
      forkSource(w) ? h("span", { className: "muted parent-note" }, " fork of ",
        h("a", { href: sessionHref(forkSource(w)) }, forkSource(w))) : null),
    h("td", {}, statusBadge(w.status)),
    h("td", { className: "objective" }, w.objective || h("span", { className: "muted" }, w.script.split("/").pop())),
    h("td", { className: "hide-narrow" }, w.started_by || ""),
    h("td", { className: "time hide-narrow" }, fmtTime(w.created_at)),
    h("td", { className: "time" }, fmtTime(w.updated_at)),
    h("td", { className: "num hide-narrow" }, num(w.turns)),
    h("td", { className: "num hide-narrow" }, num(w.tool_calls)),
    h("td", { className: "num hide-narrow" }, num(w.tokens)),
    h("td", { className: "num hide-narrow" }, typeof w.cost_usd === "number" ? "$" + w.cost_usd.toFixed(4) : "—"));
}

// ------------------------------------------------------------ a session ---

// What it waits on now, in words.
function whyText(s, now) {
  const w = s.waits;
  if (s.status === "stuck") return { text: "stuck: " + errorText(s.error), bad: true };
  if (s.status === "failed") return { text: "failed: " + errorText(s.error), bad: true };
  if (s.status === "completed" || s.status === "cancelled") return { text: s.status + " at " + fmtTime(s.updated_at), none: true };
  if (!w) return { text: s.status === "queued" ? "queued" : "running", none: true };
  const since = w.since ? " since " + fmtClock(w.since) : "";
  switch (w.kind) {
  case "approval":
    return { text: "waiting for approval of " + (w.tool || w.request_id) + since +
      (w.deadline ? " (until " + fmtTime(w.deadline) + ")" : "") };
  case "signal":
    return { text: "waiting for signal '" + w.signal + "'" + since + (w.deadline ? " (until " + fmtTime(w.deadline) + ")" : "") };
  case "timer":
    return { text: "timer until " + fmtTime(w.due_at) };
  case "activity": {
    const what = /model/.test(w.activity || "") ? "model call" : (w.activity || "activity");
    let t = what + " in flight for " + fmtSpan((now - w.since) / 1000) + ", attempt " + (w.attempt || 1);
    if (w.last_error) t += ", last error: " + errorText(w.last_error);
    return { text: t };
  }
  case "slot":
    return { text: "queued for a slot" + (w.position ? ", #" + w.position + " in line" : "") + since };
  case "rate":
    return { text: "held by rate limit " + w.rate + (w.until > 0 ? " until " + fmtClock(w.until) : "") };
  default:
    return { text: "waiting: " + pretty(w) };
  }
}

function errorText(e) {
  if (!e) return "";
  if (typeof e === "string") return e;
  let t = e.message || e.type || pretty(e);
  if (e.type && e.message) t = e.type + ": " + e.message;
  return t;
}

function sessionView(main, id, tab) {
  const why = h("p", { className: "why none", id: "why", role: "status", "aria-live": "polite" }, "…");
  const meta = h("div", { className: "meta" });
  const actions = h("div", { className: "actions" });
  const tabT = h("button", { type: "button", role: "tab", id: "tab-transcript", "aria-controls": "panel",
    "aria-selected": String(tab === "transcript"), onclick: () => { location.hash = sessionHref(id); } }, "Transcript");
  const tabH = h("button", { type: "button", role: "tab", id: "tab-history", "aria-controls": "panel",
    "aria-selected": String(tab === "history"), onclick: () => { location.hash = sessionHref(id, "history"); } }, "Engine history");
  const panel = h("div", { id: "panel", role: "tabpanel", "aria-labelledby": tab === "history" ? "tab-history" : "tab-transcript" });
  const result = h("section", { "aria-label": "Result" });
  const arts = h("section", { "aria-label": "Artifacts" });
  const tree = h("section", { id: "tree", "aria-label": "Sub-sessions" });
  const forks = h("section", { id: "forks", "aria-label": "Forks" });
  const talk = messageForms(id);
  // the result and the artifacts above the transcript: a long one would push them out of reach
  main.append(h("h1", {}, "Session ", h("span", { className: "sid" }, id)), why, meta, tree, forks, result, arts, talk.el, actions,
    h("div", { className: "tabs", role: "tablist", "aria-label": "Views" }, tabT, tabH), panel);
  let summary = null, stopped = false;
  const tick = setInterval(() => { if (summary) paintWhy(); }, 1000);
  function paintWhy() {
    const w = whyText(summary, Date.now());
    why.textContent = w.text;
    why.className = "why" + (w.none ? " none" : "") + (w.bad ? " bad" : "");
  }
  async function refresh() {
    try { summary = await api("/v1/workflows/" + encodeURIComponent(id)); } catch (e) {
      why.textContent = String(e.message);
      why.className = "why bad";
      return;
    }
    if (stopped) return;
    paintWhy();
    const input = summary.input || {};
    const r = summary.result && typeof summary.result === "object" ? summary.result : {};
    // (append would write a null as the text "null": the parts left out are filtered)
    clear(meta).append(...[
      summary.parent ? h("span", { id: "parent-link" }, "sub-session of ", h("a", { href: sessionHref(summary.parent) }, summary.parent)) : null,
      // a fork (engine fork): its source, and the source's event it was forked at
      summary.forked_from && typeof summary.forked_from.id === "string" ? h("span", { id: "fork-link" }, "forked from ",
        h("a", { href: sessionHref(summary.forked_from.id) }, summary.forked_from.id),
        " at #" + summary.forked_from.seq + (summary.forked_from.by ? " by " + summary.forked_from.by : "")) : null,
      h("span", {}, "status ", statusBadge(summary.status)),
      input.identity ? h("span", {}, "started by " + input.identity) : null,
      h("span", {}, "started " + fmtTime(summary.created_at)),
      h("span", {}, "updated " + fmtTime(summary.updated_at)),
      h("span", {}, "run " + summary.run),
      h("span", {}, (summary.history_events || 0) + " history events"),
      // the signed record of the session (docs/audit.md), checked offline with engine audit verify
      h("button", { type: "button", id: "audit-export", onclick: () => fetchDownload("/v1/workflows/" + encodeURIComponent(id) + "/audit",
        id.replace(/[^A-Za-z0-9._-]/g, "_") + ".audit.jsonl") }, "Export audit log"),
      typeof r.tokens === "number" ? h("span", { id: "own-spend" }, num(r.tokens) + " tokens" + (typeof r.cost_usd === "number" ? " · " + fmtUsd(r.cost_usd) : "")) : null,
    ].filter(Boolean));
    paintTree(tree, summary);
    paintForks(forks, summary);
    paintActions();
    talk.update(summary);
    paintResult(result, summary);
    paintArtifacts(arts, id, summary.artifacts);
  }
  // built again only when what they show changes: the page is painted every
  // few seconds, and a form built again loses what is being typed into it
  let actionsFor = null;
  function paintActions() {
    const live = !["completed", "failed", "cancelled"].includes(summary.status);
    const key = [live, can("signal"), can("cancel")].join();
    if (key === actionsFor) return;
    actionsFor = key;
    clear(actions);
    if (!live) return;
    if (can("signal")) {
      const name = h("input", { id: "sig-name", placeholder: "name", size: 12 });
      const payload = h("input", { id: "sig-payload", placeholder: "JSON payload (optional)", size: 24 });
      const out = h("span", { className: "muted", role: "status" });
      actions.append(h("form", { className: "actions", onsubmit: async (e) => {
        e.preventDefault();
        let body;
        try { body = payload.value.trim() ? JSON.parse(payload.value) : null; } catch (err) {
          out.textContent = "the payload is not JSON: " + err.message; return;
        }
        try {
          await api("/v1/workflows/" + encodeURIComponent(id) + "/signals/" + encodeURIComponent(name.value.trim()), { method: "POST", body });
          out.textContent = "signal sent";
        } catch (err) { out.textContent = err.message; }
      } }, h("label", { for: "sig-name" }, "Signal", name), h("label", { for: "sig-payload" }, "Payload", payload),
      h("button", { type: "submit" }, "Send signal"), out));
    }
    if (can("cancel")) {
      const out = h("span", { className: "muted", role: "status" });
      actions.append(h("button", { type: "button", className: "deny", onclick: async () => {
        if (!confirm("Cancel session " + id + "?")) return;
        try { await api("/v1/workflows/" + encodeURIComponent(id) + "/cancel", { method: "POST" }); out.textContent = "cancel requested"; }
        catch (err) { out.textContent = err.message; }
      } }, "Cancel session"), out);
    }
  }
  const later = debounce(refresh, 200);
  refresh();
  // what it waits on changes without a domain event too (an activity's next
  // attempt, its last error): asked again every few seconds while it is live
  const poll = setInterval(() => {
    if (summary && !["completed", "failed", "cancelled", "stuck"].includes(summary.status)) refresh();
  }, 3000);
  let sub = null;
  if (tab === "history") historyTab(panel, id);
  else sub = transcriptTab(panel, id, later);
  return { stop() { stopped = true; clearInterval(tick); clearInterval(poll); if (sub) sub.stop(); } };
}

function plural(n, what) { return num(n) + " " + what + (n === 1 ? "" : "s"); }
function fmtUsd(v) { return "$" + v.toFixed(4); }

// The workflows it started (its sub-sessions), each a link with its status,
// and the whole tree's cost and tokens (the API's "tree": each session's own
// spend counted once).
function paintTree(el, s) {
  clear(el);
  const kids = Array.isArray(s.children) ? s.children : [];
  if (!kids.length) return;
  const t = s.tree || {};
  const parts = [num(t.sessions) + " sessions", num(t.tokens) + " tokens"];
  if (typeof t.cost_usd === "number") parts.push(fmtUsd(t.cost_usd));
  if (t.running) parts.push(t.running + " not ended");
  el.append(h("h2", {}, "Sub-sessions"),
    h("p", { id: "tree-total", "data-sessions": String(t.sessions), "data-tokens": String(t.tokens) },
      h("strong", {}, "The tree: "), parts.join(" · ")),
    h("ul", { className: "children" }, kids.map((c) => h("li", { "data-id": c.id },
      h("a", { href: sessionHref(c.id) }, c.id), " ", statusBadge(c.status)))));
}

// The workflows forked from it (engine fork, the API's "forks"): each a link
// with its status, the source's event it was forked at and who forked it.
function paintForks(el, s) {
  clear(el);
  const forks = Array.isArray(s.forks) ? s.forks : [];
  if (!forks.length) return;
  el.append(h("h2", {}, "Forks"),
    h("ul", { className: "children forks" }, forks.map((f) => h("li", { "data-id": f.id },
      h("a", { href: sessionHref(f.id) }, f.id), " ", statusBadge(f.status),
      h("span", { className: "muted" }, " at #" + f.seq + (f.by ? " by " + f.by : ""))))));
}

// An eval run's result (workflows/eval_suite.lua, its suite_result.json):
// its cases (or a fork's variants), each with its scorers' results, linking
// to the case's session; null when r is not one.
function evalTable(r) {
  if (!r || !Array.isArray(r.cases) || !r.totals || typeof r.totals !== "object") return null;
  const scorers = Array.isArray(r.scorers) ? r.scorers.map(String) : [];
  const mark = { pass: "ok", fail: "FAIL", error: "ERR", skip: "–" };
  const money = (v) => typeof v === "number" ? fmtUsd(v) : "—";
  const secs = (v) => typeof v === "number" ? v.toFixed(1) + " s" : "—";
  const t = r.totals;
  return h("div", { className: "scroll" }, h("table", { className: "eval-cases" },
    h("caption", { className: "muted" }, (r.fork ? "Variants of a fork point" : "Suite " + String(r.suite || "")) +
      (r.live ? " (live models)" : r.live === false ? " (recorded models)" : "") + ": " +
      num(t.passed) + " of " + num(t.cases) + " passed" + (r.regressed ? ", regressions against " + ((r.baseline || {}).run || "the baseline") : "")),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, r.fork ? "Variant" : "Case"), h("th", { scope: "col" }, "Session"),
      scorers.map((s) => h("th", { scope: "col" }, s)),
      h("th", { scope: "col" }, "Outcome"), h("th", { scope: "col", className: "num" }, "Turns"),
      h("th", { scope: "col", className: "num" }, "Tokens"), h("th", { scope: "col", className: "num" }, "Cost"),
      h("th", { scope: "col", className: "num" }, "Wall"), h("th", { scope: "col" }, "Result"))),
    h("tbody", {}, r.cases.map((c) => {
      const scores = c.scores && typeof c.scores === "object" ? c.scores : {};
      return h("tr", { "data-case": String(c.case), className: c.pass ? "pass" : "fail" },
        h("th", { scope: "row" }, String(c.case)),
        h("td", {}, typeof c.session === "string" ? h("a", { href: sessionHref(c.session) }, c.session) : "—"),
        scorers.map((s) => {
          const sc = scores[s];
          const res = sc && sc.result ? String(sc.result) : "";
          return h("td", { className: "score " + res.replace(/[^a-z]/g, ""), title: sc && sc.detail ? String(sc.detail) : undefined },
            mark[res] || res || "—");
        }),
        h("td", {}, String(c.outcome || c.status || "")),
        h("td", { className: "num" }, num(c.turns)), h("td", { className: "num" }, num(c.tokens)),
        h("td", { className: "num" }, money(c.cost_usd)), h("td", { className: "num" }, secs(c.wall_seconds)),
        h("td", {}, h("strong", {}, c.pass ? "PASS" : "FAIL")));
    })),
    h("tfoot", {}, h("tr", {}, h("th", { scope: "row" }, "total"), h("td", {}), scorers.map(() => h("td", {})),
      h("td", {}), h("td", { className: "num" }, num(t.turns)), h("td", { className: "num" }, num(t.tokens)),
      h("td", { className: "num" }, money(t.cost_usd)), h("td", { className: "num" }, secs(t.wall_seconds)),
      h("td", {}, h("strong", {}, num(t.passed) + "/" + num(t.cases)))))));
}

function paintResult(el, s) {
  clear(el);
  if (s.status === "stuck" || s.status === "failed") {
    el.append(h("h2", {}, s.status === "stuck" ? "Why it is stuck" : "Why it failed"), errorBlock(s.error));
    return;
  }
  if (s.result === undefined || s.result === null) return;
  el.append(h("h2", {}, "Result"));
  const r = s.result;
  if (r && typeof r === "object") {
    if (typeof r.summary === "string") el.append(h("p", { className: "text" }, r.summary));
    const findings = (r.result && r.result.findings) || r.findings;
    if (Array.isArray(findings)) el.append(findingsTable(findings));
    const cases = evalTable(r);
    if (cases) el.append(cases);
    const rest = Object.assign({}, r);
    delete rest.summary;
    el.append(h("details", {}, h("summary", {}, "The whole result (JSON)"), h("pre", {}, pretty(rest))));
  } else {
    el.append(h("pre", {}, pretty(r)));
  }
}

// A stuck workflow's error: the non-determinism message names the event
// and the script line; both are shown on their own lines when present.
function errorBlock(e) {
  const box = h("div", { className: "card" });
  if (!e) return box;
  const o = typeof e === "object" ? e : { message: String(e) };
  box.append(h("p", { className: "error" }, errorText(o)));
  const extra = [];
  for (const k of ["event", "seq", "event_seq", "line", "script", "where", "traceback"])
    if (o[k] !== undefined) extra.push(h("li", {}, k + ": " + pretty(o[k])));
  if (extra.length) box.append(h("ul", {}, extra));
  box.append(h("details", {}, h("summary", {}, "The error (JSON)"), h("pre", {}, pretty(e))));
  return box;
}

function findingsTable(findings) {
  return h("div", { className: "scroll" }, h("table", { className: "findings" },
    h("caption", { className: "muted" }, findings.length === 1 ? "1 finding" : findings.length + " findings"),
    h("thead", {}, h("tr", {}, ["Severity", "File", "Line", "Finding"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, findings.map((f) => h("tr", {},
      h("td", {}, f.severity || ""), h("td", {}, h("code", {}, f.file || f.path || "")),
      h("td", { className: "num" }, f.line !== undefined ? String(f.line) : ""),
      h("td", { className: "text" }, [f.title, f.body || f.message || f.comment || f.reason].filter(Boolean).join(": ")))))));
}

function paintArtifacts(el, id, list) {
  clear(el);
  if (!Array.isArray(list) || !list.length) return;
  el.append(h("h2", {}, "Artifacts"));
  el.append(h("div", { className: "scroll" }, h("table", { className: "artifacts" },
    h("thead", {}, h("tr", {}, ["File", "Size", "SHA-256", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, list.map((a) => h("tr", {},
      h("td", {}, h("code", {}, a.path)), h("td", { className: "num" }, fmtBytes(a.size)),
      h("td", {}, h("code", { title: a.sha256 }, String(a.sha256 || "").slice(0, 16) + "…")),
      h("td", {}, h("button", { type: "button", onclick: () => download(id, a) }, "Download " + a.path.split("/").pop()))))))));
}

function download(id, a) {
  return fetchDownload("/v1/workflows/" + encodeURIComponent(id) + "/artifacts/" + encodeURIComponent(a.sha256),
    a.path.split("/").pop() || "artifact");
}

// A download through fetch (the token is a header, never in a URL).
async function fetchDownload(path, name) {
  const res = await fetch(path, { headers: authHeaders() });
  if (!res.ok) { alert("download failed: " + res.status); return; }
  const url = URL.createObjectURL(await res.blob());
  const link = h("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// ---- the transcript: domain events as they come, model text as it streams

function transcriptTab(panel, id, onChange) {
  const list = h("ol", { className: "transcript", "aria-label": "Transcript" });
  // "Fork from here" (each item's head has the button): one form open at a time
  list.addEventListener("click", (ev) => {
    const b = ev.target.closest("button.fork-here");
    if (!b) return;
    ev.stopPropagation();
    const li = b.closest("li");
    const open = li.querySelector(":scope > form.fork-form");
    for (const f of list.querySelectorAll("form.fork-form")) f.remove();
    if (open) return; // a second click closes it
    const form = forkForm(id, Number(b.dataset.seq));
    li.append(form);
    form.querySelector("input").focus();
  });
  const more = h("button", { type: "button", hidden: true }, "Show earlier events");
  const liveBox = h("div", { "aria-live": "off" });
  panel.append(more, list, liveBox);
  const events = [];
  let shownFrom = 0, pending = [], scheduled = false, live = new Map(), done = false;
  const decided = new Set();
  const delegations = new Map(); // a delegate call's id -> its one item (delegationPart)
  more.addEventListener("click", () => {
    const from = Math.max(0, shownFrom - TRANSCRIPT_WINDOW);
    const frag = document.createDocumentFragment();
    const older = new Map(); // the earlier window's delegations, grouped among themselves
    for (let i = from; i < shownFrom; i++) {
      const item = delegationPart(older, events[i]);
      if (item !== null) frag.append(item || eventItem(id, events[i]));
    }
    list.prepend(frag);
    shownFrom = from;
    more.hidden = shownFrom === 0;
  });
  function flush() {
    scheduled = false;
    const batch = pending;
    pending = [];
    for (const e of batch) if (e.type === "approval.decided" && e.payload) decided.add(String(e.payload.request_id));
    // a long backlog (a history of 20,000 events) renders only its window
    let todo = batch;
    if (batch.length >= TRANSCRIPT_WINDOW) {
      clear(list);
      todo = batch.slice(-TRANSCRIPT_WINDOW);
      shownFrom = events.length - todo.length;
    }
    const frag = document.createDocumentFragment();
    for (const e of todo) {
      const merged = delegationPart(delegations, e);
      if (merged === null) continue; // drawn in its delegation's item
      const item = merged || eventItem(id, e);
      if (e.type === "approval.requested" && e.payload) item.dataset.rid = String(e.payload.request_id);
      frag.append(item);
    }
    list.append(frag);
    // a decided request keeps no buttons
    for (const li of list.querySelectorAll('li[data-type="approval.requested"]'))
      if (decided.has(li.dataset.rid)) for (const d of li.querySelectorAll(".decide")) d.remove();
    // keep the window: drop the oldest rendered items past it
    let extra = list.children.length - TRANSCRIPT_WINDOW;
    while (extra-- > 0) { list.firstChild.remove(); shownFrom++; }
    more.hidden = shownFrom === 0;
    // the browser's own timings, for tests/bench/web_bench.sh
    if (batch.length && !performance.getEntriesByName("transcript-first").length) performance.mark("transcript-first");
    if (done && !panel.hasAttribute("data-loaded")) { panel.setAttribute("data-loaded", "true"); performance.mark("transcript-loaded"); }
    if (batch.length) onChange();
  }
  function liveText(p) {
    const key = p.step + "/" + (p.attempt || 1);
    let box = live.get(key);
    if (!box) {
      const text = h("div", { className: "text" });
      box = { el: h("div", { className: "ev live agent-message", "data-step": String(p.step) },
        h("div", { className: "head" }, h("span", { className: "kind" }, "model writing…"),
          h("span", {}, "step " + p.step + (p.attempt > 1 ? ", attempt " + p.attempt : ""))), text), text };
      live.set(key, box);
      liveBox.append(box.el);
      onChange(); // a new turn or attempt: what the header says changed
    }
    const d = p.delta || {};
    if (d.type === "text" && typeof d.text === "string") box.text.append(document.createTextNode(d.text));
    else if (d.type === "tool_call") box.text.append(document.createTextNode(d.name ? "\n→ " + d.name : ""));
  }
  const sub = stream("/v1/workflows/" + encodeURIComponent(id) + "/events", (f) => {
    if (f.event === "agent.delta") {
      if (f.data && f.data.payload) liveText(f.data.payload);
      return;
    }
    if (f.event === "end") {
      done = true;
      panel.setAttribute("data-ended", f.data.status || "");
      for (const b of live.values()) b.el.remove();
      live.clear();
      if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
      onChange();
      return;
    }
    const e = f.data;
    if (!e || typeof e.seq !== "number") return;
    if (e.type === "agent.message") { for (const b of live.values()) b.el.remove(); live.clear(); }
    events.push(e);
    pending.push(e);
    if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
  }, { after: 0 });
  return sub;
}

// ---- a delegation: the delegate call's events (tool.requested,
// delegation.started, delegation.ended, tool.result) drawn as one item that
// opens the sub-session it started

// The event's part of a delegation: the item when it is the delegation's
// first event or its item is no longer in the list (to add), null when it was
// drawn into its delegation's item, undefined when it is not a delegation's.
// map: call id -> delegation.
function delegationPart(map, e) {
  const p = e.payload || {};
  const mine = ((e.type === "tool.requested" || e.type === "tool.result") && p.tool === "delegate") ||
    e.type === "delegation.started" || e.type === "delegation.ended";
  if (!mine || p.id === undefined || p.id === null) return undefined;
  const key = String(p.id);
  let d = map.get(key);
  // a call id the model uses again in a later turn is another delegation
  if (d && d.done && e.type === "tool.requested") d = null;
  const fresh = !d;
  if (fresh) {
    d = { parts: {}, done: false, el: h("li", { className: "ev delegation", "data-type": "delegation", "data-seq": String(e.seq), "data-call": key }) };
    d.first = e;
    d.el.addEventListener("click", (ev) => {
      if (!d.child || ev.target.closest("a, button, summary, details, input, textarea, label, form")) return;
      location.hash = sessionHref(d.child);
    });
    map.set(key, d);
  }
  d.parts[e.type] = e;
  if (e.type === "tool.result") d.done = true;
  if (e.seq < d.first.seq) d.first = e;
  paintDelegation(d);
  // its item left the window (or a long backlog cleared the list): drawn again, last
  return fresh || d.el.parentNode === null ? d.el : null;
}

function paintDelegation(d) {
  const req = (d.parts["tool.requested"] || {}).payload || {}, st = (d.parts["delegation.started"] || {}).payload;
  const en = (d.parts["delegation.ended"] || {}).payload, res = (d.parts["tool.result"] || {}).payload;
  const args = req.args && typeof req.args === "object" ? req.args : {};
  d.child = (st && st.child) || (en && en.child) || (res && res.child) || null;
  const objective = (st && st.objective) || args.objective;
  const status = en ? (en.ok ? "completed" : String(en.outcome || "failed")) : d.child ? "running" : res ? "refused" : "asked";
  const el = clear(d.el);
  el.dataset.status = status;
  if (d.child) { el.dataset.child = d.child; el.classList.add("opens"); }
  const tools = (st && st.tools) || args.tools;
  el.append(head(d.first, "delegation" + (d.child ? " · sub-session " + d.child : "")),
    objective ? h("p", { className: "text" }, String(objective)) : null,
    h("p", { className: "deleg-line" },
      d.child ? h("a", { href: sessionHref(d.child), className: "open-child" }, "Open sub-session " + d.child) : null,
      d.child ? " " : null, statusBadge(status),
      Array.isArray(tools) ? h("span", { className: "muted" }, " tools: " + tools.join(", ")) : null),
    en && typeof en.tokens === "number" ? h("p", { className: "muted deleg-spend" },
      num(en.tokens) + " tokens · " + plural(en.turns, "turn") + " · " + plural(en.tool_calls, "tool call") +
      (en.charged_reservation ? " (its spend unknown: charged its whole reservation)" : "")) : null,
    res ? (res.denied && !d.child ? h("p", { className: "reason" }, String(res.content || "")) : folded(res.content !== undefined ? res.content : res)) : null,
    jsonExpander(Object.values(d.parts).sort((a, b) => a.seq - b.seq).map((e) => ({ seq: e.seq, type: e.type, payload: e.payload })), "Its events (JSON)"));
}

function head(e, label) {
  return h("div", { className: "head" }, h("span", { className: "kind" }, label),
    h("span", {}, "#" + e.seq), h("time", { datetime: new Date(e.time).toISOString() }, fmtTime(e.time)),
    // engine fork at this event: the token starts the fork and reads its source
    can("start") && can("read") ? h("button", { type: "button", className: "fork-here link", "data-seq": String(e.seq),
      "aria-label": "Fork from here: event #" + e.seq }, "Fork from here") : null);
}

// "Fork from here" on a transcript item: a form under it (the fork's id, an
// input patch, the model, as `engine fork` takes them) that asks
// POST /v1/workflows/{id}/fork at the item's event and opens the fork.
function forkForm(id, seq) {
  const safe = domId(id + "-" + seq);
  const newId = h("input", { id: "fork-id-" + safe, placeholder: "default: " + id + ".fork-N", size: 24, spellcheck: "false" });
  const patch = h("textarea", { id: "fork-patch-" + safe, rows: 3, cols: 40, spellcheck: "false",
    placeholder: '{"objective": "…"} (a JSON merge patch on the input)' });
  const model = h("textarea", { id: "fork-model-" + safe, rows: 2, cols: 40, spellcheck: "false",
    placeholder: '{"name": "…", "provider": "…"} (an agent session\'s model from here on)' });
  const out = h("p", { className: "muted fork-out", role: "status" });
  const form = h("form", { className: "fork-form card", "data-seq": String(seq), onsubmit: async (ev) => {
    ev.preventDefault();
    const body = { at: seq };
    if (newId.value.trim()) body.id = newId.value.trim();
    for (const [field, el, what] of [["input_patch", patch, "the input patch"], ["model", model, "the model"]]) {
      if (!el.value.trim()) continue;
      try { body[field] = JSON.parse(el.value); } catch (err) {
        out.textContent = what + " is not JSON: " + err.message;
        out.className = "error fork-out";
        el.focus();
        return;
      }
    }
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    out.className = "muted fork-out";
    out.textContent = "forking…";
    try {
      const f = await api("/v1/workflows/" + encodeURIComponent(id) + "/fork", { method: "POST", body });
      const fid = f && (f.id || (f.workflow && f.workflow.id));
      clear(out).append("forked: ", h("a", { href: sessionHref(fid), className: "fork-made" }, fid));
      location.hash = sessionHref(fid);
    } catch (err) {
      out.className = "error fork-out";
      out.textContent = "not forked: " + err.message;
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  } },
  h("h3", {}, "Fork from #" + seq),
  h("p", { className: "muted" }, "A new session with this one's history up to event #" + seq + ", then run on live with what you change."),
  h("div", { className: "actions" },
    h("label", { for: "fork-id-" + safe }, "Fork's id (optional)", newId),
    h("label", { for: "fork-patch-" + safe }, "Input patch (JSON, optional)", patch),
    h("label", { for: "fork-model-" + safe }, "Model (JSON, optional)", model)),
  h("div", { className: "actions" }, h("button", { type: "submit", className: "approve" }, "Fork"),
    h("button", { type: "button", onclick: () => form.remove() }, "Close")),
  out);
  return form;
}

// ---- event kinds, as web/event_kinds.json describes them (its "about"
// says why one file: the terminal draws the same shapes from it)

// The value at a dotted path of o ("result.verdict"), or undefined.
function pathGet(o, path) {
  let v = o;
  for (const k of String(path).split(".")) v = v !== null && typeof v === "object" ? v[k] : undefined;
  return v === null ? undefined : v;
}
function textOf(v) { return typeof v === "string" ? v : JSON.stringify(v); }

// A line template: {field}, {field:N} (its first N characters), [...] left
// out when a field inside is missing. null when a field outside is missing.
function fillTemplate(tpl, o) {
  let missing = false;
  const fill = (part, opt) => part.replace(/\{([^}:]+)(?::(\d+))?\}/g, (m, f, n) => {
    const v = pathGet(o, f);
    if (v === undefined) { if (opt) opt.missing = true; else missing = true; return ""; }
    const t = textOf(v);
    return n ? Array.from(t).slice(0, +n).join("") : t;
  });
  const out = tpl.replace(/\[([^\]]*)\]|([^[]+)/g, (m, inner, plain) => {
    if (plain !== undefined) return fill(plain);
    const opt = {};
    const t = fill(inner, opt);
    return opt.missing ? "" : t;
  });
  return missing ? null : out;
}

// The review shape: verdict, summary and the findings table.
function reviewShape(d, o, digest) {
  const verdict = pathGet(o, d.verdict), summary = pathGet(o, d.summary), findings = pathGet(o, d.findings);
  if (verdict === undefined && summary === undefined && findings === undefined) return null;
  if (digest) {
    const n = Array.isArray(findings) ? findings.length : 0;
    return [h("p", {}, "a review with " + n + (n === 1 ? " finding" : " findings") + (verdict !== undefined ? ", verdict " + textOf(verdict) : ""))];
  }
  return [verdict !== undefined ? h("p", { className: "verdict" }, "Verdict: ", h("strong", {}, textOf(verdict))) : null,
    summary !== undefined ? h("p", { className: "text" }, textOf(summary)) : null,
    Array.isArray(findings) ? findingsTable(findings) : null];
}

// The elements of o shown as its kind d says; null when d cannot show it.
function kindShape(d, o, digest) {
  if (!d || !o || typeof o !== "object") return null;
  switch (d.shape) {
  case "command": {
    const c = pathGet(o, d.command);
    return c === undefined ? null : [h("code", { className: "cmd", "aria-label": "shell command" }, textOf(c))];
  }
  case "line": {
    const t = fillTemplate(d.line || "", o);
    return t === null ? null : [h("p", { className: "kind-line" }, t)];
  }
  case "file": {
    const p = pathGet(o, d.path), c = pathGet(o, d.content);
    if (p === undefined || typeof c !== "string") return null;
    const lines = c.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    const shown = lines.filter((l) => l !== "").slice(0, d.lines || 4);
    const size = new TextEncoder().encode(c).length;
    return [h("p", {}, h("code", {}, textOf(p)), " · " + fmtBytes(size) + ", " + lines.length + (lines.length === 1 ? " line" : " lines")),
      digest ? null : h("pre", { className: "glimpse" }, shown.join("\n") + (lines.length > shown.length ? "\n…" : ""))];
  }
  case "review":
    return reviewShape(d, o, digest);
  default:
    return null;
  }
}

// The full JSON, one click away.
function jsonExpander(v, what) {
  return h("details", { className: "json" }, h("summary", {}, (what || "JSON")), h("pre", {}, pretty(v)));
}

// A tool call's arguments as its kind shows them (digest: in a line), then
// the JSON behind an expander.
function argsBlock(args, tool, digest) {
  const d = state.kinds.tools && state.kinds.tools[tool];
  const shown = kindShape(d, args, digest);
  return [...(shown || []), jsonExpander(args, shown ? "Arguments (JSON)" : "Arguments: " + JSON.stringify(args).slice(0, 80))];
}

// The model's final answer when it is a result (a JSON object with one of
// the fields the "result" kind names): its shape, else null.
function finalAnswer(text) {
  if (typeof text !== "string" || !/^\s*\{/.test(text)) return null;
  let o;
  try { o = JSON.parse(text); } catch (e) { return null; }
  const shown = kindShape(state.kinds.result, o, false);
  return shown ? [h("p", { className: "muted" }, "the final answer"), ...shown, jsonExpander(o, "The answer (JSON)")] : null;
}

function folded(text) {
  if (typeof text !== "string") return jsonExpander(text, "Output (JSON)");
  const t = text;
  if (t.length <= FOLD_CHARS) return h("pre", {}, t);
  return h("details", {}, h("summary", {}, "Output, " + t.length.toLocaleString() + " characters"), h("pre", {}, t));
}

function eventItem(id, e) {
  const p = e.payload || {};
  const li = (cls, label, ...body) => h("li", { className: "ev " + cls, "data-seq": String(e.seq), "data-type": e.type }, head(e, label), ...body);
  switch (e.type) {
  case "session.created":
    return li("", "session created", p.objective ? h("p", { className: "text" }, p.objective) : null,
      p.identity ? h("p", { className: "muted" }, "by " + p.identity) : null);
  case "session.status":
    return li("", "status", h("span", {}, String(p.status || "")), p.request_id ? h("span", { className: "muted" }, " (" + p.request_id + ")") : null);
  case "agent.message":
    return li("agent-message", "assistant" + (p.turn ? " · turn " + p.turn : ""),
      finalAnswer(p.text) || h("div", { className: "text" }, typeof p.text === "string" ? p.text : pretty(p.text)),
      p.usage ? h("div", { className: "muted" }, (p.usage.input_tokens || 0) + " in / " + (p.usage.output_tokens || 0) + " out tokens") : null);
  case "user.message":
    return li("", "user", h("div", { className: "text" }, String(p.text || "")), p.by ? h("div", { className: "muted" }, "by " + p.by) : null);
  case "tool.requested":
    return li("tool", "tool call · " + p.tool, argsBlock(p.args, p.tool, false));
  case "tool.result":
    return li("tool" + (p.ok === false ? " denied" : ""), "tool result · " + p.tool + (p.ok === false ? (p.denied ? " (denied)" : " (error)") : ""),
      folded(p.content !== undefined ? p.content : p));
  case "approval.requested":
    return li("approval", "approval requested · " + (p.tool || p.kind || ""),
      p.reason ? h("p", { className: "reason" }, "policy: " + p.reason) : null,
      p.args !== undefined ? argsBlock(p.args, p.tool, true) : null, p.update !== undefined ? jsonExpander(p.update, "The update (JSON)") : null,
      approvalButtons(id, p.request_id));
  case "approval.decided":
    return li(p.approved ? "approved" : "denied", p.approved ? "approved" : "denied",
      h("p", {}, (p.approved ? "Approved" : "Denied") + (p.approver ? " by " + p.approver : "") + (p.reason ? ": " : ""),
        p.reason ? h("span", { className: "reason" }, p.reason) : null));
  case "approval.overruled":
    return li("denied", "approval overruled by policy", h("p", { className: "reason" }, String(p.reason || "")));
  case "limit.exceeded":
    return li("limit", "limit exceeded", h("p", {}, p.limit + ": " + pretty(p.value) + " of " + pretty(p.max)));
  case "sandbox.reprovisioned":
    return li("limit", "sandbox provisioned again · " + String(p.host || ""),
      h("p", { className: "reason" }, String(p.reason || "")),
      h("p", { className: "muted" }, "was " + String(p.from_container || "").slice(0, 12) + " on " + String(p.from_host || "?") +
        "; files written before are gone"));
  case "artifact.saved":
    return li("", "artifact saved", h("p", {}, h("code", {}, String(p.path)), " · " + fmtBytes(p.size)));
  case "review.draft":
    return li("approval", "review draft · " + (p.event || ""), p.summary ? h("p", { className: "text" }, String(p.summary)) : null,
      Array.isArray(p.findings) ? findingsTable(p.findings) : null);
  case "session.completed":
    return li("approved", "session completed", h("p", {}, String(p.outcome || "")));
  case "session.failed":
    return li("failed", "session failed", h("p", { className: "error" }, errorText(p.error || p)));
  default: {
    const shown = kindShape(state.kinds.events && state.kinds.events[e.type], p, false);
    if (shown) return li("", e.type, ...shown, jsonExpander(p));
    return li("", e.type, Object.keys(p).length ? jsonExpander(p, "Payload (JSON)") : null);
  }
  }
}

// Approve / deny with a reason, only for a token with the approve scope.
function approvalButtons(id, rid) {
  if (!can("approve") || !rid) return null;
  const safe = domId(id + "-" + rid);
  const reason = h("input", { id: "reason-" + safe, placeholder: "why (recorded with your name)", size: 28 });
  const out = h("span", { role: "status", className: "muted" });
  const send = (approved) => async () => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    try {
      await api("/v1/workflows/" + encodeURIComponent(id) + "/approvals/" + encodeURIComponent(rid),
        { method: "POST", body: { approved, reason: reason.value } });
      out.textContent = approved ? "approved" : "denied";
    } catch (e) {
      out.textContent = e.message;
      for (const b of box.querySelectorAll("button")) b.disabled = false;
    }
  };
  const box = h("div", { className: "actions decide" },
    h("label", { for: "reason-" + safe }, "Reason", reason),
    h("button", { type: "button", className: "approve", onclick: send(true) }, "Approve"),
    h("button", { type: "button", className: "deny", onclick: send(false) }, "Deny"), out);
  return box;
}

// ---- the engine's history: virtualised rows, so 20,000 events open at once

function historyTab(panel, id) {
  const box = h("div", { className: "history", tabIndex: 0, role: "list", "aria-label": "Engine history" });
  const spacer = h("div", { className: "spacer" });
  const info = h("p", { className: "muted", "aria-live": "polite" }, "Loading the history…");
  const detail = h("pre", { hidden: true });
  box.append(spacer);
  panel.append(info, box, detail);
  let items = [];
  function paint() {
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_HEIGHT) - 10);
    const last = Math.min(items.length, first + Math.ceil(box.clientHeight / ROW_HEIGHT) + 20);
    clear(spacer);
    for (let i = first; i < last; i++) {
      const e = items[i];
      const payload = e.payload === null || e.payload === undefined ? "" : JSON.stringify(e.payload);
      const row = h("div", { className: "row", role: "listitem", tabIndex: -1, style: undefined },
        "#" + e.seq + "  " + e.type + (e.name ? "  " + e.name : "") + (e.ref ? "  ref " + e.ref : "") + "  " + payload.slice(0, 300));
      row.style.top = i * ROW_HEIGHT + "px";
      row.addEventListener("click", () => { detail.hidden = false; detail.textContent = pretty(e); });
      spacer.append(row);
    }
  }
  box.addEventListener("scroll", () => requestAnimationFrame(paint), { passive: true });
  box.addEventListener("keydown", (ev) => {
    const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 20, PageUp: -20 }[ev.key];
    if (step) { box.scrollTop += step * ROW_HEIGHT; ev.preventDefault(); }
    if (ev.key === "Home") { box.scrollTop = 0; ev.preventDefault(); }
    if (ev.key === "End") { box.scrollTop = box.scrollHeight; ev.preventDefault(); }
  });
  api("/v1/workflows/" + encodeURIComponent(id) + "/history").then((data) => {
    items = data.events || data.history || [];
    spacer.style.height = items.length * ROW_HEIGHT + "px";
    info.textContent = items.length.toLocaleString() + " events (select a row for all of it)";
    paint();
    panel.setAttribute("data-loaded", "true");
    performance.mark("history-loaded");
  }).catch((e) => { info.textContent = String(e.message); });
}

// ------------------------------------------------------------- memory ---
// The knowledge and preferences sessions proposed and a person approved
// (docs/memory.md), each with where it came from; Revoke takes one out of
// every later session's context (the approve scope).

function memoryView(main) {
  const info = h("p", { className: "muted", "aria-live": "polite" });
  const kind = h("select", { id: "memory-kind" }, h("option", { value: "" }, "all kinds"),
    h("option", { value: "knowledge" }, "knowledge"), h("option", { value: "preferences" }, "preferences"));
  const table = h("table", { className: "memory" });
  main.append(h("h1", {}, "Memory"),
    h("p", { className: "muted" }, "Instructions are the operator's files; session state and the audit history are each session's own (its history and events)."),
    h("div", { className: "filters" }, h("label", { for: "memory-kind" }, "Kind ", kind)), info, table);
  async function load() {
    let data;
    try {
      data = await api("/v1/memory" + (kind.value ? "?kind=" + encodeURIComponent(kind.value) : ""));
    } catch (e) { info.textContent = e.message; return; }
    const items = data.memory || [];
    info.textContent = items.length ? num(items.length) + (items.length === 1 ? " entry" : " entries") : "No memory entries yet.";
    clear(table).append(h("thead", {}, h("tr", {}, h("th", {}, "Entry"), h("th", {}, "Kind"), h("th", {}, "Provenance"),
      h("th", {}, "Status"), h("th", {}, ""))));
    const body = h("tbody");
    for (const m of items) body.append(memoryRow(m, load));
    table.append(body);
    main.setAttribute("data-loaded", "true");
  }
  kind.addEventListener("change", load);
  load();
  return { stop() {} };
}

function memoryRow(m, reload) {
  const status = m.revoked
    ? h("td", {}, "revoked by " + (m.revoked_by || "?") + " " + fmtTime(m.revoked_at) + (m.revoke_reason ? ": " + m.revoke_reason : ""))
    : h("td", {}, "live");
  const out = h("span", { role: "status", className: "muted" });
  let action = null;
  if (!m.revoked && can("approve")) {
    const rid = "revoke-reason-" + domId(m.id);
    const reason = h("input", { id: rid, placeholder: "why (recorded with your name)", size: 22 });
    const button = h("button", { type: "button", className: "deny", onclick: async () => {
      button.disabled = true;
      try {
        await api("/v1/memory/" + encodeURIComponent(m.id) + "/revoke", { method: "POST", body: reason.value ? { reason: reason.value } : {} });
        reload();
      } catch (e) { out.textContent = e.message; button.disabled = false; }
    } }, "Revoke");
    action = h("div", { className: "actions" }, h("label", { for: rid }, "Reason", reason), button, out);
  }
  return h("tr", { "data-id": m.id },
    h("td", {}, h("p", { className: "text" }, m.text), m.evidence ? h("p", { className: "muted" }, "evidence: " + m.evidence) : null,
      h("code", {}, m.id)),
    h("td", {}, m.kind + (m.identity ? " of " + m.identity : "")),
    h("td", {}, "proposed by ", h("a", { href: sessionHref(m.session_id) }, m.session_id),
      " (request " + m.request_id + "), approved by " + m.approver + " " + fmtTime(m.approved_at)),
    status, h("td", {}, action));
}

// ------------------------------------------------------ approvals inbox ---

function approvalsView(main) {
  const list = h("div", { id: "inbox" });
  const info = h("p", { className: "muted", "aria-live": "polite" });
  main.append(h("h1", {}, "Approvals"), info, list);
  if (!can("approve")) main.insertBefore(h("p", { className: "muted" }, "This token has no approve scope: you can see the requests, not answer them."), list);
  const drafts = new Map();
  async function load() {
    let data;
    try { data = await api("/v1/approvals"); } catch (e) { info.textContent = e.message; return; }
    const items = (data.approvals || []).slice().sort((a, b) => a.since - b.since);
    info.textContent = items.length ? items.length + " waiting, oldest first" : "Nothing waits for an approval.";
    const keep = new Set(items.map((a) => a.session_id + "\u0000" + a.request_id));
    for (const card of [...list.children]) if (!keep.has(card.dataset.key)) card.remove();
    let prev = null;
    for (const a of items) {
      const key = a.session_id + "\u0000" + a.request_id;
      let card = [...list.children].find((c) => c.dataset.key === key);
      if (!card) { card = approvalCard(a, drafts); card.dataset.key = key; }
      if (prev ? prev.nextSibling !== card : list.firstChild !== card) list.insertBefore(card, prev ? prev.nextSibling : list.firstChild);
      prev = card;
    }
    main.setAttribute("data-loaded", "true");
  }
  load();
  const again = debounce(load, 150);
  const feed = feedFromNow((f) => {
    const t = f.data && f.data.type;
    if (!t || /^approval\.|^session\.(status|completed|failed)|^cancel/.test(t)) again();
  });
  return { stop() { feed.stop(); } };
}

function approvalCard(a, drafts) {
  const args = a.arguments;
  const hid = "ap-" + domId(a.session_id + "-" + a.request_id);
  const card = h("article", { className: "card approval-card", "aria-labelledby": hid },
    h("h2", { id: hid }, (a.tool || a.kind || "request") + " · ",
      h("a", { href: sessionHref(a.session_id) }, a.session_id)),
    h("p", { className: "muted" }, "waiting since " + fmtTime(a.since) + (a.deadline ? " · until " + fmtTime(a.deadline) : "") + " · request " + a.request_id),
    a.reason ? h("p", { className: "reason" }, "policy: " + a.reason) : null,
    args !== undefined && args !== null ? argsBlock(args, a.tool, !!(args && Array.isArray(args.findings))) : null,
    a.request && a.request.payload && a.request.payload.update !== undefined ? jsonExpander(a.request.payload.update, "The update (JSON)") : null);
  // a publish shows what would be published: the session's review draft
  if (/publish|review/.test((a.tool || "") + " " + (a.kind || "") + " " + a.request_id)) {
    const slot = h("div", { className: "draft" });
    card.append(slot);
    if (args && Array.isArray(args.findings)) slot.append(h("h3", {}, "Review to publish"), args.summary ? h("p", { className: "text" }, String(args.summary)) : null, findingsTable(args.findings));
    else reviewDraft(a.session_id, drafts).then((d) => {
      if (d) slot.append(h("h3", {}, "Review draft"), d.summary ? h("p", { className: "text" }, String(d.summary)) : null,
        Array.isArray(d.findings) ? findingsTable(d.findings) : null);
    });
  }
  const buttons = approvalButtons(a.session_id, a.request_id);
  if (buttons) card.append(buttons);
  return card;
}

async function reviewDraft(sessionId, cache) {
  if (cache.has(sessionId)) return cache.get(sessionId);
  let draft = null;
  try {
    const page = await api("/v1/workflows/" + encodeURIComponent(sessionId) + "/events?after=0");
    for (const e of page.events || []) if (e.type === "review.draft") draft = e.payload;
  } catch (e) { draft = null; }
  cache.set(sessionId, draft);
  return draft;
}

// The count beside "Approvals", kept live from the feed.
let countFeed = null;
function watchApprovalCount() {
  if (countFeed) countFeed.stop();
  const el = document.getElementById("approvals-count");
  const load = async () => {
    try {
      const d = await api("/v1/approvals");
      const n = (d.approvals || []).length;
      el.textContent = n ? String(n) : "";
      el.setAttribute("aria-label", n + " waiting");
    } catch (e) { /* shown elsewhere */ }
  };
  load();
  const again = debounce(load, 300);
  countFeed = feedFromNow((f) => { if (!f.data || /^approval\./.test(f.data.type || "")) again(); });
}

// ------------------------------------------------------ the start form ---
// #/start[/SCRIPT]: a workflow script of the server's (GET
// /v1/workflow-scripts), a form generated from the input schema it declares
// (docs/workflows.md "Declaring the input"), checked here with the schema's
// own errorMessage words, started as the token's identity; the server's
// refusal is shown as it says it. What the form cannot express is a JSON
// field; "Edit as JSON" shows the whole input as JSON.

// The one type a field is drawn as ("string", "integer", ...), or null.
function schemaType(s) {
  if (!s || typeof s !== "object") return null;
  if (Array.isArray(s.type)) return s.type.find((t) => t !== "null") || null;
  if (typeof s.type === "string") return s.type;
  if (Array.isArray(s.enum)) return "enum";
  return null;
}

// ---- the schema's checks, as lua/jsonschema.lua makes them (its subset,
// its errorMessage rules): [{path, message}]
function jsType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}
function typeOk(v, t) { const k = jsType(v); return k === t || (t === "number" && k === "integer"); }
function pathJoin(p, k) { return p ? p + "." + k : String(k); }
function schemaErrors(schema, value, path, out) {
  out = out || [];
  if (!schema || typeof schema !== "object") return out;
  const em = schema.errorMessage;
  const own = [];
  const fail = (keyword, dflt, v, key, at) => {
    let msg = dflt;
    if (typeof em === "string") msg = em;
    else if (em && typeof em === "object" && em[keyword] !== undefined) {
      msg = em[keyword];
      if (keyword === "required" && msg && typeof msg === "object") msg = msg[key] !== undefined ? msg[key] : dflt;
    }
    msg = String(msg).replace(/\{value\}/g, v === undefined ? "nil" : String(v)).replace(/\{key\}/g, key === undefined ? "" : key);
    if (typeof em === "string" && own.length) return; // one message for all its own errors: said once
    own.push({ path: at !== undefined ? at : path, message: msg });
  };
  const where = path || "input";
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeOk(value, t))) {
      fail("type", where + ": expected " + types.join(" or ") + ", got " + jsType(value), value);
      out.push(...own);
      return out;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)))
    fail("enum", where + ": must be one of " + schema.enum.map((e) => JSON.stringify(e)).join(", "), value);
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) fail("const", where + ": must be " + JSON.stringify(schema.const), value);
  if (typeof value === "string") {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) fail("minLength", where + ": shorter than " + schema.minLength + " characters", value);
    if (schema.maxLength !== undefined && n > schema.maxLength) fail("maxLength", where + ": longer than " + schema.maxLength + " characters", value);
    if (typeof schema.pattern === "string") {
      let re = null;
      try { re = new RegExp(schema.pattern, "u"); } catch (e) { re = null; }
      if (re && !re.test(value)) fail("pattern", where + ": does not match " + schema.pattern, value);
    }
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) fail("minimum", where + ": below " + schema.minimum, value);
    if (schema.maximum !== undefined && value > schema.maximum) fail("maximum", where + ": above " + schema.maximum, value);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) fail("exclusiveMinimum", where + ": must be above " + schema.exclusiveMinimum, value);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) fail("exclusiveMaximum", where + ": must be below " + schema.exclusiveMaximum, value);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) fail("minItems", where + ": fewer than " + schema.minItems + " items", value);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) fail("maxItems", where + ": more than " + schema.maxItems + " items", value);
    if (schema.uniqueItems === true) {
      // JSON's equality: an object's keys in any order
      const canon = (v) => v === null || typeof v !== "object" ? JSON.stringify(v)
        : Array.isArray(v) ? "[" + v.map(canon).join(",") + "]"
        : "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
      const seen = new Map();
      const again = value.findIndex((v, i) => { const k = canon(v); if (seen.has(k)) return true; seen.set(k, i); return false; });
      if (again >= 0) fail("uniqueItems", where + ": items " + (seen.get(canon(value[again])) + 1) + " and " + (again + 1) + " are the same", value);
    }
  }
  const isObj = value !== null && typeof value === "object" && !Array.isArray(value);
  if (isObj) {
    for (const k of schema.required || []) if (value[k] === undefined) fail("required", pathJoin(where === "input" ? "" : where, k) + " is missing", undefined, k, pathJoin(path, k));
    const props = schema.properties || {};
    for (const k of Object.keys(value)) {
      if (props[k] !== undefined) continue;
      if (schema.additionalProperties === false) fail("additionalProperties", where + ": unknown field '" + k + "'", value[k], k);
    }
  }
  out.push(...own);
  if (isObj) {
    const props = schema.properties || {};
    for (const k of Object.keys(value)) {
      if (props[k] !== undefined) schemaErrors(props[k], value[k], pathJoin(path, k), out);
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object") schemaErrors(schema.additionalProperties, value[k], pathJoin(path, k), out);
    }
  }
  if (Array.isArray(value) && schema.items && typeof schema.items === "object")
    value.forEach((v, i) => schemaErrors(schema.items, v, pathJoin(path, i + 1), out));
  return out;
}

// ---- the fields: each {el, path, read() -> value | undefined, set(v),
// error(msg)}; read throws {path, message} for text it cannot read
function fieldId(path) { return "in-" + domId(path); }
function fieldLabel(name, schema, required) {
  return [h("span", {}, schema.title || name), required ? h("span", { className: "req" }, " (required)") : null];
}
function helpFor(schema, id) {
  return schema.description ? h("span", { className: "help muted", id: id + "-help" }, schema.description) : null;
}
function leafField(name, schema, path, required, depth) {
  const id = fieldId(path), t = schemaType(schema);
  const err = h("span", { className: "field-error", id: id + "-err" });
  const described = [schema.description ? id + "-help" : null, id + "-err"].filter(Boolean).join(" ");
  const common = { id, name: path, "aria-describedby": described, "aria-required": required ? "true" : null };
  let input, read, set;
  const stringsList = t === "array" && schema.items && schemaType(schema.items) === "string";
  if (t === "enum" || (t === "string" && Array.isArray(schema.enum))) {
    input = h("select", common, h("option", { value: "" }, "—"), schema.enum.map((v, i) => h("option", { value: String(i) }, String(v))));
    read = () => (input.value === "" ? undefined : schema.enum[Number(input.value)]);
    set = (v) => { const i = schema.enum.findIndex((e) => JSON.stringify(e) === JSON.stringify(v)); input.value = i < 0 ? "" : String(i); };
  } else if (t === "boolean") {
    input = h("select", common, h("option", { value: "" }, "—"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    read = () => (input.value === "" ? undefined : input.value === "true");
    set = (v) => { input.value = v === true ? "true" : v === false ? "false" : ""; };
  } else if (t === "number" || t === "integer") {
    input = h("input", Object.assign({ type: "text", inputmode: t === "integer" ? "numeric" : "decimal", size: 14, spellcheck: "false" }, common));
    read = () => {
      const s = input.value.trim();
      if (!s) return undefined;
      const n = Number(s);
      if (!Number.isFinite(n)) throw { path, message: (path) + ": '" + s + "' is not a number" };
      return n;
    };
    set = (v) => { input.value = v === undefined ? "" : String(v); };
  } else if (t === "string") {
    input = depth === 0 ? h("textarea", Object.assign({ rows: 2, cols: 60 }, common)) : h("input", Object.assign({ type: "text", size: 40 }, common));
    read = () => (input.value === "" ? undefined : input.value);
    set = (v) => { input.value = v === undefined ? "" : String(v); };
  } else if (stringsList) {
    input = h("textarea", Object.assign({ rows: 3, cols: 40, spellcheck: "false" }, common));
    read = () => {
      const lines = input.value.split("\n").map((l) => l.trim()).filter((l) => l !== "");
      return lines.length || input.value.trim() ? lines : undefined;
    };
    set = (v) => { input.value = Array.isArray(v) ? v.join("\n") : ""; };
  } else { // what the form cannot express: JSON
    input = h("textarea", Object.assign({ rows: 2, cols: 50, spellcheck: "false", className: "json" }, common));
    read = () => {
      const s = input.value.trim();
      if (!s) return undefined;
      try { return JSON.parse(s); } catch (e) { throw { path, message: path + " is not JSON: " + e.message }; }
    };
    set = (v) => { input.value = v === undefined ? "" : JSON.stringify(v); };
  }
  const hint = stringsList ? " (one per line)" : !t || (t === "array") || t === "object" ? " (JSON)" : "";
  const el = h("div", { className: "field" },
    h("label", { for: id }, fieldLabel(name, schema, required), hint ? h("span", { className: "muted" }, hint) : null),
    input, helpFor(schema, id), err);
  if (schema.default !== undefined) set(schema.default);
  // changed: filled with something other than the schema's default
  const changed = () => { const v = read(); return v !== undefined && JSON.stringify(v) !== JSON.stringify(schema.default); };
  return { el, path, read, set, changed, error(msg) {
    err.textContent = msg || "";
    if (msg) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
  }, focus() { input.focus(); } };
}
function objectField(name, schema, path, required, depth) {
  const props = schema.properties || {};
  const req = new Set(Array.isArray(schema.required) ? schema.required : []);
  const kids = Object.keys(props).map((k) => {
    const s = props[k], child = pathJoin(path, k);
    return schemaType(s) === "object" && s.properties ? objectField(k, s, child, req.has(k), depth + 1)
      : leafField(k, s, child, req.has(k), depth + 1);
  });
  const err = h("span", { className: "field-error", id: fieldId(path) + "-err" });
  const body = [schema.description ? h("p", { className: "help muted" }, schema.description) : null, ...kids.map((k) => k.el), err];
  // an optional group starts folded: it is left out while nothing in it is filled
  const el = required
    ? h("fieldset", { className: "group" }, h("legend", {}, fieldLabel(name, schema, true)), body)
    : h("details", { className: "group" }, h("summary", {}, fieldLabel(name, schema, false)), h("fieldset", { className: "group" },
      h("legend", { className: "visually-hidden" }, name), body));
  let extra = {}; // what the JSON had that no field shows: kept as it was
  return {
    el, path, kids,
    // an optional group whose fields only hold their defaults is left out
    changed() { return Object.keys(extra).length > 0 || kids.some((k) => { try { return k.changed(); } catch (e) { return true; } }); },
    read() {
      const o = Object.assign({}, extra);
      let any = Object.keys(extra).length > 0;
      for (const k of kids) { const v = k.read(); if (v !== undefined) { o[k.path.split(".").pop()] = v; any = true; } }
      if (!required && !this.changed()) return undefined;
      return any ? o : undefined;
    },
    set(v) {
      const obj = v && typeof v === "object" && !Array.isArray(v) ? v : {};
      extra = {};
      for (const k of Object.keys(obj)) if (props[k] === undefined) extra[k] = obj[k];
      for (const k of kids) k.set(obj[k.path.split(".").pop()]);
      if (el.tagName === "DETAILS" && v !== undefined) el.open = true;
    },
    error(msg) { err.textContent = msg || ""; if (msg && el.tagName === "DETAILS") el.open = true; },
    focus() { if (el.tagName === "DETAILS") el.open = true; if (kids[0]) kids[0].focus(); },
  };
}
function allFields(f, out) { out = out || []; out.push(f); for (const k of f.kids || []) allFields(k, out); return out; }

function startView(main, chosen) {
  const pick = h("select", { id: "start-script", "aria-describedby": "start-about" }, h("option", { value: "" }, "— choose —"));
  const about = h("div", { id: "start-about", className: "about" });
  const idIn = h("input", { id: "start-id", size: 30, spellcheck: "false", "aria-describedby": "start-id-help" });
  const rawToggle = h("input", { type: "checkbox", id: "start-raw" });
  const raw = h("textarea", { id: "start-json", rows: 14, cols: 80, spellcheck: "false", className: "json", hidden: true, "aria-label": "The input as JSON" });
  const fieldsBox = h("div", { id: "start-fields" });
  const problems = h("div", { id: "start-problems", role: "alert" });
  const out = h("p", { id: "start-out", role: "status" });
  const go = h("button", { type: "submit", className: "approve", id: "start-go", disabled: true }, "Start");
  let scripts = [], current = null, root = null;
  main.append(h("h1", {}, "Start a session"),
    h("form", { className: "start-form card", id: "start-form", novalidate: true, onsubmit: submit },
      h("div", { className: "field" }, h("label", { for: "start-script" }, "Workflow"), pick), about,
      h("div", { className: "field" }, h("label", { for: "start-id" }, "Id (optional)"), idIn,
        h("span", { className: "help muted", id: "start-id-help" }, "Empty: the engine makes one. Starting the same id with the same input again is the same session.")),
      h("div", { className: "field inline" }, rawToggle, h("label", { for: "start-raw" }, "Edit the input as JSON")),
      fieldsBox, raw, problems, h("div", { className: "actions" }, go), out));
  pick.addEventListener("change", () => { location.hash = "#/start/" + encodeURIComponent(pick.value); });
  rawToggle.addEventListener("change", () => {
    if (rawToggle.checked) {
      let v = {};
      try { v = collect(); } catch (e) { v = {}; }
      raw.value = JSON.stringify(v, null, 2);
    } else if (root) {
      let v;
      try { v = JSON.parse(raw.value || "{}"); } catch (e) { rawToggle.checked = true; showProblems([{ message: "the input is not JSON: " + e.message }]); return; }
      fill(v);
    }
    paintMode();
  });
  function paintMode() {
    raw.hidden = !rawToggle.checked;
    fieldsBox.hidden = rawToggle.checked;
  }
  // the form's value (with what the JSON had that it does not show)
  function collect() { return root ? root.read() || {} : {}; }
  function fill(v) { root.set(v); }
  function showProblems(list) {
    clear(problems);
    if (root) for (const f of allFields(root)) f.error("");
    if (!list.length) return;
    problems.append(h("p", { className: "error" }, list.length === 1 ? "The input has a problem:" : "The input has " + list.length + " problems:"),
      h("ul", { className: "error" }, list.map((p) => h("li", {}, p.message))));
    if (!root || rawToggle.checked) return;
    const byPath = new Map(allFields(root).map((f) => [f.path, f]));
    let first = null;
    for (const p of list) {
      // the nearest field: the path, else its parent's
      let at = p.path || "";
      while (at && !byPath.has(at)) at = at.includes(".") ? at.slice(0, at.lastIndexOf(".")) : "";
      const f = byPath.get(at);
      if (f) { f.error(p.message); first = first || f; }
    }
    if (first) first.focus();
  }
  async function submit(ev) {
    ev.preventDefault();
    if (!current) return;
    out.textContent = "";
    let input;
    try {
      input = rawToggle.checked || !root ? JSON.parse(raw.value.trim() || "{}") : collect();
    } catch (e) {
      return showProblems([e && e.path !== undefined ? e : { message: "the input is not JSON: " + e.message }]);
    }
    if (current.input_schema) {
      const list = schemaErrors(current.input_schema, input, "");
      if (list.length) return showProblems(list);
    }
    showProblems([]);
    const body = { script: current.name, input };
    if (idIn.value.trim()) body.id = idIn.value.trim();
    go.disabled = true;
    out.className = "muted";
    out.textContent = "starting…";
    try {
      const made = await api("/v1/workflows", { method: "POST", body });
      const sid = made && made.id;
      out.textContent = "started " + sid;
      location.hash = sessionHref(sid);
    } catch (e) {
      out.className = "error";
      out.textContent = "not started: " + e.message; // the server's words, as it says them
      go.disabled = false;
    }
  }
  function choose(name) {
    current = scripts.find((s) => s.name === name) || null;
    clear(fieldsBox);
    clear(about);
    showProblems([]);
    root = null;
    go.disabled = !current || !can("start");
    if (!current) return;
    pick.value = current.name;
    if (current.description) about.append(h("pre", { className: "description", tabIndex: 0, "aria-label": "What " + current.name + " does" }, current.description));
    const schema = current.input_schema;
    if (current.input_schema_error) about.append(h("p", { className: "error" }, "Its input schema cannot be used: " + current.input_schema_error));
    if (schema && schemaType(schema) === "object" && schema.properties) {
      root = objectField("input", schema, "", true, -1);
      // the root's fields straight in the form, not in a group of their own
      fieldsBox.append(...root.kids.map((k) => k.el));
      rawToggle.disabled = false;
      rawToggle.checked = false;
    } else {
      about.append(h("p", { className: "muted" }, "This script declares no input schema the form can show: its input as JSON."));
      rawToggle.checked = true;
      rawToggle.disabled = true;
      raw.value = "{}";
    }
    if (!can("start")) out.textContent = "This token lacks the 'start' scope.";
    paintMode();
  }
  (async () => {
    let data;
    try { data = await api("/v1/workflow-scripts"); } catch (e) { out.className = "error"; out.textContent = e.message; return; }
    scripts = data.scripts || [];
    for (const s of scripts) pick.append(h("option", { value: s.name }, s.name + (s.input_schema ? "" : " (JSON input)")));
    if (!scripts.length) out.textContent = "The server's workflows directory has no scripts.";
    choose(chosen);
  })();
  return { stop() {} };
}

// ---- messages to a running session: POST /v1/workflows/{id}/messages
// (kind message or interrupt), for a session that takes them: an agent
// session (agent_session.lua, or a workflow that runs one: pr_review.lua,
// chat.lua), or any waiting on the signal session:input. Built once per
// view (a refresh only shows or hides it: a half-typed message stays).
const MESSAGE_SCRIPTS = /(^|\/)(agent_session|pr_review|chat)\.lua$/;
function takesMessages(s) {
  return MESSAGE_SCRIPTS.test(s.script || "") || !!(s.waits && s.waits.kind === "signal" && s.waits.signal === "session:input");
}
function messageForms(id) {
  const text = h("textarea", { id: "msg-text", rows: 2, cols: 60, "aria-describedby": "msg-help" });
  const out = h("p", { id: "msg-out", className: "muted", role: "status" });
  const send = async (kind) => {
    const body = { kind, text: text.value };
    if (kind === "message" && !text.value.trim()) { out.className = "error"; out.textContent = "type a message first"; text.focus(); return; }
    out.className = "muted";
    out.textContent = "sending…";
    try {
      const r = await api("/v1/workflows/" + encodeURIComponent(id) + "/messages", { method: "POST", body });
      out.textContent = (r.kind === "interrupt" ? "interrupt" : "message") + " delivered, sent by " + r.sent_by;
      text.value = "";
    } catch (e) { out.className = "error"; out.textContent = "not delivered: " + e.message; }
  };
  const el = h("section", { id: "talk", className: "talk card", "aria-labelledby": "talk-h", hidden: true },
    h("h2", { id: "talk-h" }, "Tell the session"),
    h("form", { id: "msg-form", onsubmit: (e) => { e.preventDefault(); send("message"); } },
      h("label", { for: "msg-text" }, "Message"), text,
      h("p", { id: "msg-help", className: "help muted" }, "A message reaches the agent at its next turn; an interrupt stops it where it is (the text, if any, is the reason) until a message comes."),
      h("div", { className: "actions" },
        h("button", { type: "submit", id: "msg-send", className: "primary" }, "Send message"),
        h("button", { type: "button", id: "msg-interrupt", className: "danger", onclick: () => send("interrupt") }, "Interrupt"))),
    out);
  return {
    el,
    update(s) { el.hidden = !(can("signal") && ["running", "waiting"].includes(s.status) && takesMessages(s)); },
  };
}

// --------------------------------------------------------------- start ---

window.addEventListener("hashchange", route);
document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/";
  location.reload();
});
boot();
