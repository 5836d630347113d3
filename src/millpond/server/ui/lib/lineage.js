// Lineage's pieces shared by the Artifacts, Executions, artifact and execution pages: where millpond's lineage
// reads live (server/lineage_routes.py), links to an artifact's, an execution's and a run's page, and an
// execution's MLMD state as a badge (COMPLETE as SUCCEEDED is drawn, CACHED in the cache's colour).

import { h } from "./dom.js";

export const LINEAGE = "/ui-api/lineage";

// MLMD's execution states, and the run states whose colours the badges borrow.
export const EXECUTION_STATES = ["NEW", "RUNNING", "COMPLETE", "FAILED", "CACHED", "CANCELED"];
const LOOKS = { NEW: "PENDING", RUNNING: "RUNNING", COMPLETE: "SUCCEEDED", FAILED: "FAILED", CACHED: "CACHED", CANCELED: "CANCELED" };

export function executionBadge(state) {
  return h("span", { className: `state ${LOOKS[state] || "PENDING"}`, "data-state": state || "UNKNOWN" }, state || "UNKNOWN");
}

export function artifactHref(id) { return `#/artifacts/${encodeURIComponent(id)}`; }
export function executionHref(id) { return `#/executions/${encodeURIComponent(id)}`; }

// A link to an artifact's page, named by the artifact (its id when it has no name).
export function artifactLink(artifact, attrs) {
  return h("a", { href: artifactHref(artifact.artifact_id), className: "artifact-link", "data-artifact-id": artifact.artifact_id,
    ...(attrs || {}) }, artifact.name || artifact.artifact_id);
}

// A link to an execution's page, named by its task (display name), else its id.
export function executionLink(execution, attrs) {
  return h("a", { href: executionHref(execution.execution_id), className: "execution-link",
    "data-execution-id": execution.execution_id, ...(attrs || {}) }, execution.display_name || execution.execution_id);
}

// A link to a run's page (its id's first 8 characters; the whole id as its title), or "" without one.
export function runLink(runId, attrs) {
  if (!runId) return "";
  return h("a", { href: `#/runs/${encodeURIComponent(runId)}`, className: "run-link", title: runId, "data-run-id": runId,
    ...(attrs || {}) }, runId.slice(0, 8));
}
