// #/runs/ID/clone: the run form of run ID's pipeline (its version, or the IR it ran), filled with its
// name, experiment and parameters; every field editable; submitting starts a new run.

import { allPages, API, getJSON } from "../lib/api.js";
import { scoped } from "../lib/namespace.js";
import { fill, h } from "../lib/dom.js";
import { routeToken } from "../lib/polling.js";
import { irOf, runFormFor } from "./run-form.js";

export async function cloneRun(main, runId) {
  const token = routeToken;
  const box = h("div", { id: "clone-box" }, h("span", { className: "muted" }, "loading…"));
  main.append(box);
  try {
    const [run, experiments] = await Promise.all([
      getJSON(`${API}/runs/${encodeURIComponent(runId)}`),
      allPages(scoped(`${API}/experiments?sort_by=display_name`), "experiments"),
    ]);
    if (token !== routeToken) return;
    const reference = run.pipeline_version_reference || {};
    const target = reference.pipeline_version_id ? { pipeline_version_reference: reference }
      : { pipeline_spec: run.pipeline_spec, ...(run.platform_spec ? { platform_spec: run.platform_spec } : {}) };
    const config = run.runtime_config || {};
    fill(box,
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
    if (token === routeToken) fill(box, h("div", { className: "error" }, `cannot clone run ${runId}: ${err.message}`));
  }
}
