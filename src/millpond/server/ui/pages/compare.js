// #/compare/A,B,...: the runs ticked in the runs list side by side, as KFP's Compare page shows them
// (frontend/src/pages/CompareV2.tsx): the runs' overview (state, duration), a parameters table (a row
// per parameter, a column per run; rows whose values differ marked), a metrics table (each run's
// metrics: kfp 1.x's and the v2 Metrics artifacts' scalars), the v2 scalar metrics by task and artifact
// (KFP v2's "Scalar metrics" table), and each run's artifacts (metrics, confusion matrix, ROC curve,
// Markdown, HTML, images) in a column per run.
// Simplified from KFP: ROC curves are drawn per run, not overlaid on one chart.

import { API, getJSON } from "../lib/api.js";
import { fill, h, stateBadge } from "../lib/dom.js";
import { duration, text, v1Number, valueText } from "../lib/format.js";
import { routeToken } from "../lib/polling.js";
import { previewOf } from "./task-outputs.js";

const SHOWN_TYPES = new Set(["system.Metrics", "system.ClassificationMetrics", "system.Markdown", "system.HTML"]);

function sectionRow(label, count, id) {
  return h("tr", { className: "section-row", id }, h("th", { colspan: count + 1 }, label));
}

// Each run's output artifacts from its graph: [{task, key, type, artifact}], shown types and images only.
function artifactsOf(graph) {
  const out = [];
  for (const node of graph.nodes || []) {
    if (node.kind === "artifact") continue;  // its producer's outputs hold the same entries
    for (const [key, list] of Object.entries((node.outputs || {}).artifacts || {})) {
      for (const artifact of Array.isArray(list) ? list : [list]) {
        if (!artifact || typeof artifact !== "object") continue;
        const type = ((artifact.type || {}).schemaTitle) || "";
        if (SHOWN_TYPES.has(type) || /\.(png|jpe?g|gif|webp)$/i.test(artifact.uri || "")) {
          out.push({ task: node.name, key, type, artifact, state: node.state });
        }
      }
    }
  }
  return out;
}

// KFP v2's scalar metrics table: a column per run, task and Metrics artifact; a row per metric name.
function scalarsTable(runs, metrics) {
  const columns = [];
  for (const run of runs) {
    const scalars = (metrics.runs[run.run_id] || []).filter((m) => m.artifact);
    const groups = [...new Set(scalars.map((m) => `${m.node}\u0000${m.artifact}`))];
    for (const group of groups) {
      const [task, artifact] = group.split("\u0000");
      columns.push({ run, task, artifact, values: scalars.filter((m) => m.node === task && m.artifact === artifact) });
    }
  }
  if (!columns.length) return h("div", { className: "muted", id: "compare-scalars-none" }, "No run has KFP v2 scalar metrics.");
  const names = [...new Set(columns.flatMap((c) => c.values.map((m) => m.name)))];
  return h("table", { id: "compare-scalars" },
    h("thead", {},
      h("tr", {}, h("th", {}, "Run"), columns.map((c) => h("th", { "data-run-id": c.run.run_id }, c.run.display_name || c.run.run_id))),
      h("tr", {}, h("th", {}, "Task › artifact"), columns.map((c) => h("th", { className: "muted" }, `${text(c.task)} › ${text(c.artifact)}`)))),
    h("tbody", {}, names.map((name) => h("tr", { className: "scalar-row", "data-metric": name }, h("th", {}, name),
      columns.map((c) => {
        const m = c.values.find((v) => v.name === name);
        return h("td", { className: "num" }, m ? valueText(m.number_value) : "");
      })))));
}

function artifactColumns(runs, graphs) {
  return h("div", { className: "compare-cards", id: "compare-artifacts" }, runs.map((run, index) => {
    const found = artifactsOf(graphs[index]);
    return h("div", { className: "compare-run", "data-run-id": run.run_id },
      h("h3", {}, run.display_name || run.run_id),
      found.length ? found.map((a) => {
        const body = previewOf(run.run_id, a.type, a.artifact);
        return body ? h("div", { className: "preview", "data-artifact": a.key, "data-task": a.task, "data-type": a.type },
          h("div", { className: "preview-title" }, `${text(a.task)} › ${text(a.key)}`, " ", h("span", { className: "muted" }, a.type)), body) : null;
      }) : h("div", { className: "muted" }, "No artifacts to show."));
  }));
}

export async function compareRuns(main, ids) {
  const token = routeToken;
  const box = h("div", { id: "compare" }, h("span", { className: "muted" }, "loading…"));
  main.append(h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / compare"), box);
  try {
    const params = new URLSearchParams();
    for (const id of ids) params.append("run_id", id);
    const [runs, metrics, graphs] = await Promise.all([
      Promise.all(ids.map((id) => getJSON(`${API}/runs/${encodeURIComponent(id)}`))),
      getJSON(`/ui-api/run-metrics?${params}`),
      Promise.all(ids.map((id) => getJSON(`/ui-api/runs/${encodeURIComponent(id)}/graph`).catch(() => ({ nodes: [] })))),
    ]);
    if (token !== routeToken) return;
    const paramsOf = (r) => (r.runtime_config || {}).parameters || {};
    const paramNames = [...new Set(runs.flatMap((r) => Object.keys(paramsOf(r))))].sort();
    const metricNames = [...new Set(ids.flatMap((id) => (metrics.runs[id] || []).map((m) => m.name)))].sort();
    const metricOf = (id, name) => (metrics.runs[id] || []).find((m) => m.name === name);
    const row = (label, cells, cls, extra) => h("tr", { className: cls, ...(extra || {}) }, h("th", {}, label), cells.map((c) => h("td", {}, c)));
    const differs = (p) => new Set(runs.map((r) => JSON.stringify(paramsOf(r)[p] ?? null))).size > 1;
    fill(box,
      h("table", { id: "compare-table" },
        h("thead", {}, h("tr", {}, h("th", {}, ""), runs.map((r) => h("th", {},
          h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.display_name || r.run_id))))),
        h("tbody", {},
          row("State", runs.map((r) => stateBadge(r.state))),
          row("Duration", runs.map((r) => duration(r.scheduled_at || r.created_at, r.finished_at))),
          sectionRow("Parameters", runs.length, "compare-parameters"),
          paramNames.length ? paramNames.map((p) => row(p, runs.map((r) => valueText(paramsOf(r)[p])),
            `param-row${differs(p) ? " differs" : ""}`, { "data-param": p }))
            : row("", runs.map(() => ""), "muted"),
          sectionRow("Metrics", runs.length, "compare-metrics"),
          metricNames.map((name) => row(name, ids.map((id) => v1Number(metricOf(id, name))), "metric-row", { "data-metric": name })))),
      h("h2", { className: "compare-section" }, "Scalar metrics"), scalarsTable(runs, metrics),
      h("h2", { className: "compare-section" }, "Artifacts"), artifactColumns(runs, graphs));
  } catch (err) {
    if (token === routeToken) fill(box, h("div", { className: "error" }, `cannot compare: ${err.message}`));
  }
}
