// #/pipelines: the pipelines, and a form that uploads one (YAML, JSON or a kfp 1.x package).
// #/pipelines/ID[/VER]: a pipeline's versions, the chosen version's graph, and the form that starts a run of it.

import { allPages, api, API, getJSON } from "../lib/api.js";
import { drawDag } from "../lib/dag.js";
import { currentNamespace, scoped } from "../lib/namespace.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";
import { runForm } from "./run-form.js";

export function pipelinesList(main) {
  const body = h("tbody");
  const file = h("input", { type: "file", id: "pipeline-file", accept: ".yaml,.yml,.json,.tar.gz,.tgz,.zip" });
  const name = h("input", { type: "text", id: "pipeline-name", placeholder: "name (default: the file's)", size: 30 });
  const description = h("input", { type: "text", id: "pipeline-description", placeholder: "description", size: 30 });
  const message = h("span", { id: "upload-message", className: "muted" });
  const upload = h("form", { id: "upload-form", className: "panel", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!file.files.length) { message.textContent = "choose a pipeline YAML first"; return; }
    const form = new FormData();
    form.append("uploadfile", file.files[0], file.files[0].name);
    const params = new URLSearchParams();
    if (name.value.trim()) params.set("name", name.value.trim());
    if (description.value.trim()) params.set("description", description.value.trim());
    message.textContent = "uploading…";
    message.className = "muted";
    try {
      // multi-user: a private pipeline of the chosen namespace (KFP 2.x); a shared one is KFP namespace editors' to upload
      const pipeline = await api(scoped(`${API}/pipelines/upload?${params}`), { method: "POST", body: form });
      location.hash = `#/pipelines/${encodeURIComponent(pipeline.pipeline_id)}`;
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
    }
  } },
  h("h2", { style: "margin-top:0" }, "Upload a pipeline"),
  h("div", { className: "toolbar" }, file, name, description, h("button", { type: "submit", id: "upload-submit" }, "Upload"), message));
  main.append(h("h1", {}, "Pipelines"), upload, h("div", { style: "height:12px" }),
    h("table", { id: "pipelines" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Description"), h("th", {}, "Created"), h("th", {}, "Pipeline ID"))),
      body));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    const url = `${API}/pipelines?sort_by=${encodeURIComponent("created_at desc")}`;
    // multi-user: the shared pipelines (no namespace) and the chosen namespace's, as KFP's UI shows both
    const rows = currentNamespace() ? (await Promise.all([allPages(scoped(url), "pipelines"), allPages(url, "pipelines")])).flat()
      : await allPages(url, "pipelines");
    if (token !== routeToken) return;
    fill(body, ...rows.map((p) => h("tr", { className: "run-row", "data-pipeline-id": p.pipeline_id,
      onclick: () => { location.hash = `#/pipelines/${encodeURIComponent(p.pipeline_id)}`; } },
      h("td", {}, h("a", { href: `#/pipelines/${encodeURIComponent(p.pipeline_id)}` }, p.display_name || p.name),
        p.namespace ? h("span", { className: "badge namespace", title: "private to this namespace" }, p.namespace) : null),
      h("td", { className: "wrap" }, p.description || ""),
      h("td", {}, fmtTime(p.created_at)),
      h("td", { className: "muted" }, p.pipeline_id.slice(0, 8)))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No pipelines: upload one above.")));
  });
}

// The version's graph before any run: the workflow's own steps for a kfp 1.x upload, the IR's top tasks and
// their output artifacts otherwise; drawn static (no state).
function versionGraph(pipelineId, versionId) {
  const box = h("div", { className: "graph", id: "version-graph" }, h("span", { className: "muted" }, "loading…"));
  const note = h("span", { className: "muted", id: "version-graph-source" });
  getJSON(`/ui-api/pipelines/${encodeURIComponent(pipelineId)}/versions/${encodeURIComponent(versionId)}/graph`)
    .then((data) => {
      note.textContent = data.source === "workflow" ? " kfp v1: the Argo workflow's steps" : "";
      // static: no run, so no state (KFP's pipeline page draws what each node is, never "pending")
      fill(box, drawDag(data.nodes.filter((n) => !n.parent), null, () => {}, () => {}, { static: true }));
    })
    .catch((err) => { box.className = "error"; box.textContent = `no graph: ${err.message}`; });
  return [h("h2", {}, "Graph", note), box];
}

export async function pipelineDetail(main, pipelineId, versionId) {
  const token = routeToken;
  const header = h("div");
  const versionsBody = h("tbody");
  const formBox = h("div", { id: "run-form-box" });
  const graphBox = h("div", { id: "version-graph-box" });
  main.append(header, h("div", { className: "detail" },
    h("div", {}, h("h2", {}, "Versions"), h("table", { id: "versions" },
      h("thead", {}, h("tr", {}, h("th", {}, "Version"), h("th", {}, "Description"), h("th", {}, "Created"))), versionsBody),
      graphBox),
    formBox));
  try {
    const [pipeline, versions, experiments] = await Promise.all([
      getJSON(`${API}/pipelines/${encodeURIComponent(pipelineId)}`),
      allPages(`${API}/pipelines/${encodeURIComponent(pipelineId)}/versions?sort_by=${encodeURIComponent("created_at desc")}`, "pipeline_versions"),
      allPages(scoped(`${API}/experiments?sort_by=display_name`), "experiments"),
    ]);
    if (token !== routeToken) return;
    fill(header, h("h1", {}, h("a", { href: "#/pipelines" }, "Pipelines"), " / ", pipeline.display_name || pipeline.name),
      pipeline.description ? h("p", { className: "muted" }, pipeline.description) : null);
    const chosen = versions.find((v) => v.pipeline_version_id === versionId) || versions[0];
    fill(versionsBody, ...versions.map((v) => h("tr", {
      className: `run-row${chosen && v.pipeline_version_id === chosen.pipeline_version_id ? " chosen" : ""}`,
      "data-version-id": v.pipeline_version_id,
      onclick: () => { location.hash = `#/pipelines/${encodeURIComponent(pipelineId)}/${encodeURIComponent(v.pipeline_version_id)}`; } },
      h("td", {}, v.display_name || v.name), h("td", { className: "wrap" }, v.description || ""), h("td", {}, fmtTime(v.created_at)))));
    if (!chosen) { fill(formBox, h("div", { className: "muted" }, "This pipeline has no versions.")); return; }
    fill(graphBox, ...versionGraph(pipelineId, chosen.pipeline_version_id));
    const version = chosen.pipeline_spec ? chosen
      : await getJSON(`${API}/pipelines/${encodeURIComponent(pipelineId)}/versions/${encodeURIComponent(chosen.pipeline_version_id)}`);
    if (token !== routeToken) return;
    fill(formBox, runForm(pipeline, version, experiments));
  } catch (err) {
    setStatus(err.message, true);
  }
}
