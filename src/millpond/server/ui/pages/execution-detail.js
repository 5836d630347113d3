// #/executions/ID: one execution (KFP's ExecutionDetails): its properties (type, state, run, task, a cache hit's
// reused execution and fingerprint), custom properties, then its declared inputs and outputs (what its component
// declares: artifacts with their schema, parameters with their type and value) and its actual ones (the artifacts
// it read and wrote, by the input's or output's name, each linking to its artifact page). One read of
// /ui-api/lineage/executions/ID; values are set as text, a missing one as "" (never null or undefined).

import { getJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { fmtTime, text, valueText } from "../lib/format.js";
import { artifactLink, executionHref, LINEAGE, runLink } from "../lib/lineage.js";
import { routeToken } from "../lib/polling.js";
import { stateCell } from "./executions.js";

// Key/value rows of a properties object (custom properties, metadata); "none" when it has none.
export function propertiesTable(id, values) {
  const entries = Object.entries(values || {});
  if (!entries.length) return h("div", { id, className: "muted" }, "none");
  return h("table", { id, className: "properties" }, h("tbody", {}, entries.map(([key, value]) =>
    h("tr", { "data-key": key }, h("td", {}, key), h("td", { className: "value wrap" }, valueText(value))))));
}

function declaredTable(id, rows) {
  if (!rows.length) return h("div", { id, className: "muted" }, "none");
  return h("table", { id, className: "declared" },
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Kind"), h("th", {}, "Type"), h("th", {}, "Value"))),
    h("tbody", {}, rows.map((d) => h("tr", { "data-name": d.name },
      h("td", {}, d.name), h("td", {}, d.kind + (d.is_list ? " list" : "")), h("td", {}, text(d.type)),
      h("td", { className: "value wrap" }, "value" in d ? valueText(d.value) : "")))));
}

// The artifacts an execution read or wrote: name (the event's key), the artifact, type, URI, KFP's IOType, its id.
export function linksTable(id, links) {
  if (!links.length) return h("div", { id, className: "muted" }, "none");
  return h("table", { id, className: "links" },
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Artifact"), h("th", {}, "Type"), h("th", {}, "URI"),
      h("th", {}, "How"), h("th", {}, "Artifact ID"))),
    h("tbody", {}, links.map((link) => h("tr", { className: "link-row", "data-key": link.key,
      "data-artifact-id": link.artifact.artifact_id },
    h("td", { className: "key" }, link.key), h("td", {}, artifactLink(link.artifact)), h("td", {}, text(link.artifact.type)),
    h("td", { className: "uri wrap" }, text(link.artifact.uri)),
    h("td", { className: "muted" }, link.io_type + (link.producer_task && link.io_type !== "OUTPUT" ? ` from ${link.producer_task}` : "")),
    h("td", { className: "muted", title: link.artifact.artifact_id }, link.artifact.artifact_id.slice(0, 8))))));
}

function kv(pairs) {
  return h("div", { className: "kv", id: "execution-properties" }, pairs.filter(([, value]) => value !== "" && value !== null)
    .flatMap(([key, value]) => [h("div", {}, key), h("div", { "data-key": key }, value)]));
}

export async function executionDetail(main, executionId) {
  const token = routeToken;
  let data;
  try {
    data = await getJSON(`${LINEAGE}/executions/${encodeURIComponent(executionId)}`);
  } catch (err) {
    if (token === routeToken) fill(main, h("h1", {}, "Execution"), h("p", { className: "error", id: "execution-error" }, err.message));
    return;
  }
  if (token !== routeToken) return;
  const x = data.execution;
  const custom = x.custom_properties || {};
  main.append(
    h("div", { className: "breadcrumbs" }, h("a", { href: "#/executions" }, "Executions"), " / ", x.display_name),
    h("h1", { id: "execution-title" }, x.display_name || x.execution_id, " ", stateCell(x)),
    h("div", { className: "panel" }, kv([
      ["ID", x.execution_id], ["Name", text(x.name)], ["Type", text(x.type)], ["State", stateCell(x)],
      ["Run", runLink(x.run_id)], ["Task", text(x.task_name)], ["Namespace", text(x.namespace)],
      ["Cached from", x.cached_execution_id ? h("a", { href: executionHref(x.cached_execution_id), id: "execution-cached-from" },
        x.cached_execution_id) : ""],
      ["Fingerprint", text(custom.cache_fingerprint)], ["Created", fmtTime(x.created_at)], ["Updated", fmtTime(x.updated_at)],
    ])),
    h("h2", {}, "Custom properties"), propertiesTable("execution-custom-properties", custom),
    h("h2", {}, "Declared inputs"), declaredTable("declared-inputs", data.declared_inputs || []),
    h("h2", {}, "Inputs"), linksTable("execution-inputs", data.inputs || []),
    h("h2", {}, "Declared outputs"), declaredTable("declared-outputs", data.declared_outputs || []),
    h("h2", {}, "Outputs"), linksTable("execution-outputs", data.outputs || []));
  setStatus("");
}
