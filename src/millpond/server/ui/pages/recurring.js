// #/recurring: recurring runs with their trigger, concurrency and catch-up; a button enables or disables one.

import { allPages, api, API } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { experimentNames, loadExperimentNames, namesMissing } from "../lib/experiment-names.js";
import { fmtTime, triggerText } from "../lib/format.js";
import { scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

export function recurringList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Recurring runs"),
    h("table", { id: "recurring" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Trigger"),
        h("th", {}, "Max concurrency"), h("th", {}, "Catch up"), h("th", {}, "Experiment"), h("th", {}, "Created"), h("th", {}, ""))),
      body));
  const load = async () => {
    const token = routeToken;
    const rows = await allPages(scoped(`${API}/recurringruns?sort_by=${encodeURIComponent("created_at desc")}`), "recurringRuns");
    if (token !== routeToken) return;
    if (namesMissing(rows)) await loadExperimentNames();
    if (token !== routeToken) return;
    fill(body, ...rows.map((r) => {
      const enabled = r.status === "ENABLED";
      const toggle = h("button", { className: "toggle", onclick: async () => {
        toggle.disabled = true;
        try {
          await api(`${API}/recurringruns/${encodeURIComponent(r.recurring_run_id)}:${enabled ? "disable" : "enable"}`, { method: "POST" });
          await load();
        } catch (err) { setStatus(err.message, true); toggle.disabled = false; }
      } }, enabled ? "Disable" : "Enable");
      return h("tr", { "data-recurring-id": r.recurring_run_id },
        h("td", {}, r.display_name || r.recurring_run_id),
        h("td", {}, h("span", { className: `state ${enabled ? "SUCCEEDED" : "CANCELED"}`, "data-state": r.status }, r.status)),
        h("td", {}, triggerText(r.trigger)),
        h("td", {}, r.max_concurrency || ""),
        h("td", {}, r.no_catchup ? "no" : "yes"),
        h("td", {}, r.experiment_id ? h("a", { href: `#/experiments/${encodeURIComponent(r.experiment_id)}` },
          experimentNames.get(r.experiment_id) || r.experiment_id) : ""),
        h("td", {}, fmtTime(r.created_at)),
        h("td", {}, toggle));
    }));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No recurring runs.")));
  };
  every(REFRESH_MS * 2, load);
}
