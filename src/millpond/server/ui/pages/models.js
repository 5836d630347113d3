// #/models: KServe InferenceServices with their readiness, URL, traffic per revision, replicas that
// answer, and the requests the gateway routed to each (count, p50/p99 of the last 1,000), polled from
// /ui-api/models. #/models/NAMESPACE/NAME: one InferenceService: conditions, revisions and replicas,
// curl for v1, v2 and Seldon. Everything from a manifest (names, labels, annotations, messages, URIs)
// is set as text, never as HTML.

import { getJSON, objectPath } from "../lib/api.js";
import { fill, h, setStatus } from "../lib/dom.js";
import { text } from "../lib/format.js";
import { inNamespace, scoped } from "../lib/namespace.js";
import { every, REFRESH_MS, routeToken } from "../lib/polling.js";

const PROTOCOLS = { v1: "KServe v1", v2: "Open Inference Protocol v2", seldon: "Seldon v0.1" };

function readyBadge(ready) {
  const state = { True: "SUCCEEDED", False: "FAILED" }[ready.status] || "PENDING";
  return h("span", { className: `state ${state}`, "data-ready": ready.status }, ready.status === "True" ? "Ready" : (ready.reason || ready.status));
}

function trafficText(model) {
  return (model.revisions || []).map((r) => `${text(r.name)}: ${r.percent ?? "?"}%` + (model.served ? ` (${r.replicas.length} up)` : "")).join(", ");
}

function latencyText(m) {
  if (!m || m.p50_ms === null || m.p50_ms === undefined) return "";
  return `${text(m.p50_ms)} / ${text(m.p99_ms)} ms`;
}

function pairs(values) {
  return Object.entries(values || {}).map(([k, v]) => `${k}=${text(v)}`).join(", ");
}

export function modelsList(main) {
  const body = h("tbody");
  main.append(h("h1", {}, "Models"),
    h("p", { className: "muted" }, "KServe InferenceServices (millpond apply -f, arena serve). Query them through this server: /v1/models/NAME:predict, /v2/models/NAME/infer, /seldon/NAME/api/v0.1/predictions."),
    h("table", { id: "models" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Namespace"), h("th", {}, "Ready"), h("th", {}, "URL"),
        h("th", {}, "Traffic"), h("th", {}, "Replicas"), h("th", {}, "Requests"), h("th", {}, "Latency p50 / p99"),
        h("th", {}, "Sample request (v1)"))),
      body));
  every(REFRESH_MS, async () => {
    const token = routeToken;
    const answer = await getJSON(scoped("/ui-api/models"));
    if (token !== routeToken) return;
    const models = (answer.models || []).filter((m) => inNamespace(m.namespace));
    fill(body, ...models.map((m) => {
      const href = `#/models/${objectPath(m.namespace, m.name)}`;
      return h("tr", { className: "model-row", "data-model": `${m.namespace}/${m.name}` },
        h("td", {}, h("a", { href }, m.name)), h("td", {}, m.namespace),
        h("td", { className: "ready" }, readyBadge(m.ready)),
        h("td", { className: "url" }, m.url || ""), h("td", { className: "traffic wrap" }, trafficText(m)),
        h("td", { className: "replicas" }, String(m.replicas)), h("td", { className: "requests" }, String(m.metrics.requests)),
        h("td", { className: "latency" }, latencyText(m.metrics)),
        h("td", { className: "sample" }, h("code", {}, m.samples.v1)));
    }));
    if (!models.length) body.append(h("tr", {}, h("td", { colspan: 9, className: "muted" }, "No InferenceService. Apply one with millpond apply -f, or arena serve sklearn.")));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}

export function modelDetail(main, namespace, name) {
  const header = h("div", { id: "model-header" });
  const revisions = h("tbody");
  const conditions = h("tbody");
  const codes = h("tbody");
  const samples = h("div", { id: "model-samples" });
  main.append(header,
    h("h2", {}, "Revisions"),
    h("table", { id: "model-revisions" }, h("thead", {}, h("tr", {}, h("th", {}, "Revision"), h("th", {}, "Traffic"),
      h("th", {}, "Replicas (base URLs)"), h("th", {}, "Requests"))), revisions),
    h("h2", {}, "Requests by status"),
    h("table", { id: "model-codes" }, h("thead", {}, h("tr", {}, h("th", {}, "HTTP status"), h("th", {}, "Requests"))), codes),
    h("h2", {}, "Sample requests"), samples,
    h("h2", {}, "Conditions"),
    h("table", { id: "model-conditions" }, h("thead", {}, h("tr", {}, h("th", {}, "Type"), h("th", {}, "Status"),
      h("th", {}, "Reason"), h("th", {}, "Message"))), conditions));
  let samplesShown = "";
  const stop = every(REFRESH_MS, async () => {
    const token = routeToken;
    let m;
    try {
      m = await getJSON(`/ui-api/models/${objectPath(namespace, name)}`);
    } catch (err) {
      if (token === routeToken) {
        fill(header, h("h1", {}, h("a", { href: "#/models" }, "Models"), " / ", name),
          h("div", { className: "error", id: "model-error" }, `${namespace}/${name}: ${err.message}`));
        stop();
      }
      return;
    }
    if (token !== routeToken) return;
    fill(header,
      h("h1", {}, h("a", { href: "#/models" }, "Models"), " / ", m.name, " ", readyBadge(m.ready)),
      h("div", { className: "kv" },
        h("div", {}, "Namespace"), h("div", {}, m.namespace),
        h("div", {}, "URL"), h("div", { id: "model-url" }, m.url || "none yet (not served)"),
        h("div", {}, "Gateway"), h("div", {}, m.gateway),
        h("div", {}, "Predictor"), h("div", {}, m.predictor),
        h("div", {}, "Storage URI"), h("div", { className: "wrap" }, m.storageUri),
        h("div", {}, "Requests"), h("div", { id: "model-requests" }, String(m.metrics.requests)),
        h("div", {}, "Latency p50 / p99"), h("div", { id: "model-latency" }, latencyText(m.metrics) || "no request yet"),
        h("div", {}, "Labels"), h("div", { id: "model-labels", className: "wrap" }, pairs(m.labels)),
        h("div", {}, "Annotations"), h("div", { id: "model-annotations", className: "wrap" }, pairs(m.annotations)),
        ...(m.ready.message ? [h("div", {}, "Why"), h("div", { className: "wrap" }, m.ready.message)] : [])));
    const byRevision = m.metrics.byRevision || {};
    fill(revisions, ...(m.revisions || []).map((r) => h("tr", { "data-revision": r.name },
      h("td", {}, r.name), h("td", {}, `${r.percent ?? "?"}%`), h("td", { className: "wrap" }, (r.replicas || []).join(", ")),
      h("td", { className: "requests" }, String(byRevision[r.name] || 0)))));
    if (!(m.revisions || []).length) revisions.append(h("tr", {}, h("td", { colspan: 4, className: "muted" }, "No revision served yet.")));
    fill(codes, ...Object.entries(m.metrics.byCode || {}).sort().map(([code, n]) => h("tr", { "data-code": code },
      h("td", {}, code), h("td", {}, String(n)))));
    fill(conditions, ...(m.conditions || []).map((c) => h("tr", {},
      h("td", {}, c.type), h("td", {}, c.status), h("td", {}, c.reason || ""), h("td", { className: "wrap" }, c.message || ""))));
    const shown = JSON.stringify(m.samples);
    if (shown !== samplesShown) {  // redrawn only when they change: a selection to copy survives the polls
      samplesShown = shown;
      fill(samples, ...Object.entries(m.samples).sort().map(([protocol, command]) => h("div", { className: "sample", "data-protocol": protocol },
        h("div", { className: "preview-title" }, PROTOCOLS[protocol] || protocol),
        h("pre", { className: "log" }, command))));
    }
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  });
}
