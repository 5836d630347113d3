// #/compare/A,B,...: the runs ticked in the runs list side by side, their state, parameters and kfp 1.x
// metrics, as v1's compare page.

import { API, getJSON } from "../lib/api.js";
import { h, stateBadge } from "../lib/dom.js";
import { v1Number, valueText } from "../lib/format.js";
import { routeToken } from "../lib/polling.js";

export async function compareRuns(main, ids) {
  const token = routeToken;
  const box = h("div", { id: "compare" }, h("span", { className: "muted" }, "loading…"));
  main.append(h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / compare"), box);
  try {
    const params = new URLSearchParams();
    for (const id of ids) params.append("run_id", id);
    const [runs, metrics] = await Promise.all([
      Promise.all(ids.map((id) => getJSON(`${API}/runs/${encodeURIComponent(id)}`))),
      getJSON(`/ui-api/run-metrics?${params}`),
    ]);
    if (token !== routeToken) return;
    const paramNames = [...new Set(runs.flatMap((r) => Object.keys((r.runtime_config || {}).parameters || {})))].sort();
    const metricNames = [...new Set(ids.flatMap((id) => (metrics.runs[id] || []).map((m) => m.name)))].sort();
    const metricOf = (id, name) => (metrics.runs[id] || []).find((m) => m.name === name);
    const row = (label, cells, cls) => h("tr", { className: cls }, h("th", {}, label), cells.map((c) => h("td", {}, c)));
    box.replaceChildren(h("table", { id: "compare-table" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), runs.map((r) => h("th", {},
        h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.display_name || r.run_id))))),
      h("tbody", {},
        row("State", runs.map((r) => stateBadge(r.state))),
        paramNames.map((p) => row(p, runs.map((r) => valueText(((r.runtime_config || {}).parameters || {})[p] ?? "")), "param-row")),
        metricNames.map((name) => row(name, ids.map((id) => {
          const m = metricOf(id, name);
          return m ? v1Number(m) : "";
        }), "metric-row")))));
  } catch (err) {
    if (token === routeToken) box.replaceChildren(h("div", { className: "error" }, `cannot compare: ${err.message}`));
  }
}
