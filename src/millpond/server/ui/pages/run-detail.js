// #/runs/ID: a run's header (state, pipeline, experiment, parameters), its actions (terminate, retry,
// clone, archive / restore, delete), its DAG as a graph (sub-DAGs opened in place, with breadcrumbs; output
// artifacts as nodes; conditions with their expression) and the selected task's inputs, outputs,
// previews and log, followed while the run runs, or the selected artifact's type, producer, URI and preview.

import { api, API, getJSON } from "../lib/api.js";
import { drawDag } from "../lib/dag.js";
import { fill, h, setStatus, stateBadge } from "../lib/dom.js";
import { experimentNames } from "../lib/experiment-names.js";
import { duration, fmtTime, valueText } from "../lib/format.js";
import { every, routeToken } from "../lib/polling.js";
import { route } from "../lib/router.js";
import { FINAL } from "../lib/states.js";
import { artifactPreviews, v1Outputs } from "./task-outputs.js";

const GRAPH_POLL_MS = 1000;
const LOG_POLL_MS = 700;

// A task's log, appended from the last offset read until the task is final and read to the end.
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

// A task's inputs or outputs: its parameters' values and its artifacts' URIs.
function ioTable(title, section) {
  const params = (section || {}).parameters || {};
  const artifacts = (section || {}).artifacts || {};
  const rows = [
    ...Object.entries(params).map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { className: "value" }, valueText(v)))),
    ...Object.entries(artifacts).map(([k, list]) => h("tr", {}, h("td", {}, k),
      h("td", { className: "value" }, (Array.isArray(list) ? list : [list]).map((a) => (a && a.uri) || valueText(a)).join("\n")))),
  ];
  return [h("h2", {}, title), rows.length ? h("table", { className: `io ${title.toLowerCase()}` }, h("tbody", {}, rows))
    : h("div", { className: "muted" }, "none")];
}

export function runDetail(main, runId) {
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
    fill(header,
      h("h1", {}, h("a", { href: archived ? "#/archive/runs" : "#/runs" }, archived ? "Archived runs" : "Runs"), " / ",
        run.display_name || run.run_id, " ", stateBadge(run.state),
        archived ? h("span", { className: "badge archived", id: "archived-badge" }, "archived") : null),
      h("div", { className: "kv" },
        h("div", {}, "Run ID"), h("div", {}, run.run_id),
        run.description ? [h("div", {}, "Description"), h("div", { className: "wrap", id: "run-description" }, run.description)] : null,
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
        if (then) then(); else route();  // draw the run again, and follow it if it runs again
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
    fill(graph, drawDag(nodes, view.selected, (node) => selectNode(node.path),
      (node) => { view.scope = node.path; renderGraph(); }));
  }

  function selectNode(path) {
    const node = view.byPath.get(path);
    if (!node) return;
    view.selected = path;
    for (const g of graph.querySelectorAll("g.node")) g.classList.toggle("selected", g.dataset.path === path);
    renderTask(node, true);
  }

  // An output artifact's panel (KFP's artifact node details): its type, producer, URI and preview.
  function renderArtifact(node) {
    const entries = ((node.outputs || {}).artifacts || {})[node.name] || [];
    const uris = (Array.isArray(entries) ? entries : [entries]).map((a) => (a && a.uri) || "").filter(Boolean);
    const producer = view.byPath.get(node.producer) || {};
    fill(side, ...[
      h("h1", {}, node.name, " ", h("span", { className: "badge", id: "artifact-type" }, node.artifact_type || "artifact")),
      h("div", { className: "kv", id: "artifact-info" },
        h("div", {}, "Produced by"), h("div", {}, h("a", { id: "artifact-producer", onclick: () => selectNode(node.producer) },
          producer.name || node.producer)),
        h("div", {}, "State"), h("div", {}, node.state === "LIVE" ? "recorded" : "not produced yet"),
        h("div", {}, "URI"), h("div", { className: "value", id: "artifact-uri" }, uris.join("\n")),
        uris.length ? [h("div", {}, "Lineage"), h("div", { id: "artifact-lineage-links" }, uris.map((uri) => h("a", {
          href: `#/artifacts/by-uri/${encodeURIComponent(uri)}`, className: "artifact-lineage-link" }, "artifact page")))] : null),
      artifactPreviews(runId, { outputs: node.outputs, state: node.producer_state }),
    ].flat().filter((c) => c !== null && c !== undefined));
  }

  function renderTask(node, fresh) {
    view.taskShown = JSON.stringify(node);
    if (fresh || !view.log || view.log.path !== node.path) {
      if (view.log) view.log.stop();
      view.log = null;
    }
    if (node.kind === "artifact") { renderArtifact(node); return; }
    const logBox = view.log ? view.log.pre : h("pre", { className: "log", id: "task-log" });
    const children = [
      h("h1", {}, node.name, " ", stateBadge(node.state), node.cached ? h("span", { className: "badge cached" }, "cached") : null),
      h("div", { className: "kv" },
        h("div", {}, "Path"), h("div", {}, node.path),
        h("div", {}, "Kind"), h("div", {}, node.kind),
        node.condition ? [h("div", {}, "Condition"), h("div", { id: "task-condition" }, `Run when: ${node.condition}`)] : null,
        node.component ? [h("div", {}, "Component"), h("div", {}, node.component)] : null,
        node.image ? [h("div", {}, "Image"), h("div", {}, node.image)] : null,
        node.ran_in ? [h("div", {}, "Ran in"), h("div", { id: "task-ran-in" },
          node.ran_in.startsWith("host") ? "this machine, not the image (" + node.ran_in.replace(/^host: /, "") + ")"
            : "its image (" + node.ran_in + ")")] : null,
        h("div", {}, "Started"), h("div", {}, fmtTime(node.started_at)),
        h("div", {}, "Duration"), h("div", {}, duration(node.started_at, node.finished_at)),
        node.attempts > 1 ? [h("div", {}, "Attempts"), h("div", {}, node.attempts)] : null,
        node.exit_code !== undefined && node.exit_code !== null ? [h("div", {}, "Exit code"), h("div", {}, node.exit_code)] : null,
      ),
      node.error ? [h("h2", {}, "Error"), h("div", { className: "error" }, node.error)] : null,
      node.kind === "dag" || node.kind === "loop" || node.kind === "iteration"
        ? h("p", {}, h("button", { onclick: () => { view.scope = node.path; renderGraph(); } }, "Open this sub-DAG")) : null,
      ioTable("Inputs", node.inputs),
      ioTable("Outputs", node.outputs),
      artifactPreviews(runId, node),
      v1Outputs(runId, node),
    ];
    if (node.has_log) {
      children.push(h("h2", {}, "Log"), logBox);
      if (!view.log) view.log = followLog(runId, node, logBox);
    }
    fill(side, ...children.flat().filter((c) => c !== null && c !== undefined));
  }
}
