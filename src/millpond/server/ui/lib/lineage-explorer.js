// The Lineage Explorer of an artifact's page, as KFP's LineageView lays it out: columns left to right, the artifact
// in the middle, the executions that produced it and their inputs to its left, the executions that used it and
// their outputs to its right. Clicking an input artifact (a card on the left) expands its producers one step further
// left; clicking an output artifact (on the right) expands the executions that used it one step further right. Each
// step is one read of /ui-api/lineage/artifacts/ID (server/lineage_reads.py). Plain DOM: cards in flex columns.

import { getJSON } from "./api.js";
import { fill, h, setStatus } from "./dom.js";
import { artifactLink, executionBadge, executionLink, LINEAGE } from "./lineage.js";
import { routeToken } from "./polling.js";

// A column: its cards by id (an artifact or an execution; each once), and what its header says.
function column(kind, label) { return { kind, label, items: new Map() }; }

function addAll(col, entries) {
  for (const entry of entries) if (!col.items.has(entry.id)) col.items.set(entry.id, entry);
}

// The columns one neighbourhood adds on one side: the executions, then their artifacts on that side.
function stepOf(lineage, side) {
  const executions = side === "left" ? lineage.producers : lineage.consumers;
  const execs = executions.map((x) => ({ id: x.execution.execution_id, execution: x.execution }));
  const artifacts = executions.flatMap((x) => (side === "left" ? x.inputs : x.outputs)
    .map((link) => ({ id: link.artifact.artifact_id, artifact: link.artifact, key: link.key })));
  return { execs, artifacts };
}

export function lineageExplorer(container, first) {
  const view = {
    center: first.artifact,
    left: [column("execution", "Produced by"), column("artifact", "Inputs")],
    right: [column("execution", "Used by"), column("artifact", "Outputs")],
    expanded: new Set(),  // "left:ID" / "right:ID": artifacts already expanded that way
  };
  for (const side of ["left", "right"]) {
    const step = stepOf(first, side);
    addAll(view[side][0], step.execs);
    addAll(view[side][1], step.artifacts);
  }

  // Expand an artifact of the artifact column at depth (1, 3, …) on side: its producers (left) or users (right).
  async function expand(side, depth, artifactId) {
    const mark = `${side}:${artifactId}`;
    if (view.expanded.has(mark)) return;
    const token = routeToken;
    let lineage;
    try {
      lineage = await getJSON(`${LINEAGE}/artifacts/${encodeURIComponent(artifactId)}`);
    } catch (err) { setStatus(err.message, true); return; }
    if (token !== routeToken) return;
    view.expanded.add(mark);
    const cols = view[side];
    while (cols.length < depth + 3) {
      cols.push(cols.length % 2 === 0 ? column("execution", side === "left" ? "Produced by" : "Used by")
        : column("artifact", side === "left" ? "Inputs" : "Outputs"));
    }
    const step = stepOf(lineage, side);
    addAll(cols[depth + 1], step.execs);
    addAll(cols[depth + 2], step.artifacts);
    draw();
  }

  function card(side, depth, entry) {
    if (entry.execution) {
      const x = entry.execution;
      return h("div", { className: "lineage-node execution", "data-kind": "execution", "data-id": x.execution_id,
        "data-name": x.display_name || "" },
      executionLink(x), h("div", { className: "sub" }, executionBadge(x.state), " ", x.type || ""));
    }
    const a = entry.artifact;
    const done = view.expanded.has(`${side}:${a.artifact_id}`);
    const more = done ? null : h("button", { className: "expand", title: side === "left" ? "show who produced it" : "show who used it",
      onclick: (ev) => { ev.stopPropagation(); expand(side, depth, a.artifact_id); } }, side === "left" ? "◀" : "▶");
    return h("div", { className: `lineage-node artifact${done ? " expanded" : ""}`, "data-kind": "artifact",
      "data-id": a.artifact_id, "data-name": a.name || "", title: a.uri || "",
      onclick: () => expand(side, depth, a.artifact_id) },
    h("div", {}, side === "left" ? more : null, " ", artifactLink(a, { onclick: (ev) => ev.stopPropagation() }), " ",
      side === "right" ? more : null),
    h("div", { className: "sub" }, [entry.key, a.type].filter(Boolean).join(" · ")));
  }

  function columnEl(side, depth, col) {
    const cards = [...col.items.values()].map((entry) => card(side, depth, entry));
    return h("div", { className: `lineage-column ${col.kind}`, "data-side": side, "data-depth": depth + 1 },
      h("div", { className: "lineage-header" }, col.label),
      cards.length ? cards : h("div", { className: "muted none" }, "none"));
  }

  function draw() {
    const lefts = view.left.map((col, i) => columnEl("left", i, col)).reverse();
    const rights = view.right.map((col, i) => columnEl("right", i, col));
    const c = view.center;
    const target = h("div", { className: "lineage-column target", "data-side": "center", "data-depth": 0 },
      h("div", { className: "lineage-header" }, "Artifact"),
      h("div", { className: "lineage-node artifact target", "data-kind": "artifact", "data-id": c.artifact_id,
        "data-name": c.name || "", title: c.uri || "" },
      h("strong", {}, c.name || c.artifact_id), h("div", { className: "sub" }, c.type || "")));
    fill(container, h("div", { className: "lineage-explorer", id: "lineage-explorer" }, lefts, target, rights));
  }

  draw();
}
