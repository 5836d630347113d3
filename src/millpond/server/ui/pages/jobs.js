// #/jobs: training jobs (arena submit, TrainingClient, manifests) with status, queue, trainer and GPUs.
// #/jobs/NAMESPACE/NAME: a job's instances, events, and an instance's log, followed while it runs.
// Every name, message and log line goes into the page as text (h() and textContent), never as HTML.

import { getJSON, getText, objectPath } from "../lib/api.js";
import { fill, h, setStatus, stateBadge } from "../lib/dom.js";
import { text } from "../lib/format.js";
import { namespacedList } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const JOBS = "/apis/millpond/v1/jobs";
const JOB_FINAL = new Set(["SUCCEEDED", "FAILED"]);
const JOB_LOG_LINES = 500;

export function jobsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Training jobs"),
    h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Status"), h("th", {}, "Queue"),
        h("th", {}, "Trainer"), h("th", {}, "Duration"), h("th", {}, "GPUs (allocated/requested)"), h("th", {}, "Instances"))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const rows = [];
    let pageToken = "";
    do {
      const page = await getJSON(`${namespacedList(JOBS)}&page_size=200&sort_by=${encodeURIComponent("created_at desc")}&page_token=${encodeURIComponent(pageToken)}`);
      rows.push(...(page.jobs || []));
      pageToken = page.next_page_token || "";
    } while (pageToken && rows.length < 2000);
    if (token !== routeToken) return;
    fill(body, ...rows.map((job) => {
      const href = `#/jobs/${objectPath(job.namespace, job.name)}`;
      return h("tr", { className: "run-row job-row", "data-job": `${job.namespace}/${job.name}`, onclick: () => { location.hash = href; } },
        h("td", {}, h("a", { href }, job.name)), h("td", {}, job.namespace),
        // a queued job's reason under its state: Kueue's users most ask why a job waits
        h("td", { className: "wrap" }, stateBadge(job.status), job.waiting ? h("div", { className: "muted waiting" }, job.waiting) : ""),
        h("td", {}, job.queue || ""), h("td", {}, String(job.trainer || "").toUpperCase()), h("td", {}, job.duration),
        h("td", { className: "gpus" }, `${text(job.allocatedGPUs)}/${text(job.requestGPUs)}`), h("td", {}, String((job.instances || []).length)));
    }));
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No training jobs. Submit one with arena submit pytorch.")));
  });
}

export function jobDetail(main, namespace, name) {
  const view = { instance: "", finalSeen: false };
  const header = h("div", { id: "job-header" });
  const instances = h("tbody");
  const events = h("tbody");
  const chooser = h("select", { id: "job-instance", onchange: () => { view.instance = chooser.value; refreshLog(); } });
  const log = h("pre", { className: "log", id: "job-log" });
  main.append(header,
    h("h2", {}, "Instances"),
    h("table", { id: "job-instances" }, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Age"),
      h("th", {}, "Chief"), h("th", {}, "GPUs"), h("th", {}, "Node"))), instances),
    h("h2", {}, "Events"),
    h("table", { id: "job-events" }, h("thead", {}, h("tr", {}, h("th", {}, "Type"), h("th", {}, "Reason"), h("th", {}, "Age"),
      h("th", {}, "Message"))), events),
    h("h2", {}, "Log"), h("div", { className: "toolbar" }, h("label", { for: "job-instance" }, "Instance"), chooser), log);

  async function refreshLog() {
    const token = routeToken;
    const logText = await getText(`${JOBS}/${objectPath(namespace, name)}/logs?tail=${JOB_LOG_LINES}&instance=${encodeURIComponent(view.instance)}`);
    if (token !== routeToken || log.textContent === logText) return;
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = logText;
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  const stop = every(REFRESH_MS / 2, async () => {
    const token = routeToken;
    let job;
    try {
      job = await getJSON(`${JOBS}/${objectPath(namespace, name)}`);
    } catch (err) {
      if (token === routeToken) {
        fill(header, h("h1", {}, h("a", { href: "#/jobs" }, "Training jobs"), " / ", name),
          h("div", { className: "error", id: "job-error" }, `${namespace}/${name}: ${err.message}`));
        stop();
      }
      return;
    }
    const found = await getJSON(`${JOBS}/${objectPath(namespace, name)}/events`);
    if (token !== routeToken) return;
    fill(header,
      h("h1", {}, h("a", { href: "#/jobs" }, "Training jobs"), " / ", job.name, " ", stateBadge(job.status)),
      h("div", { className: "kv" },
        h("div", {}, "Namespace"), h("div", {}, job.namespace),
        h("div", {}, "Trainer"), h("div", {}, String(job.trainer || "").toUpperCase()),
        h("div", {}, "Duration"), h("div", {}, job.duration),
        h("div", {}, "Priority"), h("div", {}, job.priority),
        h("div", {}, "Queue"), h("div", {}, job.queue || "none (not managed by Kueue)"),
        h("div", {}, "User"), h("div", {}, job.user || ""),
        ...(job.waiting ? [h("div", {}, "Waiting"), h("div", { id: "job-waiting", className: "wrap" }, job.waiting)] : []),
        h("div", {}, "GPUs"), h("div", {}, `${text(job.allocatedGPUs)} allocated of ${text(job.requestGPUs)} requested`),
        h("div", {}, "UID"), h("div", {}, job.uuid)));
    fill(instances, ...(job.instances || []).map((i) => h("tr", { "data-instance": i.name },
      h("td", {}, i.name), h("td", {}, i.status), h("td", {}, i.age), h("td", {}, i.chief ? "yes" : ""),
      h("td", {}, String(i.requestGPUs)), h("td", {}, i.node))));
    if (!(job.instances || []).length) instances.append(h("tr", {}, h("td", { colspan: 6, className: "muted" }, "No instance started yet.")));
    fill(events, ...(found.events || []).map((e) => h("tr", {},
      h("td", {}, e.type), h("td", {}, e.reason), h("td", {}, e.age), h("td", { className: "wrap" }, e.message))));
    const names = (job.instances || []).map((i) => i.name);
    if (chooser.options.length !== names.length) {
      fill(chooser, names.map((n) => h("option", { value: n }, n)));
      const chief = (job.instances || []).find((i) => i.chief);
      if (!names.includes(view.instance)) view.instance = chief ? chief.name : names[0] || "";
      chooser.value = view.instance;
    }
    await refreshLog();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
    if (JOB_FINAL.has(job.status)) {
      if (view.finalSeen) stop();  // one more round after the end: the last lines written meanwhile
      view.finalSeen = true;
    }
  });
}
