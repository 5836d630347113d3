// A DAG drawn as SVG: a box per task (its state as a class, a sub-DAG's kind marked ▸, a condition's
// expression under its name), a pill per output artifact between its producer and its consumers (a
// folder mark, yellow once the run recorded it: KFP v2's ArtifactNode), an arrow per dependency.
// Clicking a node selects it; double-clicking a sub-DAG, loop or iteration opens it. A static graph (a
// pipeline version's, before any run: options.static) shows no state at all, only what each node is.

import { h, s } from "./dom.js";
import { layout, NODE_H, NODE_W } from "./layout.js";

function isContainer(node) {
  return node.kind === "dag" || node.kind === "loop" || node.kind === "iteration";
}

function clip(text, length) {
  const value = text || "";
  return value.length > length ? value.slice(0, length - 1) + "…" : value;
}

// The second line of a task's box: its state (none in a static graph), cached, its kind, its condition.
function subline(n, isStatic) {
  const container = isContainer(n);
  const parts = isStatic ? [] : [String(n.state || "").toLowerCase(), n.cached ? "cached" : ""];
  if (n.condition) parts.push(`if ${n.condition}`);
  else if (container) parts.push(`${n.kind} ▸`);
  else if (isStatic) parts.push(n.kind);
  return parts.filter(Boolean).join(" · ");
}

function artifactNode(n, p, selected, onSelect) {
  const classes = ["node", "kind-artifact", n.state === "LIVE" ? "live" : "", n.path === selected ? "selected" : ""]
    .filter(Boolean).join(" ");
  return s("g", { class: classes, "data-path": n.path, "data-kind": "artifact", "data-artifact-type": n.artifact_type || "",
    transform: `translate(${p.x},${p.y})`, onclick: () => onSelect(n) },
  s("title", {}, `${n.name}${n.artifact_type ? ` (${n.artifact_type})` : ""}`),
  s("rect", { width: NODE_W, height: NODE_H, rx: NODE_H / 2 }),
  s("path", { class: "folder", d: "M12,15 h7 l3,3 h10 v13 h-20 z" }),
  s("text", { x: 40, y: 19 }, clip(n.name, 22)),
  s("text", { x: 40, y: 35, class: "sub" }, clip(n.artifact_type, 26)));
}

export function drawDag(nodes, selected, onSelect, onOpen, options) {
  const isStatic = Boolean((options || {}).static);
  if (!nodes.length) return h("div", { className: "muted", style: "padding:16px" }, "No tasks here yet.");
  const { pos, width, height } = layout(nodes);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, id: "dag", class: isStatic ? "static" : null },
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
    if (n.kind === "artifact") { svg.append(artifactNode(n, p, selected, onSelect)); continue; }
    const state = isStatic ? null : n.state;
    const classes = ["node", state, `kind-${n.kind}`, n.condition ? "condition" : "", !isStatic && n.cached ? "cached" : "",
      n.path === selected ? "selected" : ""].filter(Boolean).join(" ");
    const container = isContainer(n);
    const what = isStatic ? n.kind : state;
    svg.append(s("g", { class: classes, "data-path": n.path, "data-state": state, "data-condition": n.condition,
      transform: `translate(${p.x},${p.y})`,
      onclick: () => onSelect(n), ondblclick: () => { if (container) onOpen(n); } },
    s("title", {}, `${n.name}${what ? ` (${what})` : ""}${n.condition ? ` — runs if ${n.condition}` : ""}`
      + `${container ? " — double-click to open" : ""}`),
    s("rect", { width: NODE_W, height: NODE_H, rx: 8 }),
    s("circle", { cx: 14, cy: NODE_H / 2, r: 5 }),
    s("text", { x: 26, y: 19 }, clip(n.name, 24)),
    s("text", { x: 26, y: 35, class: "sub" }, clip(subline(n, isStatic), 34))));
  }
  return svg;
}
