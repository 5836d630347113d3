// A finished task's outputs shown in its panel: KFP v2 artifacts (metrics, classification metrics,
// Markdown, HTML, images) and kfp 1.x outputs (mlpipeline-ui-metadata, mlpipeline-metrics). The server
// reads them (bounded; only the run's own artifacts); here they become DOM nodes: Markdown and tables as
// text, HTML and web apps in a frame with no script and no same origin.

import { getContent, getJSON } from "../lib/api.js";
import { confusionMatrix, rocCurve } from "../lib/charts.js";
import { fill, h } from "../lib/dom.js";
import { v1Number, valueText } from "../lib/format.js";
import { renderMarkdown } from "../lib/markdown.js";
import { FINAL } from "../lib/states.js";

const IMAGE_EXT = /\.(png|jpe?g|gif|webp)$/i;

// An HTML page shown, never run: no allow-scripts, no allow-same-origin.
function sandboxed(text, title) {
  const frame = h("iframe", { sandbox: "", className: "html-preview", title });
  frame.srcdoc = text;
  return frame;
}

// ---- KFP v2 artifacts -----------------------------------------------------------------

export function artifactPreviews(runId, node) {
  if (!FINAL.has(node.state)) return null;
  const cards = [];
  for (const [name, list] of Object.entries((node.outputs || {}).artifacts || {})) {
    for (const artifact of Array.isArray(list) ? list : [list]) {
      if (!artifact || typeof artifact !== "object") continue;
      const type = ((artifact.type || {}).schemaTitle) || "";
      const body = previewOf(runId, type, artifact);
      if (body) {
        cards.push(h("div", { className: "preview", "data-artifact": name, "data-type": type },
          h("div", { className: "preview-title" }, name, " ", h("span", { className: "muted" }, type)), body));
      }
    }
  }
  return cards.length ? [h("h2", {}, "Artifacts"), h("div", { id: "artifact-previews" }, cards)] : null;
}

// One artifact's preview (a table, charts, rendered Markdown, a sandboxed page, an image), or null: also the compare page's.
export function previewOf(runId, type, artifact) {
  const meta = artifact.metadata || {};
  if (type === "system.Metrics") {
    const rows = Object.entries(meta).filter(([k]) => k !== "display_name");
    if (!rows.length) return null;
    return h("table", { className: "metrics" }, h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", {}, "Value"))),
      h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { className: "num" }, valueText(v))))));
  }
  if (type === "system.ClassificationMetrics") {
    const parts = [];
    if (meta.confusionMatrix) parts.push(confusionMatrix(meta.confusionMatrix));
    if (Array.isArray(meta.confidenceMetrics) && meta.confidenceMetrics.length) parts.push(rocCurve(meta.confidenceMetrics));
    return parts.length ? h("div", { className: "classification" }, parts) : null;
  }
  const url = `/ui-api/runs/${encodeURIComponent(runId)}/artifacts?uri=${encodeURIComponent(artifact.uri || "")}`;
  if (type === "system.Markdown") return fetched(url, "text", (text) => renderMarkdown(text));
  if (type === "system.HTML") return fetched(url, "text", (text) => sandboxed(text, "HTML artifact (sandboxed)"));
  if (IMAGE_EXT.test(artifact.uri || "")) {
    return fetched(url, "blob", (blob) => h("img", { className: "image-preview", src: URL.createObjectURL(blob), alt: artifact.name || "" }));
  }
  return null;
}

// A box that says "loading…" until the file arrives, then shows render(content), or why there is no preview.
function fetched(url, kind, render) {
  const box = h("div", { className: "muted" }, "loading…");
  (async () => {
    try {
      const content = await getContent(url, kind);
      box.className = "";
      fill(box, render(content));
    } catch (err) {
      box.className = "error";
      box.textContent = `no preview: ${err.message}`;
    }
  })();
  return box;
}

// ---- kfp 1.x outputs: mlpipeline-ui-metadata and mlpipeline-metrics ---------------------

export function v1Outputs(runId, node) {
  const artifacts = (node.outputs || {}).artifacts || {};
  if (!node.task_id || !FINAL.has(node.state) || !(artifacts["mlpipeline-ui-metadata"] || artifacts["mlpipeline-metrics"])) {
    return null;
  }
  const box = h("div", { id: "v1-outputs" }, h("span", { className: "muted" }, "loading…"));
  getJSON(`/ui-api/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(node.task_id)}/v1-outputs`)
    .then((data) => {
      const cards = [];
      if ((data.metrics || []).length || data.metrics_error) {
        cards.push(h("div", { className: "preview v1-output", "data-type": "metrics" },
          h("div", { className: "preview-title" }, "mlpipeline-metrics"),
          data.metrics_error ? h("div", { className: "error" }, data.metrics_error) : v1MetricsTable(data.metrics)));
      }
      if (data.visualizations_error) cards.push(h("div", { className: "error" }, data.visualizations_error));
      for (const v of data.visualizations || []) {
        cards.push(h("div", { className: "preview v1-output", "data-type": v.type },
          h("div", { className: "preview-title" }, v.type), v.error ? h("div", { className: "error v1-error" }, v.error) : v1Visualization(v)));
      }
      fill(box, ...(cards.length ? cards : [h("span", { className: "muted" }, "none")]));
    })
    .catch((err) => { box.className = "error"; box.textContent = `no visualizations: ${err.message}`; });
  return [h("h2", {}, "Visualizations"), box];
}

function v1MetricsTable(metrics) {
  return h("table", { className: "metrics" }, h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", {}, "Value"))),
    h("tbody", {}, metrics.map((m) => h("tr", {}, h("td", {}, m.name), h("td", { className: "num" }, v1Number(m))))));
}

function v1Visualization(v) {
  if (v.type === "markdown") return renderMarkdown(v.text || "");
  if (v.type === "web-app") return sandboxed(v.text || "", "web app (sandboxed)");
  if (v.type === "tensorboard") return h("p", { className: "muted" }, v.text || "");
  if (v.type === "confusion_matrix") {
    return confusionMatrix({ annotationSpecs: (v.labels || []).map((l) => ({ displayName: l })),
      rows: (v.matrix || []).map((row) => ({ row })) });
  }
  if (v.type === "roc") return rocCurve((v.points || []).map((p) => ({ falsePositiveRate: p.fpr, recall: p.tpr })));
  if (v.type === "table") {
    return h("table", { className: "v1-table" },
      v.header ? h("thead", {}, h("tr", {}, v.header.map((c) => h("th", {}, c)))) : null,
      h("tbody", {}, (v.rows || []).map((row) => h("tr", {}, row.map((c) => h("td", {}, c))))));
  }
  return h("span", { className: "muted" }, "not shown");
}
