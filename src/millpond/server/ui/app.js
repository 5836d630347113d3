// millpond's web UI: plain JavaScript, no build step. Hash routes:
//   #/runs                  runs list (state filter, sort, paging, auto-refresh)
//   #/archive/runs          archived runs (KFP's Archive view)
//   #/runs/ID               run detail: the DAG as a graph, a task's inputs, outputs and log;
//                           terminate, retry, clone, archive / restore, delete
//   #/runs/ID/clone         the run form, filled in from run ID (pipeline, parameters), to start a new run
//   #/compare/A,B           runs side by side: state, parameters, kfp v1 metrics (ticked in the runs list)
//   #/experiments           experiments list
//   #/experiments/ID[/archive]  the runs of one experiment (its archived runs)
//   #/pipelines             pipelines list, upload a pipeline YAML
//   #/pipelines/ID[/VER]    a pipeline's versions, and a form that starts a run of one
// The links kfp.Client prints (#/runs/details/ID, #/experiments/details/ID, #/pipelines/details/ID
// and #/pipelines/details/ID/version/VER) open the same pages.
//   #/recurring             recurring runs: trigger, concurrency, enable / disable
//   #/datasets              datasets (millpond's Fluid routes) with their cache percentage
//   #/jobs                  training jobs (arena submit, TrainingClient, manifests): status, trainer, GPUs
//   #/jobs/NAMESPACE/NAME   a job: its instances, events, and an instance's log, followed while it runs
//   #/queues                Kueue's ClusterQueues: cohort, strategy, preemption, LocalQueues, quota per flavor
//   #/models                KServe InferenceServices: Ready, URL, traffic per revision, replicas, requests and
//                           latency through the gateway, a sample request (GET /ui-api/models)
//   #/models/NAMESPACE/NAME one InferenceService: conditions, revisions and replicas, curl for v1, v2 and Seldon
//   #/nodes                 this machine (or the Ray cluster's nodes): CPU, memory and GPUs, capacity,
//                           allocated and used, as live charts polled from /ui-api/nodes
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
  for (const child of children.flat(Infinity)) {
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
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const TOKEN_KEY = "millpond-token";

// Every API call goes through here: it adds the token (token mode) and turns errors into exceptions.
async function api(url, options) {
  const opts = { ...(options || {}) };
  const headers = { Accept: "application/json", ...(opts.headers || {}) };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  opts.headers = headers;
  const response = await fetch(url, opts);
  if (response.status === 401) {
    askForToken(token ? "That token was refused: enter the server's token." : null);
    throw new Error("the server wants a token");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`);
  return body;
}

function getJSON(url) { return api(url); }

// replaceChildren, leaving out null, undefined and false (which replaceChildren would show as text) and flattening arrays.
function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function postJSON(url, data) {
  return api(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) });
}

// Token mode: the page loads without one; the first 401 shows this form, the token lives in sessionStorage.
function askForToken(message) {
  if (document.getElementById("token-form")) return;
  clearTimers();
  routeToken += 1;
  const input = h("input", { type: "password", id: "token-input", autocomplete: "off", placeholder: "token", size: 40 });
  const form = h("form", { id: "token-form", className: "panel token", onsubmit: (ev) => {
    ev.preventDefault();
    if (!input.value) return;
    sessionStorage.setItem(TOKEN_KEY, input.value);
    route();
  } },
  h("h1", {}, "This server needs a token"),
  h("p", { className: "muted" }, message || "It was started with --token (or MILLPOND_TOKEN). The token is kept in this tab only (sessionStorage)."),
  h("div", { className: "toolbar" }, input, h("button", { type: "submit", id: "token-submit" }, "Continue")));
  if (message) sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("main").replaceChildren(form);
  input.focus();
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
  const parts = routeParts(location.hash);
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.nav === (parts[0] === "archive" ? "runs" : parts[0]));
  }
  if (parts[0] === "runs" && parts[1] && parts[2] === "clone") return cloneRun(main, parts[1]);
  if (parts[0] === "runs" && parts[1]) return runDetail(main, parts[1]);
  if (parts[0] === "archive") return runsList(main, null, true);
  if (parts[0] === "compare" && parts[1]) return compareRuns(main, parts[1].split(",").filter(Boolean).slice(0, 10));
  if (parts[0] === "experiments" && parts[1]) return runsList(main, parts[1], parts[2] === "archive");
  if (parts[0] === "experiments") return experimentsList(main);
  if (parts[0] === "pipelines" && parts[1]) return pipelineDetail(main, parts[1], parts[2]);
  if (parts[0] === "pipelines") return pipelinesList(main);
  if (parts[0] === "recurring") return recurringList(main);
  if (parts[0] === "datasets") return datasetsList(main);
  if (parts[0] === "jobs" && parts[1] && parts[2]) return jobDetail(main, parts[1], parts[2]);
  if (parts[0] === "jobs") return jobsList(main);
  if (parts[0] === "queues") return queuesList(main);
  if (parts[0] === "nodes") return nodesPage(main);
  if (parts[0] === "models" && parts[1] && parts[2]) return modelDetail(main, parts[1], parts[2]);
  if (parts[0] === "models") return modelsList(main);
  return runsList(main, null);
}

// A hash as path segments, with the KFP UI's forms (kfp.Client prints them) folded into ours:
// runs/details/ID → runs/ID, pipelines/details/ID/version/VER → pipelines/ID/VER.
function routeParts(hash) {
  const parts = (hash.replace(/^#\/?/, "").split("?")[0] || "runs").split("/").filter((p) => p !== "").map(decodeURIComponent);
  if (["runs", "experiments", "pipelines", "recurring"].includes(parts[0]) && parts[1] === "details") parts.splice(1, 1);
  if (parts[0] === "pipelines" && parts[2] === "version") parts.splice(2, 1);
  return parts.length ? parts : ["runs"];
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

function runsList(main, experimentId, archived) {
  const view = { state: "", sort: "created_at desc", pageSize: 20, tokens: [""], index: 0 };
  const title = h("h1", {}, `${archived ? "Archived runs" : "Runs"}${experimentId ? " of experiment" : ""}`);
  const base = experimentId ? `#/experiments/${encodeURIComponent(experimentId)}` : "#/runs";
  const tabs = h("div", { className: "tabs", id: "storage-tabs" },
    h("a", { href: base, id: "tab-active", className: archived ? "" : "active" }, "Active"),
    h("a", { href: experimentId ? `${base}/archive` : "#/archive/runs", id: "tab-archived", className: archived ? "active" : "" },
      "Archived"));
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
  const chosen = new Set();  // runs ticked for the compare view
  const compare = h("button", { id: "compare-runs", disabled: true, onclick: () => {
    location.hash = `#/compare/${[...chosen].map(encodeURIComponent).join(",")}`;
  } }, "Compare runs");
  const tick = (runId) => h("input", { type: "checkbox", className: "compare-box", "data-run-id": runId,
    checked: chosen.has(runId), onclick: (ev) => ev.stopPropagation(), onchange: (ev) => {
      if (ev.target.checked) chosen.add(runId); else chosen.delete(runId);
      compare.disabled = chosen.size < 2;
    } });
  main.append(
    title, tabs,
    h("div", { className: "toolbar" }, h("label", {}, "State"), stateSelect, h("label", {}, "Per page"), sizeSelect,
      experimentId ? h("a", { href: "#/runs" }, "all runs") : null),
    h("table", { id: "runs" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), nameHeader, h("th", {}, "State"), h("th", {}, "Experiment"), createdHeader,
        h("th", {}, "Duration"), h("th", {}, "Metrics"), h("th", {}, "Run ID"))),
      body),
    h("div", { className: "pager" }, prev, next, info, compare),
  );

  if (experimentId) {
    getJSON(`${API}/experiments/${encodeURIComponent(experimentId)}`)
      .then((e) => { title.textContent = `${archived ? "Archived runs" : "Runs"} of experiment ${e.display_name}`; })
      .catch((err) => setStatus(err.message, true));
  }

  function restart() { view.tokens = [""]; view.index = 0; load(); }

  async function load() {
    const token = routeToken;
    const params = new URLSearchParams({ page_size: view.pageSize, sort_by: view.sort,
      page_token: view.tokens[view.index] || "" });
    const predicates = [{ key: "storage_state", operation: archived ? "EQUALS" : "NOT_EQUALS", string_value: "ARCHIVED" }];
    if (view.state) predicates.push({ key: "state", operation: "EQUALS", string_value: view.state });
    params.set("filter", JSON.stringify({ predicates }));
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
      h("td", {}, tick(r.run_id)),
      h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.display_name || r.run_id)),
      h("td", {}, stateBadge(r.state)),
      h("td", {}, r.experiment_id ? h("a", { href: `#/experiments/${encodeURIComponent(r.experiment_id)}`,
        onclick: (ev) => ev.stopPropagation() }, experimentNames.get(r.experiment_id) || r.experiment_id) : ""),
      h("td", { title: r.created_at }, fmtTime(r.created_at)),
      h("td", {}, duration(r.scheduled_at || r.created_at, r.finished_at)),
      h("td", { className: "metrics-cell", "data-run-id": r.run_id }, metricsText(runMetrics.get(r.run_id))),
      h("td", { className: "muted" }, r.run_id.slice(0, 8)))));
    if (!runs.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, archived ? "No archived runs." : "No runs.")));
    loadRunMetrics(runs.filter((r) => FINAL.has(r.state)).map((r) => r.run_id), body);
    const first = view.index * view.pageSize;
    info.textContent = `${runs.length ? first + 1 : 0}–${first + runs.length} of ${page.total_size ?? "?"}`;
    prev.disabled = view.index === 0;
    next.disabled = !page.next_page_token;
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  }

  every(REFRESH_MS, load);
}

// kfp 1.x metrics (mlpipeline-metrics) of finished runs, asked once a run: they do not change after.
const runMetrics = new Map();

async function loadRunMetrics(runIds, body) {
  const missing = runIds.filter((id) => !runMetrics.has(id));
  if (missing.length) {
    const params = new URLSearchParams();
    for (const id of missing.slice(0, 100)) params.append("run_id", id);
    try {
      const data = await getJSON(`/ui-api/run-metrics?${params}`);
      for (const [id, metrics] of Object.entries(data.runs || {})) runMetrics.set(id, metrics);
    } catch (err) { setStatus(err.message, true); return; }
  }
  for (const cell of body.querySelectorAll("td.metrics-cell")) {
    if (runMetrics.has(cell.dataset.runId)) cell.replaceChildren(metricsText(runMetrics.get(cell.dataset.runId)));
  }
}

function metricsText(metrics) {
  if (!metrics || !metrics.length) return "";
  return metrics.slice(0, 6).map((m) => `${m.name}: ${v1Number(m)}`).join(" · ") + (metrics.length > 6 ? " …" : "");
}

// Compare (#/compare/A,B,...): the runs side by side, their parameters and their v1 metrics, as v1's compare page.
async function compareRuns(main, ids) {
  const token = routeToken;
  const box = h("div", { id: "compare" }, h("span", { className: "muted" }, "loading…"));
  main.append(h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / compare"), box);
  try {
    const params = new URLSearchParams();
    for (const id of ids) params.append("run_id", id);
    const [runs, metrics] = await Promise.all([
      Promise.all(ids.map((id) => getJSON(`${API}/runs/${encodeURIComponent(id)}`))),
      getJSON(`/ui-api/run-metrics?${params}`),
    ]);
    if (token !== routeToken) return;
    const paramNames = [...new Set(runs.flatMap((r) => Object.keys((r.runtime_config || {}).parameters || {})))].sort();
    const metricNames = [...new Set(ids.flatMap((id) => (metrics.runs[id] || []).map((m) => m.name)))].sort();
    const metricOf = (id, name) => (metrics.runs[id] || []).find((m) => m.name === name);
    const row = (label, cells, cls) => h("tr", { className: cls }, h("th", {}, label), cells.map((c) => h("td", {}, c)));
    box.replaceChildren(h("table", { id: "compare-table" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), runs.map((r) => h("th", {},
        h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.display_name || r.run_id))))),
      h("tbody", {},
        row("State", runs.map((r) => stateBadge(r.state))),
        paramNames.map((p) => row(p, runs.map((r) => valueText(((r.runtime_config || {}).parameters || {})[p] ?? "")), "param-row")),
        metricNames.map((name) => row(name, ids.map((id) => {
          const m = metricOf(id, name);
          return m ? v1Number(m) : "";
        }), "metric-row")))));
  } catch (err) {
    if (token === routeToken) box.replaceChildren(h("div", { className: "error" }, `cannot compare: ${err.message}`));
  }
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

// ---- pipelines -------------------------------------------------------------

async function allPages(url, key, limit) {
  const rows = [];
  let pageToken = "";
  do {
    const sep = url.includes("?") ? "&" : "?";
    const page = await getJSON(`${url}${sep}page_size=200&page_token=${encodeURIComponent(pageToken)}`);
    rows.push(...(page[key] || []));
    pageToken = page.next_page_token || "";
  } while (pageToken && rows.length < (limit || 2000));
  return rows;
}

function pipelinesList(main) {
  const body = h("tbody");
  const file = h("input", { type: "file", id: "pipeline-file", accept: ".yaml,.yml,.json,.tar.gz,.tgz,.zip" });
  const name = h("input", { type: "text", id: "pipeline-name", placeholder: "name (default: the file's)", size: 30 });
  const description = h("input", { type: "text", id: "pipeline-description", placeholder: "description", size: 30 });
  const message = h("span", { id: "upload-message", className: "muted" });
  const upload = h("form", { id: "upload-form", className: "panel", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!file.files.length) { message.textContent = "choose a pipeline YAML first"; return; }
    const form = new FormData();
    form.append("uploadfile", file.files[0], file.files[0].name);
    const params = new URLSearchParams();
    if (name.value.trim()) params.set("name", name.value.trim());
    if (description.value.trim()) params.set("description", description.value.trim());
    message.textContent = "uploading…";
    message.className = "muted";
    try {
      const pipeline = await api(`${API}/pipelines/upload?${params}`, { method: "POST", body: form });
      location.hash = `#/pipelines/${encodeURIComponent(pipeline.pipeline_id)}`;
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
    }
  } },
  h("h2", { style: "margin-top:0" }, "Upload a pipeline"),
  h("div", { className: "toolbar" }, file, name, description, h("button", { type: "submit", id: "upload-submit" }, "Upload"), message));
  main.append(h("h1", {}, "Pipelines"), upload, h("div", { style: "height:12px" }),
    h("table", { id: "pipelines" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Description"), h("th", {}, "Created"), h("th", {}, "Pipeline ID"))),
      body));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    const rows = await allPages(`${API}/pipelines?sort_by=${encodeURIComponent("created_at desc")}`, "pipelines");
    if (token !== routeToken) return;
    body.replaceChildren(...rows.map((p) => h("tr", { className: "run-row", "data-pipeline-id": p.pipeline_id,
      onclick: () => { location.hash = `#/pipelines/${encodeURIComponent(p.pipeline_id)}`; } },
      h("td", {}, h("a", { href: `#/pipelines/${encodeURIComponent(p.pipeline_id)}` }, p.display_name || p.name)),
      h("td", { className: "wrap" }, p.description || ""),
      h("td", {}, fmtTime(p.created_at)),
      h("td", { className: "muted" }, p.pipeline_id.slice(0, 8)))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No pipelines: upload one above.")));
  });
}

// A kfp 1.x upload's (or run's) pipeline_spec is its Argo workflow, as Kubeflow returns it.
function isWorkflow(spec) {
  return Boolean(spec) && spec.kind === "Workflow" && String(spec.apiVersion || "").startsWith("argoproj.io/");
}

function irOf(version) {
  const spec = version.pipeline_spec || {};
  if (isWorkflow(spec)) {  // the workflow's parameters: strings, with their defaults (no value: required)
    const parameters = {};
    for (const p of ((spec.spec || {}).arguments || {}).parameters || []) {
      if (!p || typeof p.name !== "string") continue;
      parameters[p.name] = { parameterType: "STRING", ...(p.value === undefined || p.value === null ? {} : { defaultValue: String(p.value) }) };
    }
    return { root: { inputDefinitions: { parameters } } };
  }
  return spec.pipeline_spec && spec.pipeline_spec.root ? spec.pipeline_spec : spec;
}

// The version's graph before any run: the workflow's own steps for a kfp 1.x upload, the IR's top tasks otherwise.
function versionGraph(pipelineId, versionId) {
  const box = h("div", { className: "graph", id: "version-graph" }, h("span", { className: "muted" }, "loading…"));
  const note = h("span", { className: "muted", id: "version-graph-source" });
  getJSON(`/ui-api/pipelines/${encodeURIComponent(pipelineId)}/versions/${encodeURIComponent(versionId)}/graph`)
    .then((data) => {
      note.textContent = data.source === "workflow" ? " kfp v1: the Argo workflow's steps" : "";
      box.replaceChildren(drawDag(data.nodes.filter((n) => !n.parent), null, () => {}, () => {}));
    })
    .catch((err) => { box.className = "error"; box.textContent = `no graph: ${err.message}`; });
  return [h("h2", {}, "Graph", note), box];
}

async function pipelineDetail(main, pipelineId, versionId) {
  const token = routeToken;
  const header = h("div");
  const versionsBody = h("tbody");
  const formBox = h("div", { id: "run-form-box" });
  const graphBox = h("div", { id: "version-graph-box" });
  main.append(header, h("div", { className: "detail" },
    h("div", {}, h("h2", {}, "Versions"), h("table", { id: "versions" },
      h("thead", {}, h("tr", {}, h("th", {}, "Version"), h("th", {}, "Description"), h("th", {}, "Created"))), versionsBody),
      graphBox),
    formBox));
  try {
    const [pipeline, versions, experiments] = await Promise.all([
      getJSON(`${API}/pipelines/${encodeURIComponent(pipelineId)}`),
      allPages(`${API}/pipelines/${encodeURIComponent(pipelineId)}/versions?sort_by=${encodeURIComponent("created_at desc")}`, "pipeline_versions"),
      allPages(`${API}/experiments?sort_by=display_name`, "experiments"),
    ]);
    if (token !== routeToken) return;
    header.replaceChildren(h("h1", {}, h("a", { href: "#/pipelines" }, "Pipelines"), " / ", pipeline.display_name || pipeline.name),
      pipeline.description ? h("p", { className: "muted" }, pipeline.description) : null);
    const chosen = versions.find((v) => v.pipeline_version_id === versionId) || versions[0];
    versionsBody.replaceChildren(...versions.map((v) => h("tr", {
      className: `run-row${chosen && v.pipeline_version_id === chosen.pipeline_version_id ? " chosen" : ""}`,
      "data-version-id": v.pipeline_version_id,
      onclick: () => { location.hash = `#/pipelines/${encodeURIComponent(pipelineId)}/${encodeURIComponent(v.pipeline_version_id)}`; } },
      h("td", {}, v.display_name || v.name), h("td", { className: "wrap" }, v.description || ""), h("td", {}, fmtTime(v.created_at)))));
    if (!chosen) { formBox.replaceChildren(h("div", { className: "muted" }, "This pipeline has no versions.")); return; }
    graphBox.replaceChildren(...versionGraph(pipelineId, chosen.pipeline_version_id));
    const version = chosen.pipeline_spec ? chosen
      : await getJSON(`${API}/pipelines/${encodeURIComponent(pipelineId)}/versions/${encodeURIComponent(chosen.pipeline_version_id)}`);
    if (token !== routeToken) return;
    formBox.replaceChildren(runForm(pipeline, version, experiments));
  } catch (err) {
    setStatus(err.message, true);
  }
}

const PARAM_TYPES = { STRING: "string", NUMBER_INTEGER: "integer", NUMBER_DOUBLE: "float", BOOLEAN: "boolean",
  LIST: "list (JSON)", STRUCT: "dict (JSON)" };

function paramInput(key, def) {
  const type = def.parameterType || "STRING";
  const has = def.defaultValue !== undefined && def.defaultValue !== null;
  const attrs = { name: `param-${key}`, "data-param": key, "data-type": type, id: `param-${key}` };
  if (type === "BOOLEAN") return h("input", { ...attrs, type: "checkbox", checked: has && def.defaultValue === true });
  if (type === "NUMBER_INTEGER" || type === "NUMBER_DOUBLE") {
    return h("input", { ...attrs, type: "number", step: type === "NUMBER_INTEGER" ? "1" : "any", value: has ? def.defaultValue : "",
      required: !has && !def.isOptional });
  }
  if (type === "LIST" || type === "STRUCT") {
    const el = h("textarea", { ...attrs, rows: 2, cols: 34, placeholder: type === "LIST" ? "[...]" : "{...}" });
    el.value = has ? JSON.stringify(def.defaultValue) : "";
    return el;
  }
  return h("input", { ...attrs, type: "text", size: 34, value: has ? def.defaultValue : "", required: !has && !def.isOptional });
}

function paramValue(el) {
  const type = el.dataset.type;
  if (type === "BOOLEAN") return el.checked;
  if (el.value === "") return undefined;
  if (type === "NUMBER_INTEGER") {
    const n = Number(el.value);
    if (!Number.isInteger(n)) throw new Error(`${el.dataset.param}: an integer, please`);
    return n;
  }
  if (type === "NUMBER_DOUBLE") return Number(el.value);
  if (type === "LIST" || type === "STRUCT") {
    let value;
    try { value = JSON.parse(el.value); } catch (err) { throw new Error(`${el.dataset.param}: not JSON (${err.message})`); }
    if (type === "LIST" ? !Array.isArray(value) : (typeof value !== "object" || value === null || Array.isArray(value))) {
      throw new Error(`${el.dataset.param}: a JSON ${type === "LIST" ? "list" : "object"}, please`);
    }
    return value;
  }
  return el.value;
}

function runForm(pipeline, version, experiments) {
  return runFormFor({
    heading: ["Start a run of ", version.display_name || version.name],
    ir: irOf(version),
    runName: `${pipeline.display_name || pipeline.name} ${new Date().toISOString().slice(0, 19).replace("T", " ")}`,
    fallbackName: pipeline.name,
    experiments,
    target: { pipeline_version_reference: { pipeline_id: version.pipeline_id, pipeline_version_id: version.pipeline_version_id } },
  });
}

// The form that starts a run: its name, experiment and the pipeline's parameters (typed inputs,
// filled with opts.values, else the defaults); opts.target says what to run (a pipeline version or an IR).
function runFormFor(opts) {
  const params = ((opts.ir.root || {}).inputDefinitions || {}).parameters || {};
  const values = opts.values || {};
  const name = h("input", { type: "text", id: "run-name", size: 34, value: opts.runName });
  const experiment = h("select", { id: "run-experiment" }, h("option", { value: "" }, "(default)"),
    opts.experiments.map((e) => h("option", { value: e.experiment_id, selected: e.experiment_id === opts.experimentId },
      e.display_name)));
  const inputs = Object.entries(params).map(([key, def]) =>
    [key, def, paramInput(key, Object.hasOwn(values, key) ? { ...def, defaultValue: values[key] } : def)]);
  const message = h("div", { id: "run-message", className: "error" });
  const submit = h("button", { type: "submit", id: "create-run" }, "Start run");
  const form = h("form", { id: "run-form", className: "panel", onsubmit: async (ev) => {
    ev.preventDefault();
    message.textContent = "";
    const parameters = {};
    try {
      for (const [key, , el] of inputs) {
        const value = paramValue(el);
        if (value !== undefined) parameters[key] = value;
      }
    } catch (err) { message.textContent = err.message; return; }
    const body = { display_name: name.value.trim() || opts.fallbackName, ...opts.target,
      runtime_config: { ...(opts.runtimeConfig || {}), parameters } };
    if (experiment.value) body.experiment_id = experiment.value;
    submit.disabled = true;
    try {
      const run = await postJSON(`${API}/runs`, body);
      location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
    } catch (err) {
      message.textContent = err.message;
      submit.disabled = false;
    }
  } },
  h("h1", {}, opts.heading),
  opts.note ? h("p", { className: "muted" }, opts.note) : null,
  h("div", { className: "kv form" },
    h("div", {}, "Run name"), h("div", {}, name),
    h("div", {}, "Experiment"), h("div", {}, experiment),
    inputs.map(([key, def, el]) => [
      h("div", {}, h("label", { for: el.id }, key)),
      h("div", {}, el, " ", h("span", { className: "muted" }, PARAM_TYPES[def.parameterType] || def.parameterType,
        def.isOptional || def.defaultValue !== undefined ? "" : ", required"))])),
  inputs.length ? null : h("p", { className: "muted" }, "This pipeline takes no parameters."),
  h("p", {}, submit), message);
  return form;
}

// Clone: the run form of run ID's pipeline (its version, or the IR it ran), filled with its name,
// experiment and parameters; every field editable; submitting starts a new run.
async function cloneRun(main, runId) {
  const token = routeToken;
  const box = h("div", { id: "clone-box" }, h("span", { className: "muted" }, "loading…"));
  main.append(box);
  try {
    const [run, experiments] = await Promise.all([
      getJSON(`${API}/runs/${encodeURIComponent(runId)}`),
      allPages(`${API}/experiments?sort_by=display_name`, "experiments"),
    ]);
    if (token !== routeToken) return;
    const reference = run.pipeline_version_reference || {};
    const target = reference.pipeline_version_id ? { pipeline_version_reference: reference }
      : { pipeline_spec: run.pipeline_spec, ...(run.platform_spec ? { platform_spec: run.platform_spec } : {}) };
    const config = run.runtime_config || {};
    box.replaceChildren(
      h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / ",
        h("a", { href: `#/runs/${encodeURIComponent(run.run_id)}` }, run.display_name || run.run_id), " / clone"),
      runFormFor({
        heading: ["Clone of ", run.display_name || run.run_id],
        note: reference.pipeline_version_id ? "Runs the same pipeline version." : "Runs the same pipeline spec.",
        ir: irOf(run),
        runName: `Clone of ${run.display_name || run.run_id}`,
        fallbackName: run.display_name || run.run_id,
        experiments,
        experimentId: run.experiment_id,
        values: config.parameters || {},
        target,
        runtimeConfig: config.pipeline_root ? { pipeline_root: config.pipeline_root } : {},
      }));
  } catch (err) {
    if (token === routeToken) box.replaceChildren(h("div", { className: "error" }, `cannot clone run ${runId}: ${err.message}`));
  }
}

// ---- recurring runs -----------------------------------------------------------

function triggerText(trigger) {
  const cron = (trigger || {}).cron_schedule;
  const periodic = (trigger || {}).periodic_schedule;
  if (cron) return `cron ${cron.cron}`;
  if (periodic) return `every ${periodic.interval_second}s`;
  return "";
}

function recurringList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Recurring runs"),
    h("table", { id: "recurring" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Trigger"),
        h("th", {}, "Max concurrency"), h("th", {}, "Catch up"), h("th", {}, "Experiment"), h("th", {}, "Created"), h("th", {}, ""))),
      body));
  const load = async () => {
    const token = routeToken;
    const rows = await allPages(`${API}/recurringruns?sort_by=${encodeURIComponent("created_at desc")}`, "recurringRuns");
    if (token !== routeToken) return;
    if (rows.some((r) => r.experiment_id && !experimentNames.has(r.experiment_id))) await loadExperimentNames();
    if (token !== routeToken) return;
    body.replaceChildren(...rows.map((r) => {
      const enabled = r.status === "ENABLED";
      const toggle = h("button", { className: "toggle", onclick: async () => {
        toggle.disabled = true;
        try {
          await api(`${API}/recurringruns/${encodeURIComponent(r.recurring_run_id)}:${enabled ? "disable" : "enable"}`, { method: "POST" });
          await load();
        } catch (err) { setStatus(err.message, true); toggle.disabled = false; }
      } }, enabled ? "Disable" : "Enable");
      return h("tr", { "data-recurring-id": r.recurring_run_id },
        h("td", {}, r.display_name || r.recurring_run_id),
        h("td", {}, h("span", { className: `state ${enabled ? "SUCCEEDED" : "CANCELED"}`, "data-state": r.status }, r.status)),
        h("td", {}, triggerText(r.trigger)),
        h("td", {}, r.max_concurrency || ""),
        h("td", {}, r.no_catchup ? "no" : "yes"),
        h("td", {}, r.experiment_id ? h("a", { href: `#/experiments/${encodeURIComponent(r.experiment_id)}` },
          experimentNames.get(r.experiment_id) || r.experiment_id) : ""),
        h("td", {}, fmtTime(r.created_at)),
        h("td", {}, toggle));
    }));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No recurring runs.")));
  };
  every(REFRESH_MS * 2, load);
}

// ---- datasets -------------------------------------------------------------------

const OPERATION_KINDS = ["dataloads", "datamigrates", "dataprocesses", "databackups"];

function operationDataset(spec) {
  // DataLoad/DataProcess name it in spec.dataset, DataBackup as a string, DataMigrate on either side.
  const ref = spec.dataset || (spec.from || {}).dataset || (spec.to || {}).dataset;
  return typeof ref === "string" ? ref : (ref || {}).name || "";
}

async function refreshOperations(body, token) {
  let lists;
  try {
    lists = await Promise.all(OPERATION_KINDS.map((kind) => getJSON(`/apis/millpond/v1/${kind}`)));
  } catch (err) {
    return;  // the datasets table already says why the routes are missing
  }
  if (token !== routeToken) return;
  const items = lists.flatMap((list) => list.items || []);
  body.replaceChildren(...items.map((op) => {
    const status = op.status || {};
    const condition = (status.conditions || [])[0] || {};
    return h("tr", { "data-operation": op.metadata.name },
      h("td", {}, op.kind), h("td", {}, op.metadata.name), h("td", {}, operationDataset(op.spec || {})),
      h("td", {}, h("span", { className: `state ${String(status.phase || "Pending").toUpperCase()}` }, status.phase || "Pending")),
      h("td", {}, status.duration || ""), h("td", { className: "muted" }, status.phase === "Failed" ? condition.message || "" : ""));
  }));
  if (!items.length) body.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No data operations.")));
}

function datasetsList(main) {
  const body = h("tbody");
  const operations = h("tbody");
  main.append(h("h1", {}, "Datasets"),
    h("table", { id: "datasets" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Phase"), h("th", {}, "Size"),
        h("th", {}, "Files"), h("th", {}, "Cached"), h("th", {}, "Cache"))),
      body),
    h("h2", {}, "Data operations"),
    h("table", { id: "operations" },
      h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", {}, "Name"), h("th", {}, "Dataset"), h("th", {}, "Phase"),
        h("th", {}, "Duration"), h("th", {}, "Why it failed"))),
      operations));
  every(REFRESH_MS * 2, () => refreshOperations(operations, routeToken));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    let items;
    try {
      items = (await getJSON("/apis/millpond/v1/datasets?all_namespaces=true")).items || [];
    } catch (err) {
      if (token === routeToken) {
        body.replaceChildren(h("tr", {}, h("td", { colspan: 7, className: "muted" }, `Datasets are not available: ${err.message}`)));
      }
      return;
    }
    if (token !== routeToken) return;
    body.replaceChildren(...items.map((d) => {
      const meta = d.metadata || {};
      const status = d.status || {};
      const cache = status.cacheStates || {};
      const percent = parseFloat(cache.cachedPercentage);
      return h("tr", { "data-dataset": meta.name },
        h("td", {}, meta.name), h("td", {}, meta.namespace || "default"), h("td", {}, status.phase || ""),
        h("td", {}, status.ufsTotal || ""), h("td", {}, status.fileNum || ""),
        h("td", { className: "cached-percentage" }, cache.cachedPercentage || ""),
        h("td", {}, isNaN(percent) ? "" : h("div", { className: "bar" }, h("div", { style: `width:${Math.min(100, percent)}%` }))));
    }));
    if (!items.length) body.append(h("tr", {}, h("td", { colspan: 7, className: "muted" }, "No datasets.")));
  });
}

// ---- training jobs ----------------------------------------------------------------
// Every name, message and log line goes into the page as text (h() and textContent), never as HTML.

const JOBS = "/apis/millpond/v1/jobs";
const JOB_FINAL = new Set(["SUCCEEDED", "FAILED"]);
const JOB_LOG_LINES = 500;

function jobPath(namespace, name) {
  return `${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

// A plain-text answer (a job's log), with the token and errors handled as api() does.
async function getText(url) {
  const headers = { Accept: "text/plain" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(url, { headers });
  if (response.status === 401) {
    askForToken(token ? "That token was refused: enter the server's token." : null);
    throw new Error("the server wants a token");
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.message || `${response.status} ${response.statusText}`);
  }
  return response.text();
}

function jobsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Training jobs"),
    h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Status"), h("th", {}, "Queue"),
        h("th", {}, "Trainer"), h("th", {}, "Duration"), h("th", {}, "GPUs (allocated/requested)"), h("th", {}, "Instances"))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const rows = [];
    let pageToken = "";
    do {
      const page = await getJSON(`${JOBS}?all_namespaces=true&page_size=200&sort_by=${encodeURIComponent("created_at desc")}&page_token=${encodeURIComponent(pageToken)}`);
      rows.push(...(page.jobs || []));
      pageToken = page.next_page_token || "";
    } while (pageToken && rows.length < 2000);
    if (token !== routeToken) return;
    body.replaceChildren(...rows.map((job) => {
      const href = `#/jobs/${jobPath(job.namespace, job.name)}`;
      return h("tr", { className: "run-row job-row", "data-job": `${job.namespace}/${job.name}`, onclick: () => { location.hash = href; } },
        h("td", {}, h("a", { href }, job.name)), h("td", {}, job.namespace),
        // a queued job's reason under its state: Kueue's users most ask why a job waits
        h("td", { className: "wrap" }, stateBadge(job.status), job.waiting ? h("div", { className: "muted waiting" }, job.waiting) : ""),
        h("td", {}, job.queue || ""), h("td", {}, String(job.trainer || "").toUpperCase()), h("td", {}, job.duration),
        h("td", { className: "gpus" }, `${job.allocatedGPUs}/${job.requestGPUs}`), h("td", {}, String((job.instances || []).length)));
    }));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No training jobs. Submit one with arena submit pytorch.")));
  });
}

function jobDetail(main, namespace, name) {
  const view = { instance: "", finalSeen: false };
  const header = h("div", { id: "job-header" });
  const instances = h("tbody");
  const events = h("tbody");
  const chooser = h("select", { id: "job-instance", onchange: () => { view.instance = chooser.value; refreshLog(); } });
  const log = h("pre", { className: "log", id: "job-log" });
  main.append(header,
    h("h2", {}, "Instances"),
    h("table", { id: "job-instances" }, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Age"),
      h("th", {}, "Chief"), h("th", {}, "GPUs"), h("th", {}, "Node"))), instances),
    h("h2", {}, "Events"),
    h("table", { id: "job-events" }, h("thead", {}, h("tr", {}, h("th", {}, "Type"), h("th", {}, "Reason"), h("th", {}, "Age"),
      h("th", {}, "Message"))), events),
    h("h2", {}, "Log"), h("div", { className: "toolbar" }, h("label", { for: "job-instance" }, "Instance"), chooser), log);

  async function refreshLog() {
    const token = routeToken;
    const text = await getText(`${JOBS}/${jobPath(namespace, name)}/logs?tail=${JOB_LOG_LINES}&instance=${encodeURIComponent(view.instance)}`);
    if (token !== routeToken || log.textContent === text) return;
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = text;
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  const stop = every(REFRESH_MS / 2, async () => {
    const token = routeToken;
    let job;
    try {
      job = await getJSON(`${JOBS}/${jobPath(namespace, name)}`);
    } catch (err) {
      if (token === routeToken) {
        header.replaceChildren(h("h1", {}, h("a", { href: "#/jobs" }, "Training jobs"), " / ", name),
          h("div", { className: "error", id: "job-error" }, `${namespace}/${name}: ${err.message}`));
        stop();
      }
      return;
    }
    const found = await getJSON(`${JOBS}/${jobPath(namespace, name)}/events`);
    if (token !== routeToken) return;
    header.replaceChildren(
      h("h1", {}, h("a", { href: "#/jobs" }, "Training jobs"), " / ", job.name, " ", stateBadge(job.status)),
      h("div", { className: "kv" },
        h("div", {}, "Namespace"), h("div", {}, job.namespace),
        h("div", {}, "Trainer"), h("div", {}, String(job.trainer || "").toUpperCase()),
        h("div", {}, "Duration"), h("div", {}, job.duration),
        h("div", {}, "Priority"), h("div", {}, job.priority),
        h("div", {}, "Queue"), h("div", {}, job.queue || "none (not managed by Kueue)"),
        h("div", {}, "User"), h("div", {}, job.user || ""),
        ...(job.waiting ? [h("div", {}, "Waiting"), h("div", { id: "job-waiting", className: "wrap" }, job.waiting)] : []),
        h("div", {}, "GPUs"), h("div", {}, `${job.allocatedGPUs} allocated of ${job.requestGPUs} requested`),
        h("div", {}, "UID"), h("div", {}, job.uuid)));
    instances.replaceChildren(...(job.instances || []).map((i) => h("tr", { "data-instance": i.name },
      h("td", {}, i.name), h("td", {}, i.status), h("td", {}, i.age), h("td", {}, i.chief ? "yes" : ""),
      h("td", {}, String(i.requestGPUs)), h("td", {}, i.node))));
    if (!(job.instances || []).length) instances.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No instance started yet.")));
    events.replaceChildren(...(found.events || []).map((e) => h("tr", {},
      h("td", {}, e.type), h("td", {}, e.reason), h("td", {}, e.age), h("td", { className: "wrap" }, e.message))));
    const names = (job.instances || []).map((i) => i.name);
    if (chooser.options.length !== names.length) {
      fill(chooser, names.map((n) => h("option", { value: n }, n)));
      const chief = (job.instances || []).find((i) => i.chief);
      if (!names.includes(view.instance)) view.instance = chief ? chief.name : names[0] || "";
      chooser.value = view.instance;
    }
    await refreshLog();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
    if (JOB_FINAL.has(job.status)) {
      if (view.finalSeen) stop();  // one more round after the end: the last lines written meanwhile
      view.finalSeen = true;
    }
  });
}

// ---- nodes ---------------------------------------------------------------------
// Polls /ui-api/nodes every NODES_POLL_MS and keeps the last NODES_POINTS answers per node, drawn as SVG
// line charts (no chart library, no external asset). Names and numbers go in as text only.

const NODES_POLL_MS = 2000;
const NODES_POINTS = 90;  // three minutes at one point every two seconds
const SERIES = [["allocated", "#1f6feb"], ["used", "#1a7f37"]];

function fmtBytes(value) {
  if (value === null || value === undefined) return "n/a";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(value), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function fmtCount(value) {
  return value === null || value === undefined ? "n/a" : String(Math.round(Number(value) * 100) / 100);
}

// One chart: capacity as a dashed line, allocated and used as lines over the kept points.
function resourceChart(title, kind, points, format) {
  const W = 360, H = 140, L = 8, R = 8, T = 8, B = 18;
  const last = points[points.length - 1][kind];
  const top = Math.max(1e-9, ...points.map((p) => Math.max(Number(p[kind].capacity) || 0, Number(p[kind].total) || 0,
    Number(p[kind].allocated) || 0, Number(p[kind].used) || 0)));
  const x = (i) => L + (NODES_POINTS <= 1 ? 0 : i * (W - L - R) / (NODES_POINTS - 1));
  const y = (v) => H - B - (Number(v) / top) * (H - T - B);
  const offset = NODES_POINTS - points.length;
  const line = (key, color) => {
    const coords = points.map((p, i) => [i, p[kind][key]]).filter(([, v]) => v !== null && v !== undefined);
    if (!coords.length) return null;
    return s("polyline", { class: `series series-${key}`, fill: "none", stroke: color, "stroke-width": 2,
      points: coords.map(([i, v]) => `${x(i + offset).toFixed(1)},${y(v).toFixed(1)}`).join(" ") });
  };
  const capY = y(last.capacity || 0);
  const svg = s("svg", { class: "node-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-kind": kind },
    s("title", {}, `${title}: capacity, allocated and used`),
    s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de" }),
    s("line", { class: "capacity", x1: L, x2: W - R, y1: capY, y2: capY, stroke: "#8c959f", "stroke-dasharray": "5 4" }),
    SERIES.map(([key, color]) => line(key, color)),
    s("text", { x: L + 4, y: H - 4, "font-size": 10, fill: "#656d76" }, `last ${Math.round(points.length * NODES_POLL_MS / 1000)} s`));
  const legend = h("div", { className: "legend" },
    h("span", { className: "key capacity" }, `capacity ${format(last.capacity)}`),
    h("span", { className: "key allocated" }, `allocated ${format(last.allocated)}`),
    h("span", { className: "key used" }, `used ${format(last.used)}`));
  return h("div", { className: "chart-box", "data-kind": kind }, h("h3", {}, title), svg, legend);
}

function nodesPage(main) {
  const history = new Map();  // node name -> the kept answers for it
  const note = h("p", { className: "muted", id: "nodes-mode" });
  const box = h("div", { id: "nodes" });
  main.append(h("h1", {}, "Nodes"), note, box);
  every(NODES_POLL_MS, async () => {
    const token = routeToken;
    const answer = await getJSON("/ui-api/nodes");
    if (token !== routeToken) return;
    note.textContent = answer.mode === "ray"
      ? "The Ray cluster's nodes: allocated is what Ray has handed out; Ray reports no per-node use here."
      : "This machine: capacity is what the ledger may hand out, allocated what it has handed out, used what every process of the machine uses.";
    const seen = new Set();
    for (const node of answer.nodes || []) {
      const key = String(node.name);
      seen.add(key);
      const kept = history.get(key) || [];
      kept.push(node);
      if (kept.length > NODES_POINTS) kept.shift();
      history.set(key, kept);
    }
    for (const key of [...history.keys()]) if (!seen.has(key)) history.delete(key);
    fill(box, [...history.entries()].map(([key, points]) => {
      const node = points[points.length - 1];
      const holders = node.holders || [];
      return h("section", { className: "node-card", "data-node": key },
        h("h2", {}, key, " ", h("span", { className: "muted" }, `${node.ip || ""} · ${node.role || ""}`)),
        h("div", { className: "charts" },
          resourceChart("CPU (cores)", "cpu", points, fmtCount),
          resourceChart("Memory", "memory", points, fmtBytes),
          resourceChart("GPUs", "gpu", points, fmtCount)),
        holders.length ? h("table", { className: "holders" },
          h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", {}, "Holder"), h("th", {}, "Holds"))),
          h("tbody", {}, holders.map((x) => h("tr", {}, h("td", {}, x.kind),
            h("td", {}, x.namespace ? `${x.namespace}/${x.name}` : x.name), h("td", {}, x.holds))))) : null);
    }));
    if (!history.size) box.append(h("p", { className: "muted" }, "No node answered."));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}

// ---- run detail ------------------------------------------------------------

function runDetail(main, runId) {
  const view = { scope: null, selected: null, nodes: [], byPath: new Map(), log: null, run: null, actionsShown: null };
  const header = h("div", { id: "run-header" });
  const actions = h("div", { className: "toolbar actions", id: "run-actions" });
  const crumbs = h("div", { className: "breadcrumbs", id: "breadcrumbs" });
  const graph = h("div", { className: "graph", id: "graph" });
  const side = h("div", { className: "panel", id: "task-panel" }, h("span", { className: "muted" }, "Click a task to see its inputs, outputs and log."));
  main.append(header, actions, h("div", { className: "detail" }, h("div", {}, crumbs, graph), side));

  const stop = every(GRAPH_POLL_MS, async () => {
    const token = routeToken;
    const data = await getJSON(`/ui-api/runs/${encodeURIComponent(runId)}/graph`);
    if (token !== routeToken) return;
    view.nodes = data.nodes;
    view.byPath = new Map(data.nodes.map((n) => [n.path, n]));
    view.run = data.run;
    view.source = data.source;
    renderHeader(data.run);
    renderActions(data.run);
    renderGraph();
    if (view.selected && view.byPath.has(view.selected)) {
      const node = view.byPath.get(view.selected);
      if (JSON.stringify(node) !== view.taskShown) renderTask(node, false);  // unchanged: keep previews and scroll
    }
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
    if (data.final && view.nodes.every((n) => FINAL.has(n.state) || !n.task_id)) stop();
  });

  // A run opened by its URL: the runs list has not loaded the experiments' names, so ask for this one.
  async function nameExperiment(run) {
    if (!run.experiment_id || experimentNames.has(run.experiment_id) || view.askedExperiment) return;
    view.askedExperiment = true;
    const token = routeToken;
    try {
      const experiment = await getJSON(`${API}/experiments/${encodeURIComponent(run.experiment_id)}`);
      experimentNames.set(experiment.experiment_id, experiment.display_name);
      if (token === routeToken && view.run) renderHeader(view.run);
    } catch (err) { setStatus(err.message, true); }
  }

  function renderHeader(run) {
    nameExperiment(run);
    const archived = run.storage_state === "ARCHIVED";
    header.replaceChildren(
      h("h1", {}, h("a", { href: archived ? "#/archive/runs" : "#/runs" }, archived ? "Archived runs" : "Runs"), " / ",
        run.display_name || run.run_id, " ", stateBadge(run.state),
        archived ? h("span", { className: "badge archived", id: "archived-badge" }, "archived") : null),
      h("div", { className: "kv" },
        h("div", {}, "Run ID"), h("div", {}, run.run_id),
        h("div", {}, "Pipeline"), h("div", {}, run.pipeline_name || "",
          view.source === "workflow" ? [" ", h("span", { className: "badge", id: "v1-badge", title: "drawn from its Argo workflow" },
            "kfp v1")] : null),
        h("div", {}, "Experiment"), h("div", {}, run.experiment_id
          ? h("a", { href: `#/experiments/${encodeURIComponent(run.experiment_id)}` }, experimentNames.get(run.experiment_id) || run.experiment_id) : ""),
        h("div", {}, "Created"), h("div", {}, fmtTime(run.created_at)),
        h("div", {}, "Duration"), h("div", {}, duration(run.scheduled_at || run.created_at, run.finished_at)),
        h("div", {}, "Parameters"), h("div", { className: "value" }, valueText((run.runtime_config || {}).parameters || {})),
        run.error ? h("div", {}, "Error") : null, run.error ? h("div", { className: "error" }, run.error.message) : null,
      ));
  }

  // Terminate (in flight), Retry (failed or canceled), Clone, Archive / Restore, Delete: the KFP routes.
  // Redrawn only when the run's state changes, so a click never lands on a button being replaced.
  function renderActions(run) {
    const shown = `${run.state}|${run.storage_state}`;
    if (shown === view.actionsShown) return;
    view.actionsShown = shown;
    const url = `${API}/runs/${encodeURIComponent(run.run_id)}`;
    const act = (id, label, call, then) => h("button", { id, onclick: async (ev) => {
      const button = ev.currentTarget;
      button.disabled = true;
      try {
        if (await call() === false) { button.disabled = false; return; }
        setStatus(`${label.toLowerCase()}: done`);
        then ? then() : route();  // draw the run again, and follow it if it runs again
      } catch (err) {
        setStatus(`${label}: ${err.message}`, true);
        button.disabled = false;
      }
    } }, label);
    const inFlight = !FINAL.has(run.state);
    const archived = run.storage_state === "ARCHIVED";
    fill(actions,
      inFlight ? act("action-terminate", "Terminate", () => api(`${url}:terminate`, { method: "POST" })) : null,
      run.state === "FAILED" || run.state === "CANCELED" ? act("action-retry", "Retry", () => api(`${url}:retry`, { method: "POST" })) : null,
      h("button", { id: "action-clone", onclick: () => { location.hash = `#/runs/${encodeURIComponent(run.run_id)}/clone`; } }, "Clone"),
      archived ? act("action-restore", "Restore", () => api(`${url}:unarchive`, { method: "POST" }))
        : act("action-archive", "Archive", () => api(`${url}:archive`, { method: "POST" })),
      act("action-delete", "Delete", async () => {
        const what = inFlight ? "It is terminated first. " : "";
        if (!confirm(`Delete run "${run.display_name || run.run_id}"? ${what}Its records, logs and artifacts under the default root are removed; this cannot be undone.`)) {
          return false;
        }
        await api(url, { method: "DELETE" });
        return true;
      }, () => { location.hash = archived ? "#/archive/runs" : "#/runs"; }),
    );
  }

  function renderGraph() {
    const nodes = view.nodes.filter((n) => n.parent === view.scope);
    // breadcrumbs: the pipeline / each sub-DAG, loop and iteration down to the one shown; "Up" goes one level up
    const trail = [];
    for (let p = view.scope; p; p = (view.byPath.get(p) || {}).parent) trail.unshift(p);
    const open = (scope) => { view.scope = scope; renderGraph(); };
    const root = (view.run && view.run.pipeline_name) || "pipeline";
    fill(crumbs,
      view.scope ? h("button", { id: "scope-up", title: "one level up",
        onclick: () => open((view.byPath.get(view.scope) || {}).parent || null) }, "↑ Up") : null,
      h("a", { className: "crumb", "data-scope": "", onclick: () => open(null) }, root),
      ...trail.flatMap((p) => [" / ", h("a", { className: "crumb", "data-scope": p, onclick: () => open(p) },
        (view.byPath.get(p) || {}).name || p.split("/").pop())]));
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
    view.taskShown = JSON.stringify(node);
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
      artifactPreviews(runId, node),
      v1Outputs(runId, node),
    ];
    if (node.has_log) {
      children.push(h("h2", {}, "Log"), logBox);
      if (!view.log) view.log = followLog(runId, node, logBox);
    }
    side.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  }
}

// ---- kfp 1.x outputs: mlpipeline-ui-metadata and mlpipeline-metrics -------------------------
// Read by the server (bounded; a source only from the run's own artifacts) and built here as DOM
// nodes: Markdown and tables as text, a web app in a frame with no script and no same origin.

function v1Outputs(runId, node) {
  const artifacts = (node.outputs || {}).artifacts || {};
  if (!node.task_id || !FINAL.has(node.state) || !(artifacts["mlpipeline-ui-metadata"] || artifacts["mlpipeline-metrics"])) {
    return null;
  }
  const box = h("div", { id: "v1-outputs" }, h("span", { className: "muted" }, "loading…"));
  getJSON(`/ui-api/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(node.task_id)}/v1-outputs`)
    .then((data) => {
      const cards = [];
      if ((data.metrics || []).length || data.metrics_error) {
        cards.push(h("div", { className: "preview v1-output", "data-type": "metrics" },
          h("div", { className: "preview-title" }, "mlpipeline-metrics"),
          data.metrics_error ? h("div", { className: "error" }, data.metrics_error) : v1MetricsTable(data.metrics)));
      }
      if (data.visualizations_error) cards.push(h("div", { className: "error" }, data.visualizations_error));
      for (const v of data.visualizations || []) {
        cards.push(h("div", { className: "preview v1-output", "data-type": v.type },
          h("div", { className: "preview-title" }, v.type), v.error ? h("div", { className: "error v1-error" }, v.error) : v1Visualization(v)));
      }
      box.replaceChildren(...(cards.length ? cards : [h("span", { className: "muted" }, "none")]));
    })
    .catch((err) => { box.className = "error"; box.textContent = `no visualizations: ${err.message}`; });
  return [h("h2", {}, "Visualizations"), box];
}

function v1Number(metric) {
  const value = Number(metric.number_value);
  return metric.format === "PERCENTAGE" ? `${(value * 100).toFixed(3)}%` : value.toFixed(3);
}

function v1MetricsTable(metrics) {
  return h("table", { className: "metrics" }, h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", {}, "Value"))),
    h("tbody", {}, metrics.map((m) => h("tr", {}, h("td", {}, m.name), h("td", { className: "num" }, v1Number(m))))));
}

function v1Visualization(v) {
  if (v.type === "markdown") return renderMarkdown(v.text || "");
  if (v.type === "web-app") {  // no allow-scripts, no allow-same-origin: the page is shown, never run
    const frame = h("iframe", { sandbox: "", className: "html-preview", title: "web app (sandboxed)" });
    frame.srcdoc = v.text || "";
    return frame;
  }
  if (v.type === "tensorboard") return h("p", { className: "muted" }, v.text || "");
  if (v.type === "confusion_matrix") {
    return confusionMatrix({ annotationSpecs: (v.labels || []).map((l) => ({ displayName: l })),
      rows: (v.matrix || []).map((row) => ({ row })) });
  }
  if (v.type === "roc") return rocCurve((v.points || []).map((p) => ({ falsePositiveRate: p.fpr, recall: p.tpr })));
  if (v.type === "table") {
    return h("table", { className: "v1-table" },
      v.header ? h("thead", {}, h("tr", {}, v.header.map((c) => h("th", {}, c)))) : null,
      h("tbody", {}, (v.rows || []).map((row) => h("tr", {}, row.map((c) => h("td", {}, c))))));
  }
  return h("span", { className: "muted" }, "not shown");
}

// ---- artifact previews -------------------------------------------------------

const IMAGE_EXT = /\.(png|jpe?g|gif|webp)$/i;

function artifactPreviews(runId, node) {
  if (!FINAL.has(node.state)) return null;
  const cards = [];
  for (const [name, list] of Object.entries((node.outputs || {}).artifacts || {})) {
    for (const artifact of Array.isArray(list) ? list : [list]) {
      if (!artifact || typeof artifact !== "object") continue;
      const type = ((artifact.type || {}).schemaTitle) || "";
      const body = previewOf(runId, type, artifact);
      if (body) {
        cards.push(h("div", { className: "preview", "data-artifact": name, "data-type": type },
          h("div", { className: "preview-title" }, name, " ", h("span", { className: "muted" }, type)), body));
      }
    }
  }
  return cards.length ? [h("h2", {}, "Artifacts"), h("div", { id: "artifact-previews" }, cards)] : null;
}

function previewOf(runId, type, artifact) {
  const meta = artifact.metadata || {};
  if (type === "system.Metrics") {
    const rows = Object.entries(meta).filter(([k]) => k !== "display_name");
    if (!rows.length) return null;
    return h("table", { className: "metrics" }, h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", {}, "Value"))),
      h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { className: "num" }, valueText(v))))));
  }
  if (type === "system.ClassificationMetrics") {
    const parts = [];
    if (meta.confusionMatrix) parts.push(confusionMatrix(meta.confusionMatrix));
    if (Array.isArray(meta.confidenceMetrics) && meta.confidenceMetrics.length) parts.push(rocCurve(meta.confidenceMetrics));
    return parts.length ? h("div", { className: "classification" }, parts) : null;
  }
  const url = `/ui-api/runs/${encodeURIComponent(runId)}/artifacts?uri=${encodeURIComponent(artifact.uri || "")}`;
  if (type === "system.Markdown") return fetched(url, "text", (text) => renderMarkdown(text));
  if (type === "system.HTML") {
    return fetched(url, "text", (text) => {
      const frame = h("iframe", { sandbox: "", className: "html-preview", title: "HTML artifact (sandboxed)" });
      frame.srcdoc = text;
      return frame;
    });
  }
  if (IMAGE_EXT.test(artifact.uri || "")) {
    return fetched(url, "blob", (blob) => h("img", { className: "image-preview", src: URL.createObjectURL(blob), alt: artifact.name || "" }));
  }
  return null;
}

function fetched(url, kind, render) {
  const box = h("div", { className: "muted" }, "loading…");
  (async () => {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    try {
      const response = await fetch(url, { headers });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body.message || `${response.status} ${response.statusText}`);
      }
      box.className = "";
      box.replaceChildren(render(kind === "blob" ? await response.blob() : await response.text()));
    } catch (err) {
      box.className = "error";
      box.textContent = `no preview: ${err.message}`;
    }
  })();
  return box;
}

function confusionMatrix(cm) {
  const labels = (cm.annotationSpecs || []).map((a) => a.displayName || "");
  const rows = (cm.rows || []).map((r) => r.row || []);
  const max = Math.max(1, ...rows.flat().map(Number).filter((n) => !isNaN(n)));
  return h("table", { className: "confusion-matrix" },
    h("thead", {}, h("tr", {}, h("th", { className: "corner" }, "actual ↓ / predicted →"), labels.map((l) => h("th", {}, l)))),
    h("tbody", {}, rows.map((row, i) => h("tr", {}, h("th", {}, labels[i] ?? i),
      row.map((v) => h("td", { className: "num", style: `background: rgba(31,111,235,${(0.08 + 0.72 * Number(v) / max).toFixed(2)})` }, v))))));
}

function rocCurve(points) {
  const W = 220, H = 220, P = 32;
  const pts = points.map((p) => [Number(p.falsePositiveRate) || 0, Number(p.recall) || 0]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const x = (v) => P + v * (W - P - 8), y = (v) => H - P - v * (H - P - 8);
  const ticks = [0, 0.5, 1];
  return s("svg", { class: "roc", width: W, height: H, viewBox: `0 0 ${W} ${H}` },
    s("title", {}, "ROC curve"),
    s("rect", { x: x(0), y: y(1), width: x(1) - x(0), height: y(0) - y(1), fill: "#fff", stroke: "#d0d7de" }),
    s("line", { x1: x(0), y1: y(0), x2: x(1), y2: y(1), stroke: "#8c959f", "stroke-dasharray": "4 3" }),
    ticks.map((t) => [s("text", { x: x(t), y: H - P + 14, "text-anchor": "middle", "font-size": 10 }, t),
      s("text", { x: P - 6, y: y(t) + 3, "text-anchor": "end", "font-size": 10 }, t)]),
    s("text", { x: (x(0) + x(1)) / 2, y: H - 4, "text-anchor": "middle", "font-size": 11 }, "false positive rate"),
    s("text", { x: 10, y: (y(0) + y(1)) / 2, "text-anchor": "middle", "font-size": 11,
      transform: `rotate(-90 10 ${(y(0) + y(1)) / 2})` }, "recall"),
    s("polyline", { class: "roc-line", fill: "none", stroke: "#1f6feb", "stroke-width": 2,
      points: pts.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(" ") }));
}

// Minimal Markdown, built as DOM nodes (text nodes only: the artifact's HTML is never parsed):
// headings, paragraphs, lists, code blocks, pipe tables, **bold**, *em*, `code`, [links](http...).
function renderMarkdown(text) {
  const root = h("div", { className: "markdown" });
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*```/.test(line)) {
      const code = [];
      for (i += 1; i < lines.length && !/^\s*```/.test(lines[i]); i += 1) code.push(lines[i]);
      i += 1;
      root.append(h("pre", {}, h("code", {}, code.join("\n"))));
    } else if (/^#{1,6}\s/.test(line)) {
      const level = line.match(/^#+/)[0].length;
      root.append(h(`h${Math.min(6, level + 2)}`, {}, inline(line.replace(/^#+\s*/, ""))));
      i += 1;
    } else if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul");
      for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]); i += 1) {
        list.append(h("li", {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""))));
      }
      root.append(list);
    } else if (/^\s*\|/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-+/.test(lines[i + 1])) {
      const cells = (l) => l.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());
      const head = cells(line);
      const rows = [];
      for (i += 2; i < lines.length && /^\s*\|/.test(lines[i]); i += 1) rows.push(cells(lines[i]));
      root.append(h("table", {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
        h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, inline(c))))))));
    } else if (!line.trim()) {
      i += 1;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*([-*+]|\d+[.)])\s+|\s*\|)/.test(lines[i]); i += 1) {
        para.push(lines[i]);
      }
      if (!para.length) { para.push(line); i += 1; }
      root.append(h("p", {}, inline(para.join(" "))));
    }
  }
  return root;
}

function inline(text) {
  const out = [];
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(h("code", {}, m[1]));
    else if (m[2] !== undefined) out.push(h("strong", {}, m[2]));
    else if (m[3] !== undefined) out.push(h("em", {}, m[3]));
    else if (/^https?:\/\//i.test(m[5])) out.push(h("a", { href: m[5], target: "_blank", rel: "noopener noreferrer" }, m[4]));
    else out.push(m[4]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
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
    const classes = ["node", n.state, `kind-${n.kind}`, n.cached ? "cached" : "", n.path === selected ? "selected" : ""]
      .filter(Boolean).join(" ");
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

// ---- queues (Kueue) ----------------------------------------------------------------
// One row per ClusterQueue, its quota used of nominal per flavor and resource, then every pending
// workload in its queue's order with why it waits (GET /ui-api/queues, what `millpond queue list -o
// json` prints). Names and reasons are set as text, never as HTML.

function queuesList(main) {
  const body = h("tbody");
  const pending = h("tbody");
  main.append(h("h1", {}, "Queues"),
    h("table", { id: "queues" },
      h("thead", {}, h("tr", {}, h("th", {}, "ClusterQueue"), h("th", {}, "Cohort"), h("th", {}, "Strategy"),
        h("th", {}, "Preemption"), h("th", {}, "Local queues"), h("th", {}, "Quota (flavor: resource used / nominal)"),
        h("th", {}, "Admitted"), h("th", {}, "Pending"))),
      body),
    h("h2", {}, "Pending workloads"),
    h("table", { id: "queues-pending" },
      h("thead", {}, h("tr", {}, h("th", {}, "ClusterQueue"), h("th", {}, "Position"), h("th", {}, "Workload"),
        h("th", {}, "Priority"), h("th", {}, "Requests"), h("th", {}, "Why it waits"))),
      pending));
  const pairs = (values) => Object.entries(values || {}).map(([key, value]) => `${key}=${value}`).join(", ");
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const answer = await getJSON("/ui-api/queues");
    if (token !== routeToken) return;
    const queues = answer.queues || [];
    body.replaceChildren(...queues.map((queue) => {
      const quota = (queue.quota || []).map((row) => h("div", { className: "quota" },
        `${row.flavor}: ${row.resource} ${row.used} / ${row.nominalQuota}`,
        row.borrowingLimit ? ` (borrow ≤ ${row.borrowingLimit})` : "", row.lendingLimit ? ` (lend ≤ ${row.lendingLimit})` : ""));
      const preemption = queue.preemption || {};
      return h("tr", { className: "queue-row", "data-queue": queue.name },
        h("td", {}, queue.name), h("td", {}, queue.cohort || ""), h("td", {}, queue.queueingStrategy),
        h("td", {}, `within ${preemption.withinClusterQueue}, reclaim ${preemption.reclaimWithinCohort}`),
        h("td", {}, (queue.localQueues || []).join(", ")), h("td", {}, quota),
        h("td", { className: "admitted" }, String(queue.admittedWorkloads)), h("td", { className: "pending" }, String(queue.pendingWorkloads)));
    }));
    if (!queues.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No queues. Create one with millpond queue create.")));
    const waiting = queues.flatMap((queue) => (queue.pending || []).map((w) => [queue.name, w]));
    pending.replaceChildren(...waiting.map(([queue, w]) => h("tr", { className: "pending-row", "data-workload": `${w.namespace}/${w.name}` },
      h("td", {}, queue), h("td", {}, w.position === null || w.position === undefined ? "" : String(w.position)),
      h("td", {}, w.workload), h("td", {}, String(w.priority)), h("td", {}, pairs(w.requests)), h("td", { className: "reason" }, w.reason || ""))));
    if (!waiting.length) pending.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No workload waits.")));
  });
}

// ---- models (KServe InferenceServices) ------------------------------------------------------
// Every InferenceService with its readiness, URL, traffic per revision, replicas that answer, and
// the requests the gateway routed to it (count, p50/p99 of the last 1,000), polled from
// /ui-api/models. Everything from a manifest (names, labels, annotations, messages, URIs) is set
// as text, never as HTML.

function readyBadge(ready) {
  const state = { True: "SUCCEEDED", False: "FAILED" }[ready.status] || "PENDING";
  return h("span", { className: `state ${state}`, "data-ready": ready.status }, ready.status === "True" ? "Ready" : (ready.reason || ready.status));
}

function trafficText(model) {
  return (model.revisions || []).map((r) => `${r.name}: ${r.percent ?? "?"}%` + (model.served ? ` (${r.replicas.length} up)` : "")).join(", ");
}

function latencyText(m) {
  if (!m || m.p50_ms === null || m.p50_ms === undefined) return "";
  return `${m.p50_ms} / ${m.p99_ms} ms`;
}

function modelsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Models"),
    h("p", { className: "muted" }, "KServe InferenceServices (millpond apply -f, arena serve). Query them through this server: /v1/models/NAME:predict, /v2/models/NAME/infer, /seldon/NAME/api/v0.1/predictions."),
    h("table", { id: "models" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Ready"), h("th", {}, "URL"),
        h("th", {}, "Traffic"), h("th", {}, "Replicas"), h("th", {}, "Requests"), h("th", {}, "Latency p50 / p99"),
        h("th", {}, "Sample request (v1)"))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const answer = await getJSON("/ui-api/models");
    if (token !== routeToken) return;
    const models = answer.models || [];
    body.replaceChildren(...models.map((m) => {
      const href = `#/models/${jobPath(m.namespace, m.name)}`;
      return h("tr", { className: "model-row", "data-model": `${m.namespace}/${m.name}` },
        h("td", {}, h("a", { href }, m.name)), h("td", {}, m.namespace),
        h("td", { className: "ready" }, readyBadge(m.ready)),
        h("td", { className: "url" }, m.url || ""), h("td", { className: "traffic wrap" }, trafficText(m)),
        h("td", { className: "replicas" }, String(m.replicas)), h("td", { className: "requests" }, String(m.metrics.requests)),
        h("td", { className: "latency" }, latencyText(m.metrics)),
        h("td", { className: "sample" }, h("code", {}, m.samples.v1)));
    }));
    if (!models.length) body.append(h("tr", {}, h("td", { colspan: 9, className: "muted" }, "No InferenceService. Apply one with millpond apply -f, or arena serve sklearn.")));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}

function modelDetail(main, namespace, name) {
  const header = h("div", { id: "model-header" });
  const revisions = h("tbody");
  const conditions = h("tbody");
  const codes = h("tbody");
  const samples = h("div", { id: "model-samples" });
  main.append(header,
    h("h2", {}, "Revisions"),
    h("table", { id: "model-revisions" }, h("thead", {}, h("tr", {}, h("th", {}, "Revision"), h("th", {}, "Traffic"),
      h("th", {}, "Replicas (base URLs)"), h("th", {}, "Requests"))), revisions),
    h("h2", {}, "Requests by status"),
    h("table", { id: "model-codes" }, h("thead", {}, h("tr", {}, h("th", {}, "HTTP status"), h("th", {}, "Requests"))), codes),
    h("h2", {}, "Sample requests"), samples,
    h("h2", {}, "Conditions"),
    h("table", { id: "model-conditions" }, h("thead", {}, h("tr", {}, h("th", {}, "Type"), h("th", {}, "Status"),
      h("th", {}, "Reason"), h("th", {}, "Message"))), conditions));
  let samplesShown = "";
  const stop = every(REFRESH_MS, async () => {
    const token = routeToken;
    let m;
    try {
      m = await getJSON(`/ui-api/models/${jobPath(namespace, name)}`);
    } catch (err) {
      if (token === routeToken) {
        header.replaceChildren(h("h1", {}, h("a", { href: "#/models" }, "Models"), " / ", name),
          h("div", { className: "error", id: "model-error" }, `${namespace}/${name}: ${err.message}`));
        stop();
      }
      return;
    }
    if (token !== routeToken) return;
    const pairs = (values) => Object.entries(values || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    header.replaceChildren(
      h("h1", {}, h("a", { href: "#/models" }, "Models"), " / ", m.name, " ", readyBadge(m.ready)),
      h("div", { className: "kv" },
        h("div", {}, "Namespace"), h("div", {}, m.namespace),
        h("div", {}, "URL"), h("div", { id: "model-url" }, m.url || "none yet (not served)"),
        h("div", {}, "Gateway"), h("div", {}, m.gateway),
        h("div", {}, "Predictor"), h("div", {}, m.predictor),
        h("div", {}, "Storage URI"), h("div", { className: "wrap" }, m.storageUri),
        h("div", {}, "Requests"), h("div", { id: "model-requests" }, String(m.metrics.requests)),
        h("div", {}, "Latency p50 / p99"), h("div", { id: "model-latency" }, latencyText(m.metrics) || "no request yet"),
        h("div", {}, "Labels"), h("div", { id: "model-labels", className: "wrap" }, pairs(m.labels)),
        h("div", {}, "Annotations"), h("div", { id: "model-annotations", className: "wrap" }, pairs(m.annotations)),
        ...(m.ready.message ? [h("div", {}, "Why"), h("div", { className: "wrap" }, m.ready.message)] : [])));
    const byRevision = m.metrics.byRevision || {};
    revisions.replaceChildren(...(m.revisions || []).map((r) => h("tr", { "data-revision": r.name },
      h("td", {}, r.name), h("td", {}, `${r.percent ?? "?"}%`), h("td", { className: "wrap" }, (r.replicas || []).join(", ")),
      h("td", { className: "requests" }, String(byRevision[r.name] || 0)))));
    if (!(m.revisions || []).length) revisions.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No revision served yet.")));
    codes.replaceChildren(...Object.entries(m.metrics.byCode || {}).sort().map(([code, n]) => h("tr", { "data-code": code },
      h("td", {}, code), h("td", {}, String(n)))));
    conditions.replaceChildren(...(m.conditions || []).map((c) => h("tr", {},
      h("td", {}, c.type), h("td", {}, c.status), h("td", {}, c.reason || ""), h("td", { className: "wrap" }, c.message || ""))));
    const shown = JSON.stringify(m.samples);
    if (shown !== samplesShown) {  // redrawn only when they change: a selection to copy survives the polls
      samplesShown = shown;
      samples.replaceChildren(...Object.entries(m.samples).sort().map(([protocol, command]) => h("div", { className: "sample", "data-protocol": protocol },
        h("div", { className: "preview-title" }, { v1: "KServe v1", v2: "Open Inference Protocol v2", seldon: "Seldon v0.1" }[protocol] || protocol),
        h("pre", { className: "log" }, command))));
    }
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}
