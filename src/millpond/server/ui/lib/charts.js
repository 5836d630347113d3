// Classification metrics as KFP's UI shows them: a confusion matrix (a table shaded by count) and a
// ROC curve (SVG), from KFP v2's ClassificationMetrics fields (kfp 1.x outputs are mapped to them).

import { h, s } from "./dom.js";

// cm: {annotationSpecs: [{displayName}], rows: [{row: [count…]}]}.
export function confusionMatrix(cm) {
  const labels = (cm.annotationSpecs || []).map((a) => a.displayName || "");
  const rows = (cm.rows || []).map((r) => r.row || []);
  const max = Math.max(1, ...rows.flat().map(Number).filter((n) => !isNaN(n)));
  return h("table", { className: "confusion-matrix" },
    h("thead", {}, h("tr", {}, h("th", { className: "corner" }, "actual ↓ / predicted →"), labels.map((l) => h("th", {}, l)))),
    h("tbody", {}, rows.map((row, i) => h("tr", {}, h("th", {}, labels[i] ?? i),
      row.map((v) => h("td", { className: "num", style: `background: rgba(31,111,235,${(0.08 + 0.72 * Number(v) / max).toFixed(2)})` }, v))))));
}

// points: [{falsePositiveRate, recall}], drawn in false-positive-rate order.
export function rocCurve(points) {
  const W = 220, H = 220, P = 32;
  const pts = points.map((p) => [Number(p.falsePositiveRate) || 0, Number(p.recall) || 0]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const x = (v) => P + v * (W - P - 8), y = (v) => H - P - v * (H - P - 8);
  const ticks = [0, 0.5, 1];
  return s("svg", { class: "roc", width: W, height: H, viewBox: `0 0 ${W} ${H}` },
    s("title", {}, "ROC curve"),
    s("rect", { x: x(0), y: y(1), width: x(1) - x(0), height: y(0) - y(1), fill: "#fff", stroke: "#d0d7de" }),
    s("line", { x1: x(0), y1: y(0), x2: x(1), y2: y(1), stroke: "#8c959f", "stroke-dasharray": "4 3" }),
    ticks.map((t) => [s("text", { x: x(t), y: H - P + 14, "text-anchor": "middle", "font-size": 10 }, t),
      s("text", { x: P - 6, y: y(t) + 3, "text-anchor": "end", "font-size": 10 }, t)]),
    s("text", { x: (x(0) + x(1)) / 2, y: H - 4, "text-anchor": "middle", "font-size": 11 }, "false positive rate"),
    s("text", { x: 10, y: (y(0) + y(1)) / 2, "text-anchor": "middle", "font-size": 11,
      transform: `rotate(-90 10 ${(y(0) + y(1)) / 2})` }, "recall"),
    s("polyline", { class: "roc-line", fill: "none", stroke: "#1f6feb", "stroke-width": 2,
      points: pts.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(" ") }));
}
