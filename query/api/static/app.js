// kafka-graphrag newsroom: the dashboard's one script. Plain JavaScript over the public /v1
// API, no framework and no build step. News text and LLM output are untrusted: they only ever
// reach the page through textContent, attribute setters and SVG/canvas drawing, never as HTML.
"use strict";

const KINDS = ["bootstrap", "emerged", "grew", "shrank", "split", "merged", "dissolved",
  "report_updated", "aliased", "unaliased", "headline"];
const view = document.getElementById("view");
let leaveView = () => {};  // the current view's clean-up (an open graph, say)

// ---- DOM: elements from data, never from HTML strings -----------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(href, text, attrs) {
  return el("a", { href, ...(attrs || {}) }, text);
}

function show(...nodes) {
  view.replaceChildren(...nodes);
}

function errorBox(message) {
  return el("div", { class: "error-box", role: "alert" }, message);
}

function fmtNumber(x, digits) {
  return Number(x).toLocaleString("en", { maximumFractionDigits: digits ?? 0 });
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "?";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}

// A line chart of [day, count] points, drawn as SVG elements (no markup parsed).
function sparkline(points, big) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", big ? "spark big" : "spark");
  svg.setAttribute("viewBox", "0 0 100 30");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const total = (points || []).reduce((sum, p) => sum + p[1], 0);
  svg.setAttribute("aria-label", `${total} mentions over ${(points || []).length} days`);
  if (points && points.length) {
    const days = points.map((p) => Date.parse(p[0]));
    const first = Math.min(...days);
    const span = Math.max(Math.max(...days) - first, 1);
    const top = Math.max(...points.map((p) => p[1]), 1);
    const line = document.createElementNS(ns, "polyline");
    const xy = points.map((p, i) => {
      const x = points.length === 1 ? 50 : ((days[i] - first) / span) * 100;
      return `${x.toFixed(1)},${(28 - (p[1] / top) * 26).toFixed(1)}`;
    });
    line.setAttribute("points", xy.join(" "));
    svg.append(line);
  }
  return svg;
}

// ---- the API: JSON in, JSON or a readable error out --------------------------------------

class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options) {
  const init = { credentials: "same-origin", ...(options || {}) };
  init.headers = { Accept: "application/json", "X-Requested-With": "kgrag-dashboard",
    ...(init.headers || {}) };
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiFailure(0, "unreachable", `The query service did not answer (${err.message}).`);
  }
  if (response.ok) return init.raw ? response : response.json();
  let code = "error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch (err) { /* not JSON: keep the status line */ }
  if (response.status === 401) askToSignIn(message);
  throw new ApiFailure(response.status, code, message);
}

// ---- signing in ------------------------------------------------------------------------------

const login = document.getElementById("login");
const loginMessage = document.getElementById("login-message");

function askToSignIn(message) {
  loginMessage.textContent = message || "";
  login.hidden = false;
  document.getElementById("api-key").focus();
}

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = document.getElementById("api-key").value;
  loginMessage.textContent = "";
  try {
    await api("/v1/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ api_key: key }),
    });
  } catch (err) {
    loginMessage.textContent = err.status === 401
      ? "That API key is not valid. Check it and try again."
      : err.message;
    return;
  }
  document.getElementById("api-key").value = "";
  login.hidden = true;
  start();
});

document.getElementById("signout").addEventListener("click", async () => {
  await api("/v1/session", { method: "DELETE" }).catch(() => {});
  stopLive();
  askToSignIn("Signed out.");
});

// ---- the status line ---------------------------------------------------------------------

async function refreshStatus() {
  const status = document.getElementById("status");
  try {
    const h = await fetch("/healthz", { credentials: "same-origin" }).then((r) => r.json());
    const snap = h.snapshot;
    const parts = [];
    if (snap) {
      parts.push(el("span", {}, `graph v${snap.version}`));
      parts.push(el("span", { class: "pill" }, `${ago(snap.age_s)} old`));
      parts.push(el("span", { class: "pill" }, `${fmtNumber(snap.counts.documents)} documents`));
    } else {
      parts.push(el("span", {}, "no graph yet"));
    }
    const lag = h.pending_changes;
    parts.push(el("span", { class: "pill" }, lag === null ? "lag ?" : `lag ${fmtNumber(lag)}`));
    parts.push(el("span", { class: `pill ${h.mode}` }, h.mode === "llm" ? "LLM mode" : "offline mode"));
    if (h.status !== "ok") parts.push(el("span", { class: "pill degraded", title: (h.reasons || []).join("\n") }, h.status));
    status.replaceChildren(...parts);
  } catch (err) {
    status.replaceChildren(el("span", { class: "error" }, "the service is not answering"));
  }
}

// ---- live events (server-sent, authenticated by the session cookie) ------------------------

let source = null;
const feed = [];  // newest first, kept across views
const feedListeners = new Set();

function startLive() {
  if (source) return;
  source = new EventSource("/v1/events?raw=true");
  for (const kind of KINDS) {
    source.addEventListener(kind, (message) => {
      let payload;
      try { payload = JSON.parse(message.data); } catch (err) { return; }
      feed.unshift(payload);
      feed.length = Math.min(feed.length, 200);
      for (const listener of feedListeners) listener(payload);
    });
  }
  source.addEventListener("error", () => {
    // EventSource reconnects by itself; a 401 (signed out) closes it for good
    if (source && source.readyState === EventSource.CLOSED) { source = null; }
  });
}

function stopLive() {
  if (source) source.close();
  source = null;
}

function eventLine(e, fresh) {
  const title = e.title || (e.kind === "bootstrap" ? "first graph" : e.community_id || "");
  const target = e.community_id ? link(`#/community/${encodeURIComponent(e.community_id)}`, title) : el("span", {}, title);
  const sizes = e.kind === "headline"
    ? ` ${(e.why || {}).documents ?? "?"} articles, ${(e.why || {}).expected_documents ?? "?"} expected`
    : (e.size !== undefined ? ` size ${e.previous_size ?? 0} → ${e.size}` : "");
  return el("li", { class: fresh ? "new" : "" },
    el("span", { class: `kind ${e.kind}` }, e.kind.replace("_", " ")), " ", target,
    el("span", { class: "muted" }, `${sizes} · v${e.snapshot_version ?? "?"}`));
}

// ---- citations: "[Data: Sources (3, 7); Entities (12, +more)]" become links ----------------

const CITATION = /\[Data:([^\]]*)\]/g;

function withCitations(text) {
  const out = [];
  let last = 0;
  for (const match of text.matchAll(CITATION)) {
    out.push(text.slice(last, match.index));
    out.push(citationLinks(match[1]));
    last = match.index + match[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function citationLinks(body) {
  const span = el("span", { class: "cite" }, "[");
  body.split(";").forEach((part, n) => {
    const m = part.trim().match(/^([A-Za-z ]+?)\s*\(([^)]*)\)$/);
    if (n) span.append("; ");
    if (!m) { span.append(part.trim()); return; }
    span.append(`${m[1]} `);
    m[2].split(",").map((s) => s.trim()).filter(Boolean).forEach((id, i) => {
      if (i) span.append(", ");
      if (/^\d+$/.test(id)) span.append(link(`#/cite/${encodeURIComponent(m[1])}/${id}`, id, { class: "citation" }));
      else span.append(id);
    });
  });
  span.append("]");
  return span;
}

const DATASET_PARAM = { Sources: "sources", Entities: "entities", Relationships: "relationships",
  Claims: "claims", Reports: "reports" };

async function showCitation(dataset, id) {
  const param = DATASET_PARAM[dataset];
  if (!param) return show(errorBox(`"${dataset}" is not a dataset citations name.`));
  const refs = await api(`/v1/references?${param}=${encodeURIComponent(id)}`);
  const record = ((refs.references || {})[dataset] || [])[0];
  if (!record) return show(errorBox(`${dataset} ${id} is not in graph version ${refs.snapshot_version}.`));
  if (dataset === "Sources") return go(`#/document/${encodeURIComponent(record.document_id)}?passage=${id}`);
  if (dataset === "Entities") return go(`#/entity/${encodeURIComponent(record.key)}`);
  if (dataset === "Reports") return go(`#/community/${encodeURIComponent(record.community_id)}`);
  const what = dataset === "Claims"
    ? [el("h1", {}, `Claim ${id}: ${record.type}`), el("p", {}, `${record.subject}: ${record.description}`)]
    : [el("h1", {}, `Relationship ${id}`),
       el("p", {}, link(`#/entity/${encodeURIComponent(record.source)}`, record.source), " — ",
         link(`#/entity/${encodeURIComponent(record.target)}`, record.target)),
       el("p", {}, record.description)];
  show(el("div", { class: "card" }, ...what));
}

function go(hash) {
  location.replace(hash);
}

// ---- storylines ------------------------------------------------------------------------------

function windowControls(params, onChange) {
  const preset = el("select", { id: "window", "aria-label": "Window" },
    ...[["last 7 days", "Last 7 days"], ["last 30 days", "Last 30 days"],
      ["last 90 days", "Last 90 days"], ["", "Custom…"]].map(([v, t]) =>
      el("option", { value: v, selected: params.since === v ? "selected" : null }, t)));
  const since = el("input", { type: "date", id: "since", "aria-label": "Since" });
  const until = el("input", { type: "date", id: "until", "aria-label": "Until" });
  if (params.since && !params.since.startsWith("last")) { preset.value = ""; since.value = params.since; }
  if (params.until) until.value = params.until;
  const apply = () => onChange(preset.value ? { since: preset.value } : { since: since.value, until: until.value });
  preset.addEventListener("change", apply);
  since.addEventListener("change", apply);
  until.addEventListener("change", apply);
  return el("div", { class: "controls" },
    el("label", {}, "Window", preset), el("label", {}, "Since", since), el("label", {}, "Until", until));
}

async function storylines(params) {
  params.since = params.since ?? "last 7 days";
  const table = el("tbody");
  const caption = el("p", { class: "muted" }, "loading…");
  const list = el("ul", { class: "feed", id: "live-feed" });
  for (const e of feed.slice(0, 50)) list.append(eventLine(e, false));
  const feedNote = el("p", { class: "muted" }, "Events appear here as the community job publishes them.");
  show(el("div", { class: "grid" },
    el("section", { class: "card" },
      el("h1", {}, "Emerging storylines"),
      windowControls(params, (p) => go(`#/?${new URLSearchParams(p)}`)),
      caption,
      el("table", { id: "storylines" },
        el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "Storyline"),
          el("th", {}, "Mentions"), el("th", { class: "num" }, "Articles"),
          el("th", { class: "num" }, "Expected"), el("th", { class: "num" }, "Size"))),
        table)),
    el("section", { class: "card" }, el("h2", {}, "Live"), feedNote, list)));

  async function load() {
    const q = new URLSearchParams({ sort: "emerging", limit: "20", timeline: "true" });
    if (params.since) q.set("since", params.since);
    if (params.until) q.set("until", params.until);
    const data = await api(`/v1/communities?${q}`);
    const rows = data.communities.map((c, i) => el("tr", { "data-community": c.id },
      el("td", { class: "num" }, i + 1),
      el("td", {}, link(`#/community/${encodeURIComponent(c.id)}`, c.title, { class: "storyline" }),
        el("div", { class: "muted" }, (c.summary || "").replace(CITATION, "").slice(0, 180))),
      el("td", {}, sparkline(c.timeline)),
      el("td", { class: "num" }, c.documents ?? ""),
      el("td", { class: "num" }, c.expected_documents !== undefined ? fmtNumber(c.expected_documents, 1) : ""),
      el("td", { class: "num" }, c.size)));
    table.replaceChildren(...rows);
    const w = data.window || {};
    caption.textContent = rows.length
      ? `${rows.length} storylines mentioned ${w.since || ""}${w.until ? ` to ${w.until}` : ""}, graph v${data.snapshot_version}`
      : `No storyline is mentioned in this window (graph v${data.snapshot_version}).`;
  }

  let timer = null;
  const listener = (e) => {
    feedNote.textContent = `Last event: ${e.kind} at graph v${e.snapshot_version ?? "?"}.`;
    list.prepend(eventLine(e, true));
    clearTimeout(timer);
    timer = setTimeout(() => load().catch((err) => caption.replaceChildren(errorBox(err.message))), 1500);
  };
  feedListeners.add(listener);
  leaveView = () => { feedListeners.delete(listener); clearTimeout(timer); };
  await load();
}

// ---- a community ---------------------------------------------------------------------------

function historyLine(item, self) {
  if (item.report) {
    return el("li", {}, el("span", { class: "kind report_updated" }, "report"), ` v${item.version} · report written`);
  }
  if (!item.event) {
    const kind = item.previous === null ? "appeared" : item.size > item.previous ? "grew" : item.size < item.previous ? "shrank" : "unchanged";
    const change = item.previous === null ? `size ${item.size}` : `size ${item.previous} → ${item.size}`;
    return el("li", {}, el("span", { class: `kind ${kind}` }, kind), ` v${item.version} · ${change}`);
  }
  const e = item.event;
  const why = e.why || {};
  const change = e.kind === "headline"
    ? `${why.documents ?? "?"} articles in ${why.since ?? "?"}..${why.until ?? "?"}`
    : e.kind === "bootstrap" ? "the first graph" : `size ${e.previous_size ?? 0} → ${e.size ?? "?"}`;
  const others = e.kind === "bootstrap" ? [] : [...(e.predecessors || []), ...(e.successors || [])].filter((x) => x !== self);
  return el("li", {},
    el("span", { class: `kind ${e.kind}` }, e.kind.replace("_", " ")), ` v${item.version} · ${change}`,
    others.length ? el("span", { class: "muted" }, " · with ",
      ...others.slice(0, 4).map((o, i) => [i ? ", " : "", link(`#/community/${encodeURIComponent(o)}`, o.slice(0, 8))])) : null);
}

async function community(id) {
  const [c, history] = await Promise.all([
    api(`/v1/communities/${encodeURIComponent(id)}`),
    api(`/v1/communities/${encodeURIComponent(id)}/history`).catch((err) => ({ error: err.message })),
  ]);
  const report = c.report;
  const findings = report ? report.findings.map((f) => el("div", { class: "finding" },
    el("h3", {}, f.summary), el("p", {}, ...withCitations(f.explanation || "")))) : [];
  const timeline = el("ul", { class: "timeline", id: "lineage" });
  if (history.error) timeline.append(el("li", { class: "error" }, `History unavailable: ${history.error}`));
  else {
    // lineage events, with the size history filling the versions no event names
    const items = history.events.map((e) => ({ version: e.snapshot_version ?? 0, event: e }));
    const named = new Set(items.map((i) => i.version));
    let previous = null;
    for (const [version, size] of history.size_history) {
      if (!named.has(version)) items.push({ version, size, previous });
      previous = size;
    }
    if (history.report_generated_in) items.push({ version: history.report_generated_in, report: true });
    items.sort((a, b) => a.version - b.version);
    for (const item of items) timeline.append(historyLine(item, c.id));
    if (!items.length) timeline.append(el("li", { class: "muted" }, "No history is known for this community yet."));
    if (history.partial) timeline.append(el("li", { class: "muted" }, "(older events were not read in time)"));
  }
  show(el("div", { class: "grid" },
    el("section", { class: "card" },
      el("p", { class: "muted" }, `Community ${c.community} · level ${c.level} · ${c.size} entities · rank ${c.rank ?? "?"}`
        + (report ? ` · report by ${report.mode === "llm" ? "the LLM" : "offline summary"}` : "")),
      el("h1", { id: "community-title" }, report ? report.title : c.title),
      el("p", { id: "community-summary" }, ...withCitations(report ? report.summary : c.summary || "")),
      report ? el("h2", {}, "Findings") : el("p", { class: "muted" }, "No report yet."),
      el("div", { id: "findings" }, ...findings),
      el("h2", {}, "Mentions over document time"), sparkline(c.timeline, true)),
    el("aside", {},
      el("section", { class: "card" }, el("h2", {}, "History"), timeline),
      el("section", { class: "card" }, el("h2", {}, "Hierarchy"),
        c.parent >= 0 ? el("p", {}, "Part of ", link(`#/community/${c.parent}`, `community ${c.parent}`)) : el("p", { class: "muted" }, "A top-level community."),
        c.children.length ? el("p", {}, "Holds ", ...c.children.map((n, i) => [i ? ", " : "", link(`#/community/${n}`, `community ${n}`)])) : null,
        el("p", {}, link(`#/graph/community/${encodeURIComponent(c.id)}`, "Draw its graph →"))),
      el("section", { class: "card" }, el("h2", {}, `Members (${c.members.length})`),
        el("div", { class: "tags" }, ...c.members.slice(0, 80).map((m) =>
          link(`#/entity/${encodeURIComponent(m.key)}`, m.title, { class: "tag" })))))));
}

// ---- an entity ---------------------------------------------------------------------------------

async function entity(key) {
  const e = await api(`/v1/entities/${encodeURIComponent(key)}`);
  const aliases = e.aliases.map((a) => el("span", { class: "tag", title: `${a.rule}: ${a.evidence}` }, a.title));
  show(el("div", { class: "grid" },
    el("section", { class: "card" },
      el("p", { class: "muted" }, `${e.type || "entity"} · ${e.frequency} text units · ${e.document_count ?? "?"} documents · first seen ${e.first_seen || "?"}, last ${e.last_seen || "?"}`),
      el("h1", { id: "entity-title" }, e.title),
      e.alias_of ? el("p", {}, "Also known as ", link(`#/entity/${encodeURIComponent(e.alias_of.key)}`, e.alias_of.title)) : null,
      el("p", { id: "entity-description" }, e.description),
      aliases.length ? el("div", {}, el("h3", {}, "Other names"), el("div", { class: "tags" }, ...aliases)) : null,
      el("h2", {}, "Mentions over document time"), sparkline(e.timeline, true),
      el("h2", {}, "Relationships"),
      el("table", {}, el("tbody", {}, ...e.relationships.map((r) => el("tr", {},
        el("td", {}, link(`#/entity/${encodeURIComponent(r.source)}`, r.source), " — ",
          link(`#/entity/${encodeURIComponent(r.target)}`, r.target)),
        el("td", {}, r.description), el("td", { class: "num" }, fmtNumber(r.weight, 1)))))),
      e.claims.length ? el("h2", {}, "Claims") : null,
      ...e.claims.map((c) => el("p", {}, el("span", { class: "kind" }, c.status), ` ${c.type}: ${c.description}`))),
    el("aside", {},
      el("section", { class: "card" }, el("h2", {}, "Documents"),
        el("ul", {}, ...e.sources.filter(Boolean).map((s) => el("li", {},
          link(`#/document/${encodeURIComponent(s.document_id)}?passage=${s.id}`, s.title || s.document_id),
          el("span", { class: "muted" }, ` ${String(s.published_at || "").slice(0, 10)}`))))),
      el("section", { class: "card" }, el("h2", {}, "Communities"),
        el("p", {}, ...Object.entries(e.communities).map(([level, n], i) => [i ? " · " : "", `level ${level}: `, link(`#/community/${n}`, `community ${n}`)])),
        el("p", {}, link(`#/graph/entity/${encodeURIComponent(e.key)}`, "Draw its neighbourhood →"))))));
}

// ---- a document ---------------------------------------------------------------------------------

async function documentPage(id, params) {
  const d = await api(`/v1/documents/${encodeURIComponent(id)}`);
  const cited = params.passage ? Number(params.passage) : null;
  const passages = d.passages.map((p) => el("div", { class: p.id === cited ? "passage cited" : "passage", id: `passage-${p.id}` },
    el("div", { class: "muted" }, `Source ${p.id}`), p.text));
  show(el("section", { class: "card" },
    el("p", { class: "muted" }, `${d.id} · ${String(d.published_at || "").slice(0, 10)}`),
    el("h1", { id: "document-title" }, d.title),
    d.text ? el("div", { class: "article" }, d.text) : null,
    el("h2", {}, "Passages"), ...passages));
  const target = cited !== null ? document.getElementById(`passage-${cited}`) : null;
  if (target) target.scrollIntoView({ block: "center" });
}

// ---- the graph -----------------------------------------------------------------------------------

function hue(n) {
  return `hsl(${((n ?? 0) * 137.5) % 360}, 55%, 55%)`;
}

async function graphPage(kind, id) {
  if (!kind) {
    show(el("section", { class: "card" }, el("h1", {}, "Graph"),
      el("p", {}, "Open a storyline or an entity and choose “Draw its graph”."),
      el("form", { class: "controls", onsubmit: (ev) => { ev.preventDefault(); go(`#/graph/entity/${encodeURIComponent(ev.target.elements.name.value)}`); } },
        el("label", {}, "Entity name or key", el("input", { name: "name", required: true })), el("button", { type: "submit" }, "Draw"))));
    return;
  }
  const q = new URLSearchParams({ [kind]: id, limit: "120" });
  const data = await api(`/v1/graph?${q}`);
  const container = el("div", { id: "graph", "data-nodes": "0" });
  const caption = el("p", { class: "muted", id: "graph-caption" },
    `${data.nodes.length} entities and ${data.edges.length} relationships · graph v${data.snapshot_version} · drag to pan, scroll to zoom, click an entity to open it`);
  show(el("section", { class: "card" }, el("h1", {}, kind === "entity" ? "Neighbourhood" : "Community graph"), caption, container));
  if (typeof window.cytoscape !== "function") {
    container.replaceWith(errorBox("The graph library did not load."));
    return;
  }
  const top = Math.max(...data.nodes.map((n) => n.degree), 1);
  const cy = window.cytoscape({
    container,
    elements: [
      ...data.nodes.map((n) => ({ data: { id: n.key, label: n.title, size: 14 + 30 * Math.sqrt(n.degree / top), color: hue(n.community), center: n.center ? 1 : 0 } })),
      ...data.edges.map((e) => ({ data: { id: `r${e.id}`, source: e.source, target: e.target, w: Math.min(1 + e.weight / 4, 6) } })),
    ],
    style: [
      { selector: "node", style: { label: "data(label)", width: "data(size)", height: "data(size)", "background-color": "data(color)", "font-size": 9, color: "#1d232b", "text-valign": "bottom", "text-margin-y": 3 } },
      { selector: "node[center = 1]", style: { "border-width": 3, "border-color": "#1d232b" } },
      { selector: "edge", style: { width: "data(w)", "line-color": "#c3ccd6", "curve-style": "haystack" } },
    ],
    layout: { name: "cose", animate: false, randomize: true, nodeRepulsion: () => 9000, idealEdgeLength: () => 70 },
    wheelSensitivity: 0.3,
  });
  cy.on("tap", "node", (event) => go(`#/entity/${encodeURIComponent(event.target.id())}`));
  container.setAttribute("data-nodes", String(cy.nodes().length));
  window.kgragGraph = cy;  // for tests and the curious: the drawn graph
  leaveView = () => { cy.destroy(); window.kgragGraph = null; };
}

// ---- ask ---------------------------------------------------------------------------------------------

async function ask(params) {
  const question = el("textarea", { id: "question", placeholder: "What happened with the Rotterdam strike?", required: true });
  if (params.q) question.value = params.q;
  const method = el("select", { id: "method", "aria-label": "Method" },
    ...[["local", "Local: about named things"], ["global", "Global: main themes"], ["basic", "Basic: nearest passages"], ["drift", "DRIFT: broad, then specific"]]
      .map(([v, t]) => el("option", { value: v }, t)));
  const answer = el("div", { class: "answer", id: "answer" });
  const meta = el("p", { class: "muted", id: "answer-meta" });
  const refs = el("div", { id: "references" });
  const submit = el("button", { type: "submit" }, "Ask");
  const form = el("form", { id: "ask-form" }, el("label", { for: "question" }, "Question"), question,
    el("div", { class: "controls" }, el("label", {}, "Method", method), submit));
  show(el("section", { class: "card" }, el("h1", {}, "Ask the news"), form),
    el("section", { class: "card" }, meta, answer, refs));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    answer.replaceChildren();
    refs.replaceChildren();
    meta.textContent = "asking…";
    let text = "";
    try {
      const response = await api(`/v1/query/${method.value}`, {
        method: "POST", raw: true,
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ question: question.value, stream: true }),
      });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let kind = "message";
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) kind = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
          }
          if (!data.length) continue;
          const payload = JSON.parse(data.join("\n"));
          if (kind === "status") meta.textContent = `answering from graph v${payload.snapshot_version}…`;
          else if (kind === "chunk") { text += payload.text; answer.textContent = text; }
          else if (kind === "error") throw new ApiFailure(0, payload.error.code, payload.error.message);
          else if (kind === "done") finish(payload.answer ?? text, payload);
        }
      }
    } catch (err) {
      meta.replaceChildren(errorBox(err.message));
    } finally {
      submit.disabled = false;
    }
  });

  function finish(full, result) {
    answer.replaceChildren(...withCitations(full));
    const tokens = (result.prompt_tokens || 0) + (result.completion_tokens || 0);
    meta.textContent = `${result.mode === "offline" ? "Offline mode (no LLM) · " : ""}graph v${result.snapshot_version} · `
      + `${result.llm_calls} LLM calls · ${fmtNumber(tokens)} tokens · $${Number(result.cost_usd || 0).toFixed(4)} · ${fmtNumber(result.elapsed_ms)} ms`;
    const lists = Object.entries(result.references || {}).filter(([, rows]) => rows.length).map(([dataset, rows]) =>
      el("div", {}, el("h3", {}, dataset), el("ul", {}, ...rows.map((r) => el("li", {},
        link(`#/cite/${dataset}/${r.id}`, `${r.id}`, { class: "citation" }), " ",
        r.title || r.description || `${r.source || ""} — ${r.target || ""}`)))));
    refs.replaceChildren(...(lists.length ? [el("h2", {}, "Cited")] : []), ...lists);
  }
}

// ---- routing ---------------------------------------------------------------------------------------

async function route() {
  leaveView();
  leaveView = () => {};
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === (parts[0] || "storylines"));
  }
  try {
    if (!parts.length) await storylines(params);
    else if (parts[0] === "community" && parts[1]) await community(parts[1]);
    else if (parts[0] === "entity" && parts[1]) await entity(parts[1]);
    else if (parts[0] === "document" && parts[1]) await documentPage(parts[1], params);
    else if (parts[0] === "graph") await graphPage(parts[1], parts[2]);
    else if (parts[0] === "ask") await ask(params);
    else if (parts[0] === "cite" && parts[2]) await showCitation(parts[1], parts[2]);
    else show(errorBox(`There is no page "${location.hash}". Go back to the storylines.`));
  } catch (err) {
    if (err.status === 401) return;  // the sign-in form is up
    const hint = err.code === "index_not_ready" || err.status === 503 ? " The graph may still be building; try again in a moment." : "";
    show(errorBox(`${err.message}${hint}`));
  }
}

async function start() {
  let session = { key_required: false, signed_in: true };
  try { session = await api("/v1/session"); } catch (err) { /* shown by the view */ }
  document.getElementById("signout").hidden = !session.key_required;
  if (!session.signed_in) { askToSignIn(""); return; }
  startLive();
  await route();
}

window.addEventListener("hashchange", route);
refreshStatus();
setInterval(refreshStatus, 10000);
start();
