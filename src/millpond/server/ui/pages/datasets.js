// #/datasets: Fluid datasets (millpond's Fluid routes) with their cache percentage as a bar, and the data
// operations (DataLoad, DataMigrate, DataProcess, DataBackup) with their phase and why one failed.

import { getJSON } from "../lib/api.js";
import { fill, h } from "../lib/dom.js";
import { namespacedList, scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const OPERATION_KINDS = ["dataloads", "datamigrates", "dataprocesses", "databackups"];

function operationDataset(spec) {
  // DataLoad/DataProcess name it in spec.dataset, DataBackup as a string, DataMigrate on either side.
  const ref = spec.dataset || (spec.from || {}).dataset || (spec.to || {}).dataset;
  return typeof ref === "string" ? ref : (ref || {}).name || "";
}

async function refreshOperations(body, token) {
  let lists;
  try {
    lists = await Promise.all(OPERATION_KINDS.map((kind) => getJSON(scoped(`/apis/millpond/v1/${kind}`))));
  } catch {
    return;  // the datasets table already says why the routes are missing
  }
  if (token !== routeToken) return;
  const items = lists.flatMap((list) => list.items || []);
  fill(body, ...items.map((op) => {
    const status = op.status || {};
    const condition = (status.conditions || [])[0] || {};
    return h("tr", { "data-operation": op.metadata.name },
      h("td", {}, op.kind), h("td", {}, op.metadata.name), h("td", {}, operationDataset(op.spec || {})),
      h("td", {}, h("span", { className: `state ${String(status.phase || "Pending").toUpperCase()}` }, status.phase || "Pending")),
      h("td", {}, status.duration || ""), h("td", { className: "muted" }, status.phase === "Failed" ? condition.message || "" : ""));
  }));
  if (!items.length) body.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No data operations.")));
}

export function datasetsList(main) {
  const body = h("tbody");
  const operations = h("tbody");
  main.append(h("h1", {}, "Datasets"),
    h("table", { id: "datasets" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Phase"), h("th", {}, "Size"),
        h("th", {}, "Files"), h("th", {}, "Cached"), h("th", {}, "Cache"))),
      body),
    h("h2", {}, "Data operations"),
    h("table", { id: "operations" },
      h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", {}, "Name"), h("th", {}, "Dataset"), h("th", {}, "Phase"),
        h("th", {}, "Duration"), h("th", {}, "Why it failed"))),
      operations));
  every(REFRESH_MS * 2, () => refreshOperations(operations, routeToken));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    let items;
    try {
      items = (await getJSON(namespacedList("/apis/millpond/v1/datasets"))).items || [];
    } catch (err) {
      if (token === routeToken) {
        fill(body, h("tr", {}, h("td", { colspan: 7, className: "muted" }, `Datasets are not available: ${err.message}`)));
      }
      return;
    }
    if (token !== routeToken) return;
    fill(body, ...items.map((d) => {
      const meta = d.metadata || {};
      const status = d.status || {};
      const cache = status.cacheStates || {};
      const percent = parseFloat(cache.cachedPercentage);
      return h("tr", { "data-dataset": meta.name },
        h("td", {}, meta.name), h("td", {}, meta.namespace || "default"), h("td", {}, status.phase || ""),
        h("td", {}, status.ufsTotal || ""), h("td", {}, status.fileNum || ""),
        h("td", { className: "cached-percentage" }, cache.cachedPercentage || ""),
        h("td", {}, isNaN(percent) ? "" : h("div", { className: "bar" }, h("div", { style: `width:${Math.min(100, percent)}%` }))));
    }));
    if (!items.length) body.append(h("tr", {}, h("td", { colspan: 7, className: "muted" }, "No datasets.")));
  });
}
