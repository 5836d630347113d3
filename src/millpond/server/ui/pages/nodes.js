// #/nodes: this machine (or the Ray cluster's nodes): CPU, memory and GPUs, capacity, allocated and used.
// Polls /ui-api/nodes every NODES_POLL_MS and keeps the last NODES_POINTS answers per node, drawn as SVG
// line charts (no chart library, no external asset). Names and numbers go in as text only.

import { getJSON } from "../lib/api.js";
import { fill, h, s, setStatus } from "../lib/dom.js";
import { fmtBytes, fmtCount } from "../lib/format.js";
import { every, routeToken } from "../lib/polling.js";

const NODES_POLL_MS = 2000;
const NODES_POINTS = 90;  // three minutes at one point every two seconds
const SERIES = [["allocated", "#1f6feb"], ["used", "#1a7f37"]];

// One chart: capacity as a dashed line, allocated and used as lines over the kept points.
function resourceChart(title, kind, points, format) {
  const W = 360, H = 140, L = 8, R = 8, T = 8, B = 18;
  const last = points[points.length - 1][kind];
  const top = Math.max(1e-9, ...points.map((p) => Math.max(Number(p[kind].capacity) || 0, Number(p[kind].total) || 0,
    Number(p[kind].allocated) || 0, Number(p[kind].used) || 0)));
  const x = (i) => L + (NODES_POINTS <= 1 ? 0 : i * (W - L - R) / (NODES_POINTS - 1));
  const y = (v) => H - B - (Number(v) / top) * (H - T - B);
  const offset = NODES_POINTS - points.length;
  const line = (key, color) => {
    const coords = points.map((p, i) => [i, p[kind][key]]).filter(([, v]) => v !== null && v !== undefined);
    if (!coords.length) return null;
    return s("polyline", { class: `series series-${key}`, fill: "none", stroke: color, "stroke-width": 2,
      points: coords.map(([i, v]) => `${x(i + offset).toFixed(1)},${y(v).toFixed(1)}`).join(" ") });
  };
  const capY = y(last.capacity || 0);
  const svg = s("svg", { class: "node-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-kind": kind },
    s("title", {}, `${title}: capacity, allocated and used`),
    s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de" }),
    s("line", { class: "capacity", x1: L, x2: W - R, y1: capY, y2: capY, stroke: "#8c959f", "stroke-dasharray": "5 4" }),
    SERIES.map(([key, color]) => line(key, color)),
    s("text", { x: L + 4, y: H - 4, "font-size": 10, fill: "#656d76" }, `last ${Math.round(points.length * NODES_POLL_MS / 1000)} s`));
  const legend = h("div", { className: "legend" },
    h("span", { className: "key capacity" }, `capacity ${format(last.capacity)}`),
    h("span", { className: "key allocated" }, `allocated ${format(last.allocated)}`),
    h("span", { className: "key used" }, `used ${format(last.used)}`));
  return h("div", { className: "chart-box", "data-kind": kind }, h("h3", {}, title), svg, legend);
}

export function nodesPage(main) {
  const history = new Map();  // node name -> the kept answers for it
  const note = h("p", { className: "muted", id: "nodes-mode" });
  const box = h("div", { id: "nodes" });
  main.append(h("h1", {}, "Nodes"), note, box);
  every(NODES_POLL_MS, async () => {
    const token = routeToken;
    const answer = await getJSON("/ui-api/nodes");
    if (token !== routeToken) return;
    note.textContent = answer.mode === "ray"
      ? "The Ray cluster's nodes: allocated is what Ray has handed out; Ray reports no per-node use here."
      : "This machine: capacity is what the ledger may hand out, allocated what it has handed out, used what every process of the machine uses.";
    const seen = new Set();
    for (const node of answer.nodes || []) {
      const key = String(node.name);
      seen.add(key);
      const kept = history.get(key) || [];
      kept.push(node);
      if (kept.length > NODES_POINTS) kept.shift();
      history.set(key, kept);
    }
    for (const key of [...history.keys()]) if (!seen.has(key)) history.delete(key);
    fill(box, [...history.entries()].map(([key, points]) => {
      const node = points[points.length - 1];
      const holders = node.holders || [];
      return h("section", { className: "node-card", "data-node": key },
        h("h2", {}, key, " ", h("span", { className: "muted" }, `${node.ip || ""} · ${node.role || ""}`)),
        h("div", { className: "charts" },
          resourceChart("CPU (cores)", "cpu", points, fmtCount),
          resourceChart("Memory", "memory", points, fmtBytes),
          resourceChart("GPUs", "gpu", points, fmtCount)),
        holders.length ? h("table", { className: "holders" },
          h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", {}, "Holder"), h("th", {}, "Holds"))),
          h("tbody", {}, holders.map((x) => h("tr", {}, h("td", {}, x.kind),
            h("td", {}, x.namespace ? `${x.namespace}/${x.name}` : x.name), h("td", {}, x.holds))))) : null);
    }));
    if (!history.size) box.append(h("p", { className: "muted" }, "No node answered."));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}
