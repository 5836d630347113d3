// A DAG drawn as SVG: a box per task (its state as a class, a sub-DAG's kind marked ▸), an arrow per
// dependency. Clicking a box selects it; double-clicking a sub-DAG, loop or iteration opens it.

import { h, s } from "./dom.js";
import { layout, NODE_H, NODE_W } from "./layout.js";

function isContainer(node) {
  return node.kind === "dag" || node.kind === "loop" || node.kind === "iteration";
}

export function drawDag(nodes, selected, onSelect, onOpen) {
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
    const container = isContainer(n);
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
