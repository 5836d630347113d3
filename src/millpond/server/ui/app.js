// millpond's web UI: plain JavaScript, no build step. Hash routes:
//   #/runs                  runs list (state filter, sort, paging, auto-refresh)
//   #/runs/ID               run detail: the DAG as a graph, a task's inputs, outputs and log
//   #/experiments           experiments list
//   #/experiments/ID        the runs of one experiment
"use strict";

const API = "/apis/v2beta1";
const FINAL = new Set(["SUCCEEDED", "FAILED", "SKIPPED", "CANCELED"]);
const STATES = ["RUNNING", "PENDING", "SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"];
const REFRESH_MS = 3000;
const GRAPH_POLL_MS = 1000;
const LOG_POLL_MS = 700;

let timers = [];
let routeToken = 0;  // bumped on every route change: late answers of an old page are dropped

// ---- helpers -------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "className") el.className = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`);
  return body;
}

function every(ms, fn) {
  const token = routeToken;
  let stopped = false;
  const tick = async () => {
    if (stopped || token !== routeToken) return;
    try { await fn(); } catch (err) { setStatus(err.message, true); }
    if (!stopped && token === routeToken) timers.push(setTimeout(tick, ms));
  };
  tick();
  return () => { stopped = true; };
}

function clearTimers() {
  for (const t of timers) clearTimeout(t);
  timers = [];
}

function setStatus(text, isError) {
  const el = document.getElementById("status");
  el.textContent = text || "";
  el.style.color = isError ? "#ff8182" : "";
}

function stateBadge(state) {
  return h("span", { className: `state ${state}`, "data-state": state }, state || "UNKNOWN");
}

function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function duration(start, end) {
  if (!start) return "";
  const ms = (end ? new Date(end) : new Date()) - new Date(start);
  if (!(ms >= 0)) return "";
  const sec = Math.round(ms / 1000);
  if (sec < 60) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min}m ${sec % 60}s`;
  return `${Math.floor(min / 60)}h ${min % 60}m`;
}

function valueText(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

// ---- routing -------------------------------------------------------------

function route() {
  routeToken += 1;
  clearTimers();
  setStatus("");
  const main = document.getElementById("main");
  main.replaceChildren();
  const parts = (location.hash.replace(/^#\/?/, "") || "runs").split("/").map(decodeURIComponent);
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.nav === parts[0]);
  }
  if (parts[0] === "runs" && parts[1]) return runDetail(main, parts[1]);
  if (parts[0] === "experiments" && parts[1]) return runsList(main, parts[1]);
  if (parts[0] === "experiments") return experimentsList(main);
  return runsList(main, null);
}

// ---- runs list -----------------------------------------------------------

const experimentNames = new Map();

async function loadExperimentNames() {
  let token = "";
  do {
    const page = await getJSON(`${API}/experiments?page_size=1000&page_token=${encodeURIComponent(token)}`);
    for (const e of page.experiments || []) experimentNames.set(e.experiment_id, e.display_name);
    token = page.next_page_token || "";
  } while (token);
}

function runsList(main, experimentId) {
  const view = { state: "", sort: "created_at desc", pageSize: 20, tokens: [""], index: 0 };
  const title = h("h1", {}, experimentId ? "Runs of experiment" : "Runs");
  const stateSelect = h("select", { id: "state-filter", onchange: () => { view.state = stateSelect.value; restart(); } },
    h("option", { value: "" }, "all states"), STATES.map((st) => h("option", { value: st }, st)));
  const sizeSelect = h("select", { id: "page-size", onchange: () => { view.pageSize = +sizeSelect.value; restart(); } },
    [20, 50, 100].map((n) => h("option", { value: n }, n)));
  const body = h("tbody");
  const createdHeader = h("th", { className: "sortable", id: "sort-created", onclick: () => {
    view.sort = view.sort === "created_at desc" ? "created_at" : "created_at desc"; restart();
  } });
  const nameHeader = h("th", { className: "sortable", id: "sort-name", onclick: () => {
    view.sort = view.sort === "display_name" ? "display_name desc" : "display_name"; restart();
  } });
  const prev = h("button", { id: "prev-page", onclick: () => { view.index -= 1; load(); } }, "‹ Previous");
  const next = h("button", { id: "next-page", onclick: () => { view.index += 1; load(); } }, "Next ›");
  const info = h("span", { id: "page-info" });
  main.append(
    title,
    h("div", { className: "toolbar" }, h("label", {}, "State"), stateSelect, h("label", {}, "Per page"), sizeSelect,
      experimentId ? h("a", { href: "#/runs" }, "all runs") : null),
    h("table", { id: "runs" },
      h("thead", {}, h("tr", {}, nameHeader, h("th", {}, "State"), h("th", {}, "Experiment"), createdHeader,
        h("th", {}, "Duration"), h("th", {}, "Run ID"))),
      body),
    h("div", { className: "pager" }, prev, next, info),
  );

  if (experimentId) {
    getJSON(`${API}/experiments/${encodeURIComponent(experimentId)}`)
      .then((e) => { title.textContent = `Runs of experiment ${e.display_name}`; })
      .catch((err) => setStatus(err.message, true));
  }

  function restart() { view.tokens = [""]; view.index = 0; load(); }

  async function load() {
    const token = routeToken;
    const params = new URLSearchParams({ page_size: view.pageSize, sort_by: view.sort,
      page_token: view.tokens[view.index] || "" });
    if (view.state) {
      params.set("filter", JSON.stringify({ predicates: [{ key: "state", operation: "EQUALS", string_value: view.state }] }));
    }
    if (experimentId) params.set("experiment_id", experimentId);
    const page = await getJSON(`${API}/runs?${params}`);
    if (token !== routeToken) return;
    const runs = page.runs || [];
    if (runs.some((r) => r.experiment_id && !experimentNames.has(r.experiment_id))) await loadExperimentNames();
    if (token !== routeToken) return;
    view.tokens[view.index + 1] = page.next_page_token || "";
    const arrow = (field) => (view.sort === field ? " ▲" : view.sort === `${field} desc` ? " ▼" : "");
    createdHeader.textContent = "Created" + arrow("created_at");
    nameHeader.textContent = "Name" + arrow("display_name");
    body.replaceChildren(...runs.map((r) => h("tr", { className: "run-row", "data-run-id": r.run_id,
      onclick: () => { location.hash = `#/runs/${encodeURIComponent(r.run_id)}`; } },
      h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.display_name || r.run_id)),
      h("td", {}, stateBadge(r.state)),
      h("td", {}, r.experiment_id ? h("a", { href: `#/experiments/${encodeURIComponent(r.experiment_id)}`,
        onclick: (ev) => ev.stopPropagation() }, experimentNames.get(r.experiment_id) || r.experiment_id) : ""),
      h("td", { title: r.created_at }, fmtTime(r.created_at)),
      h("td", {}, duration(r.scheduled_at || r.created_at, r.finished_at)),
      h("td", { className: "muted" }, r.run_id.slice(0, 8)))));
    if (!runs.length) body.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No runs.")));
    const first = view.index * view.pageSize;
    info.textContent = `${runs.length ? first + 1 : 0}–${first + runs.length} of ${page.total_size ?? "?"}`;
    prev.disabled = view.index === 0;
    next.disabled = !page.next_page_token;
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  }

  every(REFRESH_MS, load);
}

// ---- experiments -----------------------------------------------------------

function experimentsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Experiments"),
    h("table", { id: "experiments" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Description"), h("th", {}, "Created"),
        h("th", {}, "Last run"))),
      body));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    const rows = [];
    let pageToken = "";
    do {
      const page = await getJSON(`${API}/experiments?page_size=200&sort_by=display_name&page_token=${encodeURIComponent(pageToken)}`);
      rows.push(...(page.experiments || []));
      pageToken = page.next_page_token || "";
    } while (pageToken && rows.length < 2000);
    if (token !== routeToken) return;
    body.replaceChildren(...rows.map((e) => h("tr", { className: "run-row", "data-experiment-id": e.experiment_id,
      onclick: () => { location.hash = `#/experiments/${encodeURIComponent(e.experiment_id)}`; } },
      h("td", {}, h("a", { href: `#/experiments/${encodeURIComponent(e.experiment_id)}` }, e.display_name)),
      h("td", { className: "wrap" }, e.description || ""),
      h("td", {}, fmtTime(e.created_at)),
      h("td", {}, fmtTime(e.last_run_created_at)))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No experiments.")));
  });
}

// ---- run detail ------------------------------------------------------------

function runDetail(main, runId) {
  const view = { scope: null, selected: null, nodes: [], byPath: new Map(), log: null };
  const header = h("div", { id: "run-header" });
  const crumbs = h("div", { className: "breadcrumbs" });
  const graph = h("div", { className: "graph", id: "graph" });
  const side = h("div", { className: "panel", id: "task-panel" }, h("span", { className: "muted" }, "Click a task to see its inputs, outputs and log."));
  main.append(header, h("div", { className: "detail" }, h("div", {}, crumbs, graph), side));

  const stop = every(GRAPH_POLL_MS, async () => {
    const token = routeToken;
    const data = await getJSON(`/ui-api/runs/${encodeURIComponent(runId)}/graph`);
    if (token !== routeToken) return;
    view.nodes = data.nodes;
    view.byPath = new Map(data.nodes.map((n) => [n.path, n]));
    renderHeader(data.run);
    renderGraph();
    if (view.selected && view.byPath.has(view.selected)) renderTask(view.byPath.get(view.selected), false);
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
    if (data.final && view.nodes.every((n) => FINAL.has(n.state) || !n.task_id)) stop();
  });

  function renderHeader(run) {
    header.replaceChildren(
      h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / ", run.display_name || run.run_id, " ", stateBadge(run.state)),
      h("div", { className: "kv" },
        h("div", {}, "Run ID"), h("div", {}, run.run_id),
        h("div", {}, "Pipeline"), h("div", {}, run.pipeline_name || ""),
        h("div", {}, "Experiment"), h("div", {}, run.experiment_id
          ? h("a", { href: `#/experiments/${encodeURIComponent(run.experiment_id)}` }, experimentNames.get(run.experiment_id) || run.experiment_id) : ""),
        h("div", {}, "Created"), h("div", {}, fmtTime(run.created_at)),
        h("div", {}, "Duration"), h("div", {}, duration(run.scheduled_at || run.created_at, run.finished_at)),
        h("div", {}, "Parameters"), h("div", { className: "value" }, valueText((run.runtime_config || {}).parameters || {})),
        run.error ? h("div", {}, "Error") : null, run.error ? h("div", { className: "error" }, run.error.message) : null,
      ));
  }

  function renderGraph() {
    const nodes = view.nodes.filter((n) => n.parent === view.scope);
    // breadcrumbs: root / sub-DAG / ...
    const trail = [];
    for (let p = view.scope; p; p = (view.byPath.get(p) || {}).parent) trail.unshift(p);
    crumbs.replaceChildren(
      h("a", { onclick: () => { view.scope = null; renderGraph(); } }, "pipeline"),
      trail.map((p) => [" / ", h("a", { onclick: () => { view.scope = p; renderGraph(); } }, (view.byPath.get(p) || {}).name || p)]));
    const signature = JSON.stringify([view.scope, nodes.map((n) => [n.path, n.state, n.cached, n.deps])]);
    if (signature === view.drawn) return;  // unchanged: keep the drawing (and a double-click in progress)
    view.drawn = signature;
    graph.replaceChildren(drawDag(nodes, view.selected, (node) => {
      view.selected = node.path;
      for (const g of graph.querySelectorAll("g.node")) g.classList.toggle("selected", g.dataset.path === node.path);
      renderTask(view.byPath.get(node.path) || node, true);
    }, (node) => { view.scope = node.path; renderGraph(); }));
  }

  function renderTask(node, fresh) {
    if (fresh || !view.log || view.log.path !== node.path) {
      if (view.log) view.log.stop();
      view.log = null;
    }
    const io = (title, section) => {
      const params = (section || {}).parameters || {};
      const artifacts = (section || {}).artifacts || {};
      const rows = [
        ...Object.entries(params).map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { className: "value" }, valueText(v)))),
        ...Object.entries(artifacts).map(([k, list]) => h("tr", {}, h("td", {}, k),
          h("td", { className: "value" }, (Array.isArray(list) ? list : [list]).map((a) => (a && a.uri) || valueText(a)).join("\n")))),
      ];
      return [h("h2", {}, title), rows.length ? h("table", { className: `io ${title.toLowerCase()}` }, h("tbody", {}, rows))
        : h("div", { className: "muted" }, "none")];
    };
    const logBox = view.log ? view.log.pre : h("pre", { className: "log", id: "task-log" });
    const children = [
      h("h1", {}, node.name, " ", stateBadge(node.state), node.cached ? h("span", { className: "badge cached" }, "cached") : null),
      h("div", { className: "kv" },
        h("div", {}, "Path"), h("div", {}, node.path),
        h("div", {}, "Kind"), h("div", {}, node.kind),
        node.component ? [h("div", {}, "Component"), h("div", {}, node.component)] : null,
        node.image ? [h("div", {}, "Image"), h("div", {}, node.image)] : null,
        h("div", {}, "Started"), h("div", {}, fmtTime(node.started_at)),
        h("div", {}, "Duration"), h("div", {}, duration(node.started_at, node.finished_at)),
        node.attempts > 1 ? [h("div", {}, "Attempts"), h("div", {}, node.attempts)] : null,
        node.exit_code !== undefined && node.exit_code !== null ? [h("div", {}, "Exit code"), h("div", {}, node.exit_code)] : null,
      ),
      node.error ? [h("h2", {}, "Error"), h("div", { className: "error" }, node.error)] : null,
      node.kind === "dag" || node.kind === "loop" || node.kind === "iteration"
        ? h("p", {}, h("button", { onclick: () => { view.scope = node.path; renderGraph(); } }, "Open this sub-DAG")) : null,
      io("Inputs", node.inputs),
      io("Outputs", node.outputs),
    ];
    if (node.has_log) {
      children.push(h("h2", {}, "Log"), logBox);
      if (!view.log) view.log = followLog(runId, node, logBox);
    }
    side.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  }
}

function followLog(runId, node, pre) {
  const state = { path: node.path, pre, offset: 0 };
  pre.textContent = "";
  state.stop = every(LOG_POLL_MS, async () => {
    const chunk = await getJSON(`/ui-api/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(node.task_id)}/log?offset=${state.offset}`);
    if (chunk.text) {
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode(chunk.text));
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    state.offset = chunk.offset;
    if (chunk.done) state.stop();
  });
  return state;
}

// ---- DAG drawing -------------------------------------------------------------

const NODE_W = 190, NODE_H = 46, GAP_X = 34, GAP_Y = 46, PAD = 20;

function layout(nodes) {
  // depth = longest chain of dependencies above a node (inside its DAG)
  const byPath = new Map(nodes.map((n) => [n.path, n]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (n) => {
    if (depth.has(n.path)) return depth.get(n.path);
    if (visiting.has(n.path)) return 0;  // a cycle: should not happen in a pipeline
    visiting.add(n.path);
    let d = 0;
    for (const dep of n.deps || []) if (byPath.has(dep)) d = Math.max(d, depthOf(byPath.get(dep)) + 1);
    visiting.delete(n.path);
    depth.set(n.path, d);
    return d;
  };
  const rows = [];
  for (const n of nodes) (rows[depthOf(n)] ||= []).push(n);
  const x = new Map();
  rows.forEach((row, r) => {
    if (r > 0) {  // order by the mean position of the parents (fewer crossings)
      const key = (n) => {
        const xs = (n.deps || []).filter((d) => x.has(d)).map((d) => x.get(d));
        return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Infinity;
      };
      row.sort((a, b) => key(a) - key(b));
    }
    row.forEach((n, i) => x.set(n.path, i));
  });
  const width = Math.max(1, ...rows.map((row) => (row || []).length));
  const pos = new Map();
  rows.forEach((row, r) => {
    const offset = (width - row.length) * (NODE_W + GAP_X) / 2;
    row.forEach((n, i) => pos.set(n.path, { x: PAD + offset + i * (NODE_W + GAP_X), y: PAD + r * (NODE_H + GAP_Y) }));
  });
  return { pos, width: PAD * 2 + width * (NODE_W + GAP_X) - GAP_X, height: PAD * 2 + rows.length * (NODE_H + GAP_Y) - GAP_Y };
}

function drawDag(nodes, selected, onSelect, onOpen) {
  if (!nodes.length) return h("div", { className: "muted", style: "padding:16px" }, "No tasks here yet.");
  const { pos, width, height } = layout(nodes);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, id: "dag" },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8c959f" }))));
  for (const n of nodes) {
    const to = pos.get(n.path);
    for (const dep of n.deps || []) {
      const from = pos.get(dep);
      if (!from) continue;
      const x1 = from.x + NODE_W / 2, y1 = from.y + NODE_H, x2 = to.x + NODE_W / 2, y2 = to.y;
      const my = (y1 + y2) / 2;
      svg.append(s("path", { class: "edge", d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2 - 2}`, "marker-end": "url(#arrow)" }));
    }
  }
  for (const n of nodes) {
    const p = pos.get(n.path);
    const classes = ["node", n.state, n.cached ? "cached" : "", n.path === selected ? "selected" : ""].filter(Boolean).join(" ");
    const container = n.kind === "dag" || n.kind === "loop" || n.kind === "iteration";
    const label = n.name.length > 24 ? n.name.slice(0, 23) + "…" : n.name;
    const sub = [n.state.toLowerCase(), n.cached ? "cached" : "", container ? `${n.kind} ▸` : ""].filter(Boolean).join(" · ");
    svg.append(s("g", { class: classes, "data-path": n.path, "data-state": n.state, transform: `translate(${p.x},${p.y})`,
      onclick: () => onSelect(n), ondblclick: () => { if (container) onOpen(n); } },
      s("title", {}, `${n.name} (${n.state})${container ? " — double-click to open" : ""}`),
      s("rect", { width: NODE_W, height: NODE_H, rx: 8 }),
      s("circle", { cx: 14, cy: NODE_H / 2, r: 5 }),
      s("text", { x: 26, y: 19 }, label),
      s("text", { x: 26, y: 35, class: "sub" }, sub)));
  }
  return svg;
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
