// #/artifacts/by-uri/URI (the run page's artifact nodes link here) finds the artifact of that URI and opens its page.
// #/artifacts/ID and #/artifacts/ID/lineage: one artifact (KFP's ArtifactDetails), with two tabs: Overview (its id,
// type, URI, namespace, description, the run and execution that produced it, the executions that used it, and its
// metadata) and Lineage Explorer (lib/lineage-explorer.js). One read of /ui-api/lineage/artifacts/ID, which answers
// the artifact and its neighbourhood; values are set as text, a missing one as "" (never null or undefined).

import { API, getJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { fmtTime, text } from "../lib/format.js";
import { artifactHref, executionLink, LINEAGE, runLink } from "../lib/lineage.js";
import { lineageExplorer } from "../lib/lineage-explorer.js";
import { scoped } from "../lib/namespace.js";
import { routeToken } from "../lib/polling.js";
import { propertiesTable } from "./execution-detail.js";

function executionList(id, entries) {
  if (!entries.length) return h("span", { id, className: "muted" }, "none");
  return h("span", { id }, entries.map((x, i) => [i ? ", " : "", executionLink(x.execution)]));
}

function overview(data) {
  const a = data.artifact;
  const pairs = [
    ["ID", a.artifact_id], ["Name", text(a.name)], ["Type", text(a.type)], ["URI", text(a.uri)],
    ["Namespace", text(a.namespace)], ["Description", text(a.description)], ["Created", fmtTime(a.created_at)],
    ["Run", runLink(a.run_id)],
    ["Produced by", executionList("artifact-producers", data.producers || [])],
    ["Used by", executionList("artifact-consumers", data.consumers || [])],
  ];
  return [h("div", { className: "panel" }, h("div", { className: "kv", id: "artifact-properties" },
    pairs.filter(([, value]) => value !== "").flatMap(([key, value]) => [h("div", {}, key),
      h("div", { "data-key": key, className: key === "URI" ? "wrap" : "" }, value)]))),
  h("h2", {}, "Metadata"), propertiesTable("artifact-metadata", a.metadata)];
}

export async function artifactDetail(main, artifactId, tab) {
  const token = routeToken;
  let data;
  try {
    data = await getJSON(`${LINEAGE}/artifacts/${encodeURIComponent(artifactId)}`);
  } catch (err) {
    if (token === routeToken) fill(main, h("h1", {}, "Artifact"), h("p", { className: "error", id: "artifact-error" }, err.message));
    return;
  }
  if (token !== routeToken) return;
  const a = data.artifact;
  const onLineage = tab === "lineage";
  const body = h("div", { id: onLineage ? "artifact-lineage" : "artifact-overview" });
  main.append(
    h("div", { className: "breadcrumbs" }, h("a", { href: "#/artifacts" }, "Artifacts"), " / ", a.name || a.artifact_id),
    h("h1", { id: "artifact-title" }, a.name || a.artifact_id, " ", h("span", { className: "badge" }, a.type || "")),
    h("div", { className: "tabs", id: "artifact-tabs" },
      h("a", { href: artifactHref(a.artifact_id), id: "tab-overview", className: onLineage ? "" : "active" }, "Overview"),
      h("a", { href: `${artifactHref(a.artifact_id)}/lineage`, id: "tab-lineage", className: onLineage ? "active" : "" },
        "Lineage Explorer")),
    body);
  if (onLineage) lineageExplorer(body, data);
  else fill(body, overview(data));
  setStatus("");
}

// The artifact recorded for uri (in the namespace shown): its page, in place of this address; else say it is not.
export async function artifactByUri(main, uri) {
  const token = routeToken;
  const filter = JSON.stringify({ predicates: [{ key: "uri", operation: "EQUALS", string_value: uri }] });
  try {
    const found = (await getJSON(scoped(`${API}/artifacts?page_size=1&filter=${encodeURIComponent(filter)}`))).artifacts || [];
    if (token !== routeToken) return;
    if (found.length) { location.replace(artifactHref(found[0].artifact_id)); return; }
    fill(main, h("h1", {}, "Artifact"), h("p", { className: "muted", id: "artifact-error" }, `No artifact recorded for ${uri}.`));
  } catch (err) {
    if (token === routeToken) fill(main, h("h1", {}, "Artifact"), h("p", { className: "error", id: "artifact-error" }, err.message));
  }
}
