// #/runs, #/archive/runs, #/experiments/ID[/archive]: the runs list, with a state filter, sorting by
// name or creation, paging, auto-refresh, the metrics of finished runs (kfp 1.x's, and KFP v2 Metrics
// artifacts' scalars; the page sorted by its leading metric from the Metrics header) and runs ticked to compare.

import { API, getJSON } from "../lib/api.js";
import { fill, h, setStatus, stateBadge } from "../lib/dom.js";
import { experimentNames, loadExperimentNames, namesMissing } from "../lib/experiment-names.js";
import { duration, fmtTime, metricsText } from "../lib/format.js";
import { scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";
import { FINAL, STATES } from "../lib/states.js";

// Metrics of finished runs (kfp 1.x mlpipeline-metrics, v2 Metrics scalars), asked once a run: they do not change after.
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
    if (runMetrics.has(cell.dataset.runId)) fill(cell, metricsText(runMetrics.get(cell.dataset.runId)));
  }
}

// The metric the Metrics column sorts by: the most prevalent first metric among the page's runs (KFP's runs
// list heads its metric columns with the most prevalent metrics).
function leadingMetric(runIds) {
  const counts = new Map();
  for (const id of runIds) {
    const first = (runMetrics.get(id) || [])[0];
    if (first) counts.set(first.name, (counts.get(first.name) || 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([name]) => name)[0] || null;
}

// A run's value of metric name (its first), or null.
function metricValue(runId, name) {
  const metric = (runMetrics.get(runId) || []).find((m) => m.name === name);
  const value = metric ? Number(metric.number_value) : NaN;
  return Number.isNaN(value) ? null : value;
}

// The page's rows ordered by a metric (runs without it last), the order KFP's API gives for sort_by
// "metric:NAME"; here over the rows of the page shown (the KFP list API sorts by name or creation only).
function sortRowsByMetric(body, name, descending) {
  const rows = [...body.querySelectorAll("tr.run-row")];
  const keyed = rows.map((row, index) => ({ row, index, value: metricValue(row.dataset.runId, name) }));
  keyed.sort((a, b) => {
    if (a.value === null || b.value === null) return (a.value === null) - (b.value === null) || a.index - b.index;
    return (descending ? b.value - a.value : a.value - b.value) || a.index - b.index;
  });
  body.append(...keyed.map((k) => k.row));
}

export function runsList(main, experimentId, archived) {
  const view = { state: "", sort: "created_at desc", pageSize: 20, tokens: [""], index: 0, metricSort: null };
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
  // The Metrics column: off, then by its leading metric descending (best first for a score), then ascending.
  const metricHeader = h("th", { className: "sortable", id: "sort-metric", title: "sort this page by its leading metric",
    onclick: () => {
      view.metricSort = view.metricSort === "desc" ? "asc" : view.metricSort === "asc" ? null : "desc";
      arrangeMetrics();
    } }, "Metrics");
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
        h("th", {}, "Duration"), metricHeader, h("th", {}, "Run ID"))),
      body),
    h("div", { className: "pager" }, prev, next, info, compare),
  );

  if (experimentId) {
    getJSON(`${API}/experiments/${encodeURIComponent(experimentId)}`)
      .then((e) => { title.textContent = `${archived ? "Archived runs" : "Runs"} of experiment ${e.display_name}`; })
      .catch((err) => setStatus(err.message, true));
  }

  function restart() { view.tokens = [""]; view.index = 0; load(); }

  // The Metrics header's arrow and the rows' order, after each load and each click.
  function arrangeMetrics() {
    const ids = [...body.querySelectorAll("tr.run-row")].map((row) => row.dataset.runId);
    const name = view.metricSort ? leadingMetric(ids) : null;
    metricHeader.dataset.metric = name || "";
    metricHeader.textContent = name ? `Metrics (${name}${view.metricSort === "desc" ? " ▼" : " ▲"})` : "Metrics";
    if (name) sortRowsByMetric(body, name, view.metricSort === "desc");
  }

  async function load() {
    const token = routeToken;
    const params = new URLSearchParams({ page_size: view.pageSize, sort_by: view.sort,
      page_token: view.tokens[view.index] || "" });
    const predicates = [{ key: "storage_state", operation: archived ? "EQUALS" : "NOT_EQUALS", string_value: "ARCHIVED" }];
    if (view.state) predicates.push({ key: "state", operation: "EQUALS", string_value: view.state });
    params.set("filter", JSON.stringify({ predicates }));
    if (experimentId) params.set("experiment_id", experimentId);
    const page = await getJSON(scoped(`${API}/runs?${params}`));
    if (token !== routeToken) return;
    const runs = page.runs || [];
    if (namesMissing(runs)) await loadExperimentNames();
    if (token !== routeToken) return;
    view.tokens[view.index + 1] = page.next_page_token || "";
    const arrow = (field) => (view.sort === field ? " ▲" : view.sort === `${field} desc` ? " ▼" : "");
    createdHeader.textContent = "Created" + arrow("created_at");
    nameHeader.textContent = "Name" + arrow("display_name");
    fill(body, ...runs.map((r) => h("tr", { className: "run-row", "data-run-id": r.run_id,
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
    await loadRunMetrics(runs.filter((r) => FINAL.has(r.state)).map((r) => r.run_id), body);
    if (token !== routeToken) return;
    arrangeMetrics();
    const first = view.index * view.pageSize;
    info.textContent = `${runs.length ? first + 1 : 0}–${first + runs.length} of ${page.total_size ?? "?"}`;
    prev.disabled = view.index === 0;
    next.disabled = !page.next_page_token;
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  }

  every(REFRESH_MS, load);
}
