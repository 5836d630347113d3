// #/artifacts: every artifact the runs recorded (KFP's Artifacts list): name, type, URI, the run and task that
// produced it, created; filtered by name and type, sorted by a column's header, paged. Read from KFP's v2beta1
// artifact API (/apis/v2beta1/artifacts); the run and producer of the page's artifacts from its artifact-task links
// (one /apis/v2beta1/artifact_tasks call a page). Names and URIs are set as text, never as HTML.

import { API, getJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { artifactLink, executionHref, runLink } from "../lib/lineage.js";
import { scoped } from "../lib/namespace.js";
import { pageQuery, pager, sortHeaders } from "../lib/paged-list.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

// KFP's ArtifactType names (artifact.proto), the Type filter's choices.
const TYPES = ["Artifact", "Model", "Dataset", "HTML", "Markdown", "Metric", "ClassificationMetric", "SlicedClassificationMetric"];
const SORTABLE = [["name", "Name"], ["type", "Type"], ["uri", "URI"], ["created_at", "Created"]];

// artifact id → {run_id, task_id, producer}: the link that produced it (OUTPUT), else the first one naming it.
async function producers(artifacts) {
  const found = new Map();
  if (!artifacts.length) return found;
  const params = new URLSearchParams({ page_size: 1000 });
  for (const a of artifacts) params.append("artifact_ids", a.artifact_id);
  const links = (await getJSON(`${API}/artifact_tasks?${params}`)).artifact_tasks || [];
  for (const link of links) {
    const known = found.get(link.artifact_id);
    if (!known || (link.type === "OUTPUT" && known.type !== "OUTPUT")) found.set(link.artifact_id, link);
  }
  return found;
}

export function artifactsList(main) {
  const view = { name: "", type: "", sort: "created_at desc", pageSize: 20, tokens: [""], index: 0 };
  const nameInput = h("input", { id: "artifact-name-filter", type: "search", placeholder: "name contains…",
    oninput: () => { view.name = nameInput.value.trim(); restart(); } });
  const typeSelect = h("select", { id: "artifact-type-filter", onchange: () => { view.type = typeSelect.value; restart(); } },
    h("option", { value: "" }, "all types"), TYPES.map((t) => h("option", { value: t }, t)));
  const sizeSelect = h("select", { id: "artifact-page-size", onchange: () => { view.pageSize = +sizeSelect.value; restart(); } },
    [20, 50, 100].map((n) => h("option", { value: n }, n)));
  const sorting = sortHeaders("artifact", SORTABLE, view, () => restart());
  const headers = sorting.headers;
  const body = h("tbody");
  const paging = pager("artifact", view, () => load());
  main.append(h("h1", {}, "Artifacts"),
    h("p", { className: "muted" }, "What every task wrote and read (its lineage): click one for its Lineage Explorer."),
    h("div", { className: "toolbar" }, h("label", {}, "Name"), nameInput, h("label", {}, "Type"), typeSelect,
      h("label", {}, "Per page"), sizeSelect),
    h("table", { id: "artifacts" },
      h("thead", {}, h("tr", {}, headers.get("name"), headers.get("type"), headers.get("uri"), h("th", {}, "Run"),
        h("th", {}, "Produced by"), headers.get("created_at"), h("th", {}, "ID"))),
      body),
    paging.el);

  function restart() { view.tokens = [""]; view.index = 0; load(); }

  async function load() {
    const token = routeToken;
    const predicates = [];
    if (view.name) predicates.push({ key: "name", operation: "IS_SUBSTRING", string_value: view.name });
    if (view.type) predicates.push({ key: "type", operation: "EQUALS", string_value: view.type });
    const params = pageQuery(view, predicates);
    const page = await getJSON(scoped(`${API}/artifacts?${params}`));
    const artifacts = page.artifacts || [];
    const made = await producers(artifacts);
    if (token !== routeToken) return;
    sorting.arrows();
    fill(body, artifacts.map((a) => {
      const link = made.get(a.artifact_id);
      return h("tr", { className: "artifact-row", "data-artifact-id": a.artifact_id, "data-name": a.name || "" },
        h("td", { className: "name" }, artifactLink(a)),
        h("td", { className: "type" }, a.type || ""),
        h("td", { className: "uri wrap" }, a.uri || ""),
        h("td", { className: "run" }, link ? runLink(link.run_id) : ""),
        h("td", { className: "producer" }, link && link.type === "OUTPUT"
          ? h("a", { href: executionHref(link.task_id), className: "execution-link" }, (link.producer || {}).task_name || link.task_id) : ""),
        h("td", { title: a.created_at || "" }, fmtTime(a.created_at)),
        h("td", { className: "muted" }, (a.artifact_id || "").slice(0, 8)));
    }));
    if (!artifacts.length) body.append(h("tr", {}, h("td", { colspan: 7, className: "muted", id: "no-artifacts" }, "No artifacts.")));
    paging.shown(page, artifacts.length);
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  }

  every(REFRESH_MS, load);
}
