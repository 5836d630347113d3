// #/experiments: every experiment, with its description, creation and last run; a row opens its runs.

import { API, getJSON } from "../lib/api.js";
import { fill, h } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

export function experimentsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Experiments"),
    h("table", { id: "experiments" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Description"), h("th", {}, "Created"),
        h("th", {}, "Last run"))),
      body));
  every(REFRESH_MS * 2, async () => {
    const token = routeToken;
    const rows = [];
    let pageToken = "";
    do {
      const page = await getJSON(scoped(`${API}/experiments?page_size=200&sort_by=display_name&page_token=${encodeURIComponent(pageToken)}`));
      rows.push(...(page.experiments || []));
      pageToken = page.next_page_token || "";
    } while (pageToken && rows.length < 2000);
    if (token !== routeToken) return;
    fill(body, ...rows.map((e) => h("tr", { className: "run-row", "data-experiment-id": e.experiment_id,
      onclick: () => { location.hash = `#/experiments/${encodeURIComponent(e.experiment_id)}`; } },
      h("td", {}, h("a", { href: `#/experiments/${encodeURIComponent(e.experiment_id)}` }, e.display_name)),
      h("td", { className: "wrap" }, e.description || ""),
      h("td", {}, fmtTime(e.created_at)),
      h("td", {}, fmtTime(e.last_run_created_at)))));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No experiments.")));
  });
}
