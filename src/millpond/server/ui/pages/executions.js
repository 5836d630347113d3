// #/executions: every execution lineage recorded (KFP's Executions list): each task of each run, an importer, a
// sub-DAG, a model deployment; its MLMD state (a cache hit is CACHED, linking to the execution it reused), type,
// run and creation; filtered by name, state and type, sorted by a column's header, paged. Read from millpond's
// /ui-api/lineage/executions (KFP's v2beta1 API has no executions). Names are set as text, never as HTML.

import { getJSON } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { EXECUTION_STATES, executionBadge, executionHref, executionLink, LINEAGE, runLink } from "../lib/lineage.js";
import { scoped } from "../lib/namespace.js";
import { pageQuery, pager, sortHeaders } from "../lib/paged-list.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const TYPES = ["system.ContainerExecution", "system.DAGExecution", "system.ImporterExecution", "millpond.Deployment",
  "millpond.TrainingJob"];
const SORTABLE = [["name", "Name"], ["state", "State"], ["type", "Type"], ["created_at", "Created"]];

// The state cell: the badge, and for a cache hit the execution whose outputs it reused.
export function stateCell(execution) {
  return [executionBadge(execution.state), execution.cached_execution_id
    ? [" ", h("a", { href: executionHref(execution.cached_execution_id), className: "cached-from",
      title: `reused the outputs of execution ${execution.cached_execution_id}` }, "reused ", execution.cached_execution_id.slice(0, 8))]
    : null];
}

export function executionsList(main) {
  const view = { name: "", state: "", type: "", sort: "created_at desc", pageSize: 20, tokens: [""], index: 0 };
  const nameInput = h("input", { id: "execution-name-filter", type: "search", placeholder: "name contains…",
    oninput: () => { view.name = nameInput.value.trim(); restart(); } });
  const stateSelect = h("select", { id: "execution-state-filter", onchange: () => { view.state = stateSelect.value; restart(); } },
    h("option", { value: "" }, "all states"), EXECUTION_STATES.map((st) => h("option", { value: st }, st)));
  const typeSelect = h("select", { id: "execution-type-filter", onchange: () => { view.type = typeSelect.value; restart(); } },
    h("option", { value: "" }, "all types"), TYPES.map((t) => h("option", { value: t }, t)));
  const sorting = sortHeaders("execution", SORTABLE, view, () => restart());
  const headers = sorting.headers;
  const body = h("tbody");
  const paging = pager("execution", view, () => load());
  main.append(h("h1", {}, "Executions"),
    h("p", { className: "muted" }, "Each task of each run (and each deployment) with what it read and wrote: click one for its inputs and outputs."),
    h("div", { className: "toolbar" }, h("label", {}, "Name"), nameInput, h("label", {}, "State"), stateSelect,
      h("label", {}, "Type"), typeSelect),
    h("table", { id: "executions" },
      h("thead", {}, h("tr", {}, headers.get("name"), headers.get("state"), headers.get("type"), h("th", {}, "Run"),
        headers.get("created_at"), h("th", {}, "ID"))),
      body),
    paging.el);

  function restart() { view.tokens = [""]; view.index = 0; load(); }

  async function load() {
    const token = routeToken;
    const predicates = [];
    if (view.name) predicates.push({ key: "name", operation: "IS_SUBSTRING", string_value: view.name });
    if (view.state) predicates.push({ key: "state", operation: "EQUALS", string_value: view.state });
    if (view.type) predicates.push({ key: "type", operation: "EQUALS", string_value: view.type });
    const params = pageQuery(view, predicates);
    const page = await getJSON(scoped(`${LINEAGE}/executions?${params}`));
    if (token !== routeToken) return;
    const executions = page.executions || [];
    sorting.arrows();
    fill(body, executions.map((x) => h("tr", { className: "execution-row", "data-execution-id": x.execution_id,
      "data-name": x.display_name || "", "data-run-id": x.run_id || "" },
    h("td", { className: "name" }, executionLink(x)),
    h("td", { className: "state-cell" }, stateCell(x)),
    h("td", { className: "type" }, x.type || ""),
    h("td", { className: "run" }, runLink(x.run_id)),
    h("td", { title: x.created_at || "" }, fmtTime(x.created_at)),
    h("td", { className: "muted" }, (x.execution_id || "").slice(0, 8)))));
    if (!executions.length) body.append(h("tr", {}, h("td", { colspan: 6, className: "muted", id: "no-executions" }, "No executions.")));
    paging.shown(page, executions.length);
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  }

  every(REFRESH_MS, load);
}
