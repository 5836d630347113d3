// #/queues: Kueue's ClusterQueues. One row per ClusterQueue, its quota used of nominal per flavor and
// resource, then every pending workload in its queue's order with why it waits (GET /ui-api/queues, what
// `millpond queue list -o json` prints). Names and reasons are set as text, never as HTML.

import { getJSON } from "../lib/api.js";
import { fill, h } from "../lib/dom.js";
import { inNamespace, scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

export function queuesList(main) {
  const body = h("tbody");
  const pending = h("tbody");
  main.append(h("h1", {}, "Queues"),
    h("table", { id: "queues" },
      h("thead", {}, h("tr", {}, h("th", {}, "ClusterQueue"), h("th", {}, "Cohort"), h("th", {}, "Strategy"),
        h("th", {}, "Preemption"), h("th", {}, "Local queues"), h("th", {}, "Quota (flavor: resource used / nominal)"),
        h("th", {}, "Admitted"), h("th", {}, "Pending"))),
      body),
    h("h2", {}, "Pending workloads"),
    h("table", { id: "queues-pending" },
      h("thead", {}, h("tr", {}, h("th", {}, "ClusterQueue"), h("th", {}, "Position"), h("th", {}, "Workload"),
        h("th", {}, "Priority"), h("th", {}, "Requests"), h("th", {}, "Why it waits"))),
      pending));
  const pairs = (values) => Object.entries(values || {}).map(([key, value]) => `${key}=${value}`).join(", ");
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const answer = await getJSON(scoped("/ui-api/queues"));
    if (token !== routeToken) return;
    const queues = answer.queues || [];
    fill(body, ...queues.map((queue) => {
      const quota = (queue.quota || []).map((row) => h("div", { className: "quota" },
        `${row.flavor}: ${row.resource} ${row.used} / ${row.nominalQuota}`,
        row.borrowingLimit ? ` (borrow ≤ ${row.borrowingLimit})` : "", row.lendingLimit ? ` (lend ≤ ${row.lendingLimit})` : ""));
      const preemption = queue.preemption || {};
      return h("tr", { className: "queue-row", "data-queue": queue.name },
        h("td", {}, queue.name), h("td", {}, queue.cohort || ""), h("td", {}, queue.queueingStrategy),
        h("td", {}, `within ${preemption.withinClusterQueue}, reclaim ${preemption.reclaimWithinCohort}`),
        h("td", {}, (queue.localQueues || []).join(", ")), h("td", {}, quota),
        h("td", { className: "admitted" }, String(queue.admittedWorkloads)), h("td", { className: "pending" }, String(queue.pendingWorkloads)));
    }));
    if (!queues.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No queues. Create one with millpond queue create.")));
    const waiting = queues.flatMap((queue) => (queue.pending || []).filter((w) => inNamespace(w.namespace)).map((w) => [queue.name, w]));
    fill(pending, ...waiting.map(([queue, w]) => h("tr", { className: "pending-row", "data-workload": `${w.namespace}/${w.name}` },
      h("td", {}, queue), h("td", {}, w.position === null || w.position === undefined ? "" : String(w.position)),
      h("td", {}, w.workload), h("td", {}, String(w.priority)), h("td", {}, pairs(w.requests)), h("td", { className: "reason" }, w.reason || ""))));
    if (!waiting.length) pending.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No workload waits.")));
  });
}
