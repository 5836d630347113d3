// #/registry: the model registry (Kubeflow Model Registry's REST API on this server, server/registry_routes.py):
// every registered model with its versions, each version's state, author, model artifact URI and format, and
// the model-registry:// reference that serves it. Read straight from /api/model_registry/v1alpha3, in the chosen
// namespace's registry (multi-user) or default's. Names, URIs and properties are set as text, never as HTML.

import { getJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const REGISTRY = "/api/model_registry/v1alpha3";

// Every item of a registry list (pageSize 100, nextPageToken), at most 1,000.
async function everyItem(path) {
  const items = [];
  let token = "";
  do {
    const sep = path.includes("?") ? "&" : "?";
    const page = await getJSON(scoped(`${REGISTRY}${path}${sep}pageSize=100&nextPageToken=${encodeURIComponent(token)}`));
    items.push(...(page.items || []));
    token = page.nextPageToken || "";
  } while (token && items.length < 1000);
  return items;
}

function stateBadge(state) {
  return h("span", { className: `state ${state === "LIVE" ? "SUCCEEDED" : "SKIPPED"}`, "data-state": state }, state);
}

function properties(values) {
  return Object.entries(values || {}).map(([key, v]) => {
    const value = v.string_value ?? v.int_value ?? v.double_value ?? v.bool_value ?? v.metadataType;
    return `${key}=${value}`;
  }).join(", ");
}

export function registryPage(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Model registry"),
    h("p", { className: "muted" }, "Registered models and their versions (the model-registry client: "
      + "ModelRegistry(\"http://HOST\", PORT, author=...).register_model(...)). Serve one with "
      + "storageUri: model-registry://NAME/VERSION, or millpond serve --model NAME:VERSION."),
    h("table", { id: "registry" },
      h("thead", {}, h("tr", {}, h("th", {}, "Model"), h("th", {}, "Owner"), h("th", {}, "Version"), h("th", {}, "State"),
        h("th", {}, "Author"), h("th", {}, "Format"), h("th", {}, "URI"), h("th", {}, "Properties"), h("th", {}, "Serve as"))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const models = await everyItem("/registered_models");
    const rows = [];
    for (const model of models) {
      const versions = await everyItem(`/registered_models/${model.id}/versions`);
      if (!versions.length) rows.push({ model, version: null, artifact: null });
      for (const version of versions) {
        const artifacts = await everyItem(`/model_versions/${version.id}/artifacts?artifactType=model-artifact`);
        rows.push({ model, version, artifact: artifacts[artifacts.length - 1] || null });
      }
    }
    if (token !== routeToken) return;
    fill(body, rows.map(({ model, version, artifact }) => h("tr", {
      className: "registry-row", "data-model": model.name, "data-version": version ? version.name : "" },
    h("td", {}, model.name, " ", model.state === "ARCHIVED" ? stateBadge(model.state) : ""),
    h("td", {}, model.owner || ""),
    h("td", { className: "version" }, version ? version.name : "no version"),
    h("td", { className: "state-cell" }, version ? stateBadge(version.state) : ""),
    h("td", {}, version ? version.author || "" : ""),
    h("td", {}, artifact ? [artifact.modelFormatName, artifact.modelFormatVersion].filter(Boolean).join(" ") : ""),
    h("td", { className: "uri wrap" }, artifact ? artifact.uri || "" : ""),
    h("td", { className: "wrap" }, version ? properties(version.customProperties) : ""),
    h("td", {}, version ? h("code", {}, `model-registry://${model.name}/${version.name}`) : ""))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 9, className: "muted" }, "No registered model yet.")));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}
